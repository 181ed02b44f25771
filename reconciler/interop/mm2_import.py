"""Import (pure): MirrorMaker 2 properties -> TopologyDraft.

Precedence is MM2's (MirrorMakerConfig): a flow-level `A->B.key` beats a cluster-level `A.key`,
which beats a top-level `key`. Connector keys (topics, emit.*, sync.*, ...) are read per flow or at
the top level (MM2 ignores them at cluster level: we say so); client keys (security, SASL, SSL) per
cluster or at the top level; `exactly.once.source.support` is a Connect worker key, read per flow,
on the target cluster or at the top level.

Unset keys take MM2's defaults (the import behaves as the MM2 file did); values equal to our
defaults are then left out of the YAML (`draft.factor`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from reconciler import settings
from reconciler.interop.draft import (
    ClusterDraft,
    EnvNames,
    FlowDraft,
    ImportOptions,
    Note,
    ResidencyDraft,
    Setting,
    TopologyDraft,
    is_env_name,
)
from reconciler.interop.mm2_keys import (
    BUILTIN_EXCLUDE_EXT,
    BUILTIN_EXCLUDES,
    BY_SPELLING,
    CLIENT_OVERRIDE_PREFIXES,
    CONNECTOR_KEYS,
    DELIVERY_EXT,
    DELIVERY_SETTING,
    ENV_PROVIDER_CLASS,
    EOS_CONNECTOR_KEY,
    EOS_WORKER_KEY,
    EXT,
    FLOW_EXT_KINDS,
    JOB_FIELD_KINDS,
    MM2_REFRESH_DEFAULT,
    NOT_EXPRESSIBLE,
    POLICY_CLASSES,
    POLICY_KINDS,
    PRUNE_KEYS,
    REFRESH_ENABLED_KEYS,
    REFRESH_KEYS,
    REFRESH_SETTING,
    SAME_CLIENT_KEYS,
    SLO_KINDS,
    Kind,
    Mm2Key,
    is_client_key,
)
from reconciler.interop.properties import PropertiesError, Property, parse_properties
from reconciler.mirror.policy import PolicyKind
from reconciler.textutil import cut
from reconciler.topology import secrets
from reconciler.topology.choices import Delivery
from reconciler.topology.loader import MAX_SCALAR_CHARS, flows_limit

_REF = re.compile(r"\$\{(?P<provider>[A-Za-z0-9_.-]+):(?P<body>[^}]*)\}")
K8S_PROVIDER = "k8s-secret"  # internal: the Strimzi importer's secret references, `${k8s-secret:SECRET:KEY}`


@dataclass
class _Scopes:
    """The properties sorted by where MM2 applies them (last occurrence wins, as in Java)."""

    top: dict[str, Property] = field(default_factory=dict)
    cluster: dict[str, dict[str, Property]] = field(default_factory=dict)
    flow: dict[tuple[str, str], dict[str, Property]] = field(default_factory=dict)
    top_job: dict[str, Property] = field(default_factory=dict)  # the top-level `reconciler.job.*` keys
    top_flow: dict[str, Property] = field(default_factory=dict)  # the top-level `reconciler.<FLOW_EXT_KINDS>` keys


class _Context:
    def __init__(self, draft: TopologyDraft, providers: dict[str, str], options: ImportOptions):
        self.draft = draft
        self.options = options
        self.env = EnvNames(draft)
        self.providers = providers  # alias -> class

    def note(self, prop: Property | None, key: str, message: str, action: str) -> None:
        self.draft.notes.append(Note(prop.where if prop else None, key, message, action))


def _error(prop: Property, message: str, hint: str | None = None) -> PropertiesError:
    return PropertiesError(prop.file, prop.line, message, hint)


def _parse_value(prop: Property, kind: Kind) -> Any:
    text = prop.value.strip()
    key, shown = cut(prop.key), cut(text)
    if kind is Kind.LIST:
        return tuple(p.strip() for p in text.split(",") if p.strip())
    if kind is Kind.BOOL:
        if text.lower() not in ("true", "false"):
            raise _error(prop, f"{key} must be true or false, not {shown!r}")
        return text.lower() == "true"
    if kind is Kind.INT:
        try:
            return int(text)
        except ValueError:
            raise _error(prop, f"{key} must be an integer, not {shown!r}") from None
    if kind in (Kind.SECONDS, Kind.NUMBER):
        try:
            value = float(text)
        except ValueError:
            what = "a number of seconds" if kind is Kind.SECONDS else "a number"
            raise _error(prop, f"{key} must be {what}, not {shown!r}") from None
        return int(value) if value.is_integer() else value
    if kind is Kind.POLICY:
        return POLICY_CLASSES.get(text)
    if kind is Kind.LOCATION:
        if text not in ("source", "target"):
            raise _error(prop, f"{key} must be source or target, not {shown!r}")
        return text
    return text


def _alias_of(key: str, aliases: set[str]) -> str | None:
    """The cluster a `ALIAS.key` names, or None. Aliases hold no dot (checked on `clusters`), so the
    alias is the text before the first dot: one set look-up per key, whatever the number of clusters."""
    head, dot, _ = key.partition(".")
    return head if dot and head in aliases else None


def _scopes(props: list[Property], aliases: list[str], ctx: _Context) -> _Scopes:
    s = _Scopes()
    known = set(aliases)
    for p in props:
        if p.key == "clusters" or p.key.startswith("config.providers"):
            continue
        if "->" in p.key:
            src, _, tail = p.key.partition("->")
            tgt = _alias_of(tail, known)
            if src in known and tgt is not None:
                s.flow.setdefault((src, tgt), {})[tail[len(tgt) + 1 :]] = p
            else:
                ctx.note(
                    p,
                    p.key,
                    "this flow names a cluster not in `clusters`",
                    "add the cluster to `clusters` or remove the line",
                )
            continue
        alias = _alias_of(p.key, known)
        if alias is not None:
            s.cluster.setdefault(alias, {})[p.key[len(alias) + 1 :]] = p
        else:
            s.top[p.key] = p
            if p.key.startswith(EXT + "job."):
                s.top_job[p.key] = p
            elif p.key.startswith(EXT) and p.key[len(EXT) :] in FLOW_EXT_KINDS:
                s.top_flow[p.key] = p
    return s


# --- references and secrets ---------------------------------------------------------------------


def _map_refs(value: str, alias: str, key: str, prop: Property, ctx: _Context) -> str:
    """MM2 config-provider references -> `${VAR}`: env provider kept by name, others become variables."""

    def repl(m: re.Match) -> str:
        provider, body = m.group("provider"), m.group("body")
        cls = ctx.providers.get(provider, "")
        if provider == K8S_PROVIDER:
            secret, _, skey = body.partition(":")
            if is_env_name(skey):
                return (
                    "${"
                    + _cluster_var(skey, alias, f"key {cut(skey)!r} of Kubernetes Secret {cut(secret)!r}", ctx)
                    + "}"
                )
            name = ctx.env.add(
                secrets.suggested_env_name(alias, key),
                f"key {cut(skey)!r} of Kubernetes Secret {cut(secret)!r}",
            )
            return "${" + name + "}"
        if cls == ENV_PROVIDER_CLASS or (not cls and provider == "env"):
            return "${" + _cluster_var(body, alias, f"as for MirrorMaker 2 (referenced at {prop.where})", ctx) + "}"
        name = ctx.env.add(
            secrets.suggested_env_name(alias, key),
            f"what MM2's config provider {cut(provider, 60)!r} resolved `${{{cut(provider, 60)}:{cut(body, 60)}}}` to ({prop.where})",
        )
        ctx.note(
            prop,
            prop.key,
            f"config provider reference ${{{provider}:...}} cannot be resolved by the jobs",
            f"set {name} to its value (the topology references ${{{name}}})",
        )
        return "${" + name + "}"

    for name in dict.fromkeys(secrets.references(value)):  # a literal `${NAME}`: MM2 passes it as it is
        if not name.startswith(secrets.env_prefix(alias)):
            renamed = _cluster_var(name, alias, f"the literal ${{{name}}} at {prop.where}", ctx)
            value = value.replace("${" + name + "}", "${" + renamed + "}")
            name = renamed
        if name not in ctx.env.taken:
            ctx.env.known(name, f"the literal ${{{name}}} at {prop.where} (MM2 passes it to the client as it is)")
            ctx.note(
                prop,
                prop.key,
                f"the literal ${{{name}}} becomes a reference to environment variable {name} (MM2 substitutes no "
                "`${NAME}`: it was a placeholder of a template)",
                f"set {name}, or write the value out",
            )
    return _REF.sub(repl, value)


def _cluster_var(name: str, alias: str, source: str, ctx: _Context) -> str:
    """The topology's variable for environment variable `name` read by cluster `alias`: a cluster reads only
    variables named after it (topology/secrets.py), so `NEON_PW` of cluster `primary` becomes `PRIMARY_NEON_PW`,
    set from `NEON_PW`."""
    prefix = secrets.env_prefix(alias)
    if name.startswith(prefix):
        return ctx.env.known(name, source)
    return ctx.env.known(prefix + name, f"the value of {name}, {source}")


def _secret(value: str, alias: str, key: str, prop: Property, ctx: _Context) -> str:
    mapped = _map_refs(value, alias, key, prop, ctx)
    if mapped != value or secrets.is_env_reference(mapped):
        return mapped
    name = ctx.env.add(
        secrets.suggested_env_name(alias, key),
        f"the literal {cut(key, 60)} that was at {prop.where} (move it to your secret store)",
    )
    return "${" + name + "}"


_JAAS = re.compile(
    r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)\s*(?P<opts>.*?);?\s*$", re.S
)
_JAAS_OPT = re.compile(r'(?P<k>[\w.-]+)\s*=\s*(?:"(?P<q>(?:[^"\\]|\\.)*)"|(?P<b>[^\s;]+))')


def _jaas(value: str, alias: str, prop: Property, ctx: _Context, out: dict[str, str]) -> None:
    m = _JAAS.match(value)
    module = m.group("module") if m else ""
    if not m or not (module.endswith("PlainLoginModule") or module.endswith("ScramLoginModule")):
        ctx.note(
            prop,
            prop.key,
            f"JAAS login module {cut(module, 60) or '(unreadable)'} has no librdkafka equivalent here",
            "configure SASL/OAUTHBEARER or GSSAPI with librdkafka keys in clusters." + alias + ".config",
        )
        return
    opts = {
        o.group("k"): (o.group("q") if o.group("q") is not None else o.group("b"))
        for o in _JAAS_OPT.finditer(m.group("opts"))
    }
    if "username" in opts:
        out["sasl.username"] = _map_refs(opts["username"], alias, "sasl.username", prop, ctx)
    if "password" in opts:
        out["sasl.password"] = _secret(opts["password"], alias, "sasl.password", prop, ctx)
    for extra in sorted(set(opts) - {"username", "password"}):
        ctx.note(prop, prop.key, f"JAAS option {cut(extra, 60)!r} is not mapped", "check whether your brokers need it")


def _client_config(alias: str, entries: dict[str, Property], ctx: _Context) -> dict[str, str]:
    """Java client settings -> librdkafka settings (secrets become `${VAR}`)."""
    out: dict[str, str] = {}
    done = _same_keys(alias, entries, ctx, out)
    done |= _sasl(alias, entries, ctx, out)
    done |= _truststore(alias, entries, ctx, out)
    done |= _keystore(alias, entries, ctx, out)
    for key, p in entries.items():
        if key not in done:
            ctx.note(
                p,
                p.key,
                "client setting not mapped to librdkafka",
                f"add the librdkafka equivalent to clusters.{alias}.config if you need it",
            )
    return out


def _value(entries: dict[str, Property], key: str) -> str | None:
    return entries[key].value.strip() if key in entries else None


def _same_keys(alias: str, entries: dict[str, Property], ctx: _Context, out: dict[str, str]) -> set[str]:
    """The settings librdkafka names as the Java client does (SAME_CLIENT_KEYS). Returns the keys read."""
    done: set[str] = set()
    for key in SAME_CLIENT_KEYS:
        if key in entries:
            value = entries[key].value.strip()
            out[key] = (
                _secret(value, alias, key, entries[key], ctx)
                if secrets.is_secret_key(key)
                else _map_refs(value, alias, key, entries[key], ctx)
            )
            done.add(key)
    return done


def _sasl(alias: str, entries: dict[str, Property], ctx: _Context, out: dict[str, str]) -> set[str]:
    """The SASL mechanism, the JAAS login (user and password) and host name verification. Returns the keys read."""
    done: set[str] = set()
    if "sasl.mechanism" in entries:
        out["sasl.mechanisms"] = entries["sasl.mechanism"].value.strip()
        done.add("sasl.mechanism")
    if "sasl.jaas.config" in entries:
        _jaas(entries["sasl.jaas.config"].value, alias, entries["sasl.jaas.config"], ctx, out)
        done.add("sasl.jaas.config")
    if "ssl.endpoint.identification.algorithm" in entries:
        out["ssl.endpoint.identification.algorithm"] = (
            _value(entries, "ssl.endpoint.identification.algorithm") or "none"
        )
        done.add("ssl.endpoint.identification.algorithm")
    return done


def _truststore(alias: str, entries: dict[str, Property], ctx: _Context, out: dict[str, str]) -> set[str]:
    """The CA certificates: PEM text or a PEM file (a JKS or PKCS12 truststore is a note). Returns the keys read."""
    ts_type = (_value(entries, "ssl.truststore.type") or "JKS").upper()
    if "ssl.truststore.certificates" in entries:
        p = entries["ssl.truststore.certificates"]
        out["ssl.ca.pem"] = _map_refs(p.value.strip(), alias, "ssl.ca.pem", p, ctx)
    if "ssl.truststore.location" in entries:
        p = entries["ssl.truststore.location"]
        if ts_type == "PEM":
            out["ssl.ca.location"] = _map_refs(p.value.strip(), alias, "ssl.ca.location", p, ctx)
        else:
            ctx.note(
                p,
                p.key,
                f"a {ts_type} truststore cannot be read by librdkafka",
                f"convert it to PEM (keytool -exportcert -rfc) and set clusters.{alias}.config.ssl.ca.location",
            )
    return {"ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates", "ssl.truststore.password"}


def _keystore(alias: str, entries: dict[str, Property], ctx: _Context, out: dict[str, str]) -> set[str]:
    """The client certificate and key: a PKCS12 or PEM keystore file, or PEM text (a JKS keystore is a note).
    Returns the keys read."""
    ks_type = (_value(entries, "ssl.keystore.type") or "JKS").upper()
    if "ssl.keystore.location" in entries:
        p = entries["ssl.keystore.location"]
        if ks_type == "PKCS12":
            out["ssl.keystore.location"] = _map_refs(p.value.strip(), alias, "ssl.keystore.location", p, ctx)
            if "ssl.keystore.password" in entries:
                pw = entries["ssl.keystore.password"]
                out["ssl.keystore.password"] = _secret(pw.value.strip(), alias, "ssl.keystore.password", pw, ctx)
        elif ks_type == "PEM":
            path = _map_refs(p.value.strip(), alias, "ssl.certificate.location", p, ctx)
            out["ssl.certificate.location"] = path
            out["ssl.key.location"] = path
        else:
            ctx.note(
                p,
                p.key,
                "a JKS keystore cannot be read by librdkafka",
                f"convert it to PKCS12 (keytool -importkeystore -deststoretype PKCS12) and set "
                f"clusters.{alias}.config.ssl.keystore.location / ssl.keystore.password",
            )
    if "ssl.keystore.certificate.chain" in entries:
        p = entries["ssl.keystore.certificate.chain"]
        out["ssl.certificate.pem"] = _map_refs(p.value.strip(), alias, "ssl.certificate.pem", p, ctx)
    if "ssl.keystore.key" in entries:
        p = entries["ssl.keystore.key"]
        out["ssl.key.pem"] = _secret(p.value.strip(), alias, "ssl.key.pem", p, ctx)
    return {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
    }


# --- flows ---------------------------------------------------------------------------------------


def _lookup(spelling_list: tuple[str, ...], *scopes: dict[str, Property]) -> Property | None:
    for scope in scopes:
        for spelling in spelling_list:
            if spelling in scope:
                return scope[spelling]
    return None


def _custom_policy(prop: Property, ctx: _Context) -> str:
    """A `replication.policy.class` that is neither Kafka's nor Strimzi's: the user says which policy it is
    (`--policy-class CLASS=identity|default`); it decides every remote topic's name, so it is never guessed."""
    cls = prop.value.strip()
    kind = ctx.options.policy_classes.get(cls)
    if kind is None:
        raise _error(
            prop,
            f"replication policy class {cut(cls)!r} is not one we know (Default/IdentityReplicationPolicy of Kafka, "
            "Strimzi's IdentityReplicationPolicy)",
            hint=f"say which policy it behaves as: `--policy-class {cut(cls, 120)}=identity` (remote topics keep "
            "their names) or `=default` (`<source-alias><separator><topic>`)",
        )
    if kind not in POLICY_KINDS:  # the CLI checks this too; a caller of the library may not
        raise _error(prop, f"--policy-class {cut(cls)}: {kind!r} is not one of {', '.join(POLICY_KINDS)}")
    ctx.note(
        prop,
        prop.key,
        f"custom replication policy {cut(cls, 120)} imported as `policy: {kind}` (as --policy-class says)",
        "the jobs name topics as that built-in policy does; check the class does the same",
    )
    return kind


