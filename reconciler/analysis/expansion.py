"""Which topics each cluster will hold, given the topics that exist: the replication graph unrolled.

A pure function shared by validation (run on example topic names), the desired state of a plan
(run on live topic names) and drift reports. It applies exactly the rules a replication job
applies (`route`), so what the plan expects is what the jobs do.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from reconciler.mirror.filters import MAX_TOPIC_NAME_CHARS, TopicFilter
from reconciler.mirror.policy import ReplicationPolicy
from reconciler.topology.model import Flow, Heartbeats, Topology


class RoutedFlow(Protocol):
    """What the routing rule reads of a flow: a topology Flow, or the flow a job spec describes
    (`reconciler.contract.spec.SpecFlow`)."""

    @property
    def source(self) -> str: ...

    @property
    def target(self) -> str: ...

    @property
    def topics(self) -> TopicFilter: ...

    @property
    def policy(self) -> ReplicationPolicy: ...

    @property
    def heartbeats(self) -> Heartbeats: ...

    @property
    def carries_heartbeats(self) -> bool: ...


def route(flow: RoutedFlow, topic: str) -> str | None:
    """The remote topic `flow` replicates `topic` into, or None when it does not replicate it.

    MM2's rules: internal topics never; heartbeats always; otherwise the topic filter; and never
    to a cluster whose alias is already in the topic's lineage (KIP-382 cycle detection).
    """
    if not _selects(flow, topic) or flow.policy.is_cycle(topic, flow.target):
        return None
    return flow.policy.format_remote_topic(flow.source, topic)


def _selects(flow: RoutedFlow, topic: str) -> bool:
    """The part of `route` that reads only the flow's settings (not its clusters): flows with the same
    settings select the same topics, so `expand` asks once per settings and topic."""
    if flow.policy.is_internal_topic(topic):
        return False
    if flow.policy.is_heartbeats_topic(topic) and flow.heartbeats.replicate:
        return flow.carries_heartbeats  # else another topic family of the pair carries them (once per pair)
    return flow.topics.matches(topic)  # MirrorSourceConnector.shouldReplicateTopic


def _by_settings(out_of: Mapping[str, list[Flow]]) -> dict[str, list[tuple[int, list[Flow]]]]:
    """Flows out of each cluster in runs (in their order) of the same settings `_selects` reads, each run
    numbered by its settings: a mesh's flows out of one cluster usually share them, so a topic is judged
    once per run, not once per flow (a 200-cluster mesh: 24 million routings were minutes)."""
    numbers: dict[tuple, int] = {}
    out: dict[str, list[tuple[int, list[Flow]]]] = {}
    for cluster, flows in out_of.items():
        runs = out.setdefault(cluster, [])
        for f in flows:
            n = numbers.setdefault((f.policy, f.heartbeats, f.carries_heartbeats, f.topics), len(numbers))
            if runs and runs[-1][0] == n:
                runs[-1][1].append(f)
            else:
                runs.append((n, [f]))
    return out


def checkpoint_route(flow: RoutedFlow, topic: str) -> str | None:
    """The topic, as named on the target, that a checkpoint of a group's offset on `topic` names.

    MirrorCheckpointTask.shouldCheckpointTopic (the topic filter) and renameTopicPartition: a topic
    that came from the target (`B.t` in a flow A->B) is renamed back to its original name `t`
    (test `testDownstreamTopicRenaming`); any other topic to its remote name.
    """
    policy = flow.policy
    if policy.is_internal_topic(topic) or not flow.topics.matches(topic):
        return None
    if policy.topic_source(topic) == flow.target:
        return policy.original_topic(topic)
    return policy.format_remote_topic(flow.source, topic)


KAFKA_MAX_TOPIC_NAME = MAX_TOPIC_NAME_CHARS  # Kafka's limit on topic names (Topic.MAX_NAME_LENGTH)


@dataclass(frozen=True, eq=False)
class Placement:
    """One topic on one cluster and the lineage that put it there (no parent = local topic).

    The lineage is a chain of parents, so extending it costs O(1) whatever its length.
    """

    cluster: str
    topic: str
    origin_cluster: str
    origin_topic: str
    parent: Placement | None = None
    flow: Flow | None = None

    @cached_property
    def hops(self) -> int:
        return 0 if self.parent is None else self.parent.hops + 1

    @cached_property
    def path(self) -> tuple[Flow, ...]:
        flows: list[Flow] = []
        p: Placement | None = self
        while p is not None and p.flow is not None:
            flows.append(p.flow)
            p = p.parent
        return tuple(reversed(flows))

    @property
    def clusters(self) -> tuple[str, ...]:
        return (self.origin_cluster,) + tuple(f.target for f in self.path)

    def passed(self, cluster: str) -> bool:
        p: Placement | None = self
        while p is not None:
            if p.cluster == cluster:
                return True
            p = p.parent
        return False

    def describe_path(self) -> str:
        return " -> ".join(self.clusters)


@dataclass
class Multiplication:
    """Replication multiplies one origin topic along paths beyond the bound: what was counted."""

    origin_cluster: str
    origin_topic: str
    copies: int  # remote copies of the origin topic counted (exact unless `more`)
    more: bool  # counting stopped at the cap: there are more
    cluster: str  # the cluster that receives the most copies
    cluster_copies: int
    examples: tuple[str, ...]  # a few remote names on `cluster`, shortest lineage first
    bound: int
    placements: int  # remote placements the expansion held when it stopped (> bound)
    clusters: int  # clusters the origin topic reaches
    chain: tuple[str, ...]  # "name on cluster" for the first clusters reached, shortest lineage first


@dataclass
class Expansion:
    """cluster -> topic -> the placements (lineages) that bring it there; plus loops found on the way.

    `multiplied` is set when the expansion stopped because it passed `limit` remote placements;
    `too_long` holds the first placements whose remote name passes Kafka's topic-name limit (not followed).
    """

    topics: dict[str, dict[str, list[Placement]]] = field(default_factory=dict)
    loops: list[Placement] = field(default_factory=list)
    too_long: list[Placement] = field(default_factory=list)
    multiplied: Multiplication | None = None

    @property
    def complete(self) -> bool:
        return self.multiplied is None

    def remote(self, cluster: str) -> dict[str, list[Placement]]:
        return {
            t: [p for p in ps if p.path] for t, ps in self.topics.get(cluster, {}).items() if any(p.path for p in ps)
        }

    def placements(self) -> Iterable[Placement]:
        for per_topic in self.topics.values():
            for ps in per_topic.values():
                yield from ps


def _out_of(flows: Iterable[Flow]) -> dict[str, list[Flow]]:
    out_of: dict[str, list[Flow]] = {}
    for f in flows:
        out_of.setdefault(f.source, []).append(f)
    return out_of


def _step(here: Placement, flow: Flow) -> Placement | None:
    remote = route(flow, here.topic)
    if remote is None:
        return None
    return Placement(flow.target, remote, here.origin_cluster, here.origin_topic, here, flow)


def count_copies(
    out_of: Mapping[str, list[Flow]], origin: Placement, cap: int
) -> tuple[dict[str, int], dict[str, list[Placement]], bool]:
    """The remote copies of one origin topic per cluster, counted breadth first until `cap` copies.

    Returns (cluster -> copies, cluster -> the first few placements, i.e. the shortest lineages,
    stopped at the cap: the counts are then lower bounds).
    """
    counts: dict[str, int] = {}
    kept: dict[str, list[Placement]] = {}
    total = 0
    queue: deque[Placement] = deque([origin])
    while queue:
        here = queue.popleft()
        for flow in out_of.get(here.cluster, ()):
            if here.passed(flow.target):
                continue
            there = _step(here, flow)
            if there is None or len(there.topic) > KAFKA_MAX_TOPIC_NAME:
                continue
            total += 1
            counts[flow.target] = counts.get(flow.target, 0) + 1
            ex = kept.setdefault(flow.target, [])
            if len(ex) < 3:
                ex.append(there)
            if total >= cap:
                return counts, kept, True
            queue.append(there)
    return counts, kept, False


def _multiplication(out_of: Mapping[str, list[Flow]], origin: Placement, limit: int, total: int) -> Multiplication:
    counts, kept, more = count_copies(out_of, origin, max(limit, 1) * 5)
    cluster = max(sorted(counts), key=lambda c: counts[c])
    chain = tuple(
        f"{p.topic} on {p.cluster}" for p in sorted((ps[0] for ps in kept.values()), key=lambda p: p.hops)[:3]
    )
    return Multiplication(
        origin.origin_cluster,
        origin.origin_topic,
        sum(counts.values()),
        more,
        cluster,
        counts[cluster],
        tuple(p.topic for p in kept[cluster]),
        limit,
        total,
        len(counts),
        chain,
    )


def expand(
    topology: Topology,
    local_topics: Mapping[str, Iterable[str]],
    flows: Iterable[Flow] | None = None,
    limit: int | None = None,
) -> Expansion:
    """Unroll replication from `local_topics` (cluster -> names) through the enabled flows to a fixpoint.

    A lineage that would bring records back to a cluster they already passed through is a loop
    (only possible when a flow on the path keeps names, i.e. the identity policy); it is recorded
    in `loops` and not followed further, so the expansion always terminates. A remote name longer
    than Kafka allows is recorded in `too_long` and not followed (Kafka would refuse to create it).

    With `limit`, the expansion stops (breadth first, so short lineages and loops are found first)
    once it holds more than `limit` remote placements: MM2 re-replicates remote topics along every
    path the filters allow, so their number can grow like the number of simple paths. `multiplied`
    then says which origin topic multiplies and how much (counted depth-first, with a cap).
    """
    out_of = _out_of(topology.active_flows if flows is None else flows)
    runs = _by_settings(out_of)
    selects: dict[tuple[int, str], bool] = {}

    result = Expansion()
    queue: deque[Placement] = deque()
    for cluster, names in local_topics.items():
        for name in names:
            p = Placement(cluster, name, cluster, name)
            result.topics.setdefault(cluster, {}).setdefault(name, []).append(p)
            queue.append(p)

    remote = 0
    fanout: dict[tuple[str, str], int] = {}
    while queue:
        here = queue.popleft()
        for n, run in runs.get(here.cluster, ()):
            if (n, here.topic) not in selects:
                selects[(n, here.topic)] = _selects(run[0], here.topic)
            if not selects[(n, here.topic)]:
                continue
            for flow in run:
                there = _step(here, flow)
                if there is None:
                    continue
                if here.passed(flow.target):
                    result.loops.append(there)
                    continue
                if len(there.topic) > KAFKA_MAX_TOPIC_NAME:
                    if len(result.too_long) < 10:
                        result.too_long.append(there)
                    continue
                result.topics.setdefault(flow.target, {}).setdefault(there.topic, []).append(there)
                queue.append(there)
                remote += 1
                if limit is not None:
                    key = (here.origin_cluster, here.origin_topic)
                    fanout[key] = fanout.get(key, 0) + 1
                    if remote > limit:
                        worst = max(sorted(fanout), key=lambda k: fanout[k])
                        origin = Placement(worst[0], worst[1], worst[0], worst[1])
                        result.multiplied = _multiplication(out_of, origin, limit, remote)
                        return result
    return result
