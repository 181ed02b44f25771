"""MirrorMaker 2's MirrorClient / RemoteClusterUtils, as pure functions over what a cluster holds.

MM2's client interprets the internal topics on one cluster: heartbeat topics (`heartbeats`,
`A.heartbeats`, `B.A.heartbeats`, ...) tell which clusters are upstream and how many replication
hops away; `<source>.checkpoints.internal` tells where a source cluster's consumer groups may
resume on this cluster. Here that logic works on topic names and decoded records handed in by an
adapter (`reconciler.adapters.mirror_kafka`), so it is testable without a broker.

Differences from Java, all deliberate:
- "unreachable" is None rather than -1;
- `all_sources` is ordered nearest first (Java returns a set) so hop counts can be shown;
- a checkpoint tombstone (null value) removes the key, as compaction would; records that do not
  decode are skipped and counted (Java logs and skips them);
- every partition of the checkpoints topic is read, not only partition 0 (MM2 writes to 0; a
  keyed writer may spread keys, and one key never spans two partitions).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from reconciler.mirror.policy import DEFAULT_POLICY, PolicyKind, ReplicationPolicy
from reconciler.mirror.records import Checkpoint, Heartbeat, RecordFormatError

#: A raw record as read from a topic: (key, value), either may be None.
RawRecord = tuple[bytes | None, bytes | None]


@dataclass(frozen=True, order=True)
class TopicPartition:
    """A partition of a topic as named on the cluster being inspected."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


# --- topic names: heartbeats, checkpoints, hops ------------------------------------------------


def is_checkpoints_topic(topic: str, policy: ReplicationPolicy = DEFAULT_POLICY) -> bool:
    """ReplicationPolicy.isCheckpointsTopic: `<alias><sep>checkpoints<sep>internal`."""
    return policy.is_checkpoints_topic(topic)


def checkpoints_source(topic: str, policy: ReplicationPolicy = DEFAULT_POLICY) -> str | None:
    """The source cluster alias whose groups a checkpoints topic describes."""
    return policy.checkpoints_source(topic)


def heartbeat_topics(topics: Iterable[str], policy: ReplicationPolicy) -> frozenset[str]:
    """MirrorClient.heartbeatTopics: the local `heartbeats` topic and every replica of one."""
    return frozenset(t for t in topics if policy.is_heartbeats_topic(t))


def checkpoint_topics(topics: Iterable[str], policy: ReplicationPolicy = DEFAULT_POLICY) -> frozenset[str]:
    """MirrorClient.checkpointTopics."""
    return frozenset(t for t in topics if policy.is_checkpoints_topic(t))


def all_sources(topic: str, policy: ReplicationPolicy) -> tuple[str, ...]:
    """Every cluster a remote topic passed through, nearest first: `B.A.heartbeats` -> (B, A).

    Stops at a repeated alias, which only a policy that cannot prevent cycles (identity) makes.
    """
    sources: list[str] = []
    source = policy.topic_source(topic)
    while source is not None and source not in sources:
        sources.append(source)
        upstream = policy.upstream_topic(topic)
        if upstream is None:
            break
        topic = upstream
        source = policy.topic_source(topic)
    return tuple(sources)


def count_hops(topic: str, upstream_alias: str, policy: ReplicationPolicy) -> int | None:
    """MirrorClient.countHopsForTopic: hops from `upstream_alias` along this topic, None if not on it."""
    sources = all_sources(topic, policy)
    return sources.index(upstream_alias) + 1 if upstream_alias in sources else None


def upstream_clusters(topics: Iterable[str], policy: ReplicationPolicy) -> frozenset[str]:
    """MirrorClient.upstreamClusters: every alias named by an incoming heartbeat topic."""
    return frozenset(a for t in heartbeat_topics(topics, policy) for a in all_sources(t, policy))


def replication_hops(topics: Iterable[str], upstream_alias: str, policy: ReplicationPolicy) -> int | None:
    """MirrorClient.replicationHops: the shortest hop count from `upstream_alias`, None if unreachable."""
    hops = [h for t in heartbeat_topics(topics, policy) if (h := count_hops(t, upstream_alias, policy))]
    return min(hops, default=None)


