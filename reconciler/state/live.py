"""LiveState: what the clusters hold, as read once per run by the adapters. Plain frozen data.

Only what planning needs: topics with partition count, replication factor and *explicitly set*
configs, literal topic ACLs, and what each cluster supports. The fingerprint of the part a plan
was computed from lets `apply` refuse a stale saved plan.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# Kafka API keys the reconciler cares about (Kafka protocol guide, "Api Keys").
API_OFFSET_FETCH = 9
API_FIND_COORDINATOR = 10
API_DESCRIBE_ACLS = 29
API_CREATE_ACLS = 30
API_DELETE_ACLS = 31
API_DESCRIBE_CONFIGS = 32
API_CREATE_PARTITIONS = 37
API_INCREMENTAL_ALTER_CONFIGS = 44


class AclOperation(str, enum.Enum):
    ANY = "ANY"
    ALL = "ALL"
    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DELETE = "DELETE"
    ALTER = "ALTER"
    DESCRIBE = "DESCRIBE"
    CLUSTER_ACTION = "CLUSTER_ACTION"
    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"
    ALTER_CONFIGS = "ALTER_CONFIGS"
    IDEMPOTENT_WRITE = "IDEMPOTENT_WRITE"
    UNKNOWN = "UNKNOWN"


class AclPermission(str, enum.Enum):
    ALLOW = "ALLOW"
    DENY = "DENY"
    UNKNOWN = "UNKNOWN"


class AclPattern(str, enum.Enum):
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"
    UNKNOWN = "UNKNOWN"


class AclResource(str, enum.Enum):
    """The resource types of the ACLs the reconciler reads (Kafka's ResourceType)."""

    TOPIC = "TOPIC"
    GROUP = "GROUP"
    CLUSTER = "CLUSTER"
    TRANSACTIONAL_ID = "TRANSACTIONAL_ID"
    UNKNOWN = "UNKNOWN"

    @property
    def label(self) -> str:
        return self.value.lower().replace("_", "-")


#: The one name of the CLUSTER resource (Kafka's Resource.CLUSTER_NAME).
CLUSTER_RESOURCE_NAME = "kafka-cluster"


@dataclass(frozen=True, order=True)
class AclBinding:
    """One ACL. The reconciler manages LITERAL ones on topics; `topic` is the resource's name (the resource is a
    topic unless `resource` says otherwise: the permission check reads groups, the cluster and transactional ids)."""

    topic: str
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermission
    pattern: AclPattern = AclPattern.LITERAL
    resource: AclResource = AclResource.TOPIC

    def describe(self) -> str:
        where = "the cluster" if self.resource is AclResource.CLUSTER else f"{self.resource.label} {self.topic}"
        return (
            f"{self.permission.value} {self.principal} {self.operation.value} on {where}"
            + (f" from {self.host}" if self.host != "*" else "")
            + (f" ({self.pattern.value.lower()})" if self.pattern is not AclPattern.LITERAL else "")
        )

    def to_dict(self) -> dict:
        out = {
            "topic": self.topic,
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation.value,
            "permission": self.permission.value,
            "pattern": self.pattern.value,
        }
        if self.resource is not AclResource.TOPIC:  # a topic's ACL reads as it did before resource types
            out["resource"] = self.resource.value
        return out

    @classmethod
    def from_dict(cls, d: Mapping) -> AclBinding:
        return cls(
            d["topic"],
            d["principal"],
            d["host"],
            AclOperation(d["operation"]),
            AclPermission(d["permission"]),
            AclPattern(d.get("pattern", "LITERAL")),
            AclResource(d.get("resource", "TOPIC")),
        )


class ConfigSourceMode(str, enum.Enum):
    """How a broker labels describe_configs entries; decides which entries are 'explicitly set'."""

    SOURCES = "sources"  # real Kafka: every config listed, explicit ones have source DYNAMIC_TOPIC_CONFIG
    STORED_ONLY = "stored-only"  # Tansu: only stored configs listed, all labelled DEFAULT_CONFIG
    UNKNOWN = "unknown"  # no topic described yet


@dataclass(frozen=True)
class Capabilities:
    """What a cluster supports, from its ApiVersions answer (api key -> (min, max) version)."""

    api_versions: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    probe_error: str | None = None

    def has(self, api_key: int) -> bool:
        return api_key in self.api_versions

    @property
    def acls(self) -> bool:
        """ACL management needs all three ACL APIs. Tansu advertises Describe/CreateAcls but not DeleteAcls,
        and calling them makes librdkafka abort, so a partial set counts as unsupported."""
        return all(self.has(k) for k in (API_DESCRIBE_ACLS, API_CREATE_ACLS, API_DELETE_ACLS))

    @property
    def create_partitions(self) -> bool:
        return self.has(API_CREATE_PARTITIONS)

    @property
    def alter_configs(self) -> bool:
        return self.has(API_INCREMENTAL_ALTER_CONFIGS)

    @property
    def describe_configs(self) -> bool:
        return self.has(API_DESCRIBE_CONFIGS)

    def speaks(self, api_key: int, version: int) -> bool:
        """Whether the broker answers `api_key` at `version` (within its advertised range)."""
        lo, hi = self.api_versions.get(api_key, (0, -1))
        return lo <= version <= hi

    @property
    def batched_group_offsets(self) -> bool:
        """Many groups' committed offsets in one request: OffsetFetch v8 (KIP-709) and FindCoordinator v4 (KIP-699),
        Apache Kafka 3.0 on (adapters/group_offsets.py)."""
        return self.speaks(API_OFFSET_FETCH, 8) and self.speaks(API_FIND_COORDINATOR, 4)

    @classmethod
    def all_supported(cls) -> Capabilities:
        keys = (
            API_DESCRIBE_ACLS,
            API_CREATE_ACLS,
            API_DELETE_ACLS,
            API_DESCRIBE_CONFIGS,
            API_CREATE_PARTITIONS,
            API_INCREMENTAL_ALTER_CONFIGS,
        )
        return cls({k: (0, 1) for k in keys})

    def without(self, *api_keys: int) -> Capabilities:
        return Capabilities({k: v for k, v in self.api_versions.items() if k not in api_keys}, self.probe_error)

    def summary(self) -> dict[str, bool]:
        return {
            "acls": self.acls,
            "create_partitions": self.create_partitions,
            "alter_configs": self.alter_configs,
            "describe_configs": self.describe_configs,
        }


@dataclass(frozen=True)
class TopicState:
    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)  # explicitly set only

    def fingerprint_data(self) -> list:
        return [self.partitions, self.replication_factor, sorted(self.configs.items())]


