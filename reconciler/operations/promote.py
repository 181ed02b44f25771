"""`reconciler promote --from A --to B TOPOLOGY...`: what moving from environment A to environment B changes.

The declared differences between the two environments of one topology (topology/environments.py `differences`:
each setting either environment declares whose value differs, key by key; a secret only as its `${NAME}`
reference), and, asked for, the plan of B against B's clusters (`plan_topology`): what applying B would change.
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.operations.backend import Backend
from reconciler.operations.plan import plan_topology
from reconciler.render.promote import Shown
from reconciler.topology.diagnostics import Diagnostics
from reconciler.topology.environments import load_differences
from reconciler.topology.model import Topology

#: A promotion: the environment promoted from and to, the topology's name, the declared differences, and the
#: target environment's plan when asked for (what `reconciler promote` renders).
Promotion = Shown


def promote(
    paths: Sequence[str],
    source: Topology,
    target: Topology,
    backend: Backend,
    *,
    with_plan: bool = False,
    git_revision: str | None = None,
) -> tuple[Promotion | None, Diagnostics]:
    """The promotion from `source` to `target` (the topology in `paths`, loaded for each of the two environments);
    None with the diagnostics when the differences cannot be read."""
    assert source.environment is not None and target.environment is not None
    found, diags = load_differences(paths, source.environment, target.environment)
    if found is None:
        return None, diags
    plan = plan_topology(target, backend, git_revision).plan if with_plan else None
    return Promotion(source.environment, target.environment, target.name, tuple(found), plan), diags
