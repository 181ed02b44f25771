"""Strimzi `KafkaMirrorMaker2` resources <-> MirrorMaker 2 properties (pure).

Import turns each resource into the MM2 properties Strimzi would hand to MM2's connectors (with the
YAML line of every value) and then uses the MM2 mapping (`mm2_import`), so both formats follow one
table. Both shapes are read:
* `kafka.strimzi.io/v1beta2` with `spec.clusters` (alias, bootstrapServers, tls, authentication,
  config), `spec.connectCluster` and `spec.mirrors[]` naming `sourceCluster` and `targetCluster`;
* the newer shape (Strimzi proposal 115, the `v1` API): `spec.target` given once (alias,
  bootstrapServers, groupId, ..., tls, authentication, config) and `spec.mirrors[].source` (a cluster).
Secret references (`passwordSecret`, `certificateAndKey`, `trustedCertificates`) become `${VAR}`:
the Secret's key when it is a valid variable name (our kubernetes deployer's convention: one key per
variable), else a generated name; the import lists which Secret and key each variable comes from.

Export writes the v1beta2 shape (what running Strimzi operators accept), one resource per target
cluster (Strimzi runs all mirrors of a resource on the target's Connect cluster). Settings MM2 has no
key for ride in the annotation `reconciler.dev/properties` (`reconciler.*` properties).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from reconciler.interop.draft import ImportOptions, Note, TopologyDraft
from reconciler.interop.mm2_export import (
    check_exportable,
    client_properties,
    cluster_ext_values,
    connector_values,
    delivery_values,
    exactly_once,
    job_ext_values,
    topology_ext_values,
)
from reconciler.interop.mm2_import import K8S_PROVIDER, import_properties, note_order
from reconciler.interop.mm2_keys import (
    EOS_WORKER_KEY,
    JAAS_MODULES,
    KEY_CONNECTORS,
    SAME_CLIENT_KEYS,
)
from reconciler.interop.properties import PropertiesError, Property, format_property, parse_properties
from reconciler.textutil import cut
from reconciler.topology import secrets
from reconciler.topology.diagnostics import Diagnostics
from reconciler.topology.loader import Document, load_text
from reconciler.topology.model import Cluster, Topology
from reconciler.topology.settings_registry import Connector

ANNOTATION = "reconciler.dev/properties"
#: v1alpha1 is the v1beta2 shape (its `spec.config`, if any, is reported like every Strimzi field not read).
API_VERSIONS = ("kafka.strimzi.io/v1beta2", "kafka.strimzi.io/v1", "kafka.strimzi.io/v1alpha1")
AUTH_MECHANISMS = {"scram-sha-512": "SCRAM-SHA-512", "scram-sha-256": "SCRAM-SHA-256", "plain": "PLAIN"}
PATTERN_KEYS = {
    "topics": "topicsPattern",
    "topics.exclude": "topicsExcludePattern",
    "groups": "groupsPattern",
    "groups.exclude": "groupsExcludePattern",
}
CONNECTOR_FIELDS = {
    Connector.SOURCE: "sourceConnector",
    Connector.CHECKPOINT: "checkpointConnector",
    Connector.HEARTBEAT: "heartbeatConnector",
}
LEGACY_PATTERNS = {"topicsBlacklistPattern": "topics.exclude", "groupsBlacklistPattern": "groups.exclude"}

#: What Strimzi refuses in `spec.clusters[].config` (KafkaMirrorMaker2ClusterSpec, Strimzi's API reference): keys
#: with these prefixes, except the listed ones (TLS tuning it leaves to the user).
CLUSTER_CONFIG_FORBIDDEN_PREFIXES = (
    "ssl.",
    "sasl.",
    "security.",
    "listeners",
    "plugin.path",
    "rest.",
    "bootstrap.servers",
    "consumer.interceptor.classes",
    "producer.interceptor.classes",
)
CLUSTER_CONFIG_ALLOWED = (
    "ssl.endpoint.identification.algorithm",
    "ssl.cipher.suites",
    "ssl.protocol",
    "ssl.enabled.protocols",
)


def cluster_config_accepts(key: str) -> bool:
    """Whether Strimzi takes Kafka client key `key` in a KafkaMirrorMaker2 cluster's `config`."""
    return key in CLUSTER_CONFIG_ALLOWED or not key.startswith(CLUSTER_CONFIG_FORBIDDEN_PREFIXES)


