"""The kubernetes deployer through plan/apply (memory double, no cluster): one SparkApplication per engine. The
rendered ConfigMap (the engine directory: engine.json and one key per flow) and SparkApplication have the shape the
Spark operator expects, secrets only as Secret references; adding, changing, restarting and removing a flow touch
only the ConfigMap, a change of the engine's own settings changes the application; flows move between engines
and out of the earlier per-flow layout; `kubectl_apply` runs kubectl (a fake one here)."""

from __future__ import annotations

import json
import os
import re
import stat
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from reconciler.cli.main import main
from reconciler.contract.engine import flat_flow_file
from reconciler.contract.spec import JobSpec
from reconciler.deployers import Deployers
from reconciler.deployers.base import deployment_options
from reconciler.deployers.kubernetes import (
    CRD_FILE,
    DEFAULTS,
    ENGINE_MOUNT,
    IMAGE_SPARK_VERSION,
    SECRETS_MOUNT,
    KubernetesDeployer,
    engine_resource_name,
    render,
    resource_name,
)
from reconciler.jobplan.backend import JobBackend
from reconciler.topology.build import load_topology_text
from reconciler.topology.defaults import BUILTIN_FLOW_DEFAULTS
from reconciler.topology.diagnostics import TopologyError
from reconciler.topology.model import JobSettings
from tests.job_helpers import StatusBoard
from tests.plan_helpers import World, topology

SECRET = "k8s-s3cret-never-rendered"
TOPO = """apiVersion: reconciler/v1
kind: Topology
metadata: {{name: k8s}}
clusters:
  west: {{bootstrap_servers: "west-kafka:9092"}}
  east:
    bootstrap_servers: "east-kafka:9092"
    config: {{security.protocol: SASL_SSL, sasl.mechanisms: PLAIN, sasl.username: mirror, sasl.password: "${{EAST_PASSWORD}}"}}
defaults:
  job:
    deployer: kubernetes
    image: {image}
    namespace: replication
    manifests_dir: "{dir}"
    parallelism: 3
    kubectl_apply: {kubectl}
flows:
  - {{source: west, target: east, name: orders, topics: {{include: {topics}}}, delivery: {delivery}}}
{extra}
"""
REFUNDS = '  - {source: west, target: east, name: refunds, topics: {include: ["refunds"]}}'
ORDERS, REFUNDS_FLOW = "west->east:orders", "west->east:refunds"


class K8sEnv:
    def __init__(self, tmp_path, monkeypatch, capsys):
        self.tmp, self.capsys = tmp_path, capsys
        self.dir = tmp_path / "deploy" / "k8s"
        monkeypatch.setenv("EAST_PASSWORD", SECRET)
        self.kubectl_log = tmp_path / "kubectl.log"
        self.kubectl = tmp_path / "bin" / "kubectl"
        self.kubectl.parent.mkdir()
        self.kubectl.write_text(
            f'#!/bin/sh\necho "$@" >> {self.kubectl_log}\n'
            'if [ "$1" = get ]; then echo \'{"status": {"applicationState": {"state": "RUNNING"}, '
            '"driverInfo": {"podName": "mirror-engine-east-driver"}}}\'; '
            'else echo "sparkapplication.sparkoperator.k8s.io/x configured"; fi\n'
        )
        self.kubectl.chmod(self.kubectl.stat().st_mode | stat.S_IEXEC)
        self.world = World(
            topology("flows:\n  - {source: west, target: east}", {"west": "west-kafka:9092", "east": "east-kafka:9092"})
        )
        self.world["west"].add_topic("orders", 2)
        self.world["west"].add_topic("refunds", 2)
        self.board = StatusBoard()
        self.backend = JobBackend(Deployers(tmp_path / "state", kubectl=str(self.kubectl)), self.board.reader)
        self.cli = self.world.backend(self.backend)  # what the CLI runs against
        self.path = tmp_path / "t.yaml"
        self.write()

    def write(
        self,
        topics='["orders"]',
        delivery="at-least-once",
        kubectl="false",
        extra="",
        image="registry.example/reconciler:1.4.0",
    ) -> None:
        self.path.write_text(
            TOPO.format(dir=self.dir, topics=topics, delivery=delivery, kubectl=kubectl, extra=extra, image=image)
        )

    def jobs(self) -> list[dict]:
        """The plan's job actions and engine replacements."""
        main(["plan", str(self.path), "--format", "json"], self.cli)
        return [
            a for a in json.loads(self.capsys.readouterr().out)["actions"] if a["kind"].endswith(("_job", "_engine"))
        ]

    def apply(self) -> str:
        assert main(["apply", str(self.path), "--auto-approve"], self.cli) == 0, self.capsys.readouterr()
        out = self.capsys.readouterr().out
        assert SECRET not in out
        return out

    def file(self, engine: str = "east") -> Path:
        return self.dir / f"engine-{engine}.yaml"

    def manifest(self, engine: str = "east") -> tuple[dict, dict, str]:
        text = self.file(engine).read_text()
        cm, app, *_ = list(yaml.safe_load_all(text))
        assert not re.search(r"[&*]id\d+", text), "rendered manifests use no YAML anchors or aliases"
        return cm, app, text

    def spec(self, flow: str, engine: str = "east") -> JobSpec:
        return JobSpec.from_json(self.manifest(engine)[0]["data"][flat_flow_file(flow)])

    def report_all(self) -> None:
        cm = self.manifest()[0]
        for flow in json.loads(cm["metadata"]["annotations"]["reconciler/flows"]):
            self.board.report(flow, self.spec(flow))


