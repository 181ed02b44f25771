"""Every flow setting, declared once (as Kafka's `ConfigDef` declares each key): its path in a topology's
`defaults:` / flow, type, built-in default, documentation, JSON Schema constraints, MirrorMaker 2 key (and which
of MM2's connectors reads it) and whether a running job takes a change without a restart. The topology-wide
settings `prune:` and `slo:` are declared here too (`TOPOLOGY_SETTINGS`, same `Setting`s: path, type, default,
doc, constraints).

Not settings, so not here: the structure of a topology, written by hand in the schema and the model: clusters
(their `bootstrap_servers`, librdkafka `config` with its security keys, `tags`, `replication_principal`), `flows`
and a flow's `name`, `source` and `target`, `policies` (residency rules) and `metadata`. They name and connect
things rather than tune them: no default, nothing to derive.

Each setting has one `Scope`: `flow` (the flow's own), `engine` (the engine's Spark application: the flows sharing
an engine agree on it, a change replaces the engine), `deployment` (the deployer's: agreed on, a change does not
replace the engine) or `topology` (`prune:`, `slo:`), and the `deployers` that read it. A choice setting takes its
values from one enum (`choice_enum`: topology/choices.py, mirror/policy.py, deployer_kinds.py).

Derived from `FLOW_SETTINGS` (nothing else declares these facts):

    topology/defaults.py     BUILTIN_FLOW_DEFAULTS (`builtin_defaults()`), at import time
    interop/mm2_keys.py      CONNECTOR_KEYS, the refresh and exactly-once keys, JOB_FIELD_KINDS, KEY_CONNECTORS (the
                             Strimzi connector each MM2 key goes to), PRUNE_KEYS and SLO_KINDS, at import time
    contract/spec.py         HOT_RELOADABLE (the spec paths of the `hot_reload` settings), at import time
    topology/build.py        the engine-agreement check (`agreed_job_fields`, from the scopes)
    contract/deployers.py    DEPLOYMENT_OPTION_FIELDS (`deployer_options`) and `replaces_engine` (`engine_spec_paths`,
                             `engine_options`), which the plan's engine replacements and the kubernetes deployer's
                             FILE_OPTIONS use; contract/engine.py's EngineRecord holds `engine_spec_paths()` (a test
                             says so)
    schemas/topology.schema.json   `$defs.flowSettings`, the settings of `$defs.flow`, `properties.prune` and
                             `properties.slo`, and what an environment overrides (`$defs.flowOverride`, the
                             `prune` and `slo` of `$defs.environment`)
    docs/reference/settings.md   the settings tables between its `settings-table` and `topology-settings-table` markers
        (both written by `python scripts/generate_settings.py`; tests/unit/test_settings_registry.py fails
        when either is stale)

Checked against it by tests/unit/test_settings_registry.py, naming the setting that is missing:
the model (`JobSettings`'s fields, the `JobSpec` leaves of `FlowSettings`/`RuntimeSettings`, `Prune`'s and `Slo`'s
fields) and the parsing of topology/build.py (a topology setting each one to a non-default value must change that
value in the model).
"""

from __future__ import annotations

import builtins
import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.deployer_kinds import DEFAULT_DEPLOYER, PROCESS_DEPLOYERS, DeployerKind
from reconciler.mirror.filters import DEFAULT_CONFIG_PROPERTY_EXCLUDES
from reconciler.mirror.policy import PolicyKind
from reconciler.topology.choices import (
    OFFSET_RESET_ALIASES,
    Delivery,
    HeartbeatsLocation,
    OffsetReset,
    OffsetSyncsLocation,
    OnRefusedRecord,
)
from reconciler.topology.k8s_names import IP_ADDRESS, LABEL_SCHEMA, SUBDOMAIN_SCHEMA


class Type(str, enum.Enum):
    """A setting's type: its JSON Schema base and how MirrorMaker 2 spells its values."""

    BOOL = "bool"
    INT = "int"
    SECONDS = "seconds"  # a positive number of seconds
    NUMBER = "number"  # a number (its bounds in `Setting.constraints`)
    STRING = "string"
    CHOICE = "choice"  # one of `Setting.choices`
    PATTERNS = "patterns"  # a list of full-match regular expressions (non-empty strings)
    STRINGS = "strings"  # a list of strings
    MAPPING = "mapping"  # string keys, scalar values (spark_conf)


class Scope(enum.StrEnum):
    """What a setting belongs to: each setting has exactly one scope, and every list of engine or deployment
    settings (the engine-agreement check, the deployers' options, what replaces an engine) is derived from it."""

    FLOW = "flow"  # one flow's: the flows of one engine may differ in it; a change restarts or reloads that flow
    #: the engine's Spark application's (one per engine, reconciler.engine.host): every flow sharing the engine
    #: must agree on it, and a change replaces the engine (every flow of it restarts)
    ENGINE = "engine"
    #: the deployer's: which one, the engine's name and where its files go; not the application's (a change moves the
    #: flow or rewrites files, it does not replace the engine), and the flows sharing an engine agree on it
    DEPLOYMENT = "deployment"
    TOPOLOGY = "topology"  # the topology's, given once (`prune:`, `slo:`): no job runs with it