def _connector_setting(k: Mm2Key, flow_scope: dict[str, Property], top: dict[str, Property], ctx: _Context) -> Any:
    prop = _lookup(k.spellings, flow_scope, top)
    if prop is None:
        return k.mm2_default
    value = _parse_value(prop, k.kind)
    if k.kind is Kind.POLICY and value is None:
        value = _custom_policy(prop, ctx)
    if k.kind is Kind.SECONDS and value <= 0:
        if k.setting[-1] == "interval_seconds" and k.setting[0] in ("heartbeats", "checkpoints"):
            return ("disable",)
        ctx.note(prop, prop.key, f"a non-positive interval ({value}) is not supported", "MM2's default was used")
        return k.mm2_default
    return value


#: KIP-618's values: the Connect worker's `exactly.once.source.support` and a connector's `exactly.once.support`.
EOS_WORKER_VALUES = ("enabled", "preparing", "disabled")
EOS_CONNECTOR_VALUES = ("requested", "required")


def _eos_value(prop: Property | None, allowed: tuple[str, ...]) -> str | None:
    if prop is None:
        return None
    value = prop.value.strip().lower()
    if value not in allowed:
        raise _error(
            prop,
            f"{cut(prop.key)} must be {' or '.join(allowed)} (KIP-618), not {cut(prop.value.strip())!r}",
            hint="MirrorMaker 2 refuses this value; write the one you mean",
        )
    return value