@pytest.fixture
def k8s(tmp_path, monkeypatch, capsys):
    return K8sEnv(tmp_path, monkeypatch, capsys)


def test_rendered_manifests_have_the_operators_shape_and_no_secret(k8s):
    [deploy] = k8s.jobs()
    assert deploy["kind"] == "deploy_job" and deploy["options"]["engine"] == "east"
    assert "engine east, kubernetes replication, image registry.example/reconciler:1.4.0" in deploy["description"]
    out = k8s.apply()
    assert "rendered" in out and "added to engine east" in out
    assert sorted(p.name for p in k8s.dir.iterdir()) == [CRD_FILE, "engine-east.yaml"], "one file per engine"
    cm, app, text = k8s.manifest()
    assert SECRET not in text
    name = engine_resource_name("east")
    assert name == "mirror-engine-east"

    assert cm["apiVersion"] == "v1" and cm["kind"] == "ConfigMap" and cm["metadata"]["namespace"] == "replication"
    assert sorted(cm["data"]) == ["engine.json", "flow.west.east.orders.json"]
    assert json.loads(cm["data"]["engine.json"]) == {"name": "east", "master": "inherit", "spark_conf": {}}
    spec = k8s.spec(ORDERS)
    assert spec.flow == ORDERS and spec.target.config["sasl.password"] == "${EAST_PASSWORD}"
    notes = json.loads(cm["metadata"]["annotations"]["reconciler/flows"])
    assert notes[ORDERS]["spec-hash"] == spec.spec_hash() == deploy["spec_hash"]
    assert cm["metadata"]["annotations"]["reconciler/secret-variables"] == "EAST_PASSWORD"

    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2" and app["kind"] == "SparkApplication"
    assert app["metadata"] == {**app["metadata"], "name": name, "namespace": "replication"}
    s = app["spec"]
    assert s["type"] == "Python" and s["mode"] == "cluster" and s["image"] == "registry.example/reconciler:1.4.0"
    assert s["mainApplicationFile"] == "local:///opt/reconciler/jobs/mirror_job.py"
    assert s["arguments"] == ["--engine-dir", "/etc/reconciler/engine", "--master", "inherit"] and (
        ENGINE_MOUNT == "/etc/reconciler/engine"
    )
    assert s["restartPolicy"]["type"] == "Always" and re.fullmatch(r"\d+\.\d+\.\d+.*", s["sparkVersion"])
    # the pods' shape is in pod templates, which Spark applies itself: no mutating webhook (docs/install.md)
    driver_pod, executor_pod = s["driver"]["template"]["spec"], s["executor"]["template"]["spec"]
    # the Secret as files too (one per key), on the driver and the executors: their RECONCILER_SECRETS_DIR, which
    # the kubelet rewrites when the Secret changes (credential rotation, docs/security.md)
    secrets_volume = {
        "name": "secrets",
        "secret": {"secretName": "reconciler-secrets", "optional": True, "defaultMode": 0o440},
    }
    secrets_mount = {"name": "secrets", "mountPath": SECRETS_MOUNT, "readOnly": True}
    assert SECRETS_MOUNT == "/etc/reconciler/secrets"
    assert driver_pod["volumes"] == [{"name": "engine", "configMap": {"name": cm["metadata"]["name"]}}, secrets_volume]
    assert executor_pod["volumes"] == [secrets_volume]
    [driver_c], [executor_c] = driver_pod["containers"], executor_pod["containers"]
    assert (driver_c["name"], executor_c["name"]) == ("spark-kubernetes-driver", "spark-kubernetes-executor")
    assert driver_c["volumeMounts"] == [{"name": "engine", "mountPath": ENGINE_MOUNT, "readOnly": True}, secrets_mount]
    assert executor_c["volumeMounts"] == [secrets_mount]
    assert "volumes" not in s and "volumeMounts" not in s["driver"], "no webhook-era copy of the pod's parts"
    assert s["driver"]["serviceAccount"] == "spark-operator-spark"
    # initialExecutors is Spark's default (minExecutors); shuffle tracking the operator's with dynamicAllocation
    assert s["dynamicAllocation"] == {"enabled": True, "minExecutors": 1, "maxExecutors": 8}
    assert "spark.dynamicAllocation.shuffleTracking.enabled" not in s["sparkConf"]
    assert s["sparkConf"]["spark.scheduler.mode"] == "FAIR"
    for pod, container in ((driver_pod, driver_c), (executor_pod, executor_c)):
        assert container["envFrom"] == [{"secretRef": {"name": "reconciler-secrets", "optional": True}}]
        assert {"name": "RECONCILER_SECRETS_DIR", "value": SECRETS_MOUNT} in container["env"]
        assert not [e for e in container.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})]
        # Pod Security "restricted", the image's user, its writable working directory, job.termination_grace_seconds
        assert pod["securityContext"] == {
            "runAsNonRoot": True,
            "runAsUser": 185,
            "runAsGroup": 185,
            "fsGroup": 185,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert container["workingDir"] == "/opt/spark/work-dir" and pod["terminationGracePeriodSeconds"] == 60
    assert all(isinstance(v, str) for v in s["sparkConf"].values())
    assert not k8s.kubectl_log.exists(), "kubectl only when asked"


def test_flows_added_changed_restarted_and_removed_touch_only_the_configmap(k8s):
    k8s.apply()
    assert k8s.jobs() == [], "rendered just now: pending sync, not down"
    cm1, app1, _ = k8s.manifest()

    # a flow added: the running engine picks it up from the ConfigMap
    k8s.write(extra=REFUNDS)
    [deploy] = k8s.jobs()
    assert deploy["kind"] == "deploy_job" and deploy["flow"] == REFUNDS_FLOW
    assert "added to engine east" in k8s.apply()
    cm2, app2, _ = k8s.manifest()
    assert app2 == app1, "the operator must not resubmit the engine for a new flow"
    assert {"flow.west.east.orders.json", "flow.west.east.refunds.json"} <= set(cm2["data"])
    assert cm2["data"]["flow.west.east.orders.json"] == cm1["data"]["flow.west.east.orders.json"]

    k8s.report_all()  # the cluster synced: both flows run (a flow that never started is only re-rendered)

    # a hot change of one flow
    k8s.write(topics='["orders", "returns"]', extra=REFUNDS)
    [update] = k8s.jobs()
    assert update["kind"] == "update_job" and update["flow"] == ORDERS
    assert "hot reload, no restart" in k8s.apply()
    _, app3, _ = k8s.manifest()
    assert k8s.spec(ORDERS).settings.topics.include == ("orders", "returns") and app3 == app1

    # a change that needs a restart: the engine restarts that flow in place (its driver exits 3)
    k8s.write(topics='["orders", "returns"]', delivery="exactly-once", extra=REFUNDS)
    [restart] = k8s.jobs()
    # which changed settings count as the engine's own (so replace it) is jobplan/engines.py's `engine_settings`;
    # the deployer restarts the flow in place either way, the SparkApplication untouched
    assert ORDERS in (
        [restart["flow"]] if restart["kind"] == "restart_job" else [e["flow"] for e in restart["restarts"]]
    )
    assert "restarted in place in engine east" in k8s.apply()
    cm4, app4, _ = k8s.manifest()
    assert app4 == app1 and k8s.spec(ORDERS).settings.delivery.value == "exactly-once"
    assert k8s.spec(REFUNDS_FLOW).settings.delivery.value == "at-least-once"

    # a flow down (its status is stale, the rendering old): a restart token for it alone
    k8s.board.report(ORDERS, k8s.spec(ORDERS), age=120)
    k8s.board.report(REFUNDS_FLOW, k8s.spec(REFUNDS_FLOW))
    notes = json.loads(cm4["metadata"]["annotations"]["reconciler/flows"])
    for note in notes.values():
        note["deployed-at"] = "2020-01-01T00:00:00Z"
    cm4["metadata"]["annotations"]["reconciler/flows"] = json.dumps(notes, sort_keys=True)
    path = k8s.file()
    path.write_text(yaml.safe_dump_all([cm4, app4], sort_keys=False))
    os.utime(path, (path.stat().st_atime - 600, path.stat().st_mtime - 600))
    [restart] = k8s.jobs()
    assert restart["kind"] == "restart_job" and restart["flow"] == ORDERS and "no fresh status" in restart["reason"]
    k8s.apply()
    cm5, app5, _ = k8s.manifest()
    assert cm5["data"]["flow.west.east.orders.restart"].strip().isdigit()
    assert "flow.west.east.refunds.restart" not in cm5["data"], "its neighbour is not restarted"
    assert app5["spec"] == app1["spec"]

    # a flow removed (prune): the ConfigMap loses it, the application stays
    k8s.write(topics='["orders", "returns"]', delivery="exactly-once", extra="prune: {flows: true}")
    k8s.report_all()
    [stop] = k8s.jobs()
    assert stop["kind"] == "stop_job" and stop["flow"] == REFUNDS_FLOW
    assert "removed from engine east (1 other flow kept running)" in k8s.apply()
    cm6, app6, _ = k8s.manifest()
    assert "flow.west.east.refunds.json" not in cm6["data"] and app6["spec"] == app1["spec"]
    assert k8s.jobs() == []


def test_a_change_of_the_engines_own_settings_changes_the_application(k8s):
    k8s.write(extra=REFUNDS)
    k8s.apply()
    k8s.report_all()
    _, app1, _ = k8s.manifest()
    k8s.write(extra=REFUNDS, image="registry.example/reconciler:1.5.0")
    [replace] = k8s.jobs()  # one engine replacement, one action, listing both flows
    assert replace["kind"] == "replace_engine" and replace["engine"] == "east" and replace["verb"] == "-/+"
    assert replace["reason_kind"] == "job-engine-settings"
    assert [(s["path"], s["new"]) for s in replace["settings"]] == [("image", "registry.example/reconciler:1.5.0")]
    restarts = replace["restarts"]
    assert [e["flow"] for e in restarts] == sorted([ORDERS, REFUNDS_FLOW]) and {e["op"] for e in restarts} == {
        "restart"
    }
    assert all("deployment settings changed: image" in e["reason"] for e in restarts)
    assert all("image" not in e["changes"] for e in restarts), "the engine's settings are said once, on the action"
    assert replace["description"].startswith("replace engine east (kubernetes replication, image")
    out = k8s.apply()
    assert "the operator resubmits its SparkApplication" in out
    _, app2, _ = k8s.manifest()
    assert app2["spec"]["image"] == "registry.example/reconciler:1.5.0"
    hash_of = lambda app: app["spec"]["driver"]["annotations"]["reconciler/restart-hash"]  # noqa: E731
    assert hash_of(app2) != hash_of(app1)
    k8s.report_all()
    assert k8s.jobs() == []


def test_a_flow_moves_between_engines(k8s):
    k8s.write(extra=REFUNDS)
    k8s.apply()
    k8s.report_all()
    k8s.write(extra=REFUNDS.replace("}}", "}, job: {engine: big}}"))
    [move] = k8s.jobs()
    assert move["kind"] == "restart_job" and move["flow"] == REFUNDS_FLOW
    assert "moves from engine east into engine big" in move["reason"]
    out = k8s.apply()
    assert "removed from engine east (1 other flow kept running)" in out
    assert set(k8s.manifest("big")[0]["data"]) == {"engine.json", "flow.west.east.refunds.json"}
    assert "flow.west.east.refunds.json" not in k8s.manifest("east")[0]["data"]
    k8s.report_all()
    k8s.board.report(REFUNDS_FLOW, k8s.spec(REFUNDS_FLOW, "big"))
    assert k8s.jobs() == []


def _legacy_manifest(k8s: K8sEnv, kubectl_apply: bool) -> Path:
    """A manifest of the earlier layout (one SparkApplication per flow), as an earlier release rendered it."""
    topo = load_topology_text(k8s.path.read_text())
    spec = JobSpec.from_flow(topo, topo.flows[0])
    name = resource_name(spec.flow)
    options = {
        "image": "registry.example/reconciler:1.4.0",
        "kubectl_apply": kubectl_apply,
        "manifests_dir": str(k8s.dir),
        "metrics_port": None,
        "namespace": "replication",
        "secret_name": "reconciler-secrets",
        "service_account": "spark",
    }
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-spec", "namespace": "replication"},
        "data": {"spec.json": spec.to_json() + "\n"},
    }
    ann = {"reconciler/flow": spec.flow, "reconciler/options": json.dumps(options, sort_keys=True)}
    app = {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": "replication", "annotations": ann},
        "spec": {"arguments": ["--spec", "/etc/reconciler/spec.json", "--master", "inherit"]},
    }
    path = k8s.dir / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all([cm, app]))
    k8s.board.report(spec.flow, spec)
    return path


