"""The executor's own guard (issue 44, defence in depth): what the topology allows an apply to do, whatever the
plan says. The planner already decides this; the guard decides it again from the topology alone, at the last
step, so neither a bug in the planner nor an edited plan can delete an unrelated topic or grant an ACL to anyone.

`TopologyGuard(topology).refusal(action)` is None when the topology allows the action, else why not:

* a topic action (create, partitions, configs, ACLs, delete) only on a topic the topology owns on that cluster:
  a remote topic a declared flow into the cluster routes there (`route`, the one routing rule), or an internal
  topic (heartbeats, checkpoints, offset syncs) of a declared flow on that cluster;
* `delete_topic` only with `prune.topics`, and only a remote topic (`remote_source`, the planner's one rule) of a
  flow into the cluster that is enabled (or, with `prune.flows` too, removed; never a disabled flow's);
* `delete_config` only with `prune.configs`; `delete_acl` only with `prune.acls`, on a remote topic;
* `create_acl` only literal, on its own topic: ALLOW READ for anyone the source grants, ALLOW WRITE only for the
  cluster's declared `replication_principal`, any DENY; never ALLOW of another operation (ALL, ALTER, ...);
* a job deploy, update or restart only for a declared, enabled flow into the action's cluster;
* `record_ownership` only for the topology's own `owner:`, claiming only remote topics of its flows into the
  cluster and withdrawing only claims of topics it does not want;
* an engine replacement only when every flow whose change it hands to the engine is a declared, enabled flow into
  the action's cluster whose engine (`job.engine`, else the target's alias) is the engine replaced, and it hands
  over at least one (a replacement restarts every flow of the engine: nothing is deleted).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from reconciler.analysis.expansion import route
from reconciler.plan.action_base import Action
from reconciler.plan.actions import (
    AddPartitions,
    CreateAcl,
    CreateTopic,
    DeleteAcl,
    DeleteConfig,
    DeleteTopic,
    RecordOwnership,
    SetConfig,
)
from reconciler.plan.desired import internal_topics
from reconciler.plan.diff import remote_source
from reconciler.plan.engine_actions import ReplaceEngine
from reconciler.plan.job_actions import DeployJob, RestartJob, UpdateJob
from reconciler.state.live import AclOperation, AclPattern, AclPermission
from reconciler.topology.model import Topology


class ActionGuard(Protocol):
    """What the executor asks before it runs anything: why an action may not run, or None."""

    def refusal(self, action: Action) -> str | None: ...


class GuardRefused(Exception):
    """The executor ran nothing: some actions are not allowed by the topology (`reasons`, one line each)."""

    def __init__(self, reasons: list[str]):
        self.reasons = reasons
        more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
        super().__init__(f"refusing to apply: {reasons[0]}{more}; nothing was applied")


def refusals(guard: ActionGuard, actions: Iterable[Action]) -> list[str]:
    return [r for r in (guard.refusal(a) for a in actions) if r is not None]


class TopologyGuard:
    """The guard of one topology (see the module's docstring)."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self.active = [f for f in topology.flows if f.enabled]
        self.internal = {(c, n) for f in topology.flows for c, n, _, _ in internal_topics(f)}

    def _remote_of(self, cluster: str, name: str):
        """The enabled flow into `cluster` that replicates a topic into `name`, or None."""
        for flow in self.active:
            if flow.target != cluster:
                continue
            upstream = flow.policy.upstream_topic(name)
            if upstream is not None and route(flow, upstream) == name:
                return flow
        return None

    def _owned(self, cluster: str, name: str) -> bool:
        return (cluster, name) in self.internal or self._remote_of(cluster, name) is not None

    def refusal(self, action: Action) -> str | None:
        a, topo = action, self.topology
        where = f"{a.cluster}:{getattr(a, 'subject', '')}"
        if a.cluster not in topo.clusters:
            return f"{a.describe()}: cluster {a.cluster!r} is not in the topology"
        if isinstance(a, (DeployJob, UpdateJob, RestartJob)):
            if not any(f.name == a.flow and f.target == a.cluster for f in self.active):
                return f"{a.describe()}: no enabled flow {a.flow} into {a.cluster} in the topology"
            return None
        if isinstance(a, ReplaceEngine):
            return self._replace_engine(a)
        if isinstance(a, DeleteTopic):
            return self._delete_topic(a)
        if isinstance(a, RecordOwnership):
            return self._ownership(a)
        if not isinstance(a, (CreateTopic, SetConfig, AddPartitions, DeleteConfig, CreateAcl, DeleteAcl)):
            return None  # stop_job: stopping replication deletes nothing
        if not self._owned(a.cluster, a.subject):
            return f"{a.describe()}: {where} is not a remote or internal topic of a flow in the topology"
        if isinstance(a, DeleteConfig) and not topo.prune.configs:
            return f"{a.describe()}: the topology does not set prune.configs"
        if isinstance(a, DeleteAcl):
            if not topo.prune.acls:
                return f"{a.describe()}: the topology does not set prune.acls"
            if a.acl.topic != a.subject or self._remote_of(a.cluster, a.subject) is None:
                return f"{a.describe()}: ACLs are deleted only on remote topics"
        if isinstance(a, CreateAcl):
            return self._create_acl(a)
        return None

    def _ownership(self, a: RecordOwnership) -> str | None:
        if not self.topology.owner or a.owner != self.topology.owner:
            return f"{a.describe()} on {a.cluster}: the topology's owner is {self.topology.owner or 'not set'}"
        foreign = [t for t in a.claim if self._remote_of(a.cluster, t) is None]
        if foreign:
            return f"{a.describe()} on {a.cluster}: {foreign[0]} is not a remote topic of a flow in the topology"
        wanted = [t for t in a.release if self._remote_of(a.cluster, t) is not None]
        if wanted:
            return f"{a.describe()} on {a.cluster}: {wanted[0]} is a remote topic the topology wants"
        return None

    def _replace_engine(self, a: ReplaceEngine) -> str | None:
        if not a.handed:
            return f"{a.describe()}: it hands no flow of the topology to engine {a.engine}"
        for e in a.handed:
            flow = next((f for f in self.active if f.name == e.flow and f.target == a.cluster), None)
            if flow is None:
                return f"{a.describe()}: no enabled flow {e.flow} into {a.cluster} in the topology"
            if flow.engine != a.engine or e.options.get("engine") != a.engine:
                return f"{a.describe()}: flow {e.flow} is not in engine {a.engine} in the topology"
        return None

    def _delete_topic(self, a: DeleteTopic) -> str | None:
        topo = self.topology
        if not topo.prune.topics:
            return f"{a.describe()} on {a.cluster}: the topology does not set prune.topics"
        src = remote_source(a.topic, a.cluster, topo)
        if src is None:
            return f"{a.describe()} on {a.cluster}: not a remote topic of another cluster of the topology"
        flows = [f for f in topo.flows if (f.source, f.target) == (src, a.cluster)]
        if any(not f.enabled for f in flows):
            return f"{a.describe()} on {a.cluster}: it belongs to disabled flow {src}->{a.cluster}"
        if not flows and not topo.prune.flows:
            return (
                f"{a.describe()} on {a.cluster}: there is no flow {src}->{a.cluster} and the topology does not set "
                "prune.flows"
            )
        return None

    def _create_acl(self, a: CreateAcl) -> str | None:
        acl, writer = a.acl, self.topology.clusters[a.cluster].replication_principal
        if acl.topic != a.subject or acl.pattern is not AclPattern.LITERAL:
            return f"{a.describe()}: only literal ACLs on the action's own topic are created"
        if self._remote_of(a.cluster, acl.topic) is None:
            return f"{a.describe()}: ACLs are created only on remote topics"
        if acl.permission is AclPermission.DENY:
            return None
        if acl.permission is AclPermission.ALLOW and acl.operation is AclOperation.READ:
            return None
        if acl.permission is AclPermission.ALLOW and acl.operation is AclOperation.WRITE:
            if writer and acl.principal == writer:
                return None
            return (
                f"{a.describe()}: only the replication principal of {a.cluster} "
                f"({writer or 'none declared'}) may be allowed to WRITE a remote topic"
            )
        return f"{a.describe()}: the reconciler grants only READ (and WRITE to the replication principal)"
