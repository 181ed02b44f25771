"""Git-aware topologies: read them at any revision, describe the work tree, and diff revisions.

Built on gitpython; nothing here checks out, stages or writes anything in the repository.
"""

from reconciler.gitops.compare import RevisionComparison, compare_with_base
from reconciler.gitops.revision import (
    ChangeSet,
    RevisionError,
    RevisionInfo,
    changed_since,
    describe_revision,
    describe_worktree,
    load_topology_at,
)
from reconciler.gitops.topology_diff import (
    ChangeKind,
    ClusterChange,
    FlowChange,
    TopologyChanges,
    changed_settings,
    diff_topologies,
)

__all__ = [
    "ChangeKind",
    "ChangeSet",
    "ClusterChange",
    "FlowChange",
    "RevisionComparison",
    "RevisionError",
    "RevisionInfo",
    "TopologyChanges",
    "changed_settings",
    "changed_since",
    "compare_with_base",
    "describe_revision",
    "describe_worktree",
    "diff_topologies",
    "load_topology_at",
]