@pytest.mark.parametrize("kubectl", [False, True])
def test_a_flow_of_the_earlier_layout_moves_into_its_engine(k8s, kubectl):
    legacy = _legacy_manifest(k8s, kubectl)
    k8s.write(kubectl=str(kubectl).lower())
    [move] = k8s.jobs()
    assert move["kind"] == "restart_job" and move["flow"] == ORDERS
    assert "moves from its own Spark application into engine east" in move["reason"]
    out = k8s.apply()
    assert "its own SparkApplication of the earlier layout removed" in out
    assert not legacy.exists() and k8s.spec(ORDERS).flow == ORDERS
    if kubectl:
        log = k8s.kubectl_log.read_text().splitlines()
        deleted = log.index(f"delete -f {legacy} --ignore-not-found")
        applied = log.index(f"apply --server-side --field-manager=reconciler --force-conflicts -f {k8s.file()}")
        assert deleted < applied, "the old application goes before the engine comes"
    k8s.report_all()
    assert k8s.jobs() == []


def test_kubectl_apply_and_delete_when_asked(k8s):
    k8s.write(kubectl="true", extra=REFUNDS)
    k8s.apply()
    path = k8s.file()
    # server-side apply: client-side apply would keep the whole ConfigMap in an annotation capped at 256 KiB
    applies = [line.split() for line in k8s.kubectl_log.read_text().splitlines() if line.startswith("apply")]
    crd = ["apply", "--server-side", "--field-manager=reconciler", "--force-conflicts", "-f", str(k8s.dir / CRD_FILE)]
    assert applies[0] == crd and applies.count(crd) == 1, "the ReplicationEngine CRD first, once"
    assert applies[1:] and all(
        a == ["apply", "--server-side", "--field-manager=reconciler", "--force-conflicts", "-f", str(path)]
        for a in applies[1:]
    ), applies
    deps = KubernetesDeployer(str(k8s.kubectl)).deployments([{"manifests_dir": str(k8s.dir)}])
    assert sorted(d.flow for d in deps) == [ORDERS, REFUNDS_FLOW]
    assert all(d.alive and d.where.endswith(", driver pod mirror-engine-east-driver") for d in deps), deps
    assert all(d.options["engine"] == "east" and d.options["kubectl_apply"] is True for d in deps)
    k8s.report_all()
    assert k8s.jobs() == []
    k8s.path.write_text(k8s.path.read_text().split("flows:")[0] + "flows: []\nprune: {flows: true}\n")
    stops = k8s.jobs()
    assert [a["kind"] for a in stops] == ["stop_job", "stop_job"] and stops[0]["deployer"] == "kubernetes"
    k8s.apply()
    log = k8s.kubectl_log.read_text()
    assert log.count(f"delete -f {path} --ignore-not-found") == 1, "deleted with its last flow"
    assert not path.exists()