def _delivery(source: str, target: str, fs: dict[str, Property], scopes: _Scopes, ctx: _Context) -> str:
    """KIP-618: the target's Connect worker gives exactly-once to source connectors when `exactly.once.source.support
    = enabled` (`preparing`, `disabled`: at-least-once); a connector's `exactly.once.support = requested` (the
    default) takes what the worker gives, `required` makes MM2 refuse to start the connector without it. So:
    worker enabled -> exactly-once; `required` -> exactly-once (what the line asks for; warned when the worker does
    not enable it, as MM2 would not run the flow then); otherwise at-least-once."""
    worker_prop = _lookup((EOS_WORKER_KEY,), fs, scopes.cluster.get(target, {}), scopes.top)
    connector_prop = _lookup((EOS_CONNECTOR_KEY,), fs, scopes.top)
    worker = _eos_value(worker_prop, EOS_WORKER_VALUES) or "disabled"
    connector = _eos_value(connector_prop, EOS_CONNECTOR_VALUES) or "requested"
    if connector == "required" and worker != "enabled":
        ctx.note(
            connector_prop,
            EOS_CONNECTOR_KEY,
            f"flow {source}->{target} requires exactly-once but its worker's {EOS_WORKER_KEY} is {worker}, so MM2 "
            "would not start it",
            "imported as `delivery: exactly-once`, what the line asks for",
        )
    eos = (Delivery.EXACTLY_ONCE if worker == "enabled" or connector == "required" else Delivery.AT_LEAST_ONCE).value
    ours = _lookup((DELIVERY_EXT,), fs, scopes.top)  # export's: the topology's value where MM2 gives more
    if ours is not None and eos == Delivery.EXACTLY_ONCE and connector != "required":
        if ours.value.strip() != Delivery.AT_LEAST_ONCE:
            raise _error(ours, f"{DELIVERY_EXT} must be at-least-once, not {cut(ours.value.strip())!r}")
        return Delivery.AT_LEAST_ONCE.value
    return eos


