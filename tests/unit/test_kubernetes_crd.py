"""Every manifest the kubernetes deployer renders passes the Spark operator's own checks, strictly: the
SparkApplication against the CRD's openAPIV3Schema of two operator releases (vendored: tests/unit/k8s/README.md)
with no field the CRD does not list (the API server prunes unknown fields silently: a misspelt field is a setting
lost), its webhook's rules (reconciler/topology/spark_operator.py), and the ConfigMap against Kubernetes' own
limits. The manifests: a one-flow engine, the demo topology's engines, an engine with spark_conf, one whose flows
reference secrets, one of several flows, one of 400 flows (within the limits with room: compact JSON). And
`reconciler validate` warns about the job.spark_conf keys the operator denies or sets itself."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from reconciler.contract.spec import JobSpec
from reconciler.deployers.base import deployment_options
from reconciler.deployers.kubernetes import FlowEntry, render, render_engine
from reconciler.topology.build import load_topology
from reconciler.topology.spark_operator import DENIED_SPARK_CONF, NAMESPACE_KEY
from tests.plan_helpers import topology

ROOT = Path(__file__).resolve().parents[2]
CRDS = sorted((Path(__file__).parent / "k8s").glob("sparkapplication-v*.json"))
IMAGE = "registry.example/reconciler:1.4.0"
MiB, KiB = 1024 * 1024, 1024

DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
CONFIGMAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


# --- the CRD, made strict ------------------------------------------------------------------------------------
def strict(node: Any) -> Any:
    """The CRD's schema as JSON Schema, strict where the API server prunes: `additionalProperties: false` on every
    object that lists properties without x-kubernetes-preserve-unknown-fields; int-or-string; nullable; the
    ranges of int32/int64."""
    if isinstance(node, list):
        return [strict(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict(v) for k, v in node.items()}
    if out.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if "properties" in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("additionalProperties", False)
    if out.get("format") in INT_RANGES:
        out["minimum"], out["maximum"] = INT_RANGES[out["format"]]
    if out.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


def _list_map_keys(validator, keys, instance, schema):
    """x-kubernetes-list-type: map: no two items share their keys (env names, ports, volume names...)."""
    if not isinstance(instance, list):
        return
    seen = set()
    for item in instance:
        key = tuple(item.get(k) for k in keys) if isinstance(item, dict) else None
        if key in seen:
            yield jsonschema.ValidationError(f"duplicate item {dict(zip(keys, key))} in a list keyed by {keys}")
        seen.add(key)


Validator = jsonschema.validators.extend(jsonschema.Draft7Validator, {"x-kubernetes-list-map-keys": _list_map_keys})


@cache
def crd_schema(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())["openAPIV3Schema"]


@cache
def strict_validator(path: Path) -> Any:
    schema = strict(crd_schema(path))
    Validator.check_schema(schema)
    return Validator(schema)


def sub_schema(path: Path, *keys: str) -> dict[str, Any]:
    node = crd_schema(path)
    for key in keys:
        node = node[key]
    return node


def pod_template_schema(path: Path) -> dict[str, Any]:
    """A Pod template is x-kubernetes-preserve-unknown-fields in the CRD (the operator writes it to a file for
    spark-submit): checked here against the CRD's own core/v1 types of the fields the templates use (a
    Container is a sidecar's schema, Volume spec.volumes', PodSecurityContext driver.podSecurityContext). A field
    not listed here fails: add it with its core/v1 schema when the deployer renders one more."""
    spec = ("properties", "spec", "properties")
    driver = (*spec, "driver", "properties")
    strings = {"type": "object", "additionalProperties": {"type": "string"}}
    return strict(
        {
            "type": "object",
            "properties": {
                "metadata": {"type": "object", "properties": {"labels": strings, "annotations": strings}},
                "spec": {
                    "type": "object",
                    "properties": {
                        "containers": {"type": "array", "items": sub_schema(path, *driver, "sidecars", "items")},
                        "volumes": sub_schema(path, *spec, "volumes"),
                        "securityContext": sub_schema(path, *driver, "podSecurityContext"),
                        "terminationGracePeriodSeconds": {"type": "integer", "format": "int64"},
                    },
                },
            },
        }
    )


def crd_errors(app: dict[str, Any], path: Path) -> list[str]:
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in strict_validator(path).iter_errors(app)]
    for role in ("driver", "executor"):
        template = app.get("spec", {}).get(role, {}).get("template")
        if template is not None:
            check = Validator(pod_template_schema(path))
            errors += [
                f"spec/{role}/template/{'/'.join(map(str, e.absolute_path))}: {e.message}"
                for e in check.iter_errors(template)
            ]
    return errors


# --- Kubernetes' and the webhook's rules ---------------------------------------------------------------------
def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def metadata_errors(meta: dict[str, Any], name_rule: re.Pattern[str]) -> list[str]:
    errors = []
    if not (name_rule.fullmatch(meta.get("name", "")) and len(meta["name"]) <= 63):
        errors.append(f"name {meta.get('name')!r} is not a {name_rule.pattern} of at most 63 characters")
    if not (DNS1123_LABEL.fullmatch(meta.get("namespace", "")) and len(meta["namespace"]) <= 63):
        errors.append(f"namespace {meta.get('namespace')!r} is not a DNS-1123 label")
    for kind in ("labels", "annotations"):
        for key, value in (meta.get(kind) or {}).items():
            prefix, _, local = key.rpartition("/")
            if prefix and not (DNS1123_SUBDOMAIN.fullmatch(prefix) and len(prefix) <= 253):
                errors.append(f"{kind} key {key!r}: prefix is not a DNS-1123 subdomain")
            if not (QUALIFIED_NAME.fullmatch(local) and len(local) <= 63):
                errors.append(f"{kind} key {key!r} is not a qualified name")
            if not isinstance(value, str):
                errors.append(f"{kind} {key!r}: value is not a string")
            elif kind == "labels" and not (LABEL_VALUE.fullmatch(value) and len(value) <= 63):
                errors.append(f"label {key!r}: value {value!r} is not a label value")
    size = sum(len(k.encode()) + len(v.encode()) for k, v in (meta.get("annotations") or {}).items())
    if size > 256 * KiB:
        errors.append(f"annotations hold {size} bytes, more than 256 KiB")
    return errors


def configmap_errors(cm: dict[str, Any]) -> list[str]:
    """Kubernetes' rules for a ConfigMap: its name a DNS-1123 subdomain, its data keys [-._a-zA-Z0-9]+, its data
    at most 1 MiB."""
    errors = metadata_errors(cm["metadata"], DNS1123_SUBDOMAIN)
    data = cm.get("data") or {}
    errors += [
        f"data key {k!r} is not [-._a-zA-Z0-9]+ of at most 253"
        for k in data
        if not (CONFIGMAP_KEY.fullmatch(k) and len(k) <= 253)
    ]
    errors += [f"data {k!r} is not a string" for k, v in data.items() if not isinstance(v, str)]
    size = sum(len(k.encode()) + len(str(v).encode()) for k, v in data.items())
    if size > MiB:
        errors.append(f"data holds {size} bytes, more than 1 MiB")
    return errors


def webhook_errors(app: dict[str, Any]) -> list[str]:
    """The operator's validating webhook (internal/webhook/sparkapplication_validator.go, v2.5.2)."""
    errors = metadata_errors(app["metadata"], DNS1035_LABEL)
    spec = app["spec"]
    if ("template" in spec["driver"] or "template" in spec["executor"]) and _version(spec["sparkVersion"]) < (3, 0, 0):
        errors.append("pod template feature requires Spark version 3.0.0 or higher")
    if spec.get("nodeSelector") and (spec["driver"].get("nodeSelector") or spec["executor"].get("nodeSelector")):
        errors.append("node selector cannot be defined at both SparkApplication and Driver/Executor")
    ports = [o.get("servicePort") for o in spec.get("driverIngressOptions") or []]
    if None in ports or len(set(ports)) != len(ports):
        errors.append("driverIngressOptions: a servicePort missing or duplicated")
    for key, value in (spec.get("sparkConf") or {}).items():
        if key in DENIED_SPARK_CONF:
            errors.append(f"sparkConf key {key!r} is not allowed: {DENIED_SPARK_CONF[key]}")
        if key == NAMESPACE_KEY and value != app["metadata"]["namespace"]:
            errors.append(f"sparkConf key {key!r} must equal the application namespace")
    return errors