# --- import --------------------------------------------------------------------------------------


def _str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _shape(value: Any) -> str:
    """What a YAML value is, in words (for "must be a mapping, not a list")."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return f"the boolean {_str(value)}"
    if value is None:
        return "empty"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    return f"the string {cut(str(value), 60)!r}"


def _dotted(path: tuple) -> str:
    """A field's path as written in Strimzi's reference: spec.clusters[0].tls."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class _Reader:
    """One KafkaMirrorMaker2 resource -> MM2 properties. Every field is read through `mapping`,
    `sequence`, `text` or `scalar`, which refuse a value of the wrong shape (FILE:LINE, what was
    expected): nothing of the wrong shape is dropped or turned into a string."""

    def __init__(self, doc: Document):
        self.doc = doc
        self.props: list[Property] = []
        self.notes: list[Note] = []  # what Strimzi does that the properties cannot carry

    def line(self, path: tuple) -> int:
        return self.doc.where(path).line

    def add(self, key: str, value: Any, path: tuple) -> None:
        self.props.append(Property(key, _str(value), self.doc.file, self.line(path)))

    def error(self, path: tuple, message: str, hint: str | None = None) -> PropertiesError:
        return PropertiesError(self.doc.file, self.line(path), message, hint)

    def missing(self, parent_path: tuple, key: str, what: str | None = None) -> PropertiesError:
        """`key` is absent (or empty) from the mapping at `parent_path`: the error is at that mapping's key."""
        where = parent_path + (key,)
        line = self.line(where) if where in self.doc.positions else self.doc.where_key(parent_path).line
        return PropertiesError(
            self.doc.file, line, f"{_dotted(parent_path)} needs `{key}`" + (f" {what}" if what else "")
        )

    def wrong(self, path: tuple, value: Any, expected: str, hint: str | None = None) -> PropertiesError:
        return self.error(path, f"{_dotted(path)} must be {expected}, not {_shape(value)}", hint)

    # Typed access: `parent[key]` at `path` (the parent's path); an absent or empty value is None.

    def mapping(self, parent: dict, key: str, path: tuple, expected: str = "a mapping") -> dict | None:
        value = parent.get(key)
        if value is None or isinstance(value, dict):
            return value
        raise self.wrong(path + (key,), value, expected)

    def sequence(self, parent: dict, key: str, path: tuple, expected: str = "a list") -> list | None:
        value = parent.get(key)
        if value is None or isinstance(value, list):
            return value
        raise self.wrong(path + (key,), value, expected)

    def text(self, parent: dict, key: str, path: tuple) -> str | None:
        """An optional string field (absent or empty: None)."""
        value = parent.get(key)
        if value is None or value == "":
            return None
        if isinstance(value, str):
            return value
        raise self.wrong(path + (key,), value, "a string")

    def need(self, parent: dict, key: str, path: tuple) -> str:
        """A string field the resource cannot do without."""
        value = self.text(parent, key, path)
        if value is None:
            raise self.missing(path, key)
        return value

    def scalar(self, value: Any, path: tuple) -> Any:
        """A setting's value (a string, a number or a boolean), as Kafka configs are."""
        if isinstance(value, (dict, list)):
            raise self.wrong(path, value, "a string, a number or a boolean")
        return value

    def ref(self, secret: str, key: str) -> str:
        return "${" + f"{K8S_PROVIDER}:{secret}:{key}" + "}"

    def secret(self, parent: dict, key: str, path: tuple, fields: tuple[str, ...]) -> dict[str, str]:
        """`parent[key]`, a Secret reference the resource needs: {field: value} of its `fields`."""
        ref = self.mapping(parent, key, path, f"a mapping ({', '.join(f + ': ...' for f in fields)})")
        if ref is None:
            raise self.missing(path, key, "(a Secret reference)")
        return {f: self.need(ref, f, path + (key,)) for f in fields}

    def cluster(self, c: Any, path: tuple) -> str:
        if not isinstance(c, dict):
            raise self.wrong(path, c, "a mapping (alias, bootstrapServers, ...)")
        if not isinstance(c.get("alias"), str):
            raise self.error(path, "a cluster needs an `alias`")
        alias = c["alias"]
        if "bootstrapServers" not in c:
            raise self.error(path, f"cluster {alias!r} has no bootstrapServers")
        self.add(f"{alias}.bootstrap.servers", self.need(c, "bootstrapServers", path), path + ("bootstrapServers",))
        has_tls = c.get("tls") is not None
        tls = self.mapping(c, "tls", path, "a mapping (e.g. `trustedCertificates: [...]`, or `{}`)") or {}
        auth_path = path + ("authentication",)
        auth = self.mapping(c, "authentication", path, "a mapping (type: ..., ...)")
        kind = self.need(auth, "type", auth_path) if auth is not None else None
        sasl = kind in AUTH_MECHANISMS
        if sasl:
            self.add(f"{alias}.security.protocol", "SASL_SSL" if has_tls else "SASL_PLAINTEXT", auth_path)
        elif has_tls:
            self.add(f"{alias}.security.protocol", "SSL", path + ("tls",))
        certs = self.sequence(tls, "trustedCertificates", path + ("tls",), "a list of Secret references") or []
        for i, cert in enumerate(certs):
            p = path + ("tls", "trustedCertificates", i)
            if not isinstance(cert, dict):
                raise self.wrong(p, cert, "a mapping (secretName: ..., certificate: ...)")
            secret = self.need(cert, "secretName", p)
            name = self.text(cert, "certificate", p) or self.text(cert, "pattern", p)
            if name is None:
                raise self.missing(p, "certificate", "(or `pattern`)")
            if i == 0:
                self.add(f"{alias}.ssl.truststore.type", "PEM", p)
                self.add(f"{alias}.ssl.truststore.certificates", self.ref(secret, name), p)
            else:
                self.add(f"{alias}.strimzi.tls.trustedCertificates[{i}]", f"{secret}/{name}", p)
        for key in sorted(set(tls) - {"trustedCertificates"}, key=str):
            self.add(f"{alias}.strimzi.tls.{key}", tls[key], path + ("tls", key))
        if auth is not None and kind is not None:
            if sasl:
                self.add(f"{alias}.sasl.mechanism", AUTH_MECHANISMS[kind], auth_path + ("type",))
                user = self.need(auth, "username", auth_path)
                pw = self.secret(auth, "passwordSecret", auth_path, ("secretName", "password"))
                module = JAAS_MODULES[AUTH_MECHANISMS[kind]]
                self.add(
                    f"{alias}.sasl.jaas.config",
                    f'{module} required username="{user}" password="'
                    + self.ref(pw["secretName"], pw["password"])
                    + '";',
                    auth_path,
                )
            elif kind == "tls":
                ck = self.secret(auth, "certificateAndKey", auth_path, ("secretName", "certificate", "key"))
                self.add(f"{alias}.ssl.keystore.type", "PEM", auth_path)
                self.add(
                    f"{alias}.ssl.keystore.certificate.chain", self.ref(ck["secretName"], ck["certificate"]), auth_path
                )
                self.add(f"{alias}.ssl.keystore.key", self.ref(ck["secretName"], ck["key"]), auth_path)
            else:
                self.add(f"{alias}.strimzi.authentication.type", kind, auth_path)
        config = self.mapping(c, "config", path, "a mapping of Kafka settings (key: value)") or {}
        for key, value in config.items():
            self.add(f"{alias}.{key}", self.scalar(value, path + ("config", key)), path + ("config", key))
        for key in sorted(set(c) - {"alias", "bootstrapServers", "tls", "authentication", "config"}, key=str):
            self.add(f"{alias}.strimzi.{key}", c[key], path + (key,))
        return alias

    def mirror(self, m: dict, path: tuple, source: str, target: str) -> None:
        flow = f"{source}->{target}"
        connectors = {
            name: self.mapping(m, name, path, "a mapping (tasksMax, config, ...)")
            for name in ("sourceConnector", "checkpointConnector", "heartbeatConnector")
        }
        state = self.text(connectors["sourceConnector"] or {}, "state", path + ("sourceConnector",)) or "running"
        self.add(f"{flow}.enabled", "false" if state in ("paused", "stopped") else "true", path)
        for ours, field_name in PATTERN_KEYS.items():
            if field_name in m:
                self.add(f"{flow}.{ours}", self.text(m, field_name, path), path + (field_name,))
        for field_name, ours in LEGACY_PATTERNS.items():
            if field_name in m and PATTERN_KEYS[ours] not in m:
                self.add(f"{flow}.{ours}", self.text(m, field_name, path), path + (field_name,))
        seen: dict[str, tuple[str, tuple]] = {}
        given: dict[str, list[str]] = {}  # connector setting -> the connectors whose config sets it
        for connector, spec in connectors.items():
            if spec is None:
                continue
            cpath = path + (connector,)
            if "tasksMax" in spec:
                tasks = spec["tasksMax"]
                if isinstance(tasks, bool) or not isinstance(tasks, int):
                    raise self.wrong(cpath + ("tasksMax",), tasks, "an integer")
                if connector == "sourceConnector":
                    self.add(f"{flow}.tasks.max", tasks, cpath + ("tasksMax",))
                else:
                    self.add(f"{flow}.strimzi.{connector}.tasksMax", tasks, cpath + ("tasksMax",))
            config = self.mapping(spec, "config", cpath, "a mapping of connector settings (key: value)") or {}
            for key, value in config.items():
                p = cpath + ("config", key)
                value = self.scalar(value, p)
                if key in seen and seen[key][0] != _str(value):
                    raise self.error(
                        p,
                        f"{key} is {cut(_str(value))!r} here but {cut(seen[key][0])!r} in another "
                        f"connector of mirror {flow}",
                        hint="one flow has one value per setting: make them equal",
                    )
                seen[key] = (_str(value), p)
                given.setdefault(key, []).append(connector)
                self.add(f"{flow}.{key}", value, p)
            read = {"tasksMax", "config", "state"} if connector == "sourceConnector" else {"tasksMax", "config"}
            for key in sorted(set(spec) - read, key=str):
                self.add(f"{flow}.strimzi.{connector}.{key}", spec[key], cpath + (key,))
        self.connector_scope(flow, given, seen)
        for key in sorted(
            set(m)
            - {
                "sourceCluster",
                "targetCluster",
                "source",
                "sourceConnector",
                "checkpointConnector",
                "heartbeatConnector",
                *PATTERN_KEYS.values(),
                *LEGACY_PATTERNS,
            },
            key=str,
        ):
            self.add(f"{flow}.strimzi.{key}", m[key], path + (key,))

    def connector_scope(self, flow: str, given: dict[str, list[str]], seen: dict[str, tuple[str, tuple]]) -> None:
        """Strimzi gives a connector's `config` to that connector only; a flow has one value per setting. Say so where
        the connectors MM2 reads a key in (the settings registry's `Mm2.connectors`) are not those it was set in:
        the others used MM2's default (or ignored it), the topology applies it to the whole flow."""
        for key, connectors in given.items():
            readers = KEY_CONNECTORS.get(key)
            if readers is None:
                continue  # not a mapped flow setting: reported as such by the import
            wanted = {CONNECTOR_FIELDS[c] for c in readers}
            if len(readers) > 1:  # the policy keys: the heartbeat connector's one name, `heartbeats`, is the same under
                wanted.discard(CONNECTOR_FIELDS[Connector.HEARTBEAT])  # either policy and any separator
                connectors = [c for c in connectors if c != CONNECTOR_FIELDS[Connector.HEARTBEAT]] or connectors
            if wanted == set(connectors):
                continue
            missing = sorted(wanted - set(connectors))
            idle = sorted(set(connectors) - wanted)
            said = []
            if missing:
                said.append(
                    f"{' and '.join(missing)} read{'s' if len(missing) == 1 else ''} it too, with MM2's default"
                )
            if idle:
                said.append(f"{' and '.join(idle)} ignore{'s' if len(idle) == 1 else ''} it")
            self.notes.append(
                Note(
                    f"{self.doc.file}:{self.line(seen[key][1])}",
                    key,
                    f"set in {', '.join(connectors)} of mirror {flow} only: {'; '.join(said)}",
                    "the topology applies it to the whole flow (one value per setting); check that is what you want",
                )
            )

    def annotation(self, text: str, path: tuple) -> None:
        base = self.line(path)
        for p in parse_properties(text, self.doc.file):
            self.props.append(Property(p.key, p.value, p.file, base + p.line))

    def resource(self, aliases: list[str]) -> None:
        data = self.doc.data
        if data.get("apiVersion") not in API_VERSIONS:
            raise self.error(
                ("apiVersion",),
                f"apiVersion {cut(_str(data.get('apiVersion')))!r} is not one of {', '.join(API_VERSIONS)}",
            )
        spec = data.get("spec")
        if spec is None:
            raise self.error(("spec",), "KafkaMirrorMaker2 has no spec")
        if not isinstance(spec, dict):
            raise self.wrong(("spec",), spec, "a mapping (clusters, mirrors, ...)")
        metadata = self.mapping(data, "metadata", (), "a mapping (name, annotations, ...)") or {}
        annotations = self.mapping(metadata, "annotations", ("metadata",), "a mapping of strings") or {}
        ann = self.text(annotations, ANNOTATION, ("metadata", "annotations"))
        if ann is not None:
            self.annotation(ann, ("metadata", "annotations", ANNOTATION))
        target_alias = None
        if spec.get("target") is not None:
            target_alias = self.cluster(spec["target"], ("spec", "target"))
            aliases.append(target_alias)
        for i, c in enumerate(self.sequence(spec, "clusters", ("spec",), "a list of clusters") or []):
            aliases.append(self.cluster(c, ("spec", "clusters", i)))
        connect = self.text(spec, "connectCluster", ("spec",))
        for i, m in enumerate(self.sequence(spec, "mirrors", ("spec",), "a list of mirrors") or []):
            path = ("spec", "mirrors", i)
            if not isinstance(m, dict):
                raise self.wrong(path, m, "a mapping (sourceCluster, targetCluster, topicsPattern, ...)")
            source: str | None
            if m.get("source") is not None:
                source = self.cluster(m["source"], path + ("source",))
                aliases.append(source)
            else:
                source = self.text(m, "sourceCluster", path)
            target = target_alias or self.text(m, "targetCluster", path) or connect
            if not source or not target:
                raise self.error(
                    path,
                    "a mirror needs a source (sourceCluster or source) and a target "
                    "(targetCluster, connectCluster or spec.target)",
                )
            self.mirror(m, path, source, target)
        for key in sorted(set(spec) - {"clusters", "connectCluster", "target", "mirrors"}, key=str):
            self.add(f"strimzi.spec.{key}", spec[key], ("spec", key))