ALL_DEPLOYERS: tuple[DeployerKind, ...] = tuple(DeployerKind)
_PROCESS = tuple(d for d in DeployerKind if d in PROCESS_DEPLOYERS)
_KUBERNETES = (DeployerKind.KUBERNETES,)


def _values(choices: type[enum.Enum]) -> tuple[str, ...]:
    return tuple(str(m.value) for m in choices)


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


#: A setting with no built-in default: absent from BUILTIN_FLOW_DEFAULTS (not the same as a default of None).
NO_DEFAULT: Any = _NoDefault()

#: `Setting.spec` when it follows the rule: "settings.<dotted path>", or "engine.<name>" for `job.<name>`.
SPEC_BY_PATH = "by path"


class Connector(str, enum.Enum):
    """A MirrorMaker 2 connector, as Strimzi configures each one of a mirror (`sourceConnector`, ...)."""

    SOURCE = "source"
    CHECKPOINT = "checkpoint"
    HEARTBEAT = "heartbeat"


SOURCE_ONLY = (Connector.SOURCE,)
ALL_CONNECTORS = tuple(Connector)


@dataclass(frozen=True)
class Mm2:
    """The MirrorMaker 2 key a setting maps to (import and export, reconciler.interop)."""

    key: str
    default: Any  # MM2's own default, in our setting's terms (tuples for lists)
    legacy: tuple[str, ...] = ()  # older spellings MM2 still reads (topics.blacklist, ...)
    kind: str | None = None  # a conversion other than the type's ("policy": class names, "location")
    also: tuple[str, ...] = ()  # further MM2 keys this one setting stands for
    own_code: bool = False  # mapped by interop code of its own (exactly-once, the two refresh intervals)
    connectors: tuple[Connector, ...] = SOURCE_ONLY  # the MM2 connectors `key` is given to (Strimzi export)
    also_connectors: tuple[Connector, ...] | None = None  # those the `also` keys are given to; None: `connectors`

    @property
    def keys(self) -> tuple[str, ...]:
        return (self.key, *self.also)

    def connectors_of(self, key: str) -> tuple[Connector, ...]:
        """The connectors MM2 key `key` (one of `keys`) is given to."""
        if key in self.also and self.also_connectors is not None:
            return self.also_connectors
        return self.connectors


@dataclass(frozen=True)
class Setting:
    path: tuple[str, ...]  # in a topology's `defaults:` or flow: ("heartbeats", "interval_seconds")
    type: Type
    default: Any  # built-in default (tuples for lists); NO_DEFAULT: none
    doc: str
    hot_reload: bool  # a running job applies a change on the fly (else the change restarts it); False for prune/slo
    mm2: Mm2 | None = None
    choice_enum: builtins.type[enum.Enum] | None = None  # Type.CHOICE: its values (topology/choices.py)
    choice_aliases: tuple[str, ...] = ()  # Type.CHOICE: older spellings still taken (`offset_reset: earliest`)
    constraints: Mapping[str, Any] = field(default_factory=dict)  # JSON Schema keywords besides the type's
    nullable: bool = False  # null is a valid value (JSON Schema type [t, "null"])
    examples: tuple[Any, ...] = ()  # shown by editors (the schema's `examples`)
    spec: str | None = SPEC_BY_PATH  # its JobSpec leaf ("settings.offset_lag_max"); None: not in the spec (prune/slo)
    flow_only: bool = False  # set on a flow, not in `defaults:` (`enabled`)
    scope: Scope = field(kw_only=True)  # exactly one (`Scope`), always declared: no default
    deployers: tuple[DeployerKind, ...] = ALL_DEPLOYERS  # the deployers that read it (job.image: kubernetes only)

    @property
    def name(self) -> str:
        return ".".join(self.path)

    @property
    def choices(self) -> tuple[str, ...]:
        """Type.CHOICE: the values it takes, from its enum, then the older spellings."""
        return (_values(self.choice_enum) if self.choice_enum is not None else ()) + self.choice_aliases

    @property
    def spec_path(self) -> str | None:
        if self.spec != SPEC_BY_PATH:
            return self.spec
        if self.path[0] == "job":
            return "engine." + ".".join(self.path[1:])
        return "settings." + self.name

    def json_schema(self) -> dict[str, Any]:
        """The setting's JSON Schema (without the `default`/`examples`/`description` annotations)."""
        bases: dict[Type, dict[str, Any]] = {
            Type.BOOL: {"type": "boolean"},
            Type.INT: {"type": "integer"},
            Type.SECONDS: {"type": "number", "exclusiveMinimum": 0},
            Type.NUMBER: {"type": "number"},
            Type.STRING: {"type": "string"},
            Type.CHOICE: {"enum": list(self.choices)},
            Type.PATTERNS: {"type": "array", "items": {"type": "string", "minLength": 1}},
            Type.STRINGS: {"type": "array", "items": {"type": "string"}},
            Type.MAPPING: {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}},
        }
        base = bases[self.type]
        if self.nullable:
            base = {**base, "type": [base["type"], "null"]}
        return {**base, **self.constraints}


