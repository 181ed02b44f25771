"""The job spec: everything a replication job needs to replicate one flow, as plain JSON.

The reconciler builds it from the topology (`JobSpec.from_flow`), writes it to a file and starts
`jobs/mirror_job.py --spec FILE`. Secrets stay `${ENV_VAR}` references: the job resolves them in
its own environment (`client_config`), so a spec file, a plan or a status record never holds one.

Shape (version 2): the flow id, the two clusters, the flow's settings as the topology model holds
them (`topology.model.FlowSettings`, the settings part of a Flow: its own TopicFilter, GroupFilter,
ReplicationPolicy, SyncSettings, Heartbeats, ... serialized as they are, field by field), how the job runs (`RuntimeSettings`,
under the key `engine`: Spark master, parallelism, batch sizes, intervals) and the git revision (provenance, not hashed).
Version 1 (the flat spec of earlier releases) is still read, so a deployed job's spec can be
compared; its `version` differs, which needs a restart: every running job is restarted once on
upgrade (docs/replication-job.md).

`spec_hash()` is the sha256 of the canonical JSON of everything but the git revision; the job
publishes the hash of the spec it runs, so "is the job running the desired spec" is a comparison of
two strings.

Hot reload: a running job re-reads its spec file every refresh interval. Changes under a path of
`HOT_RELOADABLE` ("settings.topics.include", "engine.max_batch_ms", ...) are applied on the fly; a change
anywhere else makes the job stop cleanly with exit code `EXIT_RESTART_REQUIRED` (after publishing a
status saying why) so its deployer restarts it with the new spec.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from reconciler import outputs
from reconciler.mirror.filters import ConfigPropertyFilter, GroupFilter, TopicFilter
from reconciler.mirror.policy import ReplicationPolicy
from reconciler.state import ownership
from reconciler.topology import secrets, settings_registry
from reconciler.topology.build import default_settings
from reconciler.topology.choices import OffsetReset  # noqa: F401 (re-exported: the job reads it here)
from reconciler.topology.defaults import BUILTIN_FLOW_DEFAULTS
from reconciler.topology.flow_id import FlowId
from reconciler.topology.model import (
    SPEC_OMITS_DEFAULT,
    Cluster,
    Delivery,
    Flow,
    FlowSettings,
    Heartbeats,
    HeartbeatsLocation,
    JobSettings,
    OffsetSyncsLocation,
    Topology,
)

SPEC_VERSION = 2
_FLOW = BUILTIN_FLOW_DEFAULTS
EXIT_RESTART_REQUIRED = 3
#: The job stopped itself because a newer instance of its flow runs (at most one instance copies a flow).
EXIT_SUPERSEDED = 4

#: Paths (and everything under them) of a JobSpec a running job applies without a restart; a change
#: anywhere else needs one. Paths are those of `JobSpec.leaves()`. Derived from the settings registry (each
#: setting's `hot_reload`, topology/settings_registry.py) and the two engine settings no topology sets.
HOT_RELOADABLE: frozenset[str] = (
    settings_registry.hot_reloadable_spec_paths() | settings_registry.SPEC_ONLY_HOT_RELOADABLE
)


def is_hot_reloadable(path: str) -> bool:
    return any(path == hot or path.startswith(hot + ".") for hot in HOT_RELOADABLE)


#: A spec's clusters: each a leaf (a cluster changes as a whole), but for its credentials (`credential_change`).
CLUSTER_SIDES = ("source", "target")


def credential_change(current: Any, desired: Any) -> tuple[str, ...]:
    """The credential settings (topology/secrets.py `may_reference`: passwords, keys, user names, certificate
    locations) in which two JSON values of a spec's cluster differ, when they differ in nothing else; () otherwise.
    Such a change is a credential rotation: the running flow reconnects in place (engine/driver.py `reload_spec`),
    as it does when a credential file changes, and the plan shows it as that, not as a restart."""
    if not isinstance(current, Mapping) or not isinstance(desired, Mapping):
        return ()
    if any(current.get(k) != desired.get(k) for k in ("alias", "bootstrap_servers")):
        return ()
    a, b = current.get("config") or {}, desired.get("config") or {}
    keys = tuple(sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)))
    return keys if keys and all(secrets.may_reference(k) for k in keys) else ()


def rotated_sides(changes: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Of `changes` (path -> (current, desired), as `JobSpec.changes` gives), the clusters whose credentials alone
    changed, by side, with the settings that did."""
    out = {}
    for side in CLUSTER_SIDES:
        if side in changes:
            keys = credential_change(*changes[side])
            if keys:
                out[side] = keys
    return out


