"""What a drift report is made of: items, each of a category and a level, tied to a cluster and to flows."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.topology.model import Flow


class Category(str, enum.Enum):
    MISSING_TOPIC = "missing-topic"
    EXTRA_TOPIC = "extra-topic"
    PARTITIONS = "partitions"
    CONFIG = "config"
    ACL = "acl"
    UNMANAGED = "unmanaged"
    JOB = "job"
    LAG = "lag"
    LAG_AGE = "lag-age"
    LATENCY = "latency"
    HEARTBEAT = "heartbeat"
    CLUSTER = "cluster"
    CERTIFICATE = "certificate"
    REVISION = "revision"
    OTHER = "other"


class Level(str, enum.Enum):
    ERROR = "error"
    DRIFT = "drift"
    NOTE = "note"


CATEGORY_TITLES = {
    Category.MISSING_TOPIC: "missing topics",
    Category.EXTRA_TOPIC: "extra topics",
    Category.PARTITIONS: "partition drift",
    Category.CONFIG: "config drift",
    Category.ACL: "ACL drift",
    Category.UNMANAGED: "unmanaged topics",
    Category.JOB: "job drift",
    Category.LAG: "lag over SLO",
    Category.LAG_AGE: "lag age over SLO",
    Category.LATENCY: "latency over SLO",
    Category.HEARTBEAT: "heartbeat age over SLO",
    Category.CLUSTER: "unreadable clusters",
    Category.CERTIFICATE: "certificates expired or expiring",
    Category.REVISION: "revisions",
    Category.OTHER: "other",
}

_LEVEL_ORDER = {Level.ERROR: 0, Level.DRIFT: 1, Level.NOTE: 2}


@dataclass(frozen=True)
class DriftItem:
    category: Category
    level: Level
    cluster: str
    flows: tuple[str, ...]
    subject: str  # topic or flow name ('' for the cluster itself)
    message: str
    hint: str | None = None
    verb: str | None = None  # '+', '~', '-' when the item is a plan action
    action: Mapping[str, Any] | None = None  # the action's JSON (plan-json.md) when it is one
    reason: str | None = None  # the action's reason (why the topology wants it)

    @classmethod
    def of_flow(
        cls,
        flow: Flow,
        category: Category,
        message: str,
        hint: str | None = None,
        level: Level = Level.DRIFT,
        subject: str | None = None,
    ) -> DriftItem:
        """An item about one flow, on its target cluster (its subject: the flow, unless given)."""
        return cls(category, level, flow.target, (flow.name,), flow.name if subject is None else subject, message, hint)

    def sort_key(self) -> tuple:
        return (self.cluster, _LEVEL_ORDER[self.level], self.flows, self.category.value, self.subject, self.message)

    def to_dict(self) -> dict:
        return {
            "category": self.category.value,
            "level": self.level.value,
            "cluster": self.cluster,
            "flows": list(self.flows),
            "subject": self.subject,
            "message": self.message,
            "hint": self.hint,
            "verb": self.verb,
            "reason": self.reason,
            "action": dict(self.action) if self.action is not None else None,
        }