def _empty_separator(
    source: str,
    target: str,
    settings: dict[Setting, Any],
    fs: dict[str, Property],
    top: dict[str, Property],
    ctx: _Context,
) -> None:
    """An empty `replication.policy.separator` with the identity policy names no replicated topic (MM2 accepts it); a
    topology's separator is never empty, so it takes the default `.`. It still shapes MM2's internal topic names
    when `replication.policy.internal.topic.separator.enabled` (the default): those differ, and we say so."""
    if settings[("separator",)] != "" or settings[("policy",)] != PolicyKind.IDENTITY:
        return  # with the default policy an empty separator is refused by validation, at its line
    prop = _lookup(("replication.policy.separator",), fs, top)
    settings[("separator",)] = "."
    if settings[("internal_separator",)]:
        ctx.note(
            prop,
            "replication.policy.separator",
            f"flow {source}->{target}: empty; with the identity policy it names no replicated topic, but MM2 named its "
            f"internal topics `{source}checkpointsinternal` and `mm2-offset-syncs{target}internal` with it",
            "the jobs use `.` (`<alias>.checkpoints.internal`, ...): consumers that translate offsets read the new names",
        )


def _without(listed: tuple[str, ...], part: tuple[str, ...]) -> tuple[str, ...] | None:
    """`listed` without `part` (at its end, as export writes it, else one occurrence of each), None if it lacks one."""
    if part and listed[-len(part) :] == part:
        return listed[: -len(part)]
    rest = list(listed)
    for p in part:
        if p not in rest:
            return None
        rest.remove(p)
    return tuple(rest)