def restart_fields_of(changed: Iterable[str], rotated: Iterable[str] = ()) -> set[str]:
    """The "needs a restart" rule: of the changed JobSpec paths, those a running job cannot take (a cluster side
    in `rotated`, `rotated_sides`, is taken in place: it reconnects)."""
    skip = {"git_revision", *rotated}
    return {name for name in changed if not is_hot_reloadable(name) and name not in skip}


#: The values `engine.offset_reset` takes (the `job.offset_reset` setting's: its enum `OffsetReset`, then the aliases).
OFFSET_RESET_CHOICES: tuple[str, ...] = settings_registry.setting("job.offset_reset").choices


# --- dataclasses <-> JSON, field by field (the model's own types, serialized as they are) ----------


def _to_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_json(getattr(value, f.name)) for f in fields(value) if f.compare and not _omitted(value, f)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _to_json(v) for k, v in sorted(value.items())}
    if isinstance(value, (tuple, list)):
        return [_to_json(v) for v in value]
    return value


def _omitted(value: Any, f: dataclasses.Field) -> bool:
    """A field added after specs were deployed (`SPEC_OMITS_DEFAULT`, topology/model.py) that holds its default: left
    out of the JSON (and so of the hash), as the specs of earlier releases are; its absence reads as the default."""
    if not f.metadata.get(SPEC_OMITS_DEFAULT):
        return False
    default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    return bool(getattr(value, f.name) == default)


