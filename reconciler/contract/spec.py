"""The job spec: everything a replication job needs to replicate one flow, as plain JSON.

The reconciler builds it from the topology (`JobSpec.from_flow`), writes it to a file and starts
`jobs/mirror_job.py --spec FILE`. Secrets stay `${ENV_VAR}` references: the job resolves them in
its own environment (`client_config`), so a spec file, a plan or a status record never holds one.

`spec_hash()` is the sha256 of the canonical JSON of every field that changes what the job does;
the job publishes the hash of the spec it runs, so "is the job running the desired spec" is a
comparison of two strings.

Hot reload: a running job re-reads its spec file every refresh interval. Fields in
`HOT_RELOADABLE` are applied on the fly; a change to any other field makes the job stop cleanly
with exit code `EXIT_RESTART_REQUIRED` (after publishing a status saying why) so its deployer
restarts it with the new spec.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from reconciler.contract.flow_id import FlowId
from reconciler.mirror.filters import ConfigPropertyFilter, GroupFilter, TopicFilter
from reconciler.mirror.policy import PolicyKind, ReplicationPolicy
from reconciler.topology import secrets
from reconciler.topology.defaults import BUILTIN_FLOW_DEFAULTS
from reconciler.topology.model import (
    Cluster,
    Delivery,
    Emitter,
    Flow,
    Heartbeats,
    HeartbeatsLocation,
    JobSettings,
    OffsetSyncsLocation,
    SyncSettings,
    Topology,
)

SPEC_VERSION = 1
_FLOW = BUILTIN_FLOW_DEFAULTS
EXIT_RESTART_REQUIRED = 3

#: JobSpec fields a running job applies without a restart (the rest need one).
HOT_RELOADABLE: frozenset[str] = frozenset(
    {
        "topics_include",
        "topics_exclude",
        "groups_include",
        "groups_exclude",
        "topics_builtin_exclude",
        "groups_builtin_exclude",
        "config_properties_exclude",
        "replication_factor",
        "sync_topic_configs",
        "sync_group_offsets",
        "sync_group_offsets_interval_seconds",
        "heartbeats_enabled",
        "heartbeats_interval_seconds",
        "checkpoints_enabled",
        "checkpoints_interval_seconds",
        "refresh_interval_seconds",
        "offset_lag_max",
        "max_records_per_partition",
        "trigger_interval_ms",
        "max_batch_ms",
        "status_interval_seconds",
        "offset_reset",
    }
)


def restart_fields_of(changed: Iterable[str]) -> set[str]:
    """The "needs a restart" rule: of the changed JobSpec fields, those a running job cannot take."""
    return {name for name in changed if name not in HOT_RELOADABLE and name != "git_revision"}


#: What a job does when its next offset is outside the source partition (truncated/recreated):
#: "earliest" resumes at the earliest available offset, "halt" stops that partition; both report it.
OFFSET_RESET_CHOICES = ("earliest", "halt")


@dataclass(frozen=True)
class ClusterSpec:
    alias: str
    bootstrap_servers: str
    config: Mapping[str, str] = field(default_factory=dict)  # `${ENV_VAR}` references unresolved

    @classmethod
    def from_cluster(cls, cluster: Cluster) -> ClusterSpec:
        return cls(cluster.alias, cluster.bootstrap_servers, dict(sorted(cluster.config.items())))

    def client_config(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """librdkafka settings with references resolved (raises secrets.UnresolvedReference)."""
        return secrets.client_settings(self.bootstrap_servers, self.config, environ)


@dataclass(frozen=True)
class JobSpec:
    flow: str  # "<source>-><target>"
    source: ClusterSpec
    target: ClusterSpec
    # Defaults: the flow defaults of topology/defaults.py (their one home), not restated here.
    delivery: str = _FLOW["delivery"]
    policy: str = _FLOW["policy"]
    separator: str = _FLOW["separator"]
    internal_separator: bool = _FLOW["internal_separator"]
    topics_include: tuple[str, ...] = tuple(_FLOW["topics"]["include"])
    topics_exclude: tuple[str, ...] = tuple(_FLOW["topics"]["exclude"])
    groups_include: tuple[str, ...] = tuple(_FLOW["groups"]["include"])
    groups_exclude: tuple[str, ...] = tuple(_FLOW["groups"]["exclude"])
    topics_builtin_exclude: tuple[str, ...] | None = None  # None: MM2's built-in excludes
    groups_builtin_exclude: tuple[str, ...] | None = None
    config_properties_exclude: tuple[str, ...] = tuple(_FLOW["config_properties"]["exclude"])
    replication_factor: int = _FLOW["replication_factor"]
    sync_topic_configs: bool = _FLOW["sync"]["topic_configs"]
    sync_group_offsets: bool = _FLOW["sync"]["group_offsets"]
    sync_group_offsets_interval_seconds: float = float(_FLOW["sync"]["group_offsets_interval_seconds"])
    heartbeats_enabled: bool = _FLOW["heartbeats"]["enabled"]
    heartbeats_interval_seconds: float = float(_FLOW["heartbeats"]["interval_seconds"])
    heartbeats_location: str = _FLOW["heartbeats"]["location"]
    heartbeats_replication_enabled: bool = _FLOW["heartbeats"]["replicate"]
    checkpoints_enabled: bool = _FLOW["checkpoints"]["enabled"]
    checkpoints_interval_seconds: float = float(_FLOW["checkpoints"]["interval_seconds"])
    refresh_interval_seconds: float = float(_FLOW["refresh_interval_seconds"])
    offset_syncs_location: str = _FLOW["offset_syncs"]["topic_location"]
    offset_lag_max: int = _FLOW["offset_syncs"]["lag_max"]
    # --- engine -------------------------------------------------------------------------
    master: str = _FLOW["job"]["master"]
    parallelism: int = _FLOW["job"]["parallelism"]
    max_records_per_partition: int = _FLOW["job"]["max_records_per_partition"]
    trigger_interval_ms: int = _FLOW["job"]["trigger_interval_ms"]
    max_batch_ms: int = 1_000
    status_interval_seconds: float = 3.0
    offset_reset: str = "earliest"
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    version: int = SPEC_VERSION
    # Topic families (several named flows of one pair): omitted from the dict when unset, so the
    # specs (and hashes) of flows without a name are what they were before families existed.
    family: str | None = None
    carries_heartbeats: bool = True
    # Not part of the hash: provenance only.
    git_revision: str | None = field(default=None, compare=False)

    # --- construction -------------------------------------------------------------------
    @classmethod
    def from_flow(cls, topology: Topology, flow: Flow, git_revision: str | None = None) -> JobSpec:
        return cls(
            flow=flow.name,
            source=ClusterSpec.from_cluster(topology.clusters[flow.source]),
            target=ClusterSpec.from_cluster(topology.clusters[flow.target]),
            delivery=flow.delivery.value,
            policy=flow.policy.kind.value,
            separator=flow.policy.separator,
            internal_separator=flow.policy.internal_separator,
            topics_include=tuple(flow.topics.include),
            topics_exclude=tuple(flow.topics.exclude),
            groups_include=tuple(flow.groups.include),
            groups_exclude=tuple(flow.groups.exclude),
            topics_builtin_exclude=flow.topics.builtin_exclude,
            groups_builtin_exclude=flow.groups.builtin_exclude,
            config_properties_exclude=tuple(flow.config_properties.exclude),
            replication_factor=flow.replication_factor,
            sync_topic_configs=flow.sync.topic_configs,
            sync_group_offsets=flow.sync.group_offsets,
            sync_group_offsets_interval_seconds=float(flow.sync.group_offsets_interval_seconds),
            heartbeats_enabled=flow.heartbeats.enabled and flow.carries_heartbeats,
            heartbeats_interval_seconds=float(flow.heartbeats.interval_seconds),
            heartbeats_location=flow.heartbeats.location.value,
            heartbeats_replication_enabled=flow.heartbeats.replicate,
            checkpoints_enabled=flow.checkpoints.enabled,
            checkpoints_interval_seconds=float(flow.checkpoints.interval_seconds),
            refresh_interval_seconds=float(flow.refresh_interval_seconds),
            offset_syncs_location=flow.offset_syncs_location.value,
            offset_lag_max=flow.offset_lag_max,
            master=flow.job.master,
            parallelism=flow.job.parallelism,
            max_records_per_partition=flow.job.max_records_per_partition,
            trigger_interval_ms=flow.job.trigger_interval_ms,
            spark_conf=dict(sorted(flow.job.spark_conf.items())),
            family=flow.family,
            carries_heartbeats=flow.carries_heartbeats,
            git_revision=git_revision,
        )

    def __post_init__(self) -> None:
        if self.delivery not in {d.value for d in Delivery}:
            raise ValueError(f"delivery must be one of {[d.value for d in Delivery]}, not {self.delivery!r}")
        if self.offset_reset not in OFFSET_RESET_CHOICES:
            raise ValueError(f"offset_reset must be one of {OFFSET_RESET_CHOICES}, not {self.offset_reset!r}")
        if self.parallelism < 1:
            raise ValueError("parallelism must be >= 1")
        if not FlowId.looks_like(self.flow):
            raise ValueError(f"flow name {self.flow!r} is not '<source>-><target>'")
        if self.family is not None and self.flow != str(FlowId(self.source.alias, self.target.alias, self.family)):
            raise ValueError(
                f"flow name {self.flow!r} of topic family {self.family!r} is not "
                f"{str(FlowId(self.source.alias, self.target.alias, self.family))!r}"
            )

    # --- derived views ------------------------------------------------------------------
    @property
    def source_alias(self) -> str:
        return self.source.alias

    @property
    def target_alias(self) -> str:
        return self.target.alias

    @property
    def exactly_once(self) -> bool:
        return self.delivery == Delivery.EXACTLY_ONCE.value

    def to_flow(self) -> Flow:
        """The model Flow this spec describes, so the job applies `expansion.route` itself."""
        return Flow(
            source=self.source.alias,
            target=self.target.alias,
            enabled=True,
            topics=TopicFilter(tuple(self.topics_include), tuple(self.topics_exclude), self.topics_builtin_exclude),
            groups=GroupFilter(tuple(self.groups_include), tuple(self.groups_exclude), self.groups_builtin_exclude),
            policy=ReplicationPolicy(PolicyKind(self.policy), self.separator, self.internal_separator),
            delivery=Delivery(self.delivery),
            replication_factor=self.replication_factor,
            config_properties=ConfigPropertyFilter(tuple(self.config_properties_exclude)),
            sync=SyncSettings(
                self.sync_topic_configs, False, self.sync_group_offsets, self.sync_group_offsets_interval_seconds
            ),
            heartbeats=Heartbeats(
                self.heartbeats_enabled,
                self.heartbeats_interval_seconds,
                HeartbeatsLocation(self.heartbeats_location),
                self.heartbeats_replication_enabled,
            ),
            checkpoints=Emitter(self.checkpoints_enabled, self.checkpoints_interval_seconds),
            refresh_interval_seconds=self.refresh_interval_seconds,
            offset_syncs_location=OffsetSyncsLocation(self.offset_syncs_location),
            offset_lag_max=self.offset_lag_max,
            job=JobSettings(
                "spec",
                self.master,
                self.parallelism,
                self.max_records_per_partition,
                self.trigger_interval_ms,
                dict(self.spark_conf),
            ),
            family=self.family,
            carries_heartbeats=self.carries_heartbeats,
        )

    @property
    def heartbeats_on_source(self) -> bool:
        return self.heartbeats_location == HeartbeatsLocation.SOURCE.value

    @property
    def offset_syncs_on_source(self) -> bool:
        return self.offset_syncs_location == OffsetSyncsLocation.SOURCE.value

    # --- serialization ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for f in fields(self):
            if isinstance(d[f.name], tuple):
                d[f.name] = list(d[f.name])
        d["source"]["config"] = dict(self.source.config)
        d["target"]["config"] = dict(self.target.config)
        d["spark_conf"] = dict(self.spark_conf)
        if self.family is None:
            del d["family"]
        if self.carries_heartbeats:
            del d["carries_heartbeats"]
        # Fields added by issue 11 are left out at their defaults, so older specs keep their hash.
        for name, default in (
            ("internal_separator", True),
            ("heartbeats_location", HeartbeatsLocation.SOURCE.value),
            ("heartbeats_replication_enabled", True),
            ("topics_builtin_exclude", None),
            ("groups_builtin_exclude", None),
        ):
            if d[name] == default:
                del d[name]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobSpec:
        data = dict(data)
        version = data.get("version", SPEC_VERSION)
        if version != SPEC_VERSION:
            raise ValueError(f"job spec version {version} is not supported (expected {SPEC_VERSION})")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown job spec fields: {', '.join(unknown)}")
        for side in ("source", "target"):
            c = data[side]
            data[side] = ClusterSpec(c["alias"], c["bootstrap_servers"], dict(c.get("config", {})))
        for f in fields(cls):
            if f.name in data and isinstance(data[f.name], list):
                data[f.name] = tuple(data[f.name])
        if "spark_conf" in data:
            data["spark_conf"] = {str(k): str(v) for k, v in data["spark_conf"].items()}
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        return cls.from_dict(json.loads(text))

    @classmethod
    def load(cls, path: str | Path) -> JobSpec:
        return cls.from_json(Path(path).read_text())

    def write(self, path: str | Path) -> Path:
        """Write atomically (a running job may be re-reading the file)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_json() + "\n")
        tmp.replace(path)
        return path

    def spec_hash(self) -> str:
        d = self.to_dict()
        d.pop("git_revision", None)
        canonical = json.dumps(d, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    # --- hot reload ---------------------------------------------------------------------
    def changed_fields(self, other: JobSpec) -> set[str]:
        mine, theirs = self.to_dict(), other.to_dict()
        return {k for k in set(mine) | set(theirs) if k != "git_revision" and mine.get(k) != theirs.get(k)}

    def restart_fields(self, other: JobSpec) -> set[str]:
        """Fields that differ in `other` and cannot be applied to a running job."""
        return restart_fields_of(self.changed_fields(other))

    def restart_hash(self) -> str:
        """Hash of the part of the spec a running job cannot take without a restart."""
        d = {k: v for k, v in self.to_dict().items() if k in restart_fields_of(self.to_dict())}
        return hashlib.sha256(json.dumps(d, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    @property
    def flow_id(self) -> FlowId:
        return FlowId.parse(self.flow)

    def with_(self, **changes: Any) -> JobSpec:
        return replace(self, **changes)


# --- names the job uses (stable: changing them loses offsets) ---------------------------------
STATUS_TOPIC = "reconciler.status.internal"


def job_group(spec: JobSpec) -> str:
    """Consumer group holding the job's source offsets: on the source cluster (at-least-once) or
    on the target cluster (exactly-once, KIP-656). `__` keeps it out of every GroupFilter."""
    return f"__reconciler.mirror.{spec.flow}"


def transactional_id(spec: JobSpec, slot: int) -> str:
    return f"reconciler.mirror.{spec.flow}.{slot}"


def offset_syncs_topic_name(spec: JobSpec) -> str:
    """MM2's naming: on the source cluster the topic is named after the target alias, on the target
    cluster after the source alias (MirrorSourceConfig.offsetSyncsTopic), so flows never share one."""
    policy = spec.to_flow().policy
    return policy.offset_syncs_topic(spec.target.alias if spec.offset_syncs_on_source else spec.source.alias)