def _excludes(
    settings: dict[Setting, Any], lines: dict[Setting, int], fs: dict[str, Property], top: dict[str, Property]
) -> None:
    """MM2's `topics.exclude` (`groups.exclude`) is one list that replaces the built-in excludes when set; a topology
    has `exclude`, added to the built-ins unless `builtin_exclude` replaces them. The same names are excluded:
    * unset: MM2's built-ins -> `exclude` empty, `builtin_exclude` unset;
    * a list holding every built-in (as `export` writes it) -> the rest in `exclude`, `builtin_exclude` unset;
    * any other list (an empty one too: no excludes at all) -> `exclude` it, `builtin_exclude: []`;
    * with `reconciler.<topics|groups>.builtin_exclude = Y` (export's) -> `builtin_exclude: Y`, the rest in `exclude`.
    """
    for setting, (builtin_setting, builtins) in BUILTIN_EXCLUDES.items():
        listed = settings[setting] if setting in lines else builtins
        ext = _lookup((BUILTIN_EXCLUDE_EXT[builtin_setting],), fs, top)
        own = _parse_value(ext, Kind.LIST) if ext is not None else None
        rest = _without(listed, own) if own is not None else None
        if rest is not None:
            settings[setting] = rest
            settings[builtin_setting] = own
            lines[builtin_setting] = ext.line  # type: ignore[union-attr]
        elif (rest := _without(listed, builtins)) is not None:
            settings[setting] = rest
        else:
            settings[setting] = tuple(listed)
            settings[builtin_setting] = ()
            if setting in lines:
                lines[builtin_setting] = lines[setting]


def _flow_enabled(source: str, target: str, prop: Property | None, ctx: _Context) -> bool:
    """MirrorMakerConfig reads `A->B.enabled` with Java's Boolean.parseBoolean: anything but `true` (any case) is
    false, `false # passive` (an inline comment, which .properties does not have) and `yes` too. Same here, said."""
    if prop is None:
        return False
    text = prop.value.strip()
    if text.lower() not in ("true", "false"):
        ctx.note(
            prop,
            prop.key,
            f"{cut(text)!r} is neither true nor false: MM2 reads it as false (Java's Boolean.parseBoolean; a `#` after "
            "a value is part of the value), so flow " + f"{source}->{target} is imported disabled",
            "write true or false",
        )
    return text.lower() == "true"


