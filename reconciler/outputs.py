"""Files the commands write (`plan --out`, `drift --out`, `export --out`, `import --out`): checked before
any work, so a bad path is a one-line error, exit 1, nothing changed (not an IsADirectoryError at the end),
and written by `write_text`, the one way a command writes a file: atomically (a temporary file in the same
directory, then `os.replace`), or an `OutputError` naming the path and the reason, with nothing left behind."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from reconciler.textutil import cut


class OutputError(Exception):
    """A file could not be written: `error: cannot write PATH: REASON` (one line)."""


def problem(path: str) -> str | None:
    """Why `path` cannot be written as a file, or None."""
    p = Path(path)
    if path.endswith(("/", "\\")) or p.is_dir():
        return f"error: {path} is a directory; --out takes a file name, e.g. {p / 'NAME'}"
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                return f"error: cannot write {path}: {parent} is a file, not a directory"
            break
    return None


def problems(paths) -> list[str]:
    return [m for m in (problem(str(p)) for p in paths if p) if m]


def _file_mode() -> int:
    """What `open(path, "w")` would give a new file (0666 less the umask); mkstemp's files are 0600."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_text(path: str | Path, text: str, private: bool = False) -> None:
    """Write `text` (UTF-8) to `path` atomically, creating missing parent directories. On any failure
    (read-only or missing directory, /proc, /sys, a full disk) raise OutputError and leave nothing behind:
    no temporary file, no directory created here, the old file (if any) unchanged.

    `private`: for files only their owner may read (saved plans, specs, state): the file is 0600 whatever the
    umask or the mode of the file it replaces, and every directory created here 0700."""
    p = Path(path)
    created: list[Path] = []
    tmp: str | None = None
    try:
        for parent in reversed(p.parents):
            if not parent.exists():
                parent.mkdir(mode=0o700) if private else parent.mkdir()
                created.append(parent)
                if private:
                    os.chmod(parent, 0o700)  # mkdir's mode is masked by the umask
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            if private:
                mode = 0o600
            else:
                mode = os.stat(p).st_mode & 0o7777 if p.exists() else _file_mode()
            os.fchmod(f.fileno(), mode)
            f.write(text)
        os.replace(tmp, p)
        tmp = None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise OutputError(f"error: cannot write {cut(str(path))!r}: {reason}") from None
    finally:
        if tmp is not None:
            _remove(Path(tmp))
        if tmp is not None or (created and not p.exists()):
            for d in reversed(created):
                _remove(d)


def _remove(path: Path) -> None:
    try:
        path.rmdir() if path.is_dir() else path.unlink()
    except OSError:
        pass