def import_strimzi_text(text: str, file: str, options: ImportOptions | None = None) -> TopologyDraft:
    diags = Diagnostics()
    docs = load_text(text, file, diags)
    if diags.errors:
        e = diags.errors[0]
        raise PropertiesError(file, e.where.line if e.where else 1, e.message, e.hint)
    props: list[Property] = []
    aliases: list[str] = []
    found = 0
    notes: list[Note] = []
    for doc in docs:
        if doc.data is None:
            continue  # an empty document (a trailing `---`)
        if not isinstance(doc.data, dict) or doc.data.get("kind") != "KafkaMirrorMaker2":
            kind = doc.data.get("kind") if isinstance(doc.data, dict) else None
            metadata = doc.data.get("metadata") if isinstance(doc.data, dict) else None
            name = metadata.get("name") if isinstance(metadata, dict) else None
            what = f"{cut(_str(kind), 60) or 'a document without kind'}" + (
                f" {cut(_str(name), 60)!r}" if isinstance(name, str) else ""
            )
            notes.append(
                Note(
                    f"{file}:{doc.where(()).line}",
                    _str(kind) or "document",
                    f"{what} is not a KafkaMirrorMaker2: skipped",
                    "keep it for your cluster (a Secret, a KafkaTopic, ...); the topology replaces only the "
                    "KafkaMirrorMaker2",
                )
            )
            continue
        found += 1
        reader = _Reader(doc)
        reader.resource(aliases)
        props += reader.props
        notes += reader.notes
    if not found:
        raise PropertiesError(
            file,
            1,
            "no KafkaMirrorMaker2 resource in this file",
            hint="pass the YAML of a `kind: KafkaMirrorMaker2` resource (kafka.strimzi.io/v1beta2 or v1)",
        )
    ordered = list(dict.fromkeys(aliases))
    first_line = props[0].line if props else 1
    props.insert(0, Property("clusters", ", ".join(ordered), file, first_line))
    draft = import_properties(_first_cluster_definition(props), file, options)
    draft.notes = sorted(draft.notes + notes, key=note_order)
    return draft


