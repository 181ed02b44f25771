"""The port every cluster adapter implements, and the small value types that cross it.

Operations take batches and return one OpResult per item, never raise for a per-item failure:
the executor reports each result. Operations a cluster does not support return
`OpResult.unsupported(...)` without touching the wire (the Kafka adapter checks the probe first).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from reconciler.state.configs import RawConfigEntry
from reconciler.state.live import AclBinding, AclUnavailable, Capabilities


class AdminError(Exception):
    """A cluster-wide failure (unreachable, unresolved secret reference): the cluster cannot be read."""


class AclsUnavailableError(AdminError):
    """The cluster's ACLs cannot be read, and why (the rest of the cluster can)."""

    def __init__(self, reason: AclUnavailable, cluster: str, detail: str = ""):
        super().__init__(reason.explain(cluster) + (f" ({detail})" if detail else ""))
        self.reason = reason


#: Broker error names that say ACLs cannot be used, whatever the request (SECURITY_DISABLED: no authorizer).
ACL_ERRORS = {
    "SECURITY_DISABLED": AclUnavailable.DISABLED,
    "CLUSTER_AUTHORIZATION_FAILED": AclUnavailable.UNAUTHORIZED,
    "TOPIC_AUTHORIZATION_FAILED": AclUnavailable.UNAUTHORIZED,
}


class ResultCode(str, enum.Enum):
    OK = "ok"
    ALREADY_DONE = "already-done"  # e.g. topic already exists: idempotent success
    UNSUPPORTED = "unsupported"
    FAILED = "failed"


@dataclass(frozen=True)
class OpResult:
    code: ResultCode
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.code in (ResultCode.OK, ResultCode.ALREADY_DONE)

    @classmethod
    def success(cls, message: str = "") -> OpResult:
        return cls(ResultCode.OK, message)

    @classmethod
    def already(cls, message: str) -> OpResult:
        return cls(ResultCode.ALREADY_DONE, message)

    @classmethod
    def unsupported(cls, message: str) -> OpResult:
        return cls(ResultCode.UNSUPPORTED, message)

    @classmethod
    def failed(cls, message: str) -> OpResult:
        return cls(ResultCode.FAILED, message)


@dataclass(frozen=True)
class TopicMeta:
    partitions: int
    replication_factor: int


@dataclass(frozen=True)
class NewTopicSpec:
    name: str
    partitions: int
    replication_factor: int = -1  # -1: the broker's default
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ConfigAlteration:
    """Incremental changes to one topic's configs: `set` key->value, `delete` keys (back to inherited)."""

    topic: str
    set: Mapping[str, str] = field(default_factory=dict)
    delete: tuple[str, ...] = ()


@dataclass(frozen=True)
class Record:
    offset: int
    key: bytes | None
    value: bytes | None


class ClusterAdmin(Protocol):
    """One cluster. Reads are bulk; writes are batches with a result per item."""

    alias: str

    def capabilities(self) -> Capabilities: ...
    def list_topics(self) -> dict[str, TopicMeta]: ...
    def describe_topic_configs(self, topics: Sequence[str]) -> dict[str, list[RawConfigEntry]]: ...
    def describe_acls(self) -> list[AclBinding]: ...  # AclsUnavailableError when they cannot be read
    def acls_unavailable(self) -> AclUnavailable | None: ...  # why ACLs cannot be changed here (None: they can)

    def create_topics(self, specs: Sequence[NewTopicSpec]) -> dict[str, OpResult]: ...
    def create_partitions(self, totals: Mapping[str, int]) -> dict[str, OpResult]: ...
    def alter_configs(self, changes: Sequence[ConfigAlteration]) -> dict[str, OpResult]: ...
    def create_acls(self, acls: Sequence[AclBinding]) -> dict[AclBinding, OpResult]: ...
    def delete_acls(self, acls: Sequence[AclBinding]) -> dict[AclBinding, OpResult]: ...
    def delete_topics(self, topics: Sequence[str]) -> dict[str, OpResult]: ...

    def produce(self, topic: str, key: bytes, value: bytes | None) -> int: ...
    def read_records(self, topic: str, until_offset: int) -> list[Record]: ...
    def read_to_end(self, topic: str) -> list[Record]: ...

    def close(self) -> None: ...