def _s(path: str, type_: Type, default: Any, doc: str, *, hot: bool, scope: Scope, **more: Any) -> Setting:
    return Setting(tuple(path.split(".")), type_, default, doc, hot, scope=scope, **more)


ANY = (".*",)
NAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9_-]*$"
_KUBE = " (kubernetes deployer)"

#: The flow settings, in the order of the built-in defaults, the schema and the README table.
FLOW_SETTINGS: tuple[Setting, ...] = (
    _s(
        "enabled",
        Type.BOOL,
        True,
        "false keeps the flow in the file but stops its replication job (no prune needed: nothing is deleted, its "
        "remote topics stay). Removing a flow from the file stops its job only with prune.flows.",
        hot=False,
        spec=None,
        flow_only=True,
        scope=Scope.FLOW,
    ),
    _s(
        "topics.include",
        Type.PATTERNS,
        ANY,
        "Full-match regular expressions of the source topics to replicate.",
        hot=True,
        mm2=Mm2("topics", ANY),
        examples=(["orders\\..*", "payments"],),
        scope=Scope.FLOW,
    ),
    _s(
        "topics.exclude",
        Type.PATTERNS,
        (),
        "Full-match regular expressions of source topics not to replicate (MirrorMaker 2's built-in excludes apply "
        "too).",
        hot=True,
        mm2=Mm2("topics.exclude", (), legacy=("topics.blacklist",)),
        examples=([".*\\.tmp", ".*-staging"],),
        scope=Scope.FLOW,
    ),
    _s(
        "topics.builtin_exclude",
        Type.STRINGS,
        NO_DEFAULT,
        "Replaces MirrorMaker 2's built-in excludes (topics: `.*[\\-\\.]internal`, `.*\\.replica`, `__.*`), which "
        "otherwise apply on top of `exclude`; `[]` removes them (as setting `topics.exclude` does in Kafka). Internal "
        "topics are never replicated whatever this says.",
        hot=True,
        scope=Scope.FLOW,
    ),
    _s(
        "groups.include",
        Type.PATTERNS,
        ANY,
        "Full-match regular expressions of the consumer groups to checkpoint and offset-sync.",
        hot=True,
        mm2=Mm2("groups", ANY),
        examples=(["billing-.*"],),
        scope=Scope.FLOW,
    ),
    _s(
        "groups.exclude",
        Type.PATTERNS,
        (),
        "Full-match regular expressions of consumer groups to leave alone (MirrorMaker 2's built-in excludes apply "
        "too).",
        hot=True,
        mm2=Mm2("groups.exclude", (), legacy=("groups.blacklist",)),
        examples=(["console-consumer-.*"],),
        scope=Scope.FLOW,
    ),
    _s(
        "groups.builtin_exclude",
        Type.STRINGS,
        NO_DEFAULT,
        "Replaces MirrorMaker 2's built-in excludes (groups: `console-consumer-.*`, `connect-.*`, `__.*`), which "
        "otherwise apply on top of `exclude`; `[]` removes them (as setting `groups.exclude` does in Kafka). Internal "
        "topics are never replicated whatever this says.",
        hot=True,
        scope=Scope.FLOW,
    ),
    _s(
        "policy",
        Type.CHOICE,
        PolicyKind.DEFAULT.value,
        "Replication policy: `default` names remote topics `<source-alias><separator><topic>`; `identity` keeps "
        "names (KIP-690, cycles forbidden).",
        hot=False,
        choice_enum=PolicyKind,
        mm2=Mm2("replication.policy.class", "default", kind="policy", connectors=ALL_CONNECTORS),
        spec="settings.policy.kind",
        scope=Scope.FLOW,
    ),
    _s(
        "separator",
        Type.STRING,
        ".",
        "Separator of the default policy (MM2 `replication.policy.separator`).",
        hot=False,
        constraints={"minLength": 1},
        mm2=Mm2("replication.policy.separator", ".", connectors=ALL_CONNECTORS),
        examples=("_",),
        spec="settings.policy.separator",
        scope=Scope.FLOW,
    ),
    _s(
        "internal_separator",
        Type.BOOL,
        True,
        "Build MM2's internal topic names (`<alias><sep>checkpoints<sep>internal`, "
        "`mm2-offset-syncs<sep><alias><sep>internal`) with `separator`, as Kafka does by default "
        "(`replication.policy.internal.topic.separator.enabled`); false always uses `.`.",
        hot=False,
        mm2=Mm2("replication.policy.internal.topic.separator.enabled", True, connectors=ALL_CONNECTORS),
        spec="settings.policy.internal_separator",
        scope=Scope.FLOW,
    ),
    _s(
        "delivery",
        Type.CHOICE,
        Delivery.AT_LEAST_ONCE.value,
        "Delivery guarantee (exactly-once: KIP-656 transactional sink).",
        hot=False,
        choice_enum=Delivery,
        mm2=Mm2("exactly.once.support", "at-least-once", own_code=True),
        scope=Scope.FLOW,
    ),
    _s(
        "replication_factor",
        Type.INT,
        -1,
        "Replication factor of topics created on the target; -1 = broker default.",
        hot=True,
        constraints={"minimum": -1, "not": {"const": 0}},
        mm2=Mm2("replication.factor", 2),
        examples=(3,),
        scope=Scope.FLOW,
    ),
    _s(
        "config_properties.exclude",
        Type.PATTERNS,
        DEFAULT_CONFIG_PROPERTY_EXCLUDES,
        "Full-match regular expressions of topic config names not copied to remote topics (default: MirrorMaker 2's "
        "list).",
        hot=True,
        mm2=Mm2("config.properties.exclude", DEFAULT_CONFIG_PROPERTY_EXCLUDES, legacy=("config.properties.blacklist",)),
        scope=Scope.FLOW,
    ),
    _s(
        "sync.topic_configs",
        Type.BOOL,
        True,
        "Copy source topic configs (filtered) to remote topics.",
        hot=True,
        mm2=Mm2("sync.topic.configs.enabled", True),
        scope=Scope.FLOW,
    ),
    _s(
        "sync.acls",
        Type.BOOL,
        True,
        "Sync READ ACLs to remote topics; only the replication principal may WRITE them.",
        hot=True,
        mm2=Mm2("sync.topic.acls.enabled", True),
        scope=Scope.FLOW,
    ),
    _s(
        "sync.group_offsets",
        Type.BOOL,
        False,
        "Commit translated consumer-group offsets on the target (MM2 `sync.group.offsets.enabled`).",
        hot=True,
        mm2=Mm2("sync.group.offsets.enabled", False, connectors=(Connector.CHECKPOINT,)),
        scope=Scope.FLOW,
    ),
    _s(
        "sync.group_offsets_interval_seconds",
        Type.SECONDS,
        60,
        "How often translated consumer-group offsets are committed on the target.",
        hot=True,
        mm2=Mm2("sync.group.offsets.interval.seconds", 60, connectors=(Connector.CHECKPOINT,)),
        scope=Scope.FLOW,
    ),
    _s(
        "heartbeats.enabled",
        Type.BOOL,
        True,
        "Emit heartbeats at all.",
        hot=True,
        mm2=Mm2("emit.heartbeats.enabled", True, connectors=(Connector.HEARTBEAT,)),
        scope=Scope.FLOW,
    ),
    _s(
        "heartbeats.interval_seconds",
        Type.SECONDS,
        10,
        "How often heartbeats are emitted.",
        hot=True,
        mm2=Mm2("emit.heartbeats.interval.seconds", 1, connectors=(Connector.HEARTBEAT,)),
        scope=Scope.FLOW,
    ),
    _s(
        "heartbeats.location",
        Type.CHOICE,
        HeartbeatsLocation.SOURCE.value,
        "Where a flow writes its `heartbeats` records: `source` (KIP-382's text; the flow then replicates them to "
        "`<source>.heartbeats` on the target) or `target` (Kafka's MirrorHeartbeatConnector). See "
        "docs/mm2-differences.md.",
        hot=False,
        choice_enum=HeartbeatsLocation,
        scope=Scope.FLOW,
    ),
    _s(
        "heartbeats.replicate",
        Type.BOOL,
        True,
        "Always replicate heartbeat topics whatever the topic filter says (MM2 `heartbeats.replication.enabled`, "
        "default true); false leaves them to the topic filter.",
        hot=False,
        mm2=Mm2("heartbeats.replication.enabled", True),
        scope=Scope.FLOW,
    ),
    _s(
        "checkpoints.enabled",
        Type.BOOL,
        True,
        "Emit checkpoints at all.",
        hot=True,
        mm2=Mm2("emit.checkpoints.enabled", True, connectors=(Connector.CHECKPOINT,)),
        scope=Scope.FLOW,
    ),
    _s(
        "checkpoints.interval_seconds",
        Type.SECONDS,
        10,
        "How often checkpoints are emitted.",
        hot=True,
        mm2=Mm2("emit.checkpoints.interval.seconds", 60, connectors=(Connector.CHECKPOINT,)),
        scope=Scope.FLOW,
    ),
    _s(
        "refresh_interval_seconds",
        Type.SECONDS,
        10,
        "How often a running job looks for new topics, partitions, groups and spec changes.",
        hot=True,
        mm2=Mm2(
            "refresh.topics.interval.seconds",
            600,
            also=("refresh.groups.interval.seconds",),
            own_code=True,
            also_connectors=(Connector.CHECKPOINT,),
        ),  # our one interval stands for both of MM2's: topics (source connector), groups (checkpoint connector)
        scope=Scope.FLOW,
    ),
    _s(
        "offset_syncs.topic_location",
        Type.CHOICE,
        OffsetSyncsLocation.SOURCE.value,
        "Cluster holding mm2-offset-syncs.<target>.internal (MM2 `offset-syncs.topic.location`).",
        hot=False,
        choice_enum=OffsetSyncsLocation,
        # the source connector writes the offset syncs there, the checkpoint connector reads them there
        mm2=Mm2(
            "offset-syncs.topic.location",
            "source",
            kind="location",
            connectors=(Connector.SOURCE, Connector.CHECKPOINT),
        ),
        spec="settings.offset_syncs_location",
        scope=Scope.FLOW,
    ),
    _s(
        "offset_syncs.lag_max",
        Type.INT,
        100,
        "MM2 `offset.lag.max`: emit a sync at least every N records.",
        hot=True,
        constraints={"minimum": 0},
        mm2=Mm2("offset.lag.max", 100),
        spec="settings.offset_lag_max",
        scope=Scope.FLOW,
    ),
    _s(
        "on_refused_record",
        Type.CHOICE,
        OnRefusedRecord.FAIL.value,
        "A source record the target refuses (larger than the remote topic's `max.message.bytes` or the job's "
        "producer `message.max.bytes`; any record the target answers MSG_SIZE_TOO_LARGE or INVALID_RECORD): `fail` "
        "halts its partition at that record (the flow degraded, the records before it copied); `skip` writes a "
        "reference to it (key, headers, source topic/partition/offset and the error; no value) to "
        "`<source-alias>.dead-letters.internal` on the target and copies on. Never retried forever. See "
        "docs/replication-job.md.",
        hot=True,
        choice_enum=OnRefusedRecord,
        scope=Scope.FLOW,
    ),
    _s(
        "rate_limit.records_per_second",
        Type.NUMBER,
        None,
        "The most records a second the flow copies: its total over all its partitions and tasks (a batch's tasks "
        "share it by their backlog); unset: no cap. The plan warns when the flow's backlog at this rate would outlive "
        'a source topic\'s `retention.ms`. See docs/replication-job.md, "Rate limits".',
        hot=True,
        nullable=True,
        constraints={"exclusiveMinimum": 0},
        examples=(20000,),
        scope=Scope.FLOW,
    ),
    _s(
        "rate_limit.bytes_per_second",
        Type.NUMBER,
        None,
        "The most bytes (keys and values) a second the flow copies, its total over all its partitions and tasks; "
        "unset: no cap. With `records_per_second` too, the tighter of the two holds.",
        hot=True,
        nullable=True,
        constraints={"exclusiveMinimum": 0},
        examples=(10485760,),
        scope=Scope.FLOW,
    ),
    _s(
        "job.deployer",
        Type.CHOICE,
        DEFAULT_DEPLOYER.value,
        "Where the job runs: a local process, a Spark standalone cluster or Kubernetes (the Spark operator).",
        hot=False,
        choice_enum=DeployerKind,
        spec=None,
        scope=Scope.DEPLOYMENT,
    ),
    _s(
        "job.master",
        Type.STRING,
        "local[2]",
        "Spark master URL, e.g. local[2] or spark://host:7077.",
        hot=False,
        examples=("local[4]", "spark://spark-master:7077"),
        scope=Scope.ENGINE,
    ),
    _s(
        "job.parallelism",
        Type.INT,
        2,
        "Spark tasks per micro-batch.",
        hot=False,
        constraints={"minimum": 1},
        mm2=Mm2("tasks.max", 1),
        scope=Scope.FLOW,
    ),
    # Long tasks: one Spark job (~0.25 s between tasks, where records wait) per 10 s of copying; a graceful stop
    # or a spec reload waits for the running task (docs/replication-job.md, "Tasks, rounds"). The time budget
    # (`job.max_batch_ms`) ends a task; the record budget only a partition copied faster than 500,000 records/s (at
    # 1,000,000 a hot partition's task ended every ~2.5 s and its copy stood still 0.3-1.4 s between two: issue 47).
    _s(
        "job.max_records_per_partition",
        Type.INT,
        5000000,
        "Records one partition task copies per micro-batch.",
        hot=True,
        constraints={"minimum": 1},
        scope=Scope.FLOW,
    ),
    _s(
        "job.max_batch_ms",
        Type.INT,
        10000,
        "Time budget of one Spark task: it copies in rounds for this long (or until its partitions are idle or "
        "their record budget is spent). Longer tasks copy faster (one Spark job per task) and keep records waiting "
        "less often; a graceful stop or a spec change waits for the running task.",
        hot=True,
        constraints={"minimum": 100},
        scope=Scope.FLOW,
    ),
    _s(
        "job.offset_reset",
        Type.CHOICE,
        OffsetReset.RESUME.value,
        "What the job does when the source lost the records at a partition's next offset (each loss is reported in "
        "status, drift and the metrics whatever this says): `resume` resumes where nothing the source still holds is "
        "skipped and nothing is copied twice where that can be told (the log end when the job saw the broker lose "
        "its acknowledged tail, so the offsets it gives new records are copied; else the log start: retention "
        "passed the position, the topic was recreated, or a position past the end seen first after a restart, "
        "copied again rather than skipped); `resume-at-start` / `resume-at-end` always there; `pause` halts the partition (the flow degraded); "
        "`fail` stops the job. `earliest` and `halt` are the older names of `resume-at-start` and `pause`. MirrorMaker "
        "2 has no such choice: it forces the consumer's auto.offset.reset.",
        hot=True,
        choice_enum=OffsetReset,
        choice_aliases=tuple(OFFSET_RESET_ALIASES),
        scope=Scope.FLOW,
    ),
    _s(
        "job.trigger_interval_ms",
        Type.INT,
        200,
        "Pause between empty micro-batches.",
        hot=True,
        constraints={"minimum": 0},
        scope=Scope.FLOW,
    ),
    _s(
        "job.spark_conf",
        Type.MAPPING,
        {},
        "Spark configuration of the job's application (`spark.executor.memory`, ...).",
        hot=False,
        examples=({"spark.executor.memory": "2g"},),
        scope=Scope.ENGINE,
    ),
    _s(
        "job.namespace",
        Type.STRING,
        "default",
        "Kubernetes namespace" + _KUBE + "; a DNS-1123 label (docs/security.md).",
        hot=False,
        constraints=LABEL_SCHEMA,
        spec=None,
        scope=Scope.ENGINE,
        deployers=_KUBERNETES,
    ),
    _s(
        "job.image",
        Type.STRING,
        None,
        "Container image" + _KUBE + ".",
        hot=False,
        examples=("ghcr.io/example/reconciler-job:0.1.0",),
        spec=None,
        scope=Scope.ENGINE,
        deployers=_KUBERNETES,
    ),
    _s(
        "job.service_account",
        Type.STRING,
        "spark-operator-spark",  # the kubeflow spark-operator chart's, release spark-operator
        "Service account of the Spark driver pod" + _KUBE + "; a DNS-1123 subdomain, not the namespace's `default` "
        "(docs/security.md).",
        hot=False,
        constraints=SUBDOMAIN_SCHEMA,
        spec=None,
        scope=Scope.ENGINE,
        deployers=_KUBERNETES,
    ),
    _s(
        "job.secret_name",
        Type.STRING,
        "reconciler-secrets",
        "Kubernetes Secret holding the ${ENV_VAR}s the job spec references, one key per variable" + _KUBE + "; a "
        "DNS-1123 subdomain.",
        hot=False,
        constraints=SUBDOMAIN_SCHEMA,
        spec=None,
        scope=Scope.ENGINE,
        deployers=_KUBERNETES,
    ),
    _s(
        "job.manifests_dir",
        Type.STRING,
        None,
        "Directory the SparkApplication manifests are rendered into, for a GitOps controller (kubernetes deployer; "
        "default $RECONCILER_STATE_DIR/k8s).",
        hot=False,
        spec=None,
        scope=Scope.DEPLOYMENT,
        deployers=_KUBERNETES,
    ),
    _s(
        "job.kubectl_apply",
        Type.BOOL,
        False,
        "Also apply the rendered manifests with kubectl" + _KUBE + ".",
        hot=False,
        spec=None,
        scope=Scope.DEPLOYMENT,
        deployers=_KUBERNETES,
    ),
    _s(
        "job.metrics_port",
        Type.INT,
        None,
        "Port the job serves Prometheus metrics on (docs/monitoring.md); unset: the deployer picks (local: a free "
        "port, shown by `reconciler status`; kubernetes: 9404), 0: no metrics.",
        hot=False,
        nullable=True,
        constraints={"minimum": 0, "maximum": 65535},
        spec=None,
        scope=Scope.ENGINE,
    ),
    _s(
        "job.metrics_bind",
        Type.STRING,
        None,
        "Address the job's /metrics listens on (it has no authentication: docs/security.md); unset: 127.0.0.1, this "
        "machine only (local, spark-standalone), 0.0.0.0 on kubernetes (the pod network, where Prometheus scrapes "
        "the pod; the kubernetes deployer ignores the setting). 0.0.0.0 opens it on every interface.",
        hot=False,
        nullable=True,
        constraints={"pattern": IP_ADDRESS},
        examples=("0.0.0.0",),
        spec=None,
        scope=Scope.ENGINE,
        deployers=_PROCESS,
    ),
    _s(
        "job.termination_grace_seconds",
        Type.INT,
        60,
        "Seconds Kubernetes gives the job's pods to stop after SIGTERM (a node drain, an upgrade, a resubmission) "
        "before it kills them: the pods' terminationGracePeriodSeconds" + _KUBE + ".",
        hot=False,
        constraints={"minimum": 1},
        spec=None,
        scope=Scope.ENGINE,
        deployers=_KUBERNETES,
    ),
    _s(
        "job.engine",
        Type.STRING,
        None,  # the flow's target alias: one engine per target cluster (Flow.engine)
        "The engine (one Spark application) the flow runs in with the other flows of that name (docs/engines.md); "
        "unset: the flow's target cluster alias, one engine per target cluster.",
        hot=False,
        nullable=True,
        constraints={"pattern": NAME_PATTERN},
        spec=None,
        scope=Scope.DEPLOYMENT,
    ),
)