class AclUnavailable(str, enum.Enum):
    """Why the reconciler cannot manage (or read) a cluster's ACLs."""

    NO_API = "no-api"  # the brokers lack the ACL APIs (Tansu)
    DISABLED = "disabled"  # no authorizer is configured on the brokers (SECURITY_DISABLED), as Kafka without one
    UNAUTHORIZED = "unauthorized"  # the reconciler's principal may not describe or alter ACLs

    def explain(self, cluster: str) -> str:
        return {
            AclUnavailable.NO_API: f"cluster {cluster} does not support the ACL APIs (DescribeAcls, CreateAcls, DeleteAcls)",
            AclUnavailable.DISABLED: f"ACLs are not enabled on cluster {cluster}: no authorizer is configured on its brokers",
            AclUnavailable.UNAUTHORIZED: f"the reconciler's principal may not manage ACLs on cluster {cluster}",
        }[self]

    def hint(self) -> str:
        return {
            AclUnavailable.NO_API: "manage these ACLs with the platform's tooling, or set `sync.acls: false` on the flows into it",
            AclUnavailable.DISABLED: "enable an authorizer on the brokers (authorizer.class.name; KRaft: "
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer), or set `sync.acls: false` on the flows into it",
            AclUnavailable.UNAUTHORIZED: "grant the reconciler's principal DESCRIBE and ALTER on the CLUSTER resource, "
            "or set `sync.acls: false` on the flows into it",
        }[self]


@dataclass(frozen=True)
class ClusterState:
    """One cluster as read. `acls` is None when the cluster cannot list ACLs; `error` when it could not be read;
    `acls_unavailable` why ACLs cannot be managed there (None: they can)."""

    alias: str
    topics: Mapping[str, TopicState] = field(default_factory=dict)
    acls: tuple[AclBinding, ...] | None = None
    capabilities: Capabilities = field(default_factory=Capabilities)
    config_mode: ConfigSourceMode = ConfigSourceMode.UNKNOWN
    error: str | None = None
    acls_unavailable: AclUnavailable | None = None
    #: the owners' claims of its topics (state/ownership.py), when read (`read_live(..., ownership=True)`): {} none,
    #: None could not be read
    owners: Mapping[str, frozenset[str]] | None = field(default_factory=dict)

    @property
    def reachable(self) -> bool:
        return self.error is None

    def acls_by_topic(self) -> dict[str, list[AclBinding]]:
        """The topic ACLs by topic name (ACLs of other resources are left out)."""
        out: dict[str, list[AclBinding]] = {}
        for a in self.acls or ():
            if a.resource is AclResource.TOPIC:
                out.setdefault(a.topic, []).append(a)
        return out


@dataclass(frozen=True)
class LiveState:
    clusters: Mapping[str, ClusterState]

    def cluster(self, alias: str) -> ClusterState:
        return self.clusters.get(alias) or ClusterState(alias, error="not read")

    def topic(self, alias: str, name: str) -> TopicState | None:
        c = self.clusters.get(alias)
        return c.topics.get(name) if c else None

    def fingerprint(self, scope: Mapping[str, Iterable[str]]) -> str:
        """sha256 over the scoped topics (present or absent), their ACLs and owners, and each scoped cluster's
        capabilities.

        Scoped, not whole-cluster: unrelated topics created by others do not make a saved plan stale.
        """
        data = {}
        for alias in sorted(scope):
            c = self.cluster(alias)
            acls = c.acls_by_topic()
            names = sorted(set(scope[alias]))
            data[alias] = {
                "error": c.error,
                "caps": c.capabilities.summary(),
                "acls_readable": c.acls is not None,
                "topics": {n: (c.topics[n].fingerprint_data() if n in c.topics else None) for n in names},
                "acls": {n: sorted(a.to_dict().__repr__() for a in acls.get(n, ())) for n in names if n in acls},
            }
            owners = c.owners if c.owners is not None else {}
            claimed = {n: sorted(owners[n]) for n in names if n in owners}
            if claimed or c.owners is None:  # as before for a plan that reads no claims, or claims none of its topics
                data[alias]["owners"] = claimed if c.owners is not None else None
        blob = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
        return "sha256:" + hashlib.sha256(blob).hexdigest()