# --- the manifests ---------------------------------------------------------------------------------------------
def _topology_text(flows: str, defaults: str = "") -> Any:
    return topology(
        flows,
        {"west": "west-kafka:9092", "north": "north-kafka:9092", "east": "east-kafka:9092"},
        extra=defaults,
    )


def _engines(topo: Any, **extra: Any) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The manifests of every engine of a topology, rendered as the deployer does (its flows' specs, the
    deployment options of its first flow)."""
    by_engine: dict[str, list[Any]] = {}
    for flow in topo.flows:
        by_engine.setdefault(flow.engine, []).append(flow)
    for engine, flows in sorted(by_engine.items()):
        first = flows[0]
        options = {**deployment_options(first.job, first.engine), "image": IMAGE, **extra}
        options["engine"] = engine
        specs = [JobSpec.from_flow(topo, f) for f in flows]
        entries = {s.flow: FlowEntry(s.to_json() + "\n", 1_700_000_000.0) for s in specs}
        yield engine, render_engine(engine, entries, specs[0].engine.spark_conf, options, deployed_at=1_700_000_000.0)


K8S = "job: {deployer: kubernetes, image: img:1"


SASL = (
    '{security.protocol: SASL_SSL, sasl.mechanisms: SCRAM-SHA-512, sasl.username: "${%s_USER}", '
    'sasl.password: "${%s_PASSWORD}", ssl.ca.location: /etc/kafka/ca.pem}'
)


def many_flows(n: int) -> Any:
    """One engine of `n` flows as production has them: families of west->east over SASL_SSL clusters, each with
    its own topics and groups."""
    from reconciler.topology.build import load_topology_text

    lines = [
        f'  - {{source: west, target: east, name: family-{i:03d}, topics: {{include: ["orders-{i}", '
        f'"payments-{i}\\\\..*"]}}, groups: {{include: ["billing-{i}-.*"]}}, delivery: at-least-once}}'
        for i in range(n)
    ]
    return load_topology_text(
        "apiVersion: reconciler/v1\nkind: Topology\nmetadata: {name: big}\nclusters:\n"
        f'  west: {{bootstrap_servers: "west-kafka-1:9093,west-kafka-2:9093,west-kafka-3:9093", config: {SASL % ("WEST", "WEST")}}}\n'
        f'  east: {{bootstrap_servers: "east-kafka-1:9093,east-kafka-2:9093,east-kafka-3:9093", config: {SASL % ("EAST", "EAST")}}}\n'
        "defaults: {job: {deployer: kubernetes, image: img:1}}\nflows:\n" + "\n".join(lines)
    )


def manifests() -> dict[str, list[dict[str, Any]]]:
    cases: dict[str, list[dict[str, Any]]] = {}
    one = _topology_text(f"flows:\n  - {{source: west, target: east, {K8S}}}}}")
    cases["one flow"] = render(JobSpec.from_flow(one, one.flows[0]), deployment_options(one.flows[0].job, "east"))
    demo, diags = load_topology(sorted((ROOT / "topologies" / "demo").glob("*.yaml")))
    assert demo is not None, diags
    for engine, docs in _engines(demo):
        cases[f"demo engine {engine}"] = docs
    conf = _topology_text(
        "flows:\n  - {source: west, target: east, job: {deployer: kubernetes, image: img:1, namespace: replication, "
        'service_account: mirror, secret_name: mirror-secrets, metrics_port: 9500, spark_conf: {spark.executor.memory: "2g", '
        'spark.driver.memory: "1g", spark.executor.cores: "2", spark.dynamicAllocation.maxExecutors: "12", '
        'spark.sql.shuffle.partitions: "4", spark.kubernetes.namespace: replication}}}'
    )
    cases["spark_conf"] = next(docs for _, docs in _engines(conf))
    no_metrics = _topology_text(f"flows:\n  - {{source: west, target: east, {K8S}, metrics_port: 0}}}}")
    cases["no metrics port"] = next(docs for _, docs in _engines(no_metrics))
    secrets = load_topology_text_with_secrets()
    cases["secrets"] = next(docs for _, docs in _engines(secrets))
    several = _topology_text(
        f'flows:\n  - {{source: west, target: east, name: orders, topics: {{include: ["orders"]}}, {K8S}}}}}\n  - {{source: north, target: east, {K8S}}}}}\n'
        f'  - {{source: west, target: east, name: audit, topics: {{include: ["audit"]}}, {K8S}}}}}'
    )
    cases["several flows"] = next(docs for _, docs in _engines(several))
    cases["400 flows"] = next(docs for _, docs in _engines(many_flows(400)))
    return cases


def load_topology_text_with_secrets() -> Any:
    from reconciler.topology.build import load_topology_text

    return load_topology_text(
        """apiVersion: reconciler/v1
