"""Which topics each cluster will hold, given the topics that exist: the replication graph unrolled.

A pure function shared by validation (run on example topic names), the desired state of a plan
(run on live topic names) and drift reports. It applies exactly the rules a replication job
applies (`route`), so what the plan expects is what the jobs do.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from reconciler.mirror.policy import is_internal_topic
from reconciler.topology.model import Flow, Topology


def route(flow: Flow, topic: str) -> str | None:
    """The remote topic `flow` replicates `topic` into, or None when it does not replicate it.

    MM2's rules: internal topics never; heartbeats always; otherwise the topic filter; and never
    to a cluster whose alias is already in the topic's lineage (KIP-382 cycle detection).
    """
    if is_internal_topic(topic):
        return None
    if flow.policy.is_heartbeats_topic(topic):
        if not flow.carries_heartbeats:  # another topic family of the pair carries them (once per pair)
            return None
    elif not flow.topics.matches(topic):
        return None
    if flow.policy.is_cycle(topic, flow.target):
        return None
    return flow.policy.format_remote_topic(flow.source, topic)


@dataclass(frozen=True)
class Placement:
    """One topic on one cluster and the lineage that put it there (empty path = local topic)."""

    cluster: str
    topic: str
    origin_cluster: str
    origin_topic: str
    path: tuple[Flow, ...] = ()

    @property
    def hops(self) -> int:
        return len(self.path)

    @property
    def clusters(self) -> tuple[str, ...]:
        return (self.origin_cluster,) + tuple(f.target for f in self.path)

    def describe_path(self) -> str:
        return " -> ".join(self.clusters)


@dataclass
class Expansion:
    """cluster -> topic -> the placements (lineages) that bring it there; plus loops found on the way."""

    topics: dict[str, dict[str, list[Placement]]] = field(default_factory=dict)
    loops: list[Placement] = field(default_factory=list)

    def remote(self, cluster: str) -> dict[str, list[Placement]]:
        return {t: [p for p in ps if p.path] for t, ps in self.topics.get(cluster, {}).items() if any(p.path for p in ps)}

    def placements(self) -> Iterable[Placement]:
        for per_topic in self.topics.values():
            for ps in per_topic.values():
                yield from ps


def expand(topology: Topology, local_topics: Mapping[str, Iterable[str]], flows: Iterable[Flow] | None = None) -> Expansion:
    """Unroll replication from `local_topics` (cluster -> names) through the enabled flows to a fixpoint.

    A lineage that would bring records back to a cluster they already passed through is a loop
    (only possible when a flow on the path keeps names, i.e. the identity policy); it is recorded
    in `loops` and not followed further, so the expansion always terminates.
    """
    flows = tuple(topology.active_flows if flows is None else flows)
    out_of: dict[str, list[Flow]] = {}
    for f in flows:
        out_of.setdefault(f.source, []).append(f)

    result = Expansion()
    queue: deque[Placement] = deque()
    for cluster, names in local_topics.items():
        for name in names:
            p = Placement(cluster, name, cluster, name)
            result.topics.setdefault(cluster, {}).setdefault(name, []).append(p)
            queue.append(p)

    while queue:
        here = queue.popleft()
        for flow in out_of.get(here.cluster, ()):
            remote = route(flow, here.topic)
            if remote is None:
                continue
            there = Placement(flow.target, remote, here.origin_cluster, here.origin_topic, here.path + (flow,))
            if flow.target in here.clusters:
                result.loops.append(there)
                continue
            result.topics.setdefault(flow.target, {}).setdefault(remote, []).append(there)
            queue.append(there)
    return result
