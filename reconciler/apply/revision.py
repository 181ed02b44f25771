"""The git revision the topology files were read at, recorded with each apply (None outside git)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable


def topology_revision(files: Iterable[str]) -> str | None:
    files = [f for f in files if f and not f.startswith("<")]
    if not files:
        return None
    try:
        import git

        repo = git.Repo(Path(files[0]).resolve().parent, search_parent_directories=True)
        sha = repo.head.commit.hexsha
        return sha + ("-dirty" if repo.is_dirty(untracked_files=False) else "")
    except Exception:  # noqa: BLE001 - not a repository, no commits, git missing: no revision
        return None
