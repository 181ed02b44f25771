"""Replication policies: how a remote topic is named and how to tell where a topic came from.

A faithful port of MirrorMaker 2's DefaultReplicationPolicy and IdentityReplicationPolicy
(KIP-382, KIP-690), plus MirrorSourceConnector's cycle rule, so that names and decisions
match what Java tooling such as RemoteClusterUtils expects.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

HEARTBEATS_TOPIC = "heartbeats"


class PolicyKind(str, enum.Enum):
    DEFAULT = "default"
    IDENTITY = "identity"


OFFSET_SYNCS_TOPIC_PREFIX = "mm2-offset-syncs"
CHECKPOINTS_TOPIC_NAME = "checkpoints"
INTERNAL_TOPIC_NAME = "internal"
DEAD_LETTERS_TOPIC_NAME = "dead-letters"


def _java_split(topic: str, separator: str) -> list[str]:
    """Java's `String.split(Pattern.quote(separator))`: trailing empty strings are dropped."""
    parts = topic.split(separator) if separator else [topic]
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


@dataclass(frozen=True)
class ReplicationPolicy:
    """Names remote and internal topics: Kafka's DefaultReplicationPolicy / IdentityReplicationPolicy.

    `kind=DEFAULT`: `<source-alias><separator><topic>`; `IDENTITY`: same name.
    `internal_separator`: build MM2's internal topic names with `separator` (Kafka's
    `replication.policy.internal.topic.separator.enabled`, default true) or always with `.`.
    `source_cluster_alias`: the identity policy's `source.cluster.alias` (what topicSource returns).
    This class is the one home of MM2's topic names (remote, heartbeats, checkpoints, offset syncs,
    internal).
    """

    kind: PolicyKind = PolicyKind.DEFAULT
    separator: str = "."
    internal_separator: bool = True
    source_cluster_alias: str | None = None

    # --- naming -------------------------------------------------------------------------
    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if self.kind is PolicyKind.IDENTITY and not self._looks_like_heartbeat(topic):
            return topic
        return f"{source_alias}{self.separator}{topic}"

    def _default_topic_source(self, topic: str) -> str | None:
        # DefaultReplicationPolicy.topicSource: `split` drops trailing empties, so "a." is local.
        parts = _java_split(topic, self.separator)
        return parts[0] if len(parts) >= 2 else None

    def topic_source(self, topic: str) -> str | None:
        """The alias of the cluster `topic` was replicated from, or None for a local topic."""
        if self.kind is PolicyKind.IDENTITY and not self._looks_like_heartbeat(topic):
            return self.source_cluster_alias
        return self._default_topic_source(topic)

    def upstream_topic(self, topic: str) -> str | None:
        if self.kind is PolicyKind.IDENTITY and not self._looks_like_heartbeat(topic):
            return topic  # IdentityReplicationPolicy.upstreamTopic
        source = self._default_topic_source(topic)
        return None if source is None else topic[len(source) + len(self.separator) :]

    def original_topic(self, topic: str) -> str:
        upstream = self.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return topic
        return self.original_topic(upstream)

    # --- internal topic names (DefaultReplicationPolicy) -----------------------------------
    @property
    def _internal_sep(self) -> str:
        return self.separator if self.internal_separator else "."

    @property
    def _internal_suffix(self) -> str:
        return self._internal_sep + INTERNAL_TOPIC_NAME

    @property
    def _checkpoints_suffix(self) -> str:
        return self._internal_sep + CHECKPOINTS_TOPIC_NAME + self._internal_suffix

    def heartbeats_topic(self) -> str:
        return HEARTBEATS_TOPIC

    def checkpoints_topic(self, source_alias: str) -> str:
        """Where checkpoints of `source_alias`'s consumer groups are written, on the target cluster."""
        return source_alias + self._checkpoints_suffix

    def dead_letters_topic(self, source_alias: str) -> str:
        """Where a flow from `source_alias` writes the records the target refused (`on_refused_record: skip`), on the
        target cluster: named as MM2 names its checkpoints topic (`<source-alias>.checkpoints.internal`), so MM2's
        internal-topic rule keeps it from being replicated further. MM2 has no dead-letter topic of its own (Kafka
        Connect's `errors.deadletterqueue.topic.name` is for sink connectors); its records carry Connect's error
        headers (`__connect.errors.*`)."""
        return source_alias + self._internal_sep + DEAD_LETTERS_TOPIC_NAME + self._internal_suffix

    def offset_syncs_topic(self, alias: str) -> str:
        """MM2's offset-syncs topic for flows into `alias` (on the source cluster by default)."""
        return OFFSET_SYNCS_TOPIC_PREFIX + self._internal_sep + alias + self._internal_suffix

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(self._checkpoints_suffix) and len(topic) > len(self._checkpoints_suffix)

    def checkpoints_source(self, topic: str) -> str | None:
        """The source alias whose groups a checkpoints topic describes."""
        return topic[: -len(self._checkpoints_suffix)] if self.is_checkpoints_topic(topic) else None

    def is_offset_syncs_topic(self, topic: str) -> bool:
        return topic.startswith(OFFSET_SYNCS_TOPIC_PREFIX) and topic.endswith(self._internal_suffix)

    def offset_syncs_alias(self, topic: str) -> str | None:
        """The alias named by an offset-syncs topic, None if `topic` is not one."""
        head = OFFSET_SYNCS_TOPIC_PREFIX + self._internal_sep
        if not (topic.startswith(head) and topic.endswith(self._internal_suffix)):
            return None
        alias = topic[len(head) : -len(self._internal_suffix)]
        return alias or None

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return topic.endswith(self._internal_suffix)

    def is_internal_topic(self, topic: str) -> bool:
        """ReplicationPolicy.isInternalTopic (`.replica` is not internal, as in Kafka)."""
        return (
            self.is_mm2_internal_topic(topic)
            or topic.startswith("__")
            or topic.startswith(".")
            or topic.endswith("-internal")
            or topic.endswith(".internal")
        )

    # --- classification -----------------------------------------------------------------
    def is_heartbeats_topic(self, topic: str) -> bool:
        if not topic.endswith(HEARTBEATS_TOPIC):  # fast path: the original topic is always a suffix
            return False
        return self.original_topic(topic) == HEARTBEATS_TOPIC

    def _looks_like_heartbeat(self, topic: str) -> bool:
        # IdentityReplicationPolicy.looksLikeHeartbeat: a suffix match.
        return topic.endswith(HEARTBEATS_TOPIC)

    def is_cycle(self, topic: str, target_alias: str) -> bool:
        """MirrorSourceConnector.isCycle: the target's alias already appears in the topic's lineage."""
        source = self.topic_source(topic)
        if source is None:
            return False
        if source == target_alias:
            return True
        upstream = self.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return False
        return self.is_cycle(upstream, target_alias)