kind: Topology
metadata: {name: secrets}
clusters:
  west: {bootstrap_servers: "west-kafka:9092", config: {security.protocol: SASL_SSL, sasl.mechanisms: PLAIN, sasl.username: "${WEST_USER}", sasl.password: "${WEST_PASSWORD}"}}
  east: {bootstrap_servers: "east-kafka:9092", config: {security.protocol: SASL_SSL, sasl.mechanisms: PLAIN, sasl.username: mirror, sasl.password: "${EAST_PASSWORD}"}}
flows:
  - {source: west, target: east, job: {deployer: kubernetes, image: img:1, secret_name: kafka-credentials}}
"""
    )


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return manifests()


# --- the tests -------------------------------------------------------------------------------------------------
def test_the_vendored_crds_are_two_v2_releases_of_the_operator():
    assert [p.name for p in CRDS] == ["sparkapplication-v2.1.1.json", "sparkapplication-v2.5.2.json"]
    for path in CRDS:
        crd = json.loads(path.read_text())
        assert crd["metadata"]["name"] == "sparkapplications.sparkoperator.k8s.io" and crd["version"] == "v1beta2"
        driver = sub_schema(path, "properties", "spec", "properties", "driver", "properties")
        assert driver["template"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


@pytest.mark.parametrize("crd", CRDS, ids=lambda p: p.stem)
def test_every_rendered_sparkapplication_passes_the_crd_strictly(rendered, crd):
    assert len(rendered) >= 8, sorted(rendered)
    for case, (_, app, *_) in rendered.items():
        assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2" and app["kind"] == "SparkApplication"
        assert crd_errors(app, crd) == [], case


def test_every_rendered_sparkapplication_passes_the_operators_webhook(rendered):
    for case, (_, app, *_) in rendered.items():
        assert webhook_errors(app) == [], case


def test_every_rendered_configmap_is_within_kubernetes_rules(rendered):
    for case, (cm, app, *_) in rendered.items():
        assert cm["apiVersion"] == "v1" and cm["kind"] == "ConfigMap"
        assert configmap_errors(cm) == [], case
        assert cm["metadata"]["namespace"] == app["metadata"]["namespace"], case


@pytest.mark.parametrize("crd", CRDS, ids=lambda p: p.stem)
def test_the_check_fails_on_what_the_api_server_would_prune_or_reject(rendered, crd):
    _, app, *_ = rendered["one flow"]
    assert crd_errors(app, crd) == []

    def errors_with(change) -> list[str]:
        bad = copy.deepcopy(app)
        change(bad)
        return crd_errors(bad, crd)

    assert errors_with(lambda a: a["spec"]["driver"].update(volumeMount=[])), "a misspelt field of the driver"
    assert errors_with(lambda a: a["spec"].update(restartPolicies={})), "an unknown field of the spec"
    assert errors_with(lambda a: a["spec"]["restartPolicy"].update(type="Sometimes")), "a value outside the enum"
    assert errors_with(lambda a: a["spec"]["driver"].update(cores="1")), "a string where the CRD has an integer"
    assert errors_with(lambda a: a["spec"]["driver"].update(cores=2**31)), "an int32 out of range"
    assert errors_with(lambda a: a["spec"].pop("sparkVersion")), "a required field missing"
    assert errors_with(lambda a: a["spec"].update(volumes=[{"name": "v", "configMap": {"name": "x", "itmes": []}}]))
    # a field under x-kubernetes-preserve-unknown-fields is kept as written: no error (the pod template's own
    # check below covers it); an int-or-string takes both
    loose = copy.deepcopy(app)
    loose["spec"]["driver"]["template"] = {"anything": {"goes": 1}}
    assert not list(strict_validator(crd).iter_errors(loose)) and crd_errors(loose, crd)
    quantity = {"cpu": 1, "memory": "1Gi"}
    assert not errors_with(lambda a: a["spec"].update(batchSchedulerOptions={"resources": quantity}))
    assert errors_with(lambda a: a["spec"].update(batchSchedulerOptions={"resources": {"cpu": [1]}}))
    # x-kubernetes-list-map-keys: a container's two ports of one number and protocol
    port = {"containerPort": 1, "protocol": "TCP"}
    assert not errors_with(lambda a: a["spec"]["driver"].update(sidecars=[{"name": "a", "ports": [port]}]))
    assert errors_with(lambda a: a["spec"]["driver"].update(sidecars=[{"name": "a", "ports": [port, port]}]))
    # the pod template's own check
    template = {"spec": {"containers": [{"name": "c", "envFrom": [{"secretRef": {"name": "s"}}]}]}}
    assert not errors_with(lambda a: a["spec"]["driver"].update(template=template))
    template = {"spec": {"containers": [{"name": "c", "envFrom": [{"secretRef": {"nam": "s"}}]}]}}
    assert errors_with(lambda a: a["spec"]["driver"].update(template=template))
    assert errors_with(lambda a: a["spec"]["driver"].update(template={"spec": {"hostNetwork": True}}))


def test_the_rules_fail_on_what_kubernetes_or_the_webhook_rejects(rendered):
    cm, app, *_ = rendered["one flow"]
    bad = copy.deepcopy(cm)
    bad["data"]["flow/west.east.json"] = "{}"
    bad["metadata"]["annotations"]["reconciler/big"] = "x" * (256 * KiB)
    bad["data"]["big"] = "x" * MiB
    errors = configmap_errors(bad)
    assert any("data key" in e for e in errors) and any("annotations hold" in e for e in errors)
    assert any("more than 1 MiB" in e for e in errors)
    bad = copy.deepcopy(app)
    bad["metadata"]["name"] = "1-engine"
    bad["spec"]["sparkConf"].update({"spark.master": "local[2]", NAMESPACE_KEY: "elsewhere"})
    bad["spec"]["sparkVersion"] = "2.4.8"
    bad["spec"]["driver"]["template"] = {}
    errors = webhook_errors(bad)
    assert len(errors) == 4, errors


def test_an_engine_of_400_flows_fits_kubernetes_limits_with_room(rendered):
    """400 flows over SASL clusters: the ConfigMap's data within 3/4 of Kubernetes' 1 MiB (room for flows with
    more settings than these), its annotations within 256 KiB. The specs and annotations are compact JSON: the
    indented specs of before took 0.92 MiB here (2397 bytes a spec, 1793 compact)."""
    cm, app, *_ = rendered["400 flows"]
    data = sum(len(k.encode()) + len(v.encode()) for k, v in cm["data"].items())
    annotations = sum(len(k.encode()) + len(v.encode()) for k, v in cm["metadata"]["annotations"].items())
    assert len(json.loads(cm["metadata"]["annotations"]["reconciler/flows"])) == 400
    assert data <= 3 * MiB // 4 and annotations <= 256 * KiB, (data, annotations)
    for key, text in cm["data"].items():
        assert text.rstrip("\n") == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":")), key
    for value in (*cm["metadata"]["annotations"].values(), *app["metadata"]["annotations"].values()):
        assert not value.startswith("{") or value == json.dumps(
            json.loads(value), sort_keys=True, separators=(",", ":")
        )


def test_the_compact_form_keeps_the_spec_and_its_hash():
    topo = many_flows(3)
    for flow in topo.flows:
        spec = JobSpec.from_flow(topo, flow)
        compact = spec.to_compact_json()
        assert len(compact) < len(spec.to_json()) and "\n" not in compact
        assert JobSpec.from_json(compact) == JobSpec.from_json(spec.to_json()) == spec
        assert JobSpec.from_json(compact).spec_hash() == spec.spec_hash()
    cm, *_ = next(docs for _, docs in _engines(topo))
    [key, *_] = sorted(k for k in cm["data"] if k.startswith("flow."))
    assert JobSpec.from_json(cm["data"][key]) == JobSpec.from_flow(topo, topo.flows[0])
    assert json.loads(cm["metadata"]["annotations"]["reconciler/flows"])[topo.flows[0].name]["spec-hash"] == (
        JobSpec.from_flow(topo, topo.flows[0]).spec_hash()
    )


def test_validate_warns_about_spark_conf_keys_the_operator_denies_or_owns(tmp_path, capsys):
    from reconciler.cli.main import main

    path = tmp_path / "t.yaml"
    path.write_text(
        """apiVersion: reconciler/v1