def remote_topics(topics: Iterable[str], policy: ReplicationPolicy, source: str | None = None) -> frozenset[str]:
    """MirrorClient.remoteTopics: replicated topics (internal ones excluded), optionally from one source."""
    return frozenset(
        t
        for t in topics
        if not policy.is_internal_topic(t)
        and (src := policy.topic_source(t)) is not None
        and (source is None or src == source)
    )


# --- checkpoints -> translated offsets -----------------------------------------------------------


@dataclass(frozen=True)
class CheckpointScan:
    """The latest checkpoint per (topic, partition) of one group, and what could not be read."""

    checkpoints: Mapping[TopicPartition, Checkpoint]
    skipped: int = 0  # records that were not valid MM2 checkpoints

    def offsets(self) -> dict[TopicPartition, int]:
        """MirrorClient.remoteConsumerOffsets: downstream offsets keyed by the topic as named here."""
        return {tp: c.downstream_offset for tp, c in sorted(self.checkpoints.items())}


def latest_checkpoints(records: Iterable[RawRecord], group: str) -> CheckpointScan:
    """Fold a checkpoints topic, in log order, into the latest checkpoint of each partition of `group`.

    No renaming happens here: MirrorCheckpointTask already wrote the topic as named on the target
    (`orders` -> `A.orders`, or back to `orders` for a topic that came from the target), and
    MirrorClient.remoteConsumerOffsets returns `checkpoint.topicPartition()` as is.
    """
    latest: dict[TopicPartition, Checkpoint] = {}
    skipped = 0
    for key, value in records:
        if value is None:  # tombstone: compaction would remove the key
            tp = _checkpoint_key(key)
            if tp is None:
                skipped += 1
            elif tp[0] == group:
                latest.pop(tp[1], None)
            continue
        try:
            checkpoint = Checkpoint.deserialize(key, value)
        except RecordFormatError:
            skipped += 1
            continue
        if checkpoint.consumer_group_id == group:
            latest[TopicPartition(checkpoint.topic, checkpoint.partition)] = checkpoint
    return CheckpointScan(latest, skipped)


_ANY_CHECKPOINT_VALUE = Checkpoint("g", "t", 0, 0, 0).record_value()


def _checkpoint_key(key: bytes | None) -> tuple[str, TopicPartition] | None:
    """(group, topic-partition) of a tombstone's key: records.py decodes keys only with a value."""
    try:
        c = Checkpoint.deserialize(key, _ANY_CHECKPOINT_VALUE)
    except RecordFormatError:
        return None
    return c.consumer_group_id, TopicPartition(c.topic, c.partition)


def upstream_topic_name(topic: str, source_alias: str, target_alias: str, policy: ReplicationPolicy) -> str:
    """The name on the source cluster of a checkpointed topic (inverse of renameTopicPartition).

    Best effort for display: a topic that came from the target and went back (`B.x` on A, `x` on B)
    is shown as one hop; MM2 stores only the original name, so longer round trips are ambiguous.
    """
    if policy.kind is PolicyKind.IDENTITY:
        return topic
    if policy.topic_source(topic) == source_alias:
        return policy.upstream_topic(topic) or topic
    return policy.format_remote_topic(target_alias, topic)


# --- heartbeats -> reachability ------------------------------------------------------------------


def latest_heartbeat(records: Iterable[RawRecord]) -> tuple[Heartbeat | None, int]:
    """The heartbeat with the newest timestamp among `records`, and how many did not decode."""
    newest: Heartbeat | None = None
    skipped = 0
    for key, value in records:
        try:
            hb = Heartbeat.deserialize(key, value)
        except RecordFormatError:
            skipped += 1
            continue
        if newest is None or hb.timestamp >= newest.timestamp:
            newest = hb
    return newest, skipped