def _flow(source: str, target: str, scopes: _Scopes, ctx: _Context) -> FlowDraft:
    fs = scopes.flow.get((source, target), {})
    settings: dict[Setting, Any] = {}
    lines: dict[Setting, int] = {}  # the input line each setting was read from
    for k in CONNECTOR_KEYS:
        value = _connector_setting(k, fs, scopes.top, ctx)
        prop = _lookup(k.spellings, fs, scopes.top)
        setting = (k.setting[0], "enabled") if value == ("disable",) else k.setting
        if prop is not None:
            lines[setting] = prop.line
        settings[setting] = False if value == ("disable",) else value
    for k in CONNECTOR_KEYS:  # an explicit `enabled` wins over a disabling interval
        if k.setting[-1] == "enabled" and _lookup(k.spellings, fs, scopes.top) is not None:
            settings[k.setting] = _connector_setting(k, fs, scopes.top, ctx)
    refresh = []
    for key in REFRESH_KEYS:
        prop = _lookup((key,), fs, scopes.top)
        refresh.append(_parse_value(prop, Kind.SECONDS) if prop else MM2_REFRESH_DEFAULT)
        if prop is not None:
            lines[REFRESH_SETTING] = prop.line
    if refresh[0] != refresh[1]:
        ctx.note(
            _lookup(REFRESH_KEYS, fs, scopes.top),
            "refresh.*.interval.seconds",
            f"flow {source}->{target}: topics and groups are refreshed together here",
            f"the smaller interval ({min(refresh)} s) was used for both",
        )
    settings[REFRESH_SETTING] = min(refresh)
    for key in REFRESH_ENABLED_KEYS:
        prop = _lookup((key,), fs, scopes.top)
        if prop is not None and not _parse_value(prop, Kind.BOOL):
            ctx.note(
                prop,
                key,
                f"flow {source}->{target}: MM2 reads the {key.split('.')[1]} once at start; the jobs always re-read "
                "them, every refresh_interval_seconds",
                "not expressible; a large refresh_interval_seconds comes closest",
            )
    _excludes(settings, lines, fs, scopes.top)
    _empty_separator(source, target, settings, fs, scopes.top, ctx)
    settings[DELIVERY_SETTING] = _delivery(source, target, fs, scopes, ctx)
    worker = _lookup((EOS_WORKER_KEY,), fs, scopes.cluster.get(target, {}), scopes.top)
    connector = _lookup((EOS_CONNECTOR_KEY,), fs, scopes.top)
    if worker or connector:
        lines[DELIVERY_SETTING] = (connector or worker).line  # type: ignore[union-attr]
    for key, prop in {**scopes.top_job, **{k: p for k, p in fs.items() if k.startswith(EXT + "job.")}}.items():
        field_name = key[len(EXT + "job.") :]
        if field_name.startswith("spark_conf."):
            settings[("job", "spark_conf", field_name[len("spark_conf.") :])] = prop.value.strip()
            lines[("job", "spark_conf", field_name[len("spark_conf.") :])] = prop.line
        elif field_name in JOB_FIELD_KINDS:
            settings[("job", field_name)] = _parse_value(prop, JOB_FIELD_KINDS[field_name])
            lines[("job", field_name)] = prop.line
        else:
            ctx.note(prop, prop.key, "unknown job setting", f"job settings are {', '.join(JOB_FIELD_KINDS)}")
    for key, prop in {**scopes.top_flow, **{k: p for k, p in fs.items() if k[len(EXT) :] in FLOW_EXT_KINDS}}.items():
        if key.startswith(EXT):
            path = tuple(key[len(EXT) :].split("."))
            settings[path] = _parse_value(prop, FLOW_EXT_KINDS[key[len(EXT) :]])
            lines[path] = prop.line
    enabled = _flow_enabled(source, target, fs.get("enabled"), ctx)
    for key, prop in fs.items():
        if key == "enabled" or key in BY_SPELLING or key in REFRESH_KEYS or key.startswith(EXT + "job."):
            continue
        if key in REFRESH_ENABLED_KEYS:
            continue
        if key in BUILTIN_EXCLUDE_EXT.values() or key == DELIVERY_EXT:
            continue
        if key in (EOS_WORKER_KEY, EOS_CONNECTOR_KEY):
            continue
        if key.startswith(EXT) and key[len(EXT) :] in FLOW_EXT_KINDS:
            continue
        _unexpressible(prop, key, ctx, f"flow {source}->{target}")
    return FlowDraft(source, target, enabled, settings, lines, min(p.line for p in fs.values()))


def _unexpressible(prop: Property, key: str, ctx: _Context, scope: str) -> None:
    if key in NOT_EXPRESSIBLE:
        ctx.note(prop, prop.key, f"not expressible in a topology ({scope})", NOT_EXPRESSIBLE[key])
    elif key.startswith("strimzi."):
        name = prop.key.replace(".strimzi.", ".", 1).removeprefix("strimzi.")
        ctx.note(
            prop,
            name,
            f"Strimzi field, not expressible ({scope})",
            "jobs run where the topology's `job:` settings say (deployer, master, parallelism); drop it",
        )
    elif key.startswith(CLIENT_OVERRIDE_PREFIXES):
        ctx.note(
            prop,
            prop.key,
            f"per-client overrides are not expressible ({scope})",
            "jobs use one librdkafka config per cluster: put what you need in clusters.<alias>.config",
        )
    else:
        ctx.note(prop, prop.key, f"unknown key, not imported ({scope})", "check whether you still need it")


# --- the whole file ------------------------------------------------------------------------------