def _from_json(tp: Any, value: Any, where: str) -> Any:
    """`value` (JSON) as type `tp` (a dataclass, enum, tuple[...], Mapping, Optional or scalar)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _from_json(args[0], value, where)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: expected an object, not {value!r}")
        hints = typing.get_type_hints(tp)
        known = {f.name: f for f in fields(tp) if f.init and f.compare}
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise ValueError(f"{where}: unknown fields: {', '.join(unknown)}")
        return tp(**{n: _from_json(hints[n], v, f"{where}.{n}") for n, v in value.items()})
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{where}: expected a list, not {value!r}")
        (item, *_) = typing.get_args(tp)
        return tuple(_from_json(item, v, where) for v in value)
    if origin in (Mapping, dict) or tp in (Mapping, dict):
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: expected an object, not {value!r}")
        return {str(k): str(v) for k, v in value.items()}
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return value
    return value


def _leaves(value: Any, prefix: str, out: dict[str, Any]) -> dict[str, Any]:
    """Dotted path -> JSON value of every leaf: dataclass fields are descended into, except ClusterSpec
    (a cluster changes as a whole); anything else (lists, mappings, scalars) is a leaf."""
    if dataclasses.is_dataclass(value) and not isinstance(value, (type, ClusterSpec)):
        for f in fields(value):
            if f.compare:
                _leaves(getattr(value, f.name), f"{prefix}{f.name}.", out)
        return out
    out[prefix[:-1]] = _to_json(value)
    return out


@dataclass(frozen=True)
class ClusterSpec:
    alias: str
    bootstrap_servers: str
    config: Mapping[str, str] = field(default_factory=dict)  # `${ENV_VAR}` references unresolved

    @classmethod
    def from_cluster(cls, cluster: Cluster) -> ClusterSpec:
        return cls(cluster.alias, cluster.bootstrap_servers, dict(sorted(cluster.config.items())))

    def client_config(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """librdkafka settings with references resolved (raises secrets.SecretsError)."""
        return secrets.client_settings(self.alias, self.bootstrap_servers, self.config, environ)


#: How often a job publishes its status record, when its spec does not say (the one home of this default: the
#: staleness rule, contract/status.py `stale_after_seconds`, reads it for a job whose spec it does not know).
DEFAULT_STATUS_INTERVAL_SECONDS = 3.0


@dataclass(frozen=True)
class RuntimeSettings:
    """How the job runs (Spark and its loop), as opposed to what it replicates: the flow's own, though its `master`
    and `spark_conf` are the engine's (scope `engine` in topology/settings_registry.py: every flow of the engine
    agrees on them). Serialized under the key `engine` (`JobSpec.engine`, the "engine.*" paths), as specs written by
    earlier releases are: the same spec hash, so an upgrade restarts nothing."""

    master: str = _FLOW["job"]["master"]
    parallelism: int = _FLOW["job"]["parallelism"]
    max_records_per_partition: int = _FLOW["job"]["max_records_per_partition"]
    trigger_interval_ms: int = _FLOW["job"]["trigger_interval_ms"]
    max_batch_ms: int = _FLOW["job"]["max_batch_ms"]
    status_interval_seconds: float = DEFAULT_STATUS_INTERVAL_SECONDS
    offset_reset: str = _FLOW["job"]["offset_reset"]
    spark_conf: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, job: JobSettings) -> RuntimeSettings:
        return cls(
            master=job.master,
            parallelism=job.parallelism,
            max_records_per_partition=job.max_records_per_partition,
            trigger_interval_ms=job.trigger_interval_ms,
            max_batch_ms=job.max_batch_ms,
            offset_reset=job.offset_reset,
            spark_conf=dict(sorted(job.spark_conf.items())),
        )


@dataclass(frozen=True)
class SpecFlow:
    """The flow a spec replicates, as the routing rule (`analysis.expansion.route`) and the job's emitters
    read it: the two aliases and the flow's settings, nothing made up."""

    source: str
    target: str
    settings: FlowSettings

    @property
    def topics(self) -> TopicFilter:
        return self.settings.topics

    @property
    def groups(self) -> GroupFilter:
        return self.settings.groups

    @property
    def policy(self) -> ReplicationPolicy:
        return self.settings.policy

    @property
    def heartbeats(self) -> Heartbeats:
        return self.settings.heartbeats

    @property
    def carries_heartbeats(self) -> bool:
        return self.settings.carries_heartbeats

    @property
    def config_properties(self) -> ConfigPropertyFilter:
        return self.settings.config_properties


