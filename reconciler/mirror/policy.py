"""Replication policies: how a remote topic is named and how to tell where a topic came from.

A faithful port of MirrorMaker 2's DefaultReplicationPolicy and IdentityReplicationPolicy
(KIP-382, KIP-690), plus MirrorSourceConnector's cycle rule, so that names and decisions
match what Java tooling such as RemoteClusterUtils expects.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

HEARTBEATS_TOPIC = "heartbeats"


class PolicyKind(str, enum.Enum):
    DEFAULT = "default"
    IDENTITY = "identity"


@dataclass(frozen=True)
class ReplicationPolicy:
    """Names remote topics. `kind=DEFAULT`: `<source-alias><separator><topic>`; `IDENTITY`: same name."""

    kind: PolicyKind = PolicyKind.DEFAULT
    separator: str = "."

    # --- naming -------------------------------------------------------------------------
    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if self.kind is PolicyKind.IDENTITY and not self._looks_like_heartbeat(topic):
            return topic
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        """The alias of the cluster `topic` was replicated from, or None for a local topic."""
        if self.kind is PolicyKind.IDENTITY and not self._looks_like_heartbeat(topic):
            return None
        head, sep, _ = topic.partition(self.separator)
        return head if sep else None

    def upstream_topic(self, topic: str) -> str | None:
        if self.kind is PolicyKind.IDENTITY and not self._looks_like_heartbeat(topic):
            return None
        _, sep, tail = topic.partition(self.separator)
        return tail if sep else None

    def original_topic(self, topic: str) -> str:
        upstream = self.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return topic
        return self.original_topic(upstream)

    # --- classification -----------------------------------------------------------------
    def is_heartbeats_topic(self, topic: str) -> bool:
        if not topic.endswith(HEARTBEATS_TOPIC):  # fast path: the original topic is always a suffix
            return False
        return self.original_topic(topic) == HEARTBEATS_TOPIC

    def _looks_like_heartbeat(self, topic: str) -> bool:
        return topic == HEARTBEATS_TOPIC or topic.endswith(self.separator + HEARTBEATS_TOPIC)

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


def checkpoints_topic(source_alias: str) -> str:
    """Where checkpoints of `source_alias`'s consumer groups are written, on the target cluster."""
    return f"{source_alias}.checkpoints.internal"


def offset_syncs_topic(target_alias: str) -> str:
    """MM2's offset-syncs topic for flows into `target_alias` (on the source cluster by default)."""
    return f"mm2-offset-syncs.{target_alias}.internal"


def is_internal_topic(topic: str) -> bool:
    """Topics that are never replicated: Kafka's own, MM2's and the reconciler's."""
    return (
        topic.startswith("__")
        or topic.startswith(".")
        or topic.endswith(".internal")
        or topic.endswith("-internal")
        or topic.endswith(".replica")
    )
