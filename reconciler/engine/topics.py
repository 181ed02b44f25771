"""What to replicate: source topics through `expansion.route`, and the remote topics they need.

`plan_partitions` is pure (source and target topic descriptions in, work and findings out), so
the partition rules are tested without a broker — including added partitions, which Tansu
cannot create. `TopicManager` does the I/O with two AdminClients.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.analysis.expansion import RoutedFlow, route
from reconciler.contract.spec import STATUS_TOPIC, JobSpec, dead_letters_topic_name, offset_syncs_topic_name
from reconciler.mirror.filters import MAX_TOPIC_NAME_CHARS
from reconciler.mirror.policy import HEARTBEATS_TOPIC
from reconciler.state.configs import RawConfigEntry, explicit_configs_of
from reconciler.topology.choices import OnRefusedRecord

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = "max.message.bytes"
#: A record batch's bytes besides one record's key and value (v2 batch header 61 bytes, the record's own ~20): a
#: record is refused before it is produced when key + value exceed `max.message.bytes` less this.
RECORD_OVERHEAD = 128


@dataclass(frozen=True)
class TopicInfo:
    """A topic as a cluster lists it: its partition count and id; `error`: why the listing did not give its
    partitions (the topic's metadata error, or no partition listed: a topic being created, a loaded broker), None
    when it did."""

    name: str
    partitions: int
    topic_id: str | None = None
    error: str | None = None

    @property
    def listed(self) -> bool:
        """Whether the listing gave the topic's partitions (`error` is None)."""
        return self.error is None


@dataclass(frozen=True)
class RemoteTopic:
    source: str
    remote: str
    source_partitions: int
    remote_partitions: int | None  # None: does not exist on the target yet


@dataclass
class PartitionPlan:
    """Which (source topic, partition) -> remote topic the job copies now, and what it must fix first."""

    copy: dict[tuple[str, int], str] = field(default_factory=dict)
    create: list[RemoteTopic] = field(default_factory=list)  # remote topics to create
    grow: list[RemoteTopic] = field(default_factory=list)  # remote topics that need more partitions
    findings: list[str] = field(default_factory=list)
    #: remote topics the target listed without their partitions: their source topics wait (the refresh lists the
    #: target again the next time)
    unlisted_remotes: list[str] = field(default_factory=list)


def plan_partitions(
    flow: RoutedFlow, source: Mapping[str, TopicInfo], target: Mapping[str, TopicInfo]
) -> PartitionPlan:
    """Decide the work for the current topic sets: partition i of a routed topic goes to partition i
    of its remote topic, once the remote topic has that partition."""
    plan = PartitionPlan()
    for name in sorted(source):
        if len(name) > MAX_TOPIC_NAME_CHARS:  # never matched by a filter (issue 44); said once per refresh
            shown = name if len(name) <= 60 else f"{name[:60]}... ({len(name):,} chars)"
            plan.findings.append(
                f"source topic {shown} is longer than Kafka's {MAX_TOPIC_NAME_CHARS} characters: never replicated"
            )
            continue
        remote = route(flow, name)
        if remote is None:
            continue
        info = source[name]
        existing = target.get(remote)
        if not info.listed or (existing is not None and not existing.listed):
            plan.findings.append(_unlisted_finding(name, info, remote, existing))
            if existing is not None and not existing.listed:
                plan.unlisted_remotes.append(remote)
            continue
        rt = RemoteTopic(name, remote, info.partitions, existing.partitions if existing else None)
        if existing is None:
            plan.create.append(rt)
            continue
        if existing.partitions < info.partitions:
            plan.grow.append(rt)
            plan.findings.append(
                f"remote topic {remote} has {existing.partitions} partitions, source {name} has {info.partitions}: "
                f"partitions {existing.partitions}..{info.partitions - 1} wait until the remote topic has them"
            )
        elif existing.partitions > info.partitions:
            plan.findings.append(
                f"remote topic {remote} has more partitions ({existing.partitions}) than {name} ({info.partitions})"
            )
        for p in range(min(info.partitions, existing.partitions)):
            plan.copy[(name, p)] = remote
    return plan


def _unlisted_finding(name: str, info: TopicInfo, remote: str, existing: TopicInfo | None) -> str:
    """Why a routed topic is not copied at this refresh: its source or remote topic is listed without partitions."""
    if not info.listed:
        return f"source topic {name} is listed without its partitions ({info.error}): not copied until it is listed"
    assert existing is not None
    return (
        f"remote topic {remote} is listed without its partitions ({existing.error}): {name} is not copied until it is "
        f"listed"
    )


def internal_topics(spec: JobSpec) -> dict[str, list[tuple[str, dict[str, str]]]]:
    """The job's own topics, per side ("source"/"target"): name and configs when created."""
    compact = {"cleanup.policy": "compact"}
    source: list[tuple[str, dict[str, str]]] = []
    target: list[tuple[str, dict[str, str]]] = [(STATUS_TOPIC, compact)]
    if spec.emits_heartbeats:
        (source if spec.heartbeats_on_source else target).append((HEARTBEATS_TOPIC, {"cleanup.policy": "compact"}))
    if spec.settings.checkpoints.enabled:
        target.append((spec.mirror_flow.policy.checkpoints_topic(spec.source.alias), compact))
    if spec.settings.on_refused_record == OnRefusedRecord.SKIP:
        target.append((dead_letters_topic_name(spec), {}))
    syncs = (offset_syncs_topic_name(spec), {"cleanup.policy": "compact"})
    (source if spec.offset_syncs_on_source else target).append(syncs)
    return {"source": source, "target": target}


class TopicManager:
    """Lists topics on both clusters and creates what the flow needs (remote and internal topics)."""

    def __init__(self, spec: JobSpec, source_admin: Any, target_admin: Any, timeout: float = 15.0):
        self.spec = spec
        self.source_admin = source_admin
        self.target_admin = target_admin
        self.timeout = timeout

    @staticmethod
    def describe(admin: Any, timeout: float, ids: bool = False) -> dict[str, TopicInfo]:
        """The topics of a cluster and their partition counts; with `ids`, their topic ids too where the broker
        gives them (`topic_ids`: how a recreated source topic is told from the one the job copied). A topic listed
        with an error or without partitions is there, not `listed` (`TopicInfo.error`): not a topic gone."""
        md = admin.list_topics(timeout=timeout)
        out: dict[str, TopicInfo] = {}
        for name, t in md.topics.items():
            if t.error is not None or not t.partitions:  # listed, not known: the refresh decides (refresh.py)
                why = _kafka_error_text(Exception(t.error)) if t.error is not None else "no partition listed"
                out[name] = TopicInfo(name, len(t.partitions), error=why)
                continue
            out[name] = TopicInfo(name, len(t.partitions))
        if ids and out:
            for name, tid in TopicManager.topic_ids(admin, [n for n, i in out.items() if i.listed], timeout).items():
                out[name] = TopicInfo(name, out[name].partitions, tid)
        return out

    @staticmethod
    def topic_ids(admin: Any, names: list[str], timeout: float) -> dict[str, str]:
        """The topic id of each topic (DescribeTopics), where the broker gives one: Apache Kafka and Tansu do;
        noida-db 0.2.3 answers the null id (all zeros), which counts as none. A failed answer: none either."""
        from confluent_kafka import TopicCollection

        out: dict[str, str] = {}
        try:
            futures = admin.describe_topics(TopicCollection(sorted(names)), request_timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - an older broker: no ids, recreated topics are told by their ends
            log.info("cannot describe topics for their ids: %s", exc)
            return out
        for name, future in futures.items():
            try:
                tid = future.result(timeout)
            except Exception:  # noqa: BLE001 - e.g. deleted since the listing
                continue
            text = str(tid.topic_id) if tid.topic_id is not None else ""
            if text and text.strip("A=") != "":  # the null id is all zeros: "AAAAAAAAAAAAAAAAAAAAAA"
                out[name] = text
        return out

    def topic_configs(self, topic: str) -> dict[str, str]:
        from confluent_kafka.admin import ConfigResource, ResourceType

        res = ConfigResource(ResourceType.TOPIC, topic)
        try:
            entries = self.source_admin.describe_configs([res], request_timeout=self.timeout)[res].result(self.timeout)
        except Exception as exc:  # noqa: BLE001 - configs are best effort at creation
            log.warning("cannot describe configs of %s: %s", topic, exc)
            return {}
        return self.spec.mirror_flow.config_properties.apply(explicit_configs(entries))

    def record_limits(self, remotes: list[str]) -> dict[str, int]:
        """The largest record (key + value bytes) each remote topic takes: its `max.message.bytes` (the effective
        value, as Apache Kafka and noida-db answer it; Tansu answers only the configs set, and enforces none) less
        RECORD_OVERHEAD. A topic the answer does not cover has no entry (its records go to the broker unchecked)."""
        from confluent_kafka.admin import ConfigResource, ResourceType

        limits: dict[str, int] = {}
        if not remotes:
            return limits
        resources = {t: ConfigResource(ResourceType.TOPIC, t) for t in sorted(set(remotes))}
        futures = self.target_admin.describe_configs(list(resources.values()), request_timeout=self.timeout)
        for topic, res in resources.items():
            try:
                entry = futures[res].result(self.timeout).get(MAX_MESSAGE_BYTES)
                if entry is not None and entry.value is not None:
                    limits[topic] = max(0, int(entry.value) - RECORD_OVERHEAD)
            except Exception as exc:  # noqa: BLE001 - unknown: the broker's answer decides
                log.info("cannot read %s of %s: %s", MAX_MESSAGE_BYTES, topic, exc)
        return limits

    def create_remote(self, topics: list[RemoteTopic]) -> list[str]:
        """Create missing remote topics with the source's partition count and filtered configs."""
        from confluent_kafka.admin import NewTopic

        if not topics:
            return []
        new = [
            NewTopic(
                t.remote,
                t.source_partitions,
                self.spec.settings.replication_factor,
                config=self.topic_configs(t.source) if self.spec.settings.sync.topic_configs else {},
            )
            for t in topics
        ]
        return self._create(self.target_admin, new)

    def grow_remote(self, topics: list[RemoteTopic]) -> list[str]:
        """Add partitions to remote topics (CreatePartitions); errors are returned as findings."""
        from confluent_kafka.admin import NewPartitions

        if not topics:
            return []
        errors = []
        futures = self.target_admin.create_partitions(
            [NewPartitions(t.remote, t.source_partitions) for t in topics], request_timeout=self.timeout
        )
        for name, fut in futures.items():
            try:
                fut.result(self.timeout)
            except Exception as exc:  # noqa: BLE001 - e.g. UNSUPPORTED_FEATURE on Tansu
                errors.append(f"cannot add partitions to {name}: {_kafka_error_text(exc)}")
        return errors

    def ensure_internal(self) -> list[str]:
        from confluent_kafka.admin import NewTopic

        errors = []
        for side, admin in (("source", self.source_admin), ("target", self.target_admin)):
            wanted = internal_topics(self.spec)[side]
            existing = self.describe(admin, self.timeout)  # one listed with an error exists: created already
            new = [
                NewTopic(n, 1, self.spec.settings.replication_factor, config=c) for n, c in wanted if n not in existing
            ]
            errors += self._create(admin, new)
        return errors

    def _create(self, admin: Any, new: list[Any]) -> list[str]:
        if not new:
            return []
        errors = []
        for name, fut in admin.create_topics(new, request_timeout=self.timeout).items():
            try:
                fut.result(self.timeout)
                log.info("created topic %s", name)
            except Exception as exc:  # noqa: BLE001
                text = _kafka_error_text(exc)
                if "TOPIC_ALREADY_EXISTS" in text or "already exists" in text:
                    continue
                errors.append(f"cannot create topic {name}: {text}")
        return errors


def explicit_configs(entries: Mapping[str, Any]) -> dict[str, str]:
    """The configs set on a topic (not broker defaults), from a DescribeConfigs answer: the one rule
    of `reconciler.state.configs` (which planning reads live configs with) on this topic's answer."""
    return explicit_configs_of([RawConfigEntry.of(e, n) for n, e in entries.items()])


def _kafka_error_text(exc: Exception) -> str:
    arg = exc.args[0] if exc.args else exc
    name = getattr(arg, "name", None)
    text = getattr(arg, "str", None)
    if callable(name) and callable(text):
        return f"{name()}: {text()}"
    return str(exc)