def test_flows_written_in_parallel_all_land_in_the_engine(tmp_path):
    """apply handles a batch's flows in parallel: each read-modify-write of the engine file is one at a time."""
    clusters = {"west": "w:1", "east": "e:1"}
    flows = "\n".join(
        f"  - {{source: west, target: east, name: f{i}, topics: {{include: [t{i}]}}, "
        f"job: {{deployer: kubernetes, image: img:1, manifests_dir: '{tmp_path}'}}}}"
        for i in range(12)
    )
    topo = topology("flows:\n" + flows, clusters)
    deployer = KubernetesDeployer()
    options = {"image": "img:1", "manifests_dir": str(tmp_path), "engine": "east"}
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda f: deployer.deploy(JobSpec.from_flow(topo, f), options), topo.flows))
    assert all(r.ok for r in results), results
    assert sorted(d.flow for d in deployer.deployments([options])) == sorted(f.name for f in topo.flows)
    assert all(deployer.deploy(JobSpec.from_flow(topo, f), options).code.value == "already-done" for f in topo.flows)
    assert sorted(p.name for p in tmp_path.iterdir()) == [CRD_FILE, "engine-east.yaml"]


def test_the_flows_of_an_engine_agree_on_its_settings():
    text = """apiVersion: reconciler/v1
kind: Topology
metadata: {name: t}
clusters: {west: {bootstrap_servers: "w:1"}, north: {bootstrap_servers: "n:1"}, east: {bootstrap_servers: "e:1"}}
defaults: {job: {deployer: kubernetes, image: img:1}}
flows:
  - {source: west, target: east}
  - {source: north, target: east, job: {image: img:2}}
  - {source: east, target: west, job: {image: img:2}}
"""
    with pytest.raises(TopologyError) as err:
        load_topology_text(text)
    [error] = err.value.diagnostics.errors
    assert "flow north->east runs in engine east with flow west->east" in error.message
    assert "image" in error.message


