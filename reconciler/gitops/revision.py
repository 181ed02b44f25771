"""Topologies as they were at a git revision, which revision a work tree is at, and what changed since one.

Everything at a revision is read from git objects (commit -> tree -> blobs): no checkout, no
change to the work tree or index, so it is safe in CI and next to an operator's uncommitted
edits. Files are parsed by the same loader and model builder as files on disk; only their names
differ: `topologies/demo/flows.yaml@1a2b3c4`, so a diagnostic says which version it is about.

Paths are repo-relative. Relative paths given to these functions are taken relative to `cwd`
when one is passed (a command line's paths), else to the repository root.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

import git
from gitdb.exc import BadName, BadObject

from reconciler.topology.build import build_topology, load_topology
from reconciler.topology.diagnostics import Diagnostics, SourceLocation
from reconciler.topology.loader import YAML_SUFFIXES, Document, load_text
from reconciler.topology.model import Topology

#: Repo-relative posix path -> git blob id of its content.
Snapshot = Mapping[str, str]


class RevisionError(Exception):
    """Not a repository, an unknown revision, or a path outside the repository."""


@dataclass(frozen=True)
class RevisionInfo:
    """The commit a topology came from, as recorded with an apply (and reported by drift).

    `time_iso` is the committer date (when the commit landed, e.g. the merge), with its offset.
    `dirty` is true when the work tree or index differ from the commit (untracked files count),
    within the topology paths when they were given: the files applied were then not the commit's.
    """

    commit: str
    short: str
    author: str
    email: str
    time_iso: str
    message_subject: str
    dirty: bool

    def to_dict(self) -> dict:
        return asdict(self)

    def label(self) -> str:
        return f"{self.short}{' (dirty)' if self.dirty else ''}"


# --- repository, revisions, paths ---------------------------------------------------------------


def open_repo(repo_path: str | os.PathLike) -> git.Repo:
    """The repository containing `repo_path` (it may be a subdirectory)."""
    try:
        repo = git.Repo(repo_path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise RevisionError(f"{repo_path} is not inside a git repository") from None
    if repo.bare:
        raise RevisionError(f"{repo_path} is a bare repository: a work tree is needed")
    return repo


def resolve_commit(repo: git.Repo, rev: str) -> git.Commit:
    """Any rev-spec git understands (sha, branch, tag, HEAD~2, main@{1}...) -> its commit."""
    try:
        return repo.commit(rev)
    except (BadName, BadObject, ValueError, git.GitCommandError):
        raise RevisionError(f"unknown revision {rev!r} in {repo.working_tree_dir}") from None


def short_sha(repo: git.Repo, commit: git.Commit) -> str:
    """git's own abbreviation: at least 7 hex digits, more when needed to be unique."""
    return repo.git.rev_parse("--short", commit.hexsha)


def _root(repo: git.Repo) -> Path:
    return Path(repo.working_tree_dir).resolve()  # type: ignore[arg-type]


def repo_relative(
    repo: git.Repo, paths: Iterable[str | os.PathLike], cwd: str | os.PathLike | None = None
) -> list[str]:
    """Posix paths relative to the repository root ('' is the root itself)."""
    root = _root(repo)
    base = Path(cwd).resolve() if cwd is not None else root
    out = []
    for raw in paths:
        p = Path(raw)
        absolute = (p if p.is_absolute() else base / p).resolve()
        try:
            rel = absolute.relative_to(root).as_posix()
        except ValueError:
            raise RevisionError(f"{raw} is outside the repository at {root}") from None
        out.append("" if rel == "." else rel)
    return out


def _describe(repo: git.Repo, commit: git.Commit, dirty: bool) -> RevisionInfo:
    return RevisionInfo(
        commit=commit.hexsha,
        short=short_sha(repo, commit),
        author=commit.author.name or "",
        email=commit.author.email or "",
        time_iso=commit.committed_datetime.isoformat(),
        message_subject=(commit.message if isinstance(commit.message, str) else commit.message.decode())
        .split("\n", 1)[0]
        .strip(),
        dirty=dirty,
    )