kind: Topology
metadata: {name: t}
clusters: {west: {bootstrap_servers: "w:1"}, east: {bootstrap_servers: "e:1"}, north: {bootstrap_servers: "n:1"}}
defaults:
  job:
    deployer: kubernetes
    image: img:1
    namespace: replication
    spark_conf:
      spark.executor.memory: 2g
      spark.kubernetes.container.image: other:2
flows:
  - source: west
    target: east
    job:
      spark_conf:
        spark.executor.memory: 2g
        spark.kubernetes.container.image: other:2
        spark.kubernetes.namespace: default
        spark.kubernetes.driver.podTemplateFile: /tmp/t.yaml
  - {source: east, target: west}
  - {source: north, target: west}
  - {source: west, target: north, job: {deployer: local, spark_conf: {spark.master: "local[2]"}}}
"""
    )
    assert main(["validate", str(path)]) == 0
    captured = capsys.readouterr()
    assert "valid: 3 clusters, 4 flows, 4 warnings" in captured.out
    lines = [line for line in captured.err.splitlines() if "warning:" in line]
    at = {re.sub(r":\d+: warning: .*key '([^']+)'.*", r" \1", line.split(str(path) + ":")[1]) for line in lines}
    # the flow's own keys at their lines; the defaults' once (two flows take them), a local flow's not at all
    assert at == {
        "19 spark.kubernetes.container.image",
        "20 spark.kubernetes.namespace",
        "21 spark.kubernetes.driver.podTemplateFile",
        "12 spark.kubernetes.container.image",
    }, captured.err
    assert any("rejects the SparkApplication (use the image field on the CRD instead" in line for line in lines)
    assert any("must equal the application namespace 'replication'" in line for line in lines)
    assert "spark.executor.memory" not in captured.err and "spark.master" not in captured.err