def test_engine_resource_names_are_dns_labels():
    assert engine_resource_name("east") == "mirror-engine-east"
    odd = engine_resource_name("EU_West")
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", odd) and odd != engine_resource_name("eu-west")
    assert len(engine_resource_name("x" * 60)) <= 50


def test_a_topology_without_a_service_account_renders_the_spark_operator_charts():
    # One home (topology/defaults.py), the account the kubeflow spark-operator Helm chart creates (release
    # spark-operator); model.py used to say "spark", a second default that would have been wrong where used.
    topo = topology("flows:\n  - {source: west, target: east, job: {deployer: kubernetes, image: img:1}}")
    flow = topo.flows[0]
    assert flow.job.service_account == "spark-operator-spark"
    _, app, *_ = render(JobSpec.from_flow(topo, flow), deployment_options(flow.job, flow.engine))
    assert app["spec"]["driver"]["serviceAccount"] == "spark-operator-spark"
    _, app, *_ = render(JobSpec.from_flow(topo, flow), {"image": "img:1"})  # options without the setting
    assert app["spec"]["driver"]["serviceAccount"] == "spark-operator-spark"
    bare = JobSettings("kubernetes", "local[2]", 2, 1, 200, 10_000)  # the model's own defaults
    assert bare.service_account == BUILTIN_FLOW_DEFAULTS["job"]["service_account"] == "spark-operator-spark"
    assert {k: getattr(bare, k) for k in DEFAULTS if k != "metrics_port"} == {
        k: v for k, v in DEFAULTS.items() if k != "metrics_port"
    }