def describe_revision(repo_path: str | os.PathLike, rev: str) -> RevisionInfo:
    """A commit's RevisionInfo (never dirty: it is the commit's content)."""
    repo = open_repo(repo_path)
    return _describe(repo, resolve_commit(repo, rev), dirty=False)


def describe_worktree(
    repo_path: str | os.PathLike, paths: Iterable[str | os.PathLike] | None = None, cwd: str | os.PathLike | None = None
) -> RevisionInfo:
    """HEAD and whether the work tree differs from it (only within `paths`, when given)."""
    repo = open_repo(repo_path)
    try:
        head = repo.head.commit
    except ValueError:
        raise RevisionError(f"the repository at {repo.working_tree_dir} has no commits yet") from None
    scopes = repo_relative(repo, paths, cwd) if paths is not None else [""]
    dirty = any(
        repo.is_dirty(index=True, working_tree=True, untracked_files=True, path=scope or None) for scope in scopes
    )
    return _describe(repo, head, dirty)


# --- topology files in a commit's tree -----------------------------------------------------------


def _sort_key(path: str) -> tuple[str, ...]:
    return PurePosixPath(path).parts  # the order loader.topology_files gives the same files on disk


def _blobs_at(
    commit: git.Commit, rel_paths: Iterable[str], label: str, diags: Diagnostics
) -> list[tuple[str, git.Blob]]:
    """Expand files and directories of a commit like loader.topology_files expands them on disk."""
    out: list[tuple[str, git.Blob]] = []
    for rel in rel_paths:
        try:
            obj = commit.tree / rel if rel else commit.tree
        except KeyError:
            diags.error(
                f"no such file or directory at {label}: {rel}",
                SourceLocation(f"{rel}@{label}", 1, 1),
                hint="the path did not exist in that commit; check the revision and the paths",
            )
            continue
        if obj.type == "blob":
            out.append((rel, obj))
            continue
        if obj.type != "tree":  # a submodule: its files are not in this repository's objects
            diags.error(
                f"{rel} at {label} is a {obj.type}, not a file or directory", SourceLocation(f"{rel}@{label}", 1, 1)
            )
            continue
        found = sorted(
            (
                (str(b.path), b)
                for b in obj.traverse()
                if isinstance(b, git.Blob) and PurePosixPath(b.path).suffix in YAML_SUFFIXES
            ),
            key=lambda pb: _sort_key(pb[0]),
        )
        if not found:
            diags.error(
                f"no .yaml/.yml files in directory {rel or '.'} at {label}",
                SourceLocation(f"{rel or '.'}@{label}", 1, 1),
            )
        out.extend(found)
    return out


def _documents_at(repo: git.Repo, commit: git.Commit, rel_paths: list[str], diags: Diagnostics) -> list[Document]:
    label = short_sha(repo, commit)
    docs: list[Document] = []
    for path, blob in _blobs_at(commit, rel_paths, label, diags):
        name = f"{path}@{label}"
        try:
            text = blob.data_stream.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            diags.error(f"cannot read file: not UTF-8 ({exc.reason})", SourceLocation(name, 1, 1))
            continue
        docs.extend(load_text(text, name, diags))
    return docs


def load_topology_at(
    repo_path: str | os.PathLike,
    rev: str,
    paths: Iterable[str | os.PathLike],
    cwd: str | os.PathLike | None = None,
    env: str | None = None,
) -> tuple[Topology | None, Diagnostics]:
    """The topology in `paths` as of `rev`, straight from git objects (for environment `env` when it declares
    environments); None (with errors) if invalid."""
    diags = Diagnostics()
    try:
        repo = open_repo(repo_path)
        commit = resolve_commit(repo, rev)
        rel_paths = repo_relative(repo, paths, cwd)
    except RevisionError as exc:
        diags.error(str(exc))
        return None, diags
    return build_topology(_documents_at(repo, commit, rel_paths, diags), diags, env), diags


# --- which topology files changed -------------------------------------------------------------------