def _first_cluster_definition(props: list[Property]) -> list[Property]:
    """A cluster named in several resources keeps its first definition (Java keeps the last: not wanted here)."""
    seen: dict[str, Property] = {}
    out = []
    for p in props:
        if "->" not in p.key and p.key in seen and not p.key.startswith("reconciler.") and "." in p.key:
            continue
        seen.setdefault(p.key, p)
        out.append(p)
    return out


# --- export --------------------------------------------------------------------------------------


def _k8s_name(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63] or "mirror"


def _secret_key(value: str) -> str | None:
    """The variable of a value that is exactly one `${VAR}` reference, else None."""
    return secrets.references(value)[0] if secrets.is_env_reference(value) else None


def _cluster_spec(cluster: Cluster, secret_name: str, connect_config: dict[str, str]) -> tuple[dict, dict[str, str]]:
    """A KafkaMirrorMaker2 cluster entry, and the librdkafka settings it cannot hold."""
    cfg = dict(cluster.config)
    spec: dict[str, Any] = {"alias": cluster.alias, "bootstrapServers": cluster.bootstrap_servers}
    protocol = cfg.pop("security.protocol", "PLAINTEXT").upper()
    if protocol in ("SSL", "SASL_SSL"):
        tls: dict[str, Any] = {"trustedCertificates": []}
        ca = _secret_key(cfg.get("ssl.ca.pem", ""))
        if ca:
            cfg.pop("ssl.ca.pem")
            tls["trustedCertificates"] = [{"secretName": secret_name, "certificate": ca}]
        spec["tls"] = tls
    mechanism = (cfg.get("sasl.mechanisms") or cfg.get("sasl.mechanism") or "").upper()
    auth_type = {v: k for k, v in AUTH_MECHANISMS.items()}.get(mechanism)
    password = _secret_key(cfg.get("sasl.password", ""))
    if protocol.startswith("SASL") and auth_type and password and "sasl.username" in cfg:
        spec["authentication"] = {
            "type": auth_type,
            "username": cfg.pop("sasl.username"),
            "passwordSecret": {"secretName": secret_name, "password": password},
        }
        cfg.pop("sasl.password")
        cfg.pop("sasl.mechanisms", None)
        cfg.pop("sasl.mechanism", None)
    elif (
        protocol == "SSL"
        and _secret_key(cfg.get("ssl.certificate.pem", ""))
        and _secret_key(cfg.get("ssl.key.pem", ""))
    ):
        spec["authentication"] = {
            "type": "tls",
            "certificateAndKey": {
                "secretName": secret_name,
                "certificate": _secret_key(cfg.pop("ssl.certificate.pem")),
                "key": _secret_key(cfg.pop("ssl.key.pem")),
            },
        }
    elif protocol not in ("PLAINTEXT", "SSL"):
        cfg["security.protocol"] = protocol  # not expressible in Strimzi's fields: carried in the annotation
    if "ssl.endpoint.identification.algorithm" in cfg:
        java, _ = client_properties(
            Cluster(
                cluster.alias,
                "",
                {"ssl.endpoint.identification.algorithm": cfg.pop("ssl.endpoint.identification.algorithm")},
            )
        )
        connect_config.update(java)
    for key in SAME_CLIENT_KEYS:  # same name in librdkafka and Java: in `config` where Strimzi accepts it
        if key in cfg and cluster_config_accepts(key):
            connect_config[key] = cfg.pop(key)
    if connect_config:
        spec["config"] = dict(connect_config)
    return spec, cfg