def test_render_needs_an_image():
    topo = topology("flows:\n  - {source: west, target: east}")
    spec = JobSpec.from_flow(topo, topo.flows[0])
    with pytest.raises(ValueError, match="needs job.image"):
        render(spec, {})
    res = KubernetesDeployer().deploy(spec, {"manifests_dir": "/nonexistent/x"})
    assert res.code.value == "failed" and "needs job.image" in res.message
    assert not Path("/nonexistent/x").exists(), "nothing written for a flow that cannot be rendered"


def test_driver_pod_exposes_the_metrics_port_with_scrape_annotations():
    topo = topology("flows:\n  - {source: west, target: east, job: {deployer: kubernetes, image: img:1}}")
    spec = JobSpec.from_flow(topo, topo.flows[0])
    _, app, *_ = render(spec, {"image": "img:1"})
    driver = app["spec"]["driver"]
    [container] = driver["template"]["spec"]["containers"]
    assert container["ports"] == [{"name": "metrics", "containerPort": 9404}]  # TCP: the pod's default
    assert {"name": "RECONCILER_METRICS_PORT", "value": "9404"} in container["env"]
    # each driver pod is an instance of its own (the job's self-fencing tells a zombie pod from its successor)
    assert {"name": "RECONCILER_JOB_INSTANCE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}} in container[
        "env"
    ]
    assert (
        driver["annotations"]["prometheus.io/scrape"] == "true"
        and driver["annotations"]["prometheus.io/port"] == "9404"
    )
    _, app, *_ = render(spec, {"image": "img:1", "metrics_port": 0})
    driver = app["spec"]["driver"]
    [container] = driver["template"]["spec"]["containers"]
    assert "ports" not in container and "prometheus.io/scrape" not in driver["annotations"]
    assert {"name": "RECONCILER_METRICS_PORT", "value": "0"} in container["env"]