@dataclass(frozen=True)
class ChangeSet:
    """Topology files added, modified or deleted between `base` and `head` (None: the work tree)."""

    base: str  # short sha
    head: str | None
    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(sorted((*self.added, *self.modified, *self.deleted), key=_sort_key))

    @property
    def empty(self) -> bool:
        return not self.files

    def to_dict(self) -> dict:
        return {
            "base": self.base,
            "head": self.head or "worktree",
            "added": list(self.added),
            "modified": list(self.modified),
            "deleted": list(self.deleted),
        }


def diff_snapshots(base: str, head: str | None, old: Snapshot, new: Snapshot) -> ChangeSet:
    """Pure: compare two path -> content-id maps."""

    def ordered(names: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted(names, key=_sort_key))

    return ChangeSet(
        base,
        head,
        added=ordered(new.keys() - old.keys()),
        modified=ordered(p for p in old.keys() & new.keys() if old[p] != new[p]),
        deleted=ordered(old.keys() - new.keys()),
    )


def snapshot_at(repo: git.Repo, commit: git.Commit, rel_paths: Iterable[str]) -> dict[str, str]:
    """The topology files under `rel_paths` in a commit (missing paths are simply absent)."""
    ignored = Diagnostics()
    return {path: blob.hexsha for path, blob in _blobs_at(commit, rel_paths, "", ignored)}


def git_blob_id(data: bytes) -> str:
    """What `git hash-object` computes for a file without filters (no eol/clean conversion)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def snapshot_worktree(repo: git.Repo, rel_paths: Iterable[str]) -> dict[str, str]:
    """The topology files under `rel_paths` on disk, named and chosen as the loader would load them.

    Untracked and ignored files count: the loader reads whatever is on disk.
    """
    root = _root(repo)
    out: dict[str, str] = {}
    for rel in rel_paths:
        p = root / rel
        if p.is_file():
            files = [p]
        elif p.is_dir():
            files = [
                f
                for f in p.rglob("*")
                if f.suffix in YAML_SUFFIXES and f.is_file() and ".git" not in f.relative_to(root).parts
            ]
        else:
            files = []
        for f in files:
            out[f.relative_to(root).as_posix()] = git_blob_id(f.read_bytes())
    return out


def changed_since(
    repo_path: str | os.PathLike,
    base_rev: str,
    paths: Iterable[str | os.PathLike],
    head_rev: str | None = None,
    cwd: str | os.PathLike | None = None,
) -> ChangeSet:
    """Topology files that differ between `base_rev` and `head_rev` (default: the work tree)."""
    repo = open_repo(repo_path)
    rel_paths = repo_relative(repo, paths, cwd)
    base = resolve_commit(repo, base_rev)
    old = snapshot_at(repo, base, rel_paths)
    if head_rev is None:
        return diff_snapshots(short_sha(repo, base), None, old, snapshot_worktree(repo, rel_paths))
    head = resolve_commit(repo, head_rev)
    return diff_snapshots(short_sha(repo, base), short_sha(repo, head), old, snapshot_at(repo, head, rel_paths))


def load_topology_head(
    repo_path: str | os.PathLike,
    paths: Iterable[str | os.PathLike],
    head_rev: str | None = None,
    cwd: str | os.PathLike | None = None,
    env: str | None = None,
) -> tuple[Topology | None, Diagnostics]:
    """The topology at `head_rev`, or from the work tree (the files on disk) when it is None."""
    if head_rev is not None:
        return load_topology_at(repo_path, head_rev, paths, cwd, env)
    base = Path(cwd) if cwd is not None else Path(open_repo(repo_path).working_tree_dir)  # type: ignore[arg-type]
    return load_topology([Path(p) if Path(p).is_absolute() else base / p for p in paths], env=env)


# --- the revision an apply records and drift reports ---------------------------------------------
def repo_path_for(paths: Iterable[str]) -> Path:
    """A directory inside the repository holding `paths`: the nearest existing ancestor of the first one."""
    first = next(iter(paths), ".")
    p = Path(first).resolve()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p if p.is_dir() else p.parent


def revision_info(paths: Iterable[str], revision: str | None = None) -> dict | None:
    """RevisionInfo.to_dict() of `revision` (a commit) or of the work tree at `paths`; None outside git."""
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
