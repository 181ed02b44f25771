"""In-process test double of a Kafka cluster, obeying the same contract tests as the real adapter.

`MemoryCluster` is the "broker" (shared by every adapter pointed at it); `MemoryAdmin` is the
adapter. Capabilities can be toggled, so plan/apply logic for ACLs and partition changes is
tested here even though the embedded Tansu broker has neither; the describe_configs dialect can
be real Kafka's (`SOURCES`: every config with its source) or Tansu's (`STORED_ONLY`).
`fail_after` makes the N+1th write raise, to simulate a run killed half-way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.adapters.base import (
    AclsUnavailableError,
    AdminError,
    ConfigAlteration,
    NewTopicSpec,
    OpResult,
    Record,
    TopicMeta,
)
from reconciler.state.configs import ConfigSource, RawConfigEntry
from reconciler.state.live import AclBinding, AclResource, AclUnavailable, Capabilities, ConfigSourceMode

# What a real broker lists for a topic with no overrides (a representative subset, incl. the marker keys).
BROKER_TOPIC_DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "index.interval.bytes": "4096",
    "max.message.bytes": "1048588",
    "min.insync.replicas": "1",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.ms": "604800000",
}


class SimulatedCrash(BaseException):
    """Raised by a MemoryCluster write after `fail_after` writes: the process 'died' here (like SIGKILL,
    so nothing catches it as an ordinary error)."""


@dataclass
class _Topic:
    partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)
    log: list[tuple[bytes | None, bytes | None]] = field(default_factory=list)


@dataclass
class MemoryCluster:
    alias: str = "memory"
    capabilities: Capabilities = field(default_factory=Capabilities.all_supported)
    config_mode: ConfigSourceMode = ConfigSourceMode.SOURCES
    default_replication_factor: int = 1
    topics: dict[str, _Topic] = field(default_factory=dict)
    acls: set[AclBinding] = field(default_factory=set)
    reachable: bool = True
    #: None: ACLs can be managed; else why not (a broker without an authorizer: DISABLED)
    acls_unavailable: AclUnavailable | None = None
    fail_after: int | None = None
    writes: int = 0

    def _write(self) -> None:
        if self.fail_after is not None and self.writes >= self.fail_after:
            raise SimulatedCrash(f"{self.alias}: simulated crash after {self.writes} writes")
        self.writes += 1

    # convenience for tests: set up a cluster by hand, as an operator would
    def add_topic(
        self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None, rf: int | None = None
    ) -> None:
        self.topics[name] = _Topic(partitions, rf or self.default_replication_factor, dict(configs or {}))


class MemoryAdmin:
    def __init__(self, cluster: MemoryCluster, alias: str | None = None):
        self.cluster = cluster
        self.alias = alias or cluster.alias

    def _check(self) -> None:
        if not self.cluster.reachable:
            raise AdminError(f"cluster {self.alias!r} unreachable (memory double)")

    # --- reads -----------------------------------------------------------------------------
    def capabilities(self) -> Capabilities:
        self._check()
        return self.cluster.capabilities

    def list_topics(self) -> dict[str, TopicMeta]:
        self._check()
        return {n: TopicMeta(t.partitions, t.replication_factor) for n, t in self.cluster.topics.items()}

    def describe_topic_configs(self, topics: Sequence[str]) -> dict[str, list[RawConfigEntry]]:
        self._check()
        out = {}
        for name in topics:
            t = self.cluster.topics.get(name)
            if t is None:
                continue
            if self.cluster.config_mode is ConfigSourceMode.STORED_ONLY:
                out[name] = [RawConfigEntry(k, v, ConfigSource.DEFAULT_CONFIG) for k, v in t.configs.items()]
            else:
                entries = {
                    k: RawConfigEntry(k, v, ConfigSource.DEFAULT_CONFIG) for k, v in BROKER_TOPIC_DEFAULTS.items()
                }
                entries.update(
                    {k: RawConfigEntry(k, v, ConfigSource.DYNAMIC_TOPIC_CONFIG) for k, v in t.configs.items()}
                )
                out[name] = list(entries.values())
        return out

    def describe_acls(self) -> list[AclBinding]:
        self._check()
        if not self.cluster.capabilities.acls:
            raise AclsUnavailableError(AclUnavailable.NO_API, repr(self.alias))
        if self.cluster.acls_unavailable is not None:  # as Apache Kafka answers DescribeAcls without an authorizer
            raise AclsUnavailableError(self.cluster.acls_unavailable, repr(self.alias))
        return sorted(self.cluster.acls)

    def acls_unavailable(self) -> AclUnavailable | None:
        self._check()
        return AclUnavailable.NO_API if not self.cluster.capabilities.acls else self.cluster.acls_unavailable

    # --- writes ----------------------------------------------------------------------------
    def create_topics(self, specs: Sequence[NewTopicSpec]) -> dict[str, OpResult]:
        self._check()
        out = {}
        for s in specs:
            self.cluster._write()
            if s.name in self.cluster.topics:
                out[s.name] = OpResult.already("topic already exists")
            elif s.partitions < 1:
                out[s.name] = OpResult.failed("INVALID_PARTITIONS: number of partitions must be at least 1")
            else:
                rf = self.cluster.default_replication_factor if s.replication_factor == -1 else s.replication_factor
                self.cluster.topics[s.name] = _Topic(s.partitions, rf, dict(s.configs))
                out[s.name] = OpResult.success()
        return out

    def create_partitions(self, totals: Mapping[str, int]) -> dict[str, OpResult]:
        self._check()
        out = {}
        for name, total in totals.items():
            if not self.cluster.capabilities.create_partitions:
                out[name] = OpResult.unsupported(f"cluster {self.alias!r} does not support CreatePartitions")
                continue
            self.cluster._write()
            t = self.cluster.topics.get(name)
            if t is None:
                out[name] = OpResult.failed("UNKNOWN_TOPIC_OR_PART: topic does not exist")
            elif total <= t.partitions:
                out[name] = OpResult.failed(
                    f"INVALID_PARTITIONS: topic has {t.partitions} partitions, cannot set {total}"
                )
            else:
                t.partitions = total
                out[name] = OpResult.success()
        return out

    def alter_configs(self, changes: Sequence[ConfigAlteration]) -> dict[str, OpResult]:
        self._check()
        out = {}
        for c in changes:
            if not self.cluster.capabilities.alter_configs:
                out[c.topic] = OpResult.unsupported(f"cluster {self.alias!r} does not support IncrementalAlterConfigs")
                continue
            self.cluster._write()
            t = self.cluster.topics.get(c.topic)
            if t is None:
                out[c.topic] = OpResult.failed("UNKNOWN_TOPIC_OR_PART: topic does not exist")
                continue
            t.configs.update(c.set)
            for k in c.delete:
                t.configs.pop(k, None)
            out[c.topic] = OpResult.success()
        return out

    def create_acls(self, acls: Sequence[AclBinding]) -> dict[AclBinding, OpResult]:
        return self._acl_op(acls, self.cluster.acls.add)

    def delete_acls(self, acls: Sequence[AclBinding]) -> dict[AclBinding, OpResult]:
        return self._acl_op(acls, self.cluster.acls.discard)

    def _acl_op(self, acls, op) -> dict[AclBinding, OpResult]:
        self._check()
        out = {}
        for a in acls:
            why = self.acls_unavailable()
            if why is not None:
                explained = why.explain(repr(self.alias))
                out[a] = (
                    OpResult.failed(explained)
                    if why is AclUnavailable.UNAUTHORIZED
                    else OpResult.unsupported(explained)
                )
                continue
            self.cluster._write()
            op(a)
            out[a] = OpResult.success()
        return out

    def delete_topics(self, topics: Sequence[str]) -> dict[str, OpResult]:
        self._check()
        out = {}
        for name in topics:
            self.cluster._write()
            if self.cluster.topics.pop(name, None) is None:
                out[name] = OpResult.failed("UNKNOWN_TOPIC_OR_PART: topic does not exist")
            else:
                self.cluster.acls = {
                    a for a in self.cluster.acls if a.topic != name or a.resource is not AclResource.TOPIC
                }
                out[name] = OpResult.success()
        return out

    # --- records ---------------------------------------------------------------------------
    def produce(self, topic: str, key: bytes, value: bytes | None) -> int:
        self._check()
        t = self.cluster.topics.get(topic)
        if t is None:
            raise AdminError(f"cluster {self.alias!r}: topic {topic!r} does not exist")
        t.log.append((key, value))
        return len(t.log) - 1

    def read_records(self, topic: str, until_offset: int) -> list[Record]:
        self._check()
        t = self.cluster.topics.get(topic)
        if t is None or len(t.log) <= until_offset:
            raise AdminError(f"cluster {self.alias!r}: could not read {topic!r} up to offset {until_offset}")
        return [Record(i, k, v) for i, (k, v) in enumerate(t.log[: until_offset + 1])]

    def read_to_end(self, topic: str) -> list[Record]:
        self._check()
        t = self.cluster.topics.get(topic)
        return [] if t is None else [Record(i, k, v) for i, (k, v) in enumerate(t.log)]

    def close(self) -> None:
        pass


class MemoryFactory:
    """Connects topology clusters to MemoryClusters by alias (creating empty ones on first use)."""

    def __init__(self, clusters: Mapping[str, MemoryCluster] | None = None):
        self.clusters: dict[str, MemoryCluster] = dict(clusters or {})

    def __call__(self, cluster) -> MemoryAdmin:
        mc = self.clusters.setdefault(cluster.alias, MemoryCluster(cluster.alias))
        return MemoryAdmin(mc, cluster.alias)