#: The documentation of the settings' sections (a section is an object of settings in the schema).
SECTIONS: dict[str, str | None] = {
    "topics": "Source topics to replicate (MM2 `topics` / `topics.exclude`). Default: include ['.*'].",
    "groups": "Consumer groups to checkpoint and offset-sync (MM2 `groups` / `groups.exclude`). Default: include "
    "['.*'].",
    "config_properties": "Which topic configs are copied to remote topics.",
    "sync": "What besides records is kept in sync.",
    "heartbeats": "Heartbeats (MM2 `emit.heartbeats`).",
    "checkpoints": "Checkpoints (MM2 `emit.checkpoints`).",
    "offset_syncs": None,
    "rate_limit": "A cap on the flow's copy rate, so that a backfill neither starves the source's other consumers nor "
    "fills the link: the engine paces the flow's tasks to it. Default: none.",
    "job": "Where and how the replication job runs.",
    "prune": "Deletions the reconciler may make. Everything is off by default: nothing is deleted unless enabled here.",
    "slo": "Thresholds for drift reports.",
}


def _t(path: str, type_: Type, default: Any, doc: str, **more: Any) -> Setting:
    """A topology-wide setting: no job runs with it (not hot-reloadable, not in the job spec), no MM2 key."""
    return Setting(
        tuple(path.split(".")), type_, default, doc, hot_reload=False, spec=None, scope=Scope.TOPOLOGY, **more
    )


