"""The git revision a topology was read at, recorded with each apply and reported by drift.

`revision_info(paths, revision)` is the RevisionInfo (commit, short, author, email, time_iso,
message_subject, dirty) as a dict: of the commit `revision` when the topology was read from git
objects (`--revision REV`), else of the work tree holding `paths` (HEAD, dirty when the topology
files differ from it). None outside a git repository. `revision_label` is the short form kept in
saved plans and apply records for older readers: `<sha>` or `<sha>-dirty`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path


def repo_path_for(paths: Iterable[str]) -> Path:
    """A directory inside the repository holding `paths`: the nearest existing ancestor of the first one."""
    first = next(iter(paths), ".")
    p = Path(first).resolve()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p if p.is_dir() else p.parent


def revision_info(paths: Iterable[str], revision: str | None = None) -> dict | None:
    """RevisionInfo.to_dict() of `revision` (a commit) or of the work tree at `paths`; None outside git."""
    from reconciler.gitops import RevisionError, describe_revision, describe_worktree

    paths = [p for p in paths if p and not str(p).startswith("<")]
    if not paths:
        return None
    try:
        repo = repo_path_for(paths)
        if revision is not None:
            return describe_revision(repo, revision).to_dict()
        return describe_worktree(repo, paths, cwd=os.getcwd()).to_dict()
    except RevisionError:
        return None
    except Exception:  # noqa: BLE001 - git missing or a broken repository: no revision, never a failed apply
        return None


def revision_label(info: Mapping | None) -> str | None:
    if not info:
        return None
    return info["commit"] + ("-dirty" if info.get("dirty") else "")


def topology_revision(files: Iterable[str]) -> str | None:
    """`<sha>[-dirty]` of the work tree holding the files (kept for callers of the short form)."""
    return revision_label(revision_info(list(files)))