@dataclass(frozen=True)
class HeartbeatTopic:
    """One heartbeat topic on the inspected cluster and its freshest heartbeat."""

    topic: str
    sources: tuple[str, ...]  # clusters it came through, nearest first; () for the local `heartbeats`
    latest: Heartbeat | None
    age_seconds: float | None


@dataclass(frozen=True)
class Upstream:
    """An upstream cluster: the shortest path to it and the freshest heartbeat seen along any path."""

    alias: str
    hops: int
    via: str  # the heartbeat topic giving the shortest path
    last_heartbeat_ms: int | None
    age_seconds: float | None


@dataclass(frozen=True)
class Reachability:
    cluster: str
    upstream: tuple[Upstream, ...]
    topics: tuple[HeartbeatTopic, ...]


def _age(timestamp_ms: int | None, now_ms: int) -> float | None:
    return None if timestamp_ms is None else max(0.0, (now_ms - timestamp_ms) / 1000.0)


def reachability(
    cluster: str, latest: Mapping[str, Heartbeat | None], policy: ReplicationPolicy, now_ms: int
) -> Reachability:
    """Upstream clusters with hop counts (MirrorClient.replicationHops) and heartbeat ages.

    `latest` maps each heartbeat topic on `cluster` to its freshest heartbeat (None if empty).
    A cluster's age is that of the freshest heartbeat on any topic it appears on: if any path
    still carries heartbeats from it, data from it is still flowing here.
    """
    topics = tuple(
        HeartbeatTopic(t, all_sources(t, policy), hb, _age(hb.timestamp if hb else None, now_ms))
        for t, hb in sorted(latest.items())
    )
    upstream: list[Upstream] = []
    for alias in sorted({a for t in topics for a in t.sources}):
        seen = [(t.sources.index(alias) + 1, t) for t in topics if alias in t.sources]
        # shortest path; among equals the topic it originates on (`B.heartbeats` rather than `B.A.heartbeats`)
        hops, via = min(seen, key=lambda s: (s[0], len(s[1].sources), s[1].topic))
        stamps = [t.latest.timestamp for _, t in seen if t.latest is not None]
        last = max(stamps, default=None)
        upstream.append(Upstream(alias, hops, via.topic, last, _age(last, now_ms)))
    return Reachability(cluster, tuple(sorted(upstream, key=lambda u: (u.hops, u.alias))), topics)


# --- failover: translated offsets vs the group's committed offsets on the target ----------------

#: Group states in which no consumer can be using the group's offsets. Anything else, including a
#: state the broker reports as unknown (Tansu does so while a member is joining), counts as active.
INACTIVE_GROUP_STATES = frozenset({"EMPTY", "DEAD"})


@dataclass(frozen=True)
class GroupState:
    """A consumer group as DescribeGroups reports it on one cluster."""

    group: str
    state: str  # ConsumerGroupState name: EMPTY, STABLE, PREPARING_REBALANCE, DEAD, UNKNOWN, ...
    members: int

    @property
    def active(self) -> bool:
        """Whether consumers may be using the group, so that its offsets must not be changed under them.

        Both signals are needed: some brokers (Tansu) report a STABLE group with no member list.
        """
        return self.members > 0 or self.state not in INACTIVE_GROUP_STATES


class FailoverAction(str, enum.Enum):
    """How one partition's committed offset on the target is handled."""

    COMMIT = "commit"  # no committed offset yet, or it is behind the translation: move forward
    UNCHANGED = "unchanged"  # already at the translated offset
    KEEP_AHEAD = "keep-ahead"  # committed offset is ahead; never rewound without allow_rewind
    REWIND = "rewind"  # committed offset is ahead and allow_rewind was given
    MISSING = "missing"  # the topic or partition does not exist on the target: blocks apply


@dataclass(frozen=True)
class PartitionFailover:
    partition: TopicPartition
    translated: int
    committed: int | None
    action: FailoverAction

    @property
    def changes(self) -> bool:
        return self.action in (FailoverAction.COMMIT, FailoverAction.REWIND)