def _connector_configs(values: dict[str, str]) -> dict[Connector, dict[str, str]]:
    """The MM2 connector keys of a flow split into the configs of Strimzi's three connectors: each key goes to the
    connectors the settings registry names for it (`Mm2.connectors`; the policy keys to all three)."""
    out: dict[Connector, dict[str, str]] = {c: {} for c in Connector}
    for key, value in values.items():
        for connector in KEY_CONNECTORS[key]:
            out[connector][key] = value
    return out


def _resource(topology: Topology, target: str, origin: str) -> dict:
    eos = exactly_once(topology)
    flows = [f for f in topology.flows if f.target == target]
    secret_name = (topology.default_job.secret_name if topology.default_job else None) or "reconciler-secrets"
    ext: dict[str, str] = dict(topology_ext_values(topology))
    clusters = []
    for alias in [target] + list(dict.fromkeys(f.source for f in flows)):
        cluster = topology.clusters[alias]
        connect = {EOS_WORKER_KEY: "enabled"} if alias == target and target in eos.worker_enabled else {}
        spec, leftovers = _cluster_spec(cluster, secret_name, connect)
        clusters.append(spec)
        ext.update({f"{alias}.{k}": v for k, v in cluster_ext_values(cluster, leftovers).items()})
    mirrors = []
    for f in flows:
        values = connector_values(f)
        mirror: dict[str, Any] = {"sourceCluster": f.source, "targetCluster": target}
        for ours, field_name in PATTERN_KEYS.items():
            if ours in values:
                mirror[field_name] = values.pop(ours)
        tasks = int(values.pop("tasks.max", "1"))
        configs = _connector_configs(values)
        source_cfg, checkpoint_cfg = configs[Connector.SOURCE], configs[Connector.CHECKPOINT]
        heartbeat_cfg = configs[Connector.HEARTBEAT]
        connector: dict[str, Any] = {"tasksMax": tasks}
        if not f.enabled:
            connector["state"] = "stopped"
        if source_cfg:
            connector["config"] = source_cfg
        mirror["sourceConnector"] = connector
        if checkpoint_cfg:
            mirror["checkpointConnector"] = {"config": checkpoint_cfg}
        if heartbeat_cfg:
            mirror["heartbeatConnector"] = {"config": heartbeat_cfg}
        mirrors.append(mirror)
        ext.update({f"{f.name}.{k}": v for k, v in {**job_ext_values(f), **delivery_values(f, eos)}.items()})
    metadata: dict[str, Any] = {"name": _k8s_name(f"{topology.name or 'reconciler'}-to-{target}")}
    if ext:
        metadata["annotations"] = {ANNOTATION: "\n".join(format_property(k, v) for k, v in ext.items()) + "\n"}
    return {
        "apiVersion": "kafka.strimzi.io/v1beta2",
        "kind": "KafkaMirrorMaker2",
        "metadata": metadata,
        "spec": {"replicas": 1, "connectCluster": target, "clusters": clusters, "mirrors": mirrors},
    }


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(
    str, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None)
)


def export_strimzi(topology: Topology, origin: str) -> str:
    check_exportable(topology, "Strimzi KafkaMirrorMaker2")
    targets = list(dict.fromkeys(f.target for f in topology.flows))
    head = (
        f"# KafkaMirrorMaker2 resources exported by `reconciler export strimzi` from {origin}:\n"
        "# one per target cluster (Strimzi runs a resource's mirrors on the target's Connect cluster).\n"
        "# Secrets: the Secret named in passwordSecret/trustedCertificates holds one key per variable.\n"
    )
    docs = [yaml.dump(_resource(topology, t, origin), Dumper=_Dumper, sort_keys=False, width=120) for t in targets]
    return head + "---\n".join(docs)
