"""The validated topology: small frozen dataclasses, built only by `reconciler.topology.build`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from reconciler.mirror.filters import ConfigPropertyFilter, GroupFilter, PatternFilter, TopicFilter
from reconciler.mirror.policy import ReplicationPolicy
from reconciler.topology.choices import Delivery, HeartbeatsLocation, OffsetSyncsLocation, OnRefusedRecord
from reconciler.topology.defaults import BUILTIN_FLOW_DEFAULTS
from reconciler.topology.diagnostics import SourceLocation
from reconciler.topology.flow_id import FAMILY_SEPARATOR, FlowId, flow_ends, flow_name  # noqa: F401

#: The job settings' defaults have one home, topology/defaults.py (build.py always passes them all).
_JOB = BUILTIN_FLOW_DEFAULTS["job"]

# The flow id has one home: reconciler.topology.flow_id (re-exported here for the model's users).


@dataclass(frozen=True)
class Cluster:
    alias: str
    bootstrap_servers: str
    config: Mapping[str, str] = field(default_factory=dict)  # as written: ${ENV_VAR} unresolved
    tags: Mapping[str, str] = field(default_factory=dict)
    replication_principal: str | None = None
    where: SourceLocation | None = field(default=None, compare=False)
    # issue 45 (plan/permissions.py): the principal `apply` connects as, the read-only one of `plan`/`drift`, and
    # whether the cluster enforces ACLs (None: decided from its ACLs)
    reconciler_principal: str | None = None
    plan_principal: str | None = None
    acls_enforced: bool | None = None


@dataclass(frozen=True)
class SyncSettings:
    topic_configs: bool
    acls: bool
    group_offsets: bool
    group_offsets_interval_seconds: float


@dataclass(frozen=True)
class Emitter:
    """Heartbeats or checkpoints: whether and how often."""

    enabled: bool
    interval_seconds: float


@dataclass(frozen=True)
class Heartbeats(Emitter):
    """Heartbeats: also where they are written and whether heartbeat topics are always replicated
    (Kafka's `heartbeats.replication.enabled`; when false, only the topic filter decides)."""

    location: HeartbeatsLocation = HeartbeatsLocation.SOURCE
    replicate: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "location", HeartbeatsLocation(self.location))


@dataclass(frozen=True)
class RateLimit:
    """A flow's cap on its copy rate (`rate_limit`): records and bytes per second, the flow's total over all its
    partitions and tasks (the engine paces its tasks to it: engine/pacing.py); None: no cap of that kind."""

    records_per_second: float | None = None
    bytes_per_second: float | None = None

    @property
    def limited(self) -> bool:
        return self.records_per_second is not None or self.bytes_per_second is not None


#: The metadata key of a field added to the job spec after specs were deployed: a spec omits it while it holds its
#: default (and reads its absence as the default), so the spec of a flow that does not set it, and its hash, stay
#: what earlier releases wrote: an upgrade restarts nothing (contract/spec.py `_to_json`).
SPEC_OMITS_DEFAULT = "spec_omits_default"


@dataclass(frozen=True)
class JobSettings:
    deployer: str
    master: str
    parallelism: int
    max_records_per_partition: int
    trigger_interval_ms: int
    max_batch_ms: int
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    # what the job does when the source lost the records at a partition's position (topology/choices.py OffsetReset)
    offset_reset: str = _JOB["offset_reset"]
    namespace: str = _JOB["namespace"]
    image: str | None = _JOB["image"]
    # kubernetes: the driver's service account
    service_account: str = _JOB["service_account"]
    # kubernetes: the Secret holding the ${ENV_VAR}s the spec references
    secret_name: str = _JOB["secret_name"]
    # kubernetes: where manifests are rendered ($RECONCILER_STATE_DIR/k8s)
    manifests_dir: str | None = _JOB["manifests_dir"]
    # kubernetes: also `kubectl apply` them
    kubectl_apply: bool = _JOB["kubectl_apply"]
    # the job's Prometheus port; None: the deployer picks, 0: none
    metrics_port: int | None = _JOB["metrics_port"]
    # the address the job's /metrics listens on; None: 127.0.0.1 (kubernetes: 0.0.0.0, always)
    metrics_bind: str | None = _JOB["metrics_bind"]
    # kubernetes: the pods' terminationGracePeriodSeconds
    termination_grace_seconds: int = _JOB["termination_grace_seconds"]
    # the engine (Spark application) the flow runs in; None: its target's (Flow.engine)
    engine: str | None = _JOB["engine"]


