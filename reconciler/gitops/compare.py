"""`plan --base REV` in one call: changed files, both topologies, and what changed between them."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from reconciler.gitops.revision import (
    ChangeSet,
    RevisionInfo,
    changed_since,
    describe_revision,
    describe_worktree,
    load_topology_at,
    load_topology_head,
)
from reconciler.gitops.topology_diff import TopologyChanges, diff_topologies
from reconciler.topology.diagnostics import Diagnostics
from reconciler.topology.model import Topology


@dataclass(frozen=True)
class RevisionComparison:
    """`base` vs `head` (a commit, or the work tree when `head.dirty` may be true)."""

    base: RevisionInfo
    head: RevisionInfo
    head_is_worktree: bool
    files: ChangeSet
    old: Topology | None  # None when the base revision's topology is invalid
    new: Topology | None
    base_diagnostics: Diagnostics

    @property
    def changes(self) -> TopologyChanges | None:
        """None when either side is invalid: a plan must then cover every flow."""
        if self.old is None or self.new is None:
            return None
        return diff_topologies(self.old, self.new)

    def affected_flows(self) -> tuple[str, ...]:
        """Flows to plan: those the change can affect, or all of the new topology's if unknown."""
        changes = self.changes
        if changes is not None:
            return changes.affected_flows
        return tuple(sorted(f.name for f in self.new.flows)) if self.new is not None else ()


def compare_with_base(
    repo_path: str | os.PathLike,
    base_rev: str,
    paths: Iterable[str | os.PathLike],
    head_rev: str | None = None,
    cwd: str | os.PathLike | None = None,
    env: str | None = None,
) -> tuple[RevisionComparison, Diagnostics]:
    """Compare the topology at `base_rev` with `head_rev` (default: the work tree), both for environment `env`
    when the topology declares environments.

    The returned Diagnostics are the head topology's (what a plan acts on); the base's are kept in
    `base_diagnostics`: an invalid base only means every flow is planned. Raises RevisionError
    for an unknown revision or a path outside the repository.
    """
    paths = list(paths)
    files = changed_since(repo_path, base_rev, paths, head_rev=head_rev, cwd=cwd)
    old, base_diags = load_topology_at(repo_path, base_rev, paths, cwd, env)
    new, diags = load_topology_head(repo_path, paths, head_rev, cwd, env)
    head = describe_worktree(repo_path, paths, cwd) if head_rev is None else describe_revision(repo_path, head_rev)
    comparison = RevisionComparison(
        describe_revision(repo_path, base_rev), head, head_rev is None, files, old, new, base_diags
    )
    return comparison, diags