def test_termination_grace_and_pod_resources_come_from_the_topology():
    topo = topology(
        "flows:\n  - {source: west, target: east, job: {deployer: kubernetes, image: img:1, "
        'termination_grace_seconds: 120, spark_conf: {spark.executor.memory: "2g", spark.driver.cores: "2"}}}'
    )
    flow = topo.flows[0]
    _, app, *_ = render(JobSpec.from_flow(topo, flow), deployment_options(flow.job, flow.engine))
    for role in ("driver", "executor"):
        assert app["spec"][role]["template"]["spec"]["terminationGracePeriodSeconds"] == 120
    # the operator passes spec.driver/executor's cores and memory after sparkConf: they carry spark_conf's values
    assert (app["spec"]["driver"]["cores"], app["spec"]["driver"]["memory"]) == (2, "512m")
    assert (app["spec"]["executor"]["cores"], app["spec"]["executor"]["memory"]) == (1, "2g")


def test_spark_version_is_the_images_whichever_machine_renders():
    """sparkVersion is constraints.txt's pyspark pin (what the image installs), not this machine's pyspark: a
    render from a runner without pyspark is the same manifest (a change would resubmit every engine)."""
    root = Path(__file__).resolve().parents[2]
    pins = re.findall(r"^pyspark==(\S+)$", (root / "constraints.txt").read_text(), re.M)
    assert pins == [IMAGE_SPARK_VERSION]
    topo = topology("flows:\n  - {source: west, target: east, job: {deployer: kubernetes, image: img:1}}")
    _, app, *_ = render(JobSpec.from_flow(topo, topo.flows[0]), {"image": "img:1"})
    assert app["spec"]["sparkVersion"] == IMAGE_SPARK_VERSION