_UNSET = "; unset: no threshold."

#: The topology-wide settings (`prune:`, `slo:`, each given once per topology), in the order of the schema and
#: the README table. Their model: `Prune` and `Slo` (topology/model.py), one field per setting of the section.
TOPOLOGY_SETTINGS: tuple[Setting, ...] = (
    _t("prune.topics", Type.BOOL, False, "Delete remote topics no flow wants any more."),
    _t("prune.configs", Type.BOOL, False, "Remove remote-topic configs the source no longer sets."),
    _t("prune.acls", Type.BOOL, False, "Delete synced ACLs no longer wanted."),
    _t("prune.flows", Type.BOOL, False, "Stop jobs of flows removed from the topology."),
    _t(
        "slo.max_lag_records",
        Type.INT,
        None,
        "Records a flow's job may be behind (its partitions' lag, summed) before `drift` and the alert rules report "
        "it" + _UNSET,
        constraints={"minimum": 0},
    ),
    _t(
        "slo.max_lag_seconds",
        Type.SECONDS,
        None,
        "Age in seconds of the oldest source record a flow's job has not replicated yet beyond which `drift` and "
        "the alert rules report it" + _UNSET,
    ),
    _t(
        "slo.max_heartbeat_age_seconds",
        Type.SECONDS,
        None,
        "Age in seconds of the newest heartbeat of a flow on its target beyond which `drift` and the alert rules "
        "report it and `failover` marks it STALE" + _UNSET,
    ),
    _t(
        "slo.max_latency_p99_ms",
        Type.NUMBER,
        None,
        "p99 record age in milliseconds (source timestamp to the target's acknowledgement, backlog included) "
        "beyond which `drift` and the alert rules report the flow" + _UNSET,
        constraints={"exclusiveMinimum": 0},
    ),
    _t(
        "slo.certificate_expiry_days",
        Type.INT,
        30,
        "Days before a cluster's client or CA certificate (`ssl.certificate.location`, `ssl.ca.location`, "
        "`ssl.certificate.pem`, `ssl.ca.pem`) expires from which `drift` reports it (an expired one always is); "
        '0: only expired ones (docs/security.md, "Certificate expiry").',
        constraints={"minimum": 0},
    ),
)