@dataclass(frozen=True)
class FlowSettings:
    """What a flow replicates and how, as MirrorMaker 2 would be configured for it: the part of a Flow a
    replication job runs with (the job spec carries it as it is: reconciler.contract.spec)."""

    topics: TopicFilter
    groups: GroupFilter
    policy: ReplicationPolicy
    delivery: Delivery
    replication_factor: int
    config_properties: ConfigPropertyFilter
    sync: SyncSettings
    heartbeats: Heartbeats
    checkpoints: Emitter
    refresh_interval_seconds: float
    offset_syncs_location: OffsetSyncsLocation
    offset_lag_max: int
    family: str | None = None  # topic family: one of several named flows of a pair
    carries_heartbeats: bool = True  # False for all but one family of a pair (heartbeats once per pair)
    on_refused_record: OnRefusedRecord = OnRefusedRecord.FAIL  # a record the target refuses: halt, or dead-letter it
    rate_limit: RateLimit = field(default_factory=RateLimit, metadata={SPEC_OMITS_DEFAULT: True})  # none: not paced

    def __post_init__(self) -> None:
        object.__setattr__(self, "on_refused_record", OnRefusedRecord(self.on_refused_record))

    @classmethod
    def of(cls, flow: FlowSettings) -> FlowSettings:
        """The settings of a flow, on their own (a Flow is its settings plus ends, switch, job and place)."""
        return FlowSettings(**{f.name: getattr(flow, f.name) for f in fields(FlowSettings)})


@dataclass(frozen=True, kw_only=True)
class Flow(FlowSettings):
    """A directed replication flow source -> target with its effective (defaults-merged) settings."""

    source: str
    target: str
    enabled: bool
    job: JobSettings
    where: SourceLocation | None = field(default=None, compare=False)

    @property
    def id(self) -> FlowId:
        return FlowId(self.source, self.target, self.family)

    @property
    def name(self) -> str:
        return str(self.id)

    @property
    def pair(self) -> str:
        return flow_name(self.source, self.target)

    @property
    def engine(self) -> str:
        """The engine (one Spark application) the flow runs in: `job.engine`, else one engine per target cluster,
        named after it (as Strimzi runs one KafkaMirrorMaker2 per target: "remote consume, local produce")."""
        return self.job.engine or self.target


@dataclass(frozen=True)
class ResidencyRule:
    """Topics matching `topics` may only be replicated to clusters whose tag `tag` is in `allowed`."""

    name: str
    topics: PatternFilter
    tag: str
    allowed: tuple[str, ...]
    where: SourceLocation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Prune:
    """Which kinds of deletion the topology allows. All off unless enabled explicitly."""

    topics: bool = False
    configs: bool = False
    acls: bool = False
    flows: bool = False


@dataclass(frozen=True)
class Slo:
    max_lag_records: int | None = None
    max_lag_seconds: float | None = None  # age of the oldest record not replicated yet
    max_heartbeat_age_seconds: float | None = None
    max_latency_p99_ms: float | None = None
    certificate_expiry_days: int = 30  # a client/CA certificate expiring within this many days is drift


def topology_title(name: str | None, environment: str | None) -> str:
    """What a plan or report is of, in words: `topology NAME, environment ENV` (each part only when known)."""
    parts = (f"topology {name}" if name else "", f"environment {environment}" if environment else "")
    return ", ".join(p for p in parts if p)


@dataclass(frozen=True)
class Topology:
    clusters: Mapping[str, Cluster]
    flows: tuple[Flow, ...]
    residency: tuple[ResidencyRule, ...] = ()
    prune: Prune = Prune()
    slo: Slo = Slo()
    name: str | None = None
    files: tuple[str, ...] = ()
    default_job: JobSettings | None = None  # `defaults: {job: ...}` merged: where jobs of removed flows were deployed
    #: sha256 of the documents as read (canonical JSON of each, sorted): what a saved plan was planned from
    #: (`reconciler.plan.planfile`); a comment or layout edit keeps it, any value changed does not
    content_digest: str = ""
    #: the environment the topology was resolved for (`--env`, topology/environments.py), and every environment it
    #: declares; None and () for a topology without `environments:`
    environment: str | None = None
    environments: tuple[str, ...] = ()
    #: who owns what it creates (`owner:`): its remote topics are claimed for it and its jobs carry it, and prune
    #: deletes only what it owns (docs/environments.md, "Ownership"); None: no owner
    owner: str | None = None

    def flow(self, name: str) -> Flow:
        return next(f for f in self.flows if f.name == name)

    @property
    def active_flows(self) -> tuple[Flow, ...]:
        return tuple(f for f in self.flows if f.enabled)