def test_a_rendered_flow_the_cluster_has_not_synced_is_pending_sync_not_down(k8s):
    """GitOps (`kubectl_apply: false`): a flow rendered for Argo CD / Flux that has published no status since is
    "pending sync" however long the sync takes (an unmerged pull request, the controller's poll, an image pull):
    plan and apply 10 minutes later change nothing (no restart token, the file as it was), status says so, and
    drift says it once the wait is long."""
    start = time.time()
    now = [start]
    cli = k8s.world.backend(k8s.backend, clock=lambda: now[0])

    def run(*args: str) -> tuple[int, dict]:
        code = main([args[0], str(k8s.path), *args[1:], "--format", "json"], cli)
        return code, json.loads(k8s.capsys.readouterr().out)

    assert main(["apply", str(k8s.path), "--auto-approve"], cli) == 0
    k8s.capsys.readouterr()
    rendered = k8s.file().read_text()
    plans = []
    for minutes in (0, 10):
        now[0] = (
            start + minutes * 60 + 30
        )  # the deployer stamps the render with the wall clock: a margin for a slow run
        code, plan = run("plan", "--detailed-exitcode")
        plans.append(plan)
        assert code == 0 and [a for a in plan["actions"] if a["kind"].endswith(("_job", "_engine"))] == [], plan[
            "actions"
        ]
    [pending] = [f for f in plans[1]["findings"] if f["kind"] == "pending"]
    assert pending["severity"] == "info" and pending["reason_kind"] == "job-pending-sync"
    assert pending["subject"] == ORDERS and "pending sync" in pending["message"] and "10m ago" in pending["message"]

    assert main(["apply", str(k8s.path), "--auto-approve"], cli) == 0
    k8s.capsys.readouterr()
    assert k8s.file().read_text() == rendered, "an apply while the cluster has not synced rewrites nothing"
    assert not [k for k in k8s.manifest()[0]["data"] if k.endswith(".restart")], "no restart token"

    _, status = run("status")
    [row] = status["jobs"]
    assert row["state"] == "pending sync" and "10m ago" in row["why"], row

    now[0] = start + 30 * 60 + 30  # long pending: a warning in the plan, drift (not a restart)
    _, plan = run("plan")
    assert [a for a in plan["actions"] if a["kind"].endswith(("_job", "_engine"))] == []
    [pending] = [f for f in plan["findings"] if f["kind"] == "pending"]
    assert pending["severity"] == "warning" and "30m ago" in pending["message"] and "never restarts" in pending["hint"]
    code, drift = run("drift")
    items = [i for f in drift["flows"] for i in f.get("items", [])] + drift.get("items", [])
    jobs = [i for i in items if i["category"] == "job" and ORDERS in i["flows"]]
    assert code == 2 and jobs and all("pending sync" in i["message"] for i in jobs), jobs

    # a change while pending replaces what was rendered: an update, never a restart token
    k8s.write(delivery="exactly-once")
    _, plan = run("plan")
    [update] = [a for a in plan["actions"] if a["kind"].endswith(("_job", "_engine"))]
    assert update["kind"] == "update_job" and "pending sync" in update["reason"], update
    assert main(["apply", str(k8s.path), "--auto-approve"], cli) == 0
    k8s.capsys.readouterr()
    assert k8s.spec(ORDERS).settings.delivery.value == "exactly-once"
    assert not [k for k in k8s.manifest()[0]["data"] if k.endswith(".restart")], "no restart token"


def test_the_slos_reach_the_engines_replicationengine_and_a_change_restarts_nothing(k8s):
    """The topology's lag SLOs are the ReplicationEngine's spec.slo (the engine judges its flows by them): a change is
    an update that rewrites that resource only, no restart token, the SparkApplication's spec as it was."""
    k8s.write(extra="slo: {max_lag_records: 100, max_heartbeat_age_seconds: 30}")
    k8s.apply()
    k8s.report_all()
    assert k8s.jobs() == []
    docs = list(yaml.safe_load_all(k8s.file().read_text()))
    assert [d["kind"] for d in docs] == ["ConfigMap", "SparkApplication", "ReplicationEngine", "Role", "RoleBinding"]
    engine, app = docs[2], docs[1]
    assert engine["spec"]["slo"] == {"maxLagRecords": 100}, "the heartbeat age is drift's"
    assert engine["spec"]["flows"] == [{"name": ORDERS, "specHash": k8s.spec(ORDERS).spec_hash()}]
    k8s.write(extra="slo: {max_lag_records: 5000}")
    [update] = k8s.jobs()
    assert update["kind"] == "update_job" and "its ReplicationEngine is rewritten, no restart" in update["reason"]
    k8s.apply()
    after = list(yaml.safe_load_all(k8s.file().read_text()))
    assert after[2]["spec"]["slo"] == {"maxLagRecords": 5000}
    assert after[1]["spec"] == app["spec"], "the SparkApplication is not resubmitted"
    assert not [k for k in after[0]["data"] if k.endswith(".restart")], "no flow restarts"
