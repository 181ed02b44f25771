"""Export (pure): a validated Topology -> MirrorMaker 2 properties (and the pieces `strimzi` reuses).

What MM2 has a key for is written with MM2's key, wherever the topology's value differs from MM2's
default (so MM2 behaves like the topology, and `import` reads the same values back). What MM2 has no
key for (job placement, tags, replication principal, residency, prune, slo) goes under `reconciler.`
keys, which MM2 ignores, so that export -> import loses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.interop.draft import Setting, builtin_default
from reconciler.interop.mm2_keys import (
    BUILTIN_EXCLUDE_EXT,
    BUILTIN_EXCLUDES,
    CONNECTOR_KEYS,
    DEFAULT_POLICY_CLASS,
    DELIVERY_EXT,
    DELIVERY_SETTING,
    ENV_PROVIDER_CLASS,
    EOS_WORKER_KEY,
    EXT,
    FLOW_EXT_KINDS,
    IDENTITY_POLICY_CLASS,
    JAAS_MODULES,
    JOB_FIELD_KINDS,
    MM2_REFRESH_DEFAULT,
    PRUNE_KEYS,
    REFRESH_KEYS,
    REFRESH_SETTING,
    SAME_CLIENT_KEYS,
    SLO_KINDS,
    Kind,
)
from reconciler.interop.properties import format_property
from reconciler.mirror.policy import PolicyKind
from reconciler.topology import secrets
from reconciler.topology.model import Cluster, Delivery, Flow, Topology
from reconciler.topology.settings_registry import TOPOLOGY_BY_NAME


@dataclass(frozen=True)
class Line:
    key: str | None = None
    value: str | None = None
    comment: str | None = None

    def render(self) -> str:
        if self.key is None:
            return f"# {self.comment}" if self.comment else ""
        text = format_property(self.key, self.value or "")
        return text


def flow_settings(flow: Flow) -> dict[Setting, Any]:
    """A flow's effective settings in the topology's terms (the inverse of the import's FlowDraft)."""
    s: dict[Setting, Any] = {
        ("topics", "include"): tuple(flow.topics.include),
        ("topics", "exclude"): tuple(flow.topics.exclude),
        ("groups", "include"): tuple(flow.groups.include),
        ("groups", "exclude"): tuple(flow.groups.exclude),
        ("topics", "builtin_exclude"): flow.topics.builtin_exclude,
        ("groups", "builtin_exclude"): flow.groups.builtin_exclude,
        ("policy",): flow.policy.kind.value,
        ("separator",): flow.policy.separator,
        ("internal_separator",): flow.policy.internal_separator,
        ("replication_factor",): flow.replication_factor,
        ("config_properties", "exclude"): tuple(flow.config_properties.exclude),
        ("sync", "topic_configs"): flow.sync.topic_configs,
        ("sync", "acls"): flow.sync.acls,
        ("sync", "group_offsets"): flow.sync.group_offsets,
        ("sync", "group_offsets_interval_seconds"): flow.sync.group_offsets_interval_seconds,
        ("heartbeats", "enabled"): flow.heartbeats.enabled,
        ("heartbeats", "replicate"): flow.heartbeats.replicate,
        ("heartbeats", "interval_seconds"): flow.heartbeats.interval_seconds,
        ("checkpoints", "enabled"): flow.checkpoints.enabled,
        ("checkpoints", "interval_seconds"): flow.checkpoints.interval_seconds,
        REFRESH_SETTING: flow.refresh_interval_seconds,
        ("offset_syncs", "topic_location"): flow.offset_syncs_location.value,
        ("offset_syncs", "lag_max"): flow.offset_lag_max,
        ("job", "parallelism"): flow.job.parallelism,
        DELIVERY_SETTING: flow.delivery.value,
        ("heartbeats", "location"): flow.heartbeats.location.value,
        ("on_refused_record",): flow.on_refused_record.value,
        ("rate_limit", "records_per_second"): flow.rate_limit.records_per_second,
        ("rate_limit", "bytes_per_second"): flow.rate_limit.bytes_per_second,
    }
    for name in JOB_FIELD_KINDS:
        s[("job", name)] = getattr(flow.job, name)
    for k, v in flow.job.spark_conf.items():
        s[("job", "spark_conf", k)] = v
    return s


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _format(kind: Kind, value: Any) -> str:
    if kind is Kind.LIST:
        return ", ".join(value)
    if kind is Kind.BOOL:
        return "true" if value else "false"
    if kind is Kind.POLICY:
        return IDENTITY_POLICY_CLASS if value == PolicyKind.IDENTITY else DEFAULT_POLICY_CLASS
    return _num(value)


def mm2_excludes(s: dict[Setting, Any], setting: Setting) -> tuple[str, ...]:
    """MM2's one exclude list (which replaces its built-ins) for a flow's `exclude` + effective `builtin_exclude`."""
    builtin_setting, builtins = BUILTIN_EXCLUDES[setting]
    own = s[builtin_setting]
    return tuple(s[setting]) + (builtins if own is None else tuple(own))  # no dedup: import splits it back


def connector_values(flow: Flow) -> dict[str, str]:
    """MM2 connector keys whose value differs from MM2's default (exactly-once handled separately)."""
    s = flow_settings(flow)
    out: dict[str, str] = {}
    for k in CONNECTOR_KEYS:
        value = s[k.setting]
        if k.setting in BUILTIN_EXCLUDES:
            value = mm2_excludes(s, k.setting)
            if value == BUILTIN_EXCLUDES[k.setting][1]:
                continue  # MM2's default: its built-in excludes
        elif value == k.mm2_default:
            continue
        out[k.key] = _format(k.kind, value)
    if s[REFRESH_SETTING] != MM2_REFRESH_DEFAULT:
        for key in REFRESH_KEYS:
            out[key] = _num(s[REFRESH_SETTING])
    return out


def job_ext_values(flow: Flow) -> dict[str, str]:
    """Flow settings MM2 has no key for, where they differ from our defaults: the job's (parallelism is tasks.max),
    a `builtin_exclude` other than MM2's or none (MM2's exclude key already holds its patterns), and the others
    (`FLOW_EXT_KINDS`: on_refused_record, heartbeats.location, rate_limit)."""
    s = flow_settings(flow)
    out: dict[str, str] = {}
    for builtin_setting, key in BUILTIN_EXCLUDE_EXT.items():
        if s[builtin_setting]:
            out[key] = ", ".join(s[builtin_setting])
    for name, kind in FLOW_EXT_KINDS.items():
        value = s[tuple(name.split("."))]
        if value is not None and value != builtin_default(tuple(name.split("."))):
            out[f"{EXT}{name}"] = _format(kind, value)
    for name, kind in JOB_FIELD_KINDS.items():
        value = s[("job", name)]
        if value != builtin_default(("job", name)) and value is not None:
            out[f"{EXT}job.{name}"] = _format(kind, value)
    for k, v in sorted(flow.job.spark_conf.items()):
        out[f"{EXT}job.spark_conf.{k}"] = v
    return out


def env_refs(value: str) -> str:
    """`${VAR}` -> MM2's EnvVarConfigProvider syntax `${env:VAR}`."""
    return secrets.ENV_REF.sub(lambda m: "${env:" + m.group(1) + "}", value)


def uses_references(topology: Topology) -> bool:
    return any(
        secrets.references(v) for c in topology.clusters.values() for v in [c.bootstrap_servers, *c.config.values()]
    )


def _jaas_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def client_properties(cluster: Cluster) -> tuple[dict[str, str], dict[str, str]]:
    """librdkafka settings -> (Java client properties, leftovers with no Java equivalent)."""
    cfg = dict(cluster.config)
    java: dict[str, str] = {}
    for key in SAME_CLIENT_KEYS:
        if key in cfg:
            java[key] = cfg.pop(key)
    mechanism = cfg.pop("sasl.mechanisms", None) or cfg.pop("sasl.mechanism", None)
    if mechanism:
        java["sasl.mechanism"] = mechanism
    user, password = cfg.pop("sasl.username", None), cfg.pop("sasl.password", None)
    if user is not None or password is not None:
        module = JAAS_MODULES.get((mechanism or "PLAIN").upper(), JAAS_MODULES["PLAIN"])
        opts = "".join(
            f' {k}="{_jaas_quote(v)}"' for k, v in (("username", user), ("password", password)) if v is not None
        )
        java["sasl.jaas.config"] = f"{module} required{opts};"
    if "ssl.endpoint.identification.algorithm" in cfg:
        v = cfg.pop("ssl.endpoint.identification.algorithm")
        java["ssl.endpoint.identification.algorithm"] = "" if v == "none" else v
    if "ssl.ca.location" in cfg:
        java["ssl.truststore.type"] = "PEM"
        java["ssl.truststore.location"] = cfg.pop("ssl.ca.location")
    if "ssl.ca.pem" in cfg:
        java["ssl.truststore.type"] = "PEM"
        java["ssl.truststore.certificates"] = cfg.pop("ssl.ca.pem")
    if "ssl.keystore.location" in cfg:
        java["ssl.keystore.type"] = "PKCS12"
        java["ssl.keystore.location"] = cfg.pop("ssl.keystore.location")
        if "ssl.keystore.password" in cfg:
            java["ssl.keystore.password"] = cfg.pop("ssl.keystore.password")
    if "ssl.certificate.pem" in cfg and "ssl.key.pem" in cfg:
        java["ssl.keystore.type"] = "PEM"
        java["ssl.keystore.certificate.chain"] = cfg.pop("ssl.certificate.pem")
        java["ssl.keystore.key"] = cfg.pop("ssl.key.pem")
    if cfg.get("ssl.certificate.location") and cfg.get("ssl.certificate.location") == cfg.get("ssl.key.location"):
        java["ssl.keystore.type"] = "PEM"
        java["ssl.keystore.location"] = cfg.pop("ssl.certificate.location")
        cfg.pop("ssl.key.location")
    return java, cfg


def cluster_ext_values(cluster: Cluster, leftovers: dict[str, str]) -> dict[str, str]:
    out = {f"{EXT}tags.{k}": v for k, v in sorted(cluster.tags.items())}
    if cluster.replication_principal:
        out[f"{EXT}replication_principal"] = cluster.replication_principal
    out.update({f"{EXT}config.{k}": v for k, v in sorted(leftovers.items())})
    return out


def topology_ext_values(topology: Topology) -> dict[str, str]:
    out: dict[str, str] = {}
    if topology.name:
        out[f"{EXT}metadata.name"] = topology.name
    for rule in topology.residency:
        base = f"{EXT}policies.residency.{rule.name}"
        out[base + ".topics"] = ", ".join(rule.topics.include)
        out[base + ".tag"] = rule.tag
        out[base + ".allowed"] = ", ".join(rule.allowed)
    for name in PRUNE_KEYS:
        if getattr(topology.prune, name):
            out[f"{EXT}prune.{name}"] = "true"
    for name in SLO_KINDS:
        value = getattr(topology.slo, name)
        if value is not None and value != TOPOLOGY_BY_NAME[f"slo.{name}"].default:  # the default goes without saying
            out[f"{EXT}slo.{name}"] = _num(value)
    return out


@dataclass(frozen=True)
class ExactlyOnce:
    """How the flows' delivery is said in MM2 (KIP-618): the target's worker gives exactly-once to every flow into it
    (`exactly.once.support = requested`, the default) once `exactly.once.source.support = enabled`; MM2 has no way to
    keep one flow into such a target at-least-once, so those get exactly-once from MM2 (a stronger guarantee) and
    carry `reconciler.delivery = at-least-once` for the import."""

    worker_enabled: frozenset[str]  # target aliases with an exactly-once flow
    at_least_once: frozenset[str]  # at-least-once flows into such a target


def exactly_once(topology: Topology) -> ExactlyOnce:
    enabled = frozenset(f.target for f in topology.flows if f.delivery is Delivery.EXACTLY_ONCE)
    weaker = frozenset(
        f.name for f in topology.flows if f.delivery is not Delivery.EXACTLY_ONCE and f.target in enabled
    )
    return ExactlyOnce(enabled, weaker)


def delivery_values(flow: Flow, eos: ExactlyOnce) -> dict[str, str]:
    return {DELIVERY_EXT: flow.delivery.value} if flow.name in eos.at_least_once else {}


def _flow_values(flow: Flow, eos: ExactlyOnce) -> dict[str, str]:
    return {**connector_values(flow), **job_ext_values(flow), **delivery_values(flow, eos)}


class ExportError(Exception):
    """The topology uses something the target format cannot say at all."""


def check_exportable(topology: Topology, fmt: str) -> None:
    """MM2 (and Strimzi, whose connectors are named after the pair) run one flow per pair: topic families
    cannot be exported; say where the first one is."""
    named = [f for f in topology.flows if f.family is not None]
    if named:
        f = named[0]
        where = f"{f.where.file}:{f.where.line}" if f.where else "topology"
        raise ExportError(
            f"{where}: error: flow {f.name} is a topic family; {fmt} runs one flow per source->target "
            f"pair\n  hint: merge the families of {f.pair} into one flow (combine their topic filters) "
            "before exporting"
        )


def export_mm2(topology: Topology, origin: str) -> str:
    check_exportable(topology, "MirrorMaker 2")
    eos = exactly_once(topology)
    lines: list[Line] = [
        Line(comment=f"MirrorMaker 2 configuration exported by `reconciler export mm2` from {origin}."),
        Line(comment="Run it with: connect-mirror-maker.sh THIS_FILE"),
        Line(
            comment=f"Keys under `{EXT}` carry settings MM2 has no key for (MM2 ignores them); "
            "`reconciler import mm2` reads them back."
        ),
        Line("clusters", ", ".join(topology.clusters)),
    ]
    if uses_references(topology):
        lines += [
            Line(comment="${env:VAR}: values the topology takes from environment variables"),
            Line("config.providers", "env"),
            Line("config.providers.env.class", ENV_PROVIDER_CLASS),
        ]
    for alias, cluster in topology.clusters.items():
        lines += [
            Line(),
            Line(comment=f"--- cluster {alias}"),
            Line(f"{alias}.bootstrap.servers", env_refs(cluster.bootstrap_servers)),
        ]
        java, leftovers = client_properties(cluster)
        lines += [Line(f"{alias}.{k}", env_refs(v)) for k, v in java.items()]
        if alias in eos.worker_enabled:
            lines.append(Line(f"{alias}.{EOS_WORKER_KEY}", "enabled"))
        if leftovers:
            lines.append(Line(comment=f"librdkafka settings with no Java client equivalent: {', '.join(leftovers)}"))
        lines += [Line(f"{alias}.{k}", env_refs(v)) for k, v in cluster_ext_values(cluster, leftovers).items()]
    per_flow = {f.name: _flow_values(f, eos) for f in topology.flows}
    common: dict[str, str] = {}
    if per_flow:
        first = next(iter(per_flow.values()))
        common = {k: v for k, v in first.items() if all(vals.get(k) == v for vals in per_flow.values())}
    if common:
        lines += [Line(), Line(comment="--- settings of every flow")]
        lines += [Line(k, v) for k, v in common.items()]
    for f in topology.flows:
        lines += [
            Line(),
            Line(comment=f"--- flow {f.name}"),
            Line(f"{f.name}.enabled", "true" if f.enabled else "false"),
        ]
        if f.name in eos.at_least_once:
            lines.append(
                Line(
                    comment=f"at-least-once in the topology; MM2 gives every flow into {f.target} exactly-once "
                    f"(`{f.target}.{EOS_WORKER_KEY} = enabled`, which another flow needs)"
                )
            )
        lines += [Line(f"{f.name}.{k}", v) for k, v in per_flow[f.name].items() if k not in common]
    ext = topology_ext_values(topology)
    if ext:
        lines += [Line(), Line(comment="--- reconciler settings MM2 has no key for")]
        lines += [Line(k, v) for k, v in ext.items()]
    return "\n".join(line.render() for line in lines) + "\n"