def _ext_top(scopes: _Scopes, ctx: _Context) -> None:
    d = ctx.draft
    rules: dict[str, dict[str, Property]] = {}
    for key, prop in scopes.top.items():
        if key.startswith(EXT + "job.") or key in BUILTIN_EXCLUDE_EXT.values() or key == DELIVERY_EXT:
            continue
        if key in scopes.top_flow or not key.startswith(EXT):
            continue
        rest = key[len(EXT) :]
        if rest == "metadata.name":
            d.name = prop.value.strip()
        elif rest == "metadata.description":
            d.description = prop.value
        elif rest.startswith("prune.") and rest[len("prune.") :] in PRUNE_KEYS:
            d.prune[rest[len("prune.") :]] = _parse_value(prop, Kind.BOOL)
        elif rest.startswith("slo.") and rest[len("slo.") :] in SLO_KINDS:
            d.slo[rest[len("slo.") :]] = _parse_value(prop, SLO_KINDS[rest[len("slo.") :]])
        elif rest.startswith("policies.residency."):
            name, _, attr = rest[len("policies.residency.") :].rpartition(".")
            rules.setdefault(name, {})[attr] = prop
        else:
            ctx.note(prop, prop.key, "unknown reconciler extension key", "check its spelling")
    for name, attrs in rules.items():
        missing = [a for a in ("topics", "tag", "allowed") if a not in attrs]
        if missing:
            any_prop = next(iter(attrs.values()))
            raise _error(
                any_prop,
                f"residency rule {name!r} lacks {', '.join(EXT + 'policies.residency.' + name + '.' + m for m in missing)}",
            )
        d.residency.append(
            ResidencyDraft(
                name,
                _parse_value(attrs["topics"], Kind.LIST),
                attrs["tag"].value.strip(),
                _parse_value(attrs["allowed"], Kind.LIST),
                min(p.line for p in attrs.values()),
            )
        )


def _cluster(
    alias: str, scopes: _Scopes, ctx: _Context, clusters_prop: Property, top_client: dict[str, Property]
) -> ClusterDraft:
    own = scopes.cluster.get(alias, {})
    boot = own.get("bootstrap.servers")
    if boot is None:
        raise _error(
            clusters_prop,
            f"cluster {alias!r} has no {alias}.bootstrap.servers",
            hint=f"add `{alias}.bootstrap.servers = host:port`",
        )
    client = dict(top_client)
    client.update({k: p for k, p in own.items() if is_client_key(k)})
    config = _client_config(alias, client, ctx)
    tags: dict[str, str] = {}
    principal = None
    for key, prop in own.items():
        if key == "bootstrap.servers" or is_client_key(key) or key == EOS_WORKER_KEY:
            continue
        if key.startswith(EXT + "tags."):
            tags[key[len(EXT + "tags.") :]] = prop.value.strip()
        elif key == EXT + "replication_principal":
            principal = prop.value.strip()
        elif key.startswith(EXT + "config."):
            lib_key = key[len(EXT + "config.") :]
            value = prop.value.strip()
            config[lib_key] = (
                _secret(value, alias, lib_key, prop, ctx)
                if secrets.is_secret_key(lib_key)
                else _map_refs(value, alias, lib_key, prop, ctx)
            )
        elif key in BY_SPELLING or key in REFRESH_KEYS or key in REFRESH_ENABLED_KEYS:
            ctx.note(
                prop,
                prop.key,
                "MM2 applies connector settings at cluster level to no flow",
                f"to set it for flows out of or into {alias}, write `{alias}->TARGET.{cut(key, 60)}` or a top-level "
                f"`{cut(key, 60)}`",
            )
        else:
            _unexpressible(prop, key, ctx, f"cluster {alias}")
    bootstrap = _map_refs(boot.value.strip(), alias, "bootstrap.servers", boot, ctx)
    return ClusterDraft(alias, bootstrap, dict(sorted(config.items())), tags, principal, boot.line)


def _providers(props: list[Property]) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in props:
        m = re.fullmatch(r"config\.providers\.([^.]+)\.class", p.key)
        if m:
            out[m.group(1)] = p.value.strip()
    return out


_KEY_REF = re.compile(r"\$\{([^}:]*)\}")  # `${name}`, no config provider: names a key if the file has one


def _check_sizes(props: list[Property]) -> None:
    """A value the topology cannot hold is an error at its own line (not at the line of the imported
    YAML, which the user never sees). `clusters` is split into aliases, each checked on its own."""
    for p in props:
        if p.key != "clusters" and len(p.value) > MAX_SCALAR_CHARS:
            raise _error(
                p,
                f"the value of {cut(p.key)} has {len(p.value):,} characters (limit {MAX_SCALAR_CHARS:,}, "
                "the longest value a topology holds)",
                hint="a setting is a name, a pattern, a list or a number; check this line",
            )