#: The top-level sections of the topology settings, in order (`prune`, `slo`).
TOPOLOGY_SECTIONS: tuple[str, ...] = tuple(dict.fromkeys(s.path[0] for s in TOPOLOGY_SETTINGS))

#: JobSpec leaves that are no topology setting: what the reconciler derives (topic family, heartbeat carrier, the
#: policy's source alias), the engine settings it fixes and the topology's owner. The status interval and the owner
#: are hot-reloadable.
SPEC_ONLY_LEAVES: tuple[str, ...] = (
    "settings.family",
    "settings.carries_heartbeats",
    "settings.policy.source_cluster_alias",
    "engine.status_interval_seconds",
    "owner",
)
SPEC_ONLY_HOT_RELOADABLE: frozenset[str] = frozenset({"engine.status_interval_seconds", "owner"})

BY_NAME: dict[str, Setting] = {s.name: s for s in FLOW_SETTINGS}
TOPOLOGY_BY_NAME: dict[str, Setting] = {s.name: s for s in TOPOLOGY_SETTINGS}


def setting(name: str) -> Setting:
    """The setting `name` ("heartbeats.interval_seconds")."""
    return BY_NAME[name]


def _json_value(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_json_value(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _json_value(v) for k, v in value.items()}
    return value


def builtin_defaults() -> dict[str, Any]:
    """The built-in defaults as a topology's nested `defaults:` would write them (a new copy each call)."""
    out: dict[str, Any] = {}
    for s in FLOW_SETTINGS:
        if s.default is NO_DEFAULT:
            continue
        node = out
        for part in s.path[:-1]:
            node = node.setdefault(part, {})
        node[s.path[-1]] = _json_value(s.default)
    return out


def hot_reloadable_spec_paths() -> frozenset[str]:
    """The JobSpec leaves of the settings a running job takes without a restart."""
    return frozenset(s.spec_path for s in FLOW_SETTINGS if s.hot_reload and s.spec_path is not None)


def mm2_settings() -> Iterator[Setting]:
    return (s for s in FLOW_SETTINGS if s.mm2 is not None)


def section_settings(section: str) -> tuple[Setting, ...]:
    """The topology settings of the top-level section `section` ("prune", "slo")."""
    return tuple(s for s in TOPOLOGY_SETTINGS if s.path[0] == section)


# --- scopes: every list of engine or deployment settings, derived ---------------------------------------------------
#: The setting that picks the deployer (a deployment setting, but no option of the deployer it picks).
DEPLOYER_SETTING = "job.deployer"


def scoped(scope: Scope, deployers: Iterable[str] | None = None) -> tuple[Setting, ...]:
    """The flow settings of `scope`, in the registry's order; those one of `deployers` reads (None: any)."""
    wanted = None if deployers is None else set(deployers)
    return tuple(
        s for s in FLOW_SETTINGS if s.scope is scope and (wanted is None or any(d in wanted for d in s.deployers))
    )


def engine_spec_paths() -> tuple[str, ...]:
    """The JobSpec paths of the engine's settings that the job spec carries ("engine.master", "engine.spark_conf"):
    what an engine's `EngineRecord` holds besides its name (contract/engine.py); a change replaces the engine."""
    return tuple(s.spec_path for s in scoped(Scope.ENGINE) if s.spec_path is not None)


def deployer_options(deployer: str) -> tuple[str, ...]:
    """The `JobSettings` fields handed to `deployer` beside the job spec (not in it, so not in its hash): the engine
    and deployment settings it reads that the spec does not carry, but `job.deployer` (which picks it)."""
    return tuple(
        s.path[-1]
        for s in FLOW_SETTINGS
        if s.scope in (Scope.ENGINE, Scope.DEPLOYMENT)
        and s.spec_path is None
        and s.name != DEPLOYER_SETTING
        and deployer in s.deployers
    )


def engine_options(deployer: str) -> frozenset[str]:
    """Of `deployer_options(deployer)`, the engine's (its application's): a change of one replaces the engine; a
    change of any other moves the flow or rewrites the deployer's files."""
    return frozenset(s.path[-1] for s in scoped(Scope.ENGINE, (deployer,)) if s.spec_path is None)


def agreed_job_fields(deployers: Iterable[str]) -> tuple[str, ...]:
    """The `JobSettings` fields the enabled flows of one engine must agree on when they use `deployers`: every engine
    and deployment setting one of them reads (one Spark application, deployed once, runs them all)."""
    wanted = set(deployers)
    return tuple(
        s.path[-1]
        for s in FLOW_SETTINGS
        if s.scope in (Scope.ENGINE, Scope.DEPLOYMENT) and any(d in wanted for d in s.deployers)
    )