DEFAULT_POLICY = ReplicationPolicy()


def checkpoints_topic(source_alias: str, policy: ReplicationPolicy = DEFAULT_POLICY) -> str:
    """Where checkpoints of `source_alias`'s consumer groups are written, on the target cluster."""
    return policy.checkpoints_topic(source_alias)


def offset_syncs_topic(target_alias: str, policy: ReplicationPolicy = DEFAULT_POLICY) -> str:
    """MM2's offset-syncs topic for flows into `target_alias` (on the source cluster by default)."""
    return policy.offset_syncs_topic(target_alias)


def is_internal_topic(topic: str, policy: ReplicationPolicy = DEFAULT_POLICY) -> bool:
    """Topics that are never replicated: Kafka's own, MM2's and the reconciler's."""
    return policy.is_internal_topic(topic)


class Mm2InternalKind(str, enum.Enum):
    CHECKPOINTS = "checkpoints"
    OFFSET_SYNCS = "offset-syncs"


@dataclass(frozen=True)
class Mm2InternalTopic:
    """An MM2 internal topic recognised by name: which kind, and the alias it names."""

    kind: Mm2InternalKind
    alias: str


def known_policies(flows: Iterable[Any]) -> tuple[ReplicationPolicy, ...]:
    """The distinct policies of `flows` (objects with a `.policy`), Kafka's default always among them."""
    seen = dict.fromkeys([f.policy for f in flows] + [DEFAULT_POLICY])
    return tuple(seen)


def parse_mm2_internal_topic(
    topic: str, policies: Iterable[ReplicationPolicy] = (DEFAULT_POLICY,)
) -> Mm2InternalTopic | None:
    """`<alias><sep>checkpoints<sep>internal` or `mm2-offset-syncs<sep><alias><sep>internal` under any of `policies`."""
    for policy in policies:
        if (alias := policy.checkpoints_source(topic)) is not None:
            return Mm2InternalTopic(Mm2InternalKind.CHECKPOINTS, alias)
        if (alias := policy.offset_syncs_alias(topic)) is not None:
            return Mm2InternalTopic(Mm2InternalKind.OFFSET_SYNCS, alias)
    return None


def is_internal_topic_any(topic: str, policies: Iterable[ReplicationPolicy]) -> bool:
    """Internal under any of `policies` (a cluster may hold topics of flows with different separators)."""
    return any(p.is_internal_topic(topic) for p in policies)