def _key_references(last: dict[str, Property]) -> list[tuple[Property, str]]:
    """Values that name another key of the file (`a = ${b}`), as (property, name); a cycle of them
    (a = ${b}, b = ${a}) is an error naming its keys. Linear: one depth-first search, no recursion."""
    graph: dict[str, list[str]] = {}
    for key, p in last.items():
        if "${" in p.value:
            names = [n for n in dict.fromkeys(_KEY_REF.findall(p.value)) if n in last]
            if names:
                graph[key] = names
    done: set[str] = set()
    for start in graph:
        if start in done:
            continue
        path, on_path = [start], {start}
        stack = [iter(graph[start])]
        while stack:
            name = next(stack[-1], None)
            if name is None:
                stack.pop()
                done.add(path[-1])
                on_path.discard(path.pop())
            elif name in on_path:
                cycle = path[path.index(name) :]
                first = min(range(len(cycle)), key=lambda i: last[cycle[i]].line)
                cycle = cycle[first:] + cycle[:first]
                keys = cycle if len(cycle) <= 6 else cycle[:5] + cycle[-1:]
                shown = [f"{cut(k, 60)} (line {last[k].line})" for k in keys]
                if len(cycle) > 6:
                    shown.insert(5, f"... ({len(cycle) - 6:,} more)")
                chain = " -> ".join(shown)
                raise _error(
                    last[cycle[0]],
                    f"cyclic reference: {chain} -> {cut(cycle[0], 60)}",
                    hint="MM2 substitutes no `${key}` (only config providers, `${provider:path:key}`); "
                    "write the value out",
                )
            elif name not in done and name in graph:
                path.append(name)
                on_path.add(name)
                stack.append(iter(graph[name]))
    return [(last[key], name) for key, names in graph.items() for name in names]


def import_properties(props: list[Property], file: str, options: ImportOptions | None = None) -> TopologyDraft:
    """MM2 properties -> draft; PropertiesError (FILE:LINE) for what cannot be read at all."""
    _check_sizes(props)
    last = {p.key: p for p in props}
    key_refs = _key_references(last)
    clusters_prop = last.get("clusters")
    if clusters_prop is None:
        raise PropertiesError(
            file,
            1,
            "no `clusters` key: this is not a MirrorMaker 2 file",
            hint="MM2 files start with `clusters = A, B` and `A.bootstrap.servers = ...`",
        )
    aliases = list(_parse_value(clusters_prop, Kind.LIST))
    for alias in aliases:
        if len(alias) > MAX_SCALAR_CHARS or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", alias):
            raise _error(
                clusters_prop,
                f"cluster alias {cut(alias)!r} cannot be a topology cluster name",
                hint="aliases use letters, digits, '-' and '_' (a dot would make remote topic names ambiguous); rename it",
            )
    draft = TopologyDraft(name=None, clusters=[], flows=[])
    ctx = _Context(draft, _providers(props), options or ImportOptions())
    seen: dict[str, Property] = {}
    for p in props:
        if p.key in seen and seen[p.key].value != p.value:
            ctx.note(seen[p.key], p.key, f"set again at line {p.line}", "MM2 uses the last value; remove one of them")
        seen[p.key] = p
    for prop, name in key_refs:
        ctx.note(
            prop,
            prop.key,
            f"${{{cut(name, 60)}}} names a key of this file, but MM2 substitutes no keys (only config providers)",
            "the value was copied as it is (the topology reads `${NAME}` as an environment variable); write it out",
        )
    scopes = _scopes(list(last.values()), aliases, ctx)
    for key, prop in scopes.top.items():
        if key.startswith(EXT) or key in BY_SPELLING or key in REFRESH_KEYS or is_client_key(key):
            continue
        if key in REFRESH_ENABLED_KEYS:
            continue
        if key in (EOS_WORKER_KEY, EOS_CONNECTOR_KEY):
            continue
        _unexpressible(prop, key, ctx, "top level")
    _ext_top(scopes, ctx)
    top_client = {k: p for k, p in scopes.top.items() if is_client_key(k)}
    limit = settings.max_flows()
    declared = sum(1 for fs in scopes.flow.values() if "enabled" in fs)
    if declared > limit:  # refused before the flows (and clusters) are built
        nth = sorted(fs["enabled"].line for fs in scopes.flow.values() if "enabled" in fs)[limit]
        raise PropertiesError(file, nth, *flows_limit(limit))
    draft.clusters = [_cluster(a, scopes, ctx, clusters_prop, top_client) for a in aliases]
    for (source, target), fs in sorted(scopes.flow.items(), key=lambda kv: min(p.line for p in kv[1].values())):
        if source == target:
            raise _error(next(iter(fs.values())), f"flow {source}->{target} replicates a cluster to itself")
        if "enabled" not in fs:
            ctx.note(
                next(iter(fs.values())),
                f"{source}->{target}.*",
                f"settings for flow {source}->{target}, which is not enabled (`{source}->{target}.enabled` unset)",
                f"set `{source}->{target}.enabled = true` to replicate it; nothing was imported for it",
            )
            continue
        draft.flows.append(_flow(source, target, scopes, ctx))
    draft.notes.sort(key=note_order)
    return draft


def note_order(note: Note) -> tuple[str, int]:
    """Notes in the order of the input: by file, then line (those without a place last)."""
    if note.where is None:
        return ("\uffff", 0)
    file, _, line = note.where.rpartition(":")
    return (file, int(line) if line.isdigit() else 0)


def import_mm2_text(text: str, file: str, options: ImportOptions | None = None) -> TopologyDraft:
    return import_properties(parse_properties(text, file), file, options)