@dataclass(frozen=True)
class JobSpec:
    flow: str  # the flow id "<source>-><target>[:<family>]"
    source: ClusterSpec
    target: ClusterSpec
    settings: FlowSettings = field(default_factory=default_settings)
    engine: RuntimeSettings = field(default_factory=RuntimeSettings)
    version: int = SPEC_VERSION
    # Not part of the hash: provenance only.
    git_revision: str | None = field(default=None, compare=False)
    # The topology's `owner:` (docs/environments.md, "Ownership"): whose job it is; only that owner's plan stops it.
    # Written only when set (a spec without an owner hashes as before); a change is taken in place.
    owner: str | None = None

    # --- construction -------------------------------------------------------------------
    @classmethod
    def from_flow(cls, topology: Topology, flow: Flow, git_revision: str | None = None) -> JobSpec:
        return cls(
            flow=flow.name,
            source=ClusterSpec.from_cluster(topology.clusters[flow.source]),
            target=ClusterSpec.from_cluster(topology.clusters[flow.target]),
            settings=FlowSettings.of(flow),
            engine=RuntimeSettings.of(flow.job),
            git_revision=git_revision,
            owner=topology.owner,
        )

    def __post_init__(self) -> None:
        if self.engine.offset_reset not in OFFSET_RESET_CHOICES:
            raise ValueError(f"offset_reset must be one of {OFFSET_RESET_CHOICES}, not {self.engine.offset_reset!r}")
        if self.engine.parallelism < 1:
            raise ValueError("parallelism must be >= 1")
        if not FlowId.looks_like(self.flow):
            raise ValueError(f"flow name {self.flow!r} is not '<source>-><target>'")
        family = self.settings.family
        if family is not None and self.flow != str(FlowId(self.source.alias, self.target.alias, family)):
            raise ValueError(
                f"flow name {self.flow!r} of topic family {family!r} is not "
                f"{str(FlowId(self.source.alias, self.target.alias, family))!r}"
            )

    # --- derived views ------------------------------------------------------------------
    @property
    def source_alias(self) -> str:
        return self.source.alias

    @property
    def target_alias(self) -> str:
        return self.target.alias

    @property
    def delivery(self) -> str:
        """The delivery guarantee's name ("at-least-once" | "exactly-once")."""
        return self.settings.delivery.value

    @property
    def exactly_once(self) -> bool:
        return self.settings.delivery is Delivery.EXACTLY_ONCE

    @property
    def emits_heartbeats(self) -> bool:
        """Heartbeats are on and this flow carries them (one topic family per pair does)."""
        return self.settings.heartbeats.enabled and self.settings.carries_heartbeats

    @property
    def mirror_flow(self) -> SpecFlow:
        """The flow as the routing rule reads it (`analysis.expansion.route`, `checkpoint_route`)."""
        return SpecFlow(self.source.alias, self.target.alias, self.settings)

    @property
    def heartbeats_on_source(self) -> bool:
        return self.settings.heartbeats.location is HeartbeatsLocation.SOURCE

    @property
    def offset_syncs_on_source(self) -> bool:
        return self.settings.offset_syncs_location is OffsetSyncsLocation.SOURCE

    # --- serialization ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "flow": self.flow,
            "source": _to_json(self.source),
            "target": _to_json(self.target),
            "settings": _to_json(self.settings),
            "engine": _to_json(self.engine),
            "git_revision": self.git_revision,
        } | ({"owner": self.owner} if self.owner is not None else {})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def to_compact_json(self) -> str:
        """`to_json` without whitespace: the same spec (the same `spec_hash`), in fewer bytes (an engine's ConfigMap
        holds hundreds of them within Kubernetes' limits: reconciler.deployers.kubernetes)."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobSpec:
        data = dict(data)
        version = data.get("version", 1)
        if version == 1:
            data = _from_version_1(data)
        elif version != SPEC_VERSION:
            raise ValueError(f"job spec version {version} is not supported (expected {SPEC_VERSION})")
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown job spec fields: {', '.join(unknown)}")
        for side in ("source", "target"):
            c = data[side]
            data[side] = ClusterSpec(c["alias"], c["bootstrap_servers"], dict(c.get("config", {})))
        data["settings"] = _from_json(FlowSettings, data["settings"], "settings")
        data["engine"] = _from_json(RuntimeSettings, data.get("engine", {}), "engine")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        return cls.from_dict(json.loads(text))

    @classmethod
    def load(cls, path: str | Path) -> JobSpec:
        return cls.from_json(Path(path).read_text())

    def write(self, path: str | Path) -> Path:
        """Write atomically (a running job may be re-reading the file), readable by its owner only (0600: a spec
        names clusters, principals and the variables that hold their secrets)."""
        path = Path(path)
        outputs.write_text(path, self.to_json() + "\n", private=True)
        return path

    def spec_hash(self) -> str:
        """The hash of the spec's canonical JSON (git_revision aside). Computed once per spec (issue 39: the
        running job asks for it at every step and status): a JobSpec is frozen, so the value kept on the instance
        (outside its fields: not compared, not copied by `with_`) never goes stale."""
        cached: str | None = self.__dict__.get("_spec_hash")
        if cached is None:
            d = self.to_dict()
            d.pop("git_revision", None)
            canonical = json.dumps(d, sort_keys=True, separators=(",", ":"))
            cached = hashlib.sha256(canonical.encode()).hexdigest()
            object.__setattr__(self, "_spec_hash", cached)
        return cached

    # --- hot reload ---------------------------------------------------------------------
    def leaves(self) -> dict[str, Any]:
        """Dotted path -> JSON value of every setting ("settings.topics.include", "engine.parallelism",
        "source", "version", ...): what `changes`, HOT_RELOADABLE and `restart_hash` speak of."""
        return _leaves(self, "", {})

    def changes(self, other: JobSpec) -> dict[str, tuple[Any, Any]]:
        """Path -> (this value, `other`'s value) of every setting that differs (git_revision aside)."""
        mine, theirs = self.leaves(), other.leaves()
        return {
            k: (mine.get(k), theirs.get(k))
            for k in sorted(set(mine) | set(theirs))
            if k != "git_revision" and mine.get(k) != theirs.get(k)
        }

    def changed_fields(self, other: JobSpec) -> set[str]:
        return set(self.changes(other))

    def restart_fields(self, other: JobSpec) -> set[str]:
        """Paths that differ in `other` and cannot be applied to a running job."""
        changes = self.changes(other)
        return restart_fields_of(changes, rotated_sides(changes))

    def restart_hash(self) -> str:
        """Hash of the part of the spec a running job cannot take without a restart."""
        leaves = self.leaves()
        for side in CLUSTER_SIDES:  # credentials are taken in place (credential_change)
            cluster = dict(leaves[side])
            cluster["config"] = {k: v for k, v in cluster.get("config", {}).items() if not secrets.may_reference(k)}
            leaves[side] = cluster
        d = {k: v for k, v in leaves.items() if k in restart_fields_of(leaves)}
        return hashlib.sha256(json.dumps(d, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    @property
    def flow_id(self) -> FlowId:
        return FlowId.parse(self.flow)

    def with_(self, **changes: Any) -> JobSpec:
        return replace(self, **changes)

    def with_settings(self, **changes: Any) -> JobSpec:
        return replace(self, settings=replace(self.settings, **changes))

    def with_engine(self, **changes: Any) -> JobSpec:
        return replace(self, engine=replace(self.engine, **changes))


@dataclass
class SpecFile:
    """A running job's spec file, parsed again only when it changed (issue 39: a flow re-read and parsed it at every
    refresh interval). `read()` loads it; `changed()` loads it if the file's identity (inode, mtime_ns, size) differs
    from the last load's, else returns None. `JobSpec.write` replaces the file (a new inode), and so does a
    Kubernetes ConfigMap update (a new file behind the symlink), so a rewrite is seen even within one mtime tick.
    A load that fails is not remembered: the next call tries again (and the job reports it again). `load` is given
    for tests (JobSpec.load by default)."""

    path: Path
    load: typing.Callable[[Path], JobSpec] = JobSpec.load
    _loaded: tuple[int, int, int] | None = None

    def _identity(self) -> tuple[int, int, int]:
        st = self.path.stat()
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def read(self) -> JobSpec:
        """Load the file (whether or not it changed)."""
        identity = self._identity()  # before the read: a file replaced meanwhile is read again next time
        spec = self.load(self.path)
        self._loaded = identity
        return spec

    def changed(self) -> JobSpec | None:
        """The spec in the file if the file changed since the last load, else None (nothing read nor parsed)."""
        if self._identity() == self._loaded:
            return None
        return self.read()


def _from_version_1(d: dict[str, Any]) -> dict[str, Any]:
    """A version-1 (flat) spec, as deployed by earlier releases, in the version-2 shape. Its `version`
    stays 1: comparing it with a version-2 spec shows `version` changed, which needs a restart."""
    f = _FLOW
    flat = dict(d)

    def take(name: str, default: Any) -> Any:
        return flat.pop(name, default)

    settings = {
        "topics": {
            "include": take("topics_include", f["topics"]["include"]),
            "exclude": take("topics_exclude", f["topics"]["exclude"]),
            "builtin_exclude": take("topics_builtin_exclude", None),
        },
        "groups": {
            "include": take("groups_include", f["groups"]["include"]),
            "exclude": take("groups_exclude", f["groups"]["exclude"]),
            "builtin_exclude": take("groups_builtin_exclude", None),
        },
        "policy": {
            "kind": take("policy", f["policy"]),
            "separator": take("separator", f["separator"]),
            "internal_separator": take("internal_separator", True),
            "source_cluster_alias": None,
        },
        "delivery": take("delivery", f["delivery"]),
        "replication_factor": take("replication_factor", f["replication_factor"]),
        "config_properties": {"exclude": take("config_properties_exclude", f["config_properties"]["exclude"])},
        "sync": {
            "topic_configs": take("sync_topic_configs", f["sync"]["topic_configs"]),
            "acls": f["sync"]["acls"],
            "group_offsets": take("sync_group_offsets", f["sync"]["group_offsets"]),
            "group_offsets_interval_seconds": take(
                "sync_group_offsets_interval_seconds", f["sync"]["group_offsets_interval_seconds"]
            ),
        },
        "heartbeats": {
            "enabled": take("heartbeats_enabled", f["heartbeats"]["enabled"]),
            "interval_seconds": take("heartbeats_interval_seconds", f["heartbeats"]["interval_seconds"]),
            "location": take("heartbeats_location", HeartbeatsLocation.SOURCE.value),
            "replicate": take("heartbeats_replication_enabled", True),
        },
        "checkpoints": {
            "enabled": take("checkpoints_enabled", f["checkpoints"]["enabled"]),
            "interval_seconds": take("checkpoints_interval_seconds", f["checkpoints"]["interval_seconds"]),
        },
        "refresh_interval_seconds": take("refresh_interval_seconds", f["refresh_interval_seconds"]),
        "offset_syncs_location": take("offset_syncs_location", f["offset_syncs"]["topic_location"]),
        "offset_lag_max": take("offset_lag_max", f["offset_syncs"]["lag_max"]),
        "family": take("family", None),
        "carries_heartbeats": take("carries_heartbeats", True),
        "on_refused_record": take("on_refused_record", f["on_refused_record"]),
    }
    engine = {name: flat.pop(name) for name in [e.name for e in fields(RuntimeSettings)] if name in flat}
    out: dict[str, Any] = {k: flat.pop(k) for k in ("flow", "source", "target", "git_revision") if k in flat}
    flat.pop("version", None)
    if flat:
        raise ValueError(f"unknown job spec fields: {', '.join(sorted(flat))}")
    return {**out, "version": 1, "settings": settings, "engine": engine}


# --- names the job uses (stable: changing them loses offsets) ---------------------------------
STATUS_TOPIC = "reconciler.status.internal"
#: The apply lease, the applied records and the owners' claims, on every cluster an apply changes (apply/lock.py,
#: state/ownership.py, its one home: the live read names it there).
LEASE_TOPIC = ownership.LEASE_TOPIC


def job_group(spec: JobSpec) -> str:
    """Consumer group holding the job's source offsets: on the source cluster (at-least-once) or
    on the target cluster (exactly-once, KIP-656). `__` keeps it out of every GroupFilter."""
    return job_group_of(spec.flow)


def job_group_of(flow: str) -> str:
    """`job_group` by the flow's id: `reconciler failback` sets the reverse flow's positions there."""
    return f"__reconciler.mirror.{flow}"


def transactional_id(spec: JobSpec, slot: int) -> str:
    return f"{transactional_id_prefix(spec.flow)}{slot}"


def transactional_id_prefix(flow: str) -> str:
    """What every transactional id of an exactly-once flow starts with (one per slot): the PREFIXED
    TransactionalId resource its replication principal needs WRITE and DESCRIBE on (plan/permissions.py)."""
    return f"reconciler.mirror.{flow}."


def offset_syncs_topic_name(spec: JobSpec) -> str:
    """MM2's naming: on the source cluster the topic is named after the target alias, on the target
    cluster after the source alias (MirrorSourceConfig.offsetSyncsTopic), so flows never share one."""
    return offset_syncs_place(spec.settings, spec.source.alias, spec.target.alias)[1]


def offset_syncs_place(settings: FlowSettings, source: str, target: str) -> tuple[str, str]:
    """(the cluster alias holding a flow's offset syncs, the topic's name): `reconciler verify` and `cutover`
    read them where the job writes them."""
    on_source = settings.offset_syncs_location is OffsetSyncsLocation.SOURCE
    return (
        (source, settings.policy.offset_syncs_topic(target))
        if on_source
        else (target, settings.policy.offset_syncs_topic(source))
    )


def dead_letters_topic_name(spec: JobSpec) -> str:
    """The flow's dead-letter topic on the target (`on_refused_record: skip`): `<source-alias>.dead-letters.internal`."""
    return spec.settings.policy.dead_letters_topic(spec.source.alias)
