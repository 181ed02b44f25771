"""The MirrorMaker 2 keys we map, with MM2's own defaults (apache/kafka connect/mirror, 3.x), in one
table read by both directions: import (`mm2_import`) and export (`mm2_export`, `strimzi`). The keys of flow
settings are declared with their setting (topology/settings_registry.py) and derived from it here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from reconciler.interop.draft import Setting
from reconciler.mirror.filters import GroupFilter, TopicFilter
from reconciler.mirror.policy import PolicyKind
from reconciler.topology import settings_registry as registry


class Kind(str, enum.Enum):
    LIST = "list"  # comma-separated (MM2 ConfigDef LIST: split on ',', trimmed)
    BOOL = "bool"
    INT = "int"
    SECONDS = "seconds"  # a positive number of seconds
    NUMBER = "number"
    STRING = "string"
    POLICY = "policy"  # replication.policy.class
    LOCATION = "location"  # offset-syncs.topic.location


@dataclass(frozen=True)
class Mm2Key:
    key: str
    setting: Setting
    kind: Kind
    mm2_default: Any  # MM2's default, in our setting's terms
    legacy: tuple[str, ...] = ()  # older spellings MM2 still reads (topics.blacklist, ...)

    @property
    def spellings(self) -> tuple[str, ...]:
        return (self.key,) + self.legacy


DEFAULT_POLICY_CLASS = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY_CLASS = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
#: Strimzi's own identity policy, from before Kafka had one (Kafka 3.0, KIP-382's follow-up); same behaviour.
STRIMZI_IDENTITY_POLICY_CLASS = "io.strimzi.kafka.connect.mirror.IdentityReplicationPolicy"
POLICY_CLASSES = {
    DEFAULT_POLICY_CLASS: PolicyKind.DEFAULT.value,
    "DefaultReplicationPolicy": PolicyKind.DEFAULT.value,
    IDENTITY_POLICY_CLASS: PolicyKind.IDENTITY.value,
    STRIMZI_IDENTITY_POLICY_CLASS: PolicyKind.IDENTITY.value,
    "IdentityReplicationPolicy": PolicyKind.IDENTITY.value,
}
POLICY_KINDS: tuple[str, ...] = registry.setting("policy").choices


def _kind(s: registry.Setting) -> Kind:
    """How MM2 spells the setting's values: its own conversion, else its type's."""
    if s.mm2 is not None and s.mm2.kind is not None:
        return Kind(s.mm2.kind)
    return {
        registry.Type.PATTERNS: Kind.LIST,
        registry.Type.STRINGS: Kind.LIST,
        registry.Type.BOOL: Kind.BOOL,
        registry.Type.INT: Kind.INT,
        registry.Type.SECONDS: Kind.SECONDS,
        registry.Type.NUMBER: Kind.NUMBER,
    }.get(s.type, Kind.STRING)


def _mm2(name: str) -> registry.Mm2:
    mm2 = registry.setting(name).mm2
    assert mm2 is not None, name
    return mm2


#: Connector-level keys: MM2 reads them at the top level or per flow (`A->B.key`, which wins). Derived from the
#: settings registry (topology/settings_registry.py: each setting's `mm2`).
CONNECTOR_KEYS: tuple[Mm2Key, ...] = tuple(
    Mm2Key(s.mm2.key, s.path, _kind(s), s.mm2.default, s.mm2.legacy)
    for s in registry.mm2_settings()
    if s.mm2 is not None and not s.mm2.own_code
)
BY_SPELLING = {s: k for k in CONNECTOR_KEYS for s in k.spellings}

#: The MM2 connectors (Strimzi's `sourceConnector`, `checkpointConnector`, `heartbeatConnector`) each MM2 key of a
#: setting is given to, from the registry's `Mm2.connectors` (export to Strimzi).
KEY_CONNECTORS: dict[str, tuple[registry.Connector, ...]] = {
    key: s.mm2.connectors_of(key) for s in registry.mm2_settings() if s.mm2 is not None for key in s.mm2.keys
}

#: MM2's `topics.exclude` / `groups.exclude` default to the built-in excludes and REPLACE them when set; a topology's
#: `exclude` adds to them unless `builtin_exclude` (the setting beside it) replaces them. The exclude setting ->
#: (its builtin_exclude setting, the built-in patterns: the filters' own `ALWAYS_EXCLUDED`).
BUILTIN_EXCLUDES: dict[Setting, tuple[Setting, tuple[str, ...]]] = {
    ("topics", "exclude"): (("topics", "builtin_exclude"), TopicFilter.ALWAYS_EXCLUDED),
    ("groups", "exclude"): (("groups", "builtin_exclude"), GroupFilter.ALWAYS_EXCLUDED),
}
#: A `builtin_exclude` other than MM2's (or `[]`) rides in this extension key beside MM2's exclude key, so that
#: import can split MM2's one list back into `exclude` and `builtin_exclude`.
BUILTIN_EXCLUDE_EXT: dict[Setting, str] = {
    builtin: f"reconciler.{'.'.join(builtin)}" for builtin, _ in BUILTIN_EXCLUDES.values()
}

#: Our single refresh interval stands for both of MM2's.
REFRESH_SETTING: Setting = ("refresh_interval_seconds",)
REFRESH_KEYS = _mm2("refresh_interval_seconds").keys
MM2_REFRESH_DEFAULT = _mm2("refresh_interval_seconds").default
#: MM2's switches for those refreshes (default true); the jobs always refresh, every `refresh_interval_seconds`.
REFRESH_ENABLED_KEYS = ("refresh.topics.enabled", "refresh.groups.enabled")

#: Exactly-once (KIP-618 for Connect, used by MM2): the worker setting on the target cluster, and the
#: connector setting `exactly.once.support=required` on a flow.
EOS_WORKER_KEY = "exactly.once.source.support"
EOS_CONNECTOR_KEY = _mm2("delivery").key
DELIVERY_SETTING: Setting = ("delivery",)
#: An at-least-once flow into a target whose worker enables exactly-once (for another flow): MM2 gives it
#: exactly-once anyway; the topology's value rides in this extension key (export -> import).
DELIVERY_EXT = "reconciler.delivery"

#: Keys MM2 knows that the topology cannot express, and what to do about each.
NOT_EXPRESSIBLE: dict[str, str] = {
    "heartbeats.topic.replication.factor": "internal topics get the flow's replication_factor; drop it",
    "checkpoints.topic.replication.factor": "internal topics get the flow's replication_factor; drop it",
    "offset-syncs.topic.replication.factor": "internal topics get the flow's replication_factor; drop it",
    "offset.storage.replication.factor": "jobs keep their offsets in a consumer group, not in Connect topics; drop it",
    "config.storage.replication.factor": "jobs have no Connect config topic; drop it",
    "status.storage.replication.factor": "jobs publish status to reconciler.status.internal; drop it",
    "offset.storage.topic": "jobs keep their offsets in a consumer group, not in Connect topics; drop it",
    "config.storage.topic": "jobs have no Connect config topic; drop it",
    "status.storage.topic": "jobs have no Connect status topic; drop it",
    "sync.topic.configs.interval.seconds": "configs are synced by `reconciler apply` and checked by `drift`; drop it",
    "sync.topic.acls.interval.seconds": "ACLs are synced by `reconciler apply` and checked by `drift`; drop it",
    "emit.offset-syncs.enabled": "jobs always write offset syncs (checkpoints need them); drop it",
    "dedicated.mode.enable.internal.rest": "jobs need no Connect REST; drop it",
    "topic.filter.class": "only the default topic filter (topics / topics.exclude) is supported; rewrite it as patterns",
    "group.filter.class": "only the default group filter (groups / groups.exclude) is supported; rewrite it as patterns",
    "config.property.filter.class": "only config.properties.exclude is supported; rewrite it as patterns",
    "key.converter": "jobs copy bytes as they are (MM2's ByteArrayConverter); drop it",
    "value.converter": "jobs copy bytes as they are (MM2's ByteArrayConverter); drop it",
    "header.converter": "jobs copy headers as they are; drop it",
    "emit.checkpoints.enabled.for.groups": "use groups / groups.exclude",
    "admin.timeout.ms": "not configurable; drop it",
    "consumer.poll.timeout.ms": "jobs read in micro-batches (job.trigger_interval_ms); drop it",
    "forwarding.admin.class": "topics and ACLs are created by `reconciler apply` with its own admin client; drop it",
    "transaction.boundary": "exactly-once jobs commit one transaction per micro-batch; drop it",
}

#: The Java client keys the import maps to librdkafka (what becomes of each; mm2_import._client_config does it).
CLIENT_KEY_FATES: dict[str, str] = {
    "security.protocol, client.id, sasl.kerberos.service.name, ssl.key.password, ssl.cipher.suites": (
        "the same key in `clusters.A.config`"
    ),
    "sasl.mechanism": "`sasl.mechanisms`",
    "sasl.jaas.config": "Plain/Scram login module: `sasl.username`, `sasl.password: ${VAR}`; other modules reported",
    "ssl.endpoint.identification.algorithm": "the same key (empty: `none`)",
    "ssl.truststore.type, ssl.truststore.location, ssl.truststore.certificates": (
        "PEM: `ssl.ca.location` / `ssl.ca.pem`; JKS/PKCS12 truststores reported (convert to PEM)"
    ),
    "ssl.truststore.password": "not needed by PEM (dropped with its truststore)",
    "ssl.keystore.type, ssl.keystore.location, ssl.keystore.password": (
        "PKCS12: same keys; PEM: `ssl.certificate.location` + `ssl.key.location`; JKS reported (convert)"
    ),
    "ssl.keystore.certificate.chain, ssl.keystore.key": "`ssl.certificate.pem`, `ssl.key.pem`",
    "security.*, sasl.*, ssl.*": "any other: reported (add the librdkafka equivalent to `clusters.A.config`)",
}

#: Prefixes of per-client overrides (reported: jobs use one librdkafka config per cluster).
CLIENT_OVERRIDE_PREFIXES = (
    "consumer.",
    "producer.",
    "admin.",
    "source.cluster.",
    "target.cluster.",
    "source.admin.",
    "target.admin.",
    "offset-syncs.",
)

#: Java client keys with the same name and meaning in librdkafka.
SAME_CLIENT_KEYS = (
    "security.protocol",
    "client.id",
    "sasl.kerberos.service.name",
    "ssl.key.password",
    "ssl.cipher.suites",
)
CLIENT_PREFIXES = ("security.", "sasl.", "ssl.")

JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}

ENV_PROVIDER_CLASS = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"

#: Our extension keys (`reconciler.*`) hold what MM2 has no key for, so that export -> import is lossless.
EXT = "reconciler."
JOB_FIELD_KINDS: dict[str, Kind] = {
    s.path[1]: _kind(s)
    for s in registry.FLOW_SETTINGS
    if s.path[0] == "job" and s.mm2 is None and s.type is not registry.Type.MAPPING
}  # parallelism is tasks.max; spark_conf is `reconciler.job.spark_conf.<key>`
#: The flow settings outside `job:` that MM2 has no key for (`enabled` and the builtin excludes have their own keys):
#: `reconciler.<setting>` in the flow's scope (`on_refused_record`, `heartbeats.location`, `rate_limit.*`), so that
#: export -> import loses nothing.
FLOW_EXT_KINDS: dict[str, Kind] = {
    s.name: _kind(s)
    for s in registry.FLOW_SETTINGS
    if s.mm2 is None and s.path[0] != "job" and s.path != ("enabled",) and s.path not in BUILTIN_EXCLUDE_EXT
}
#: `reconciler.prune.<key>` and `reconciler.slo.<key>`: the registry's `prune:` and `slo:` settings.
SLO_KINDS: dict[str, Kind] = {s.path[1]: _kind(s) for s in registry.section_settings("slo")}
PRUNE_KEYS: tuple[str, ...] = tuple(s.path[1] for s in registry.section_settings("prune"))


def is_client_key(key: str) -> bool:
    return key.startswith(CLIENT_PREFIXES) or key in SAME_CLIENT_KEYS
