"""Offsets: MirrorMaker 2's RemoteClusterUtils for operators (`offsets translate`, `failover`,
`reachability`), over the Backend's mirror client factory.

Each reads one cluster: the factory resolves that cluster's settings, probes it (a cluster that is down is
one line within seconds, before any Kafka client retries) and builds the client. Only `failover` with
`apply` writes anything. A refusal, and any cluster error, is raised as `Refused` with the line to print.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from reconciler.adapters.mirror_kafka import ClusterIOError
from reconciler.adapters.probe import NotAnswering, Unreachable
from reconciler.mirror import mirror_client as mc
from reconciler.mirror.policy import ReplicationPolicy
from reconciler.operations.backend import Backend, MirrorCluster
from reconciler.render.failover import Failover, Translation
from reconciler.topology.connection import check_references
from reconciler.topology.flow_id import FlowId
from reconciler.topology.model import Flow, Topology

Warn = Callable[[str], None]


class Refused(Exception):
    """The operation stops: the message is the line to print (exit 1)."""


@dataclass(frozen=True)
class GroupMove:
    """A consumer group moving from `source` to `target` (what translate and failover are asked)."""

    group: str
    source: str
    target: str
    timeout: float = 30.0  # per cluster request


@dataclass(frozen=True)
class FailoverOutcome:
    shown: Failover  # the translation, the group's state on the target, the plan, whether it was applied
    refusal: str | None  # why `apply` may not commit (None: it may)

    @property
    def plan(self) -> mc.FailoverPlan:
        return self.shown.plan

    @property
    def applied(self) -> bool:
        return self.shown.applied


@contextmanager
def _cluster_errors() -> Iterator[None]:
    try:
        yield
    except (ClusterIOError, Unreachable, NotAnswering) as exc:
        raise Refused(str(exc)) from exc


def _check_aliases(topology: Topology, *aliases: str) -> None:
    for alias in aliases:
        if alias not in topology.clusters:
            raise Refused(
                f"cluster {alias!r} is not in the topology (clusters: {', '.join(sorted(topology.clusters))})"
            )


def _connect(topology: Topology, alias: str, backend: Backend, timeout: float) -> MirrorCluster:
    """Settings are resolved for the one cluster an operation reads; a cluster that is down raises here."""
    _check_aliases(topology, alias)
    diags = check_references(topology, [alias])
    if not diags.ok:
        raise Refused(diags.render())
    return backend.mirror_client(topology.clusters[alias], timeout)


#: For the other operations over one flow's clusters (verify, cutover).
cluster_errors = _cluster_errors
connect = _connect


def find_flow(topology: Topology, flow_id: str) -> Flow:
    """The flow named `A->B[:family]`; Refused naming the topology's flows when there is none."""
    try:
        FlowId.parse(flow_id)
    except ValueError as exc:
        raise Refused(str(exc)) from None
    flow = next((f for f in topology.flows if f.name == flow_id), None)
    if flow is None:
        raise Refused(f"no flow {flow_id} in the topology (flows: {', '.join(sorted(f.name for f in topology.flows))})")
    return flow


def _flow_policy(topology: Topology, source: str, target: str, warn: Warn) -> ReplicationPolicy:
    flow = next((f for f in topology.flows if (f.source, f.target) == (source, target)), None)
    if flow is None:
        warn(f"warning: no flow {source}->{target} in the topology; assuming the default replication policy")
        return ReplicationPolicy()
    return flow.policy


def _translation(topology: Topology, move: GroupMove, target: MirrorCluster, warn: Warn) -> Translation:
    policy = _flow_policy(topology, move.source, move.target, warn)
    try:
        scan = mc.translate_offsets(target, move.source, move.group, policy)
    except mc.NoCheckpointsTopic:
        raise Refused(
            f"cluster {move.target!r} has no topic {policy.checkpoints_topic(move.source)}: "
            f"no flow {move.source}->{move.target} has emitted checkpoints there"
        ) from None
    if not scan.checkpoints:
        raise Refused(
            f"no checkpoints for group {move.group!r} in {policy.checkpoints_topic(move.source)} on "
            f"{move.target!r}: the group is not replicated by the flow (groups filter) or has not "
            f"committed offsets on {move.source!r} yet"
        )
    return Translation(move.group, move.source, move.target, policy, scan)


def translate(topology: Topology, move: GroupMove, backend: Backend, warn: Warn = lambda _: None) -> Translation:
    """Where the group may resume on the target, from the checkpoints there."""
    with _cluster_errors():
        _check_aliases(topology, move.source, move.target)
        target = _connect(topology, move.target, backend, move.timeout)
        return _translation(topology, move, target, warn)


def _refusal(move: GroupMove, state: mc.GroupState, plan: mc.FailoverPlan) -> str | None:
    """Why `apply` may not commit (None when it may)."""
    if state.active:
        return (
            f"group {move.group!r} is active on {move.target!r} (state {state.state}, {state.members} member(s)): "
            f"stop its consumers there before moving its offsets"
        )
    if plan.missing:
        return (
            f"{len(plan.missing)} partition(s) do not exist on {move.target!r} "
            f"({', '.join(map(str, plan.missing))}): replicate the topics before failing over"
        )
    return None


def failover(
    topology: Topology,
    move: GroupMove,
    backend: Backend,
    *,
    apply: bool = False,
    allow_rewind: bool = False,
    warn: Warn = lambda _: None,
) -> FailoverOutcome:
    """The translated offsets as a plan for the group on the target; with `apply`, committed there unless
    refused (the group active on the target, partitions missing there)."""
    with _cluster_errors():
        _check_aliases(topology, move.source, move.target)
        target = _connect(topology, move.target, backend, move.timeout)
        t = _translation(topology, move, target, warn)
        partitions = target.topics()
        present = [tp for tp in t.scan.checkpoints if tp.partition < partitions.get(tp.topic, 0)]
        committed = target.committed_offsets(move.group, present)
        state = target.group_state(move.group)
        plan = mc.plan_failover(move.group, t.scan.offsets(), committed, partitions, allow_rewind)
        refusal = _refusal(move, state, plan)
        applied = False
        if apply and refusal is None and plan.commits:
            target.commit_offsets(move.group, plan.commits)
            applied = True
        return FailoverOutcome(Failover(t, state, plan, applied), refusal)


def reachability(topology: Topology, alias: str, backend: Backend, timeout: float = 30.0) -> mc.Reachability:
    """The clusters upstream of `alias`, their hop counts and heartbeat ages at the Backend's clock."""
    with _cluster_errors():
        cluster = _connect(topology, alias, backend, timeout)
        policy = mc.policy_between([f.policy for f in topology.flows])
        latest = mc.latest_heartbeats(cluster, policy)
        return mc.reachability(alias, latest, policy, int(backend.clock() * 1000))
