"""Files the commands write (`plan --out`, `drift --out`, `export --out`): checked before any work,
so a bad path is a one-line error, exit 1, nothing changed (not an IsADirectoryError at the end)."""

from __future__ import annotations

from pathlib import Path


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