@dataclass(frozen=True)
class FailoverPlan:
    group: str
    partitions: tuple[PartitionFailover, ...]

    @property
    def commits(self) -> dict[TopicPartition, int]:
        """The offsets `--apply` commits."""
        return {p.partition: p.translated for p in self.partitions if p.changes}

    @property
    def missing(self) -> tuple[TopicPartition, ...]:
        return tuple(p.partition for p in self.partitions if p.action is FailoverAction.MISSING)


def plan_failover(
    group: str,
    translated: Mapping[TopicPartition, int],
    committed: Mapping[TopicPartition, int],
    partitions_on_target: Mapping[str, int] | None,
    allow_rewind: bool = False,
) -> FailoverPlan:
    """Decide, per partition, what committing the translated offsets to the target group does.

    Like MM2's own group-offset sync (MirrorCheckpointTask.syncGroupOffset), offsets only move
    forward by default: a committed offset ahead of the checkpoint means the group already read
    further on the target, and rewinding it would re-deliver records.
    `partitions_on_target` maps topic -> partition count on the target cluster (None: not checked,
    e.g. by a replication job that created those partitions itself).
    The replication job's group-offset sync (`sync.group_offsets`) applies this same rule.
    """
    out: list[PartitionFailover] = []
    for tp, offset in sorted(translated.items()):
        current = committed.get(tp)
        if partitions_on_target is not None and tp.partition >= partitions_on_target.get(tp.topic, 0):
            action = FailoverAction.MISSING
        elif current is None or current < offset:
            action = FailoverAction.COMMIT
        elif current == offset:
            action = FailoverAction.UNCHANGED
        else:
            action = FailoverAction.REWIND if allow_rewind else FailoverAction.KEEP_AHEAD
        out.append(PartitionFailover(tp, offset, current, action))
    return FailoverPlan(group, tuple(out))


def policy_between(policies: Sequence[ReplicationPolicy]) -> ReplicationPolicy:
    """The one policy shared by `policies`, or the default policy when there is none or they differ."""
    distinct = set(policies)
    return distinct.pop() if len(distinct) == 1 else ReplicationPolicy()


# --- RemoteClusterUtils: the same questions, asked of a cluster ----------------------------------


class ClusterReader(Protocol):
    """What MirrorClient reads from a cluster (reconciler.adapters.mirror_kafka.MirrorKafka, or a fake)."""

    def topics(self) -> dict[str, int]: ...
    def read_all(self, topic: str, partitions: int) -> list[RawRecord]: ...
    def read_tail(self, topic: str, partitions: int, per_partition: int) -> list[RawRecord]: ...


class NoCheckpointsTopic(LookupError):
    """The target holds no `<source>.checkpoints.internal`: no flow source->target emits checkpoints."""


#: Records read from the end of each heartbeat topic partition: heartbeats are small and frequent,
#: so the newest is among the last few, and the topic's history need not be read.
HEARTBEAT_TAIL = 64


def translate_offsets(
    target: ClusterReader, source_alias: str, group: str, policy: ReplicationPolicy = DEFAULT_POLICY
) -> CheckpointScan:
    """RemoteClusterUtils.translateOffsets: where `group` of `source_alias` may resume on `target`.

    Reads `<source>.checkpoints.internal` on the target to its end; the result's `offsets()` are
    keyed by the topics as named on the target.
    """
    topic = policy.checkpoints_topic(source_alias)
    partitions = target.topics().get(topic)
    if not partitions:
        raise NoCheckpointsTopic(topic)
    return latest_checkpoints(target.read_all(topic, partitions), group)


def latest_heartbeats(
    cluster: ClusterReader, policy: ReplicationPolicy, tail: int = HEARTBEAT_TAIL
) -> dict[str, Heartbeat | None]:
    """The freshest heartbeat of every heartbeat topic on `cluster` (None where none decodes)."""
    topics = cluster.topics()
    return {
        t: latest_heartbeat(cluster.read_tail(t, topics[t], tail))[0] for t in sorted(heartbeat_topics(topics, policy))
    }
