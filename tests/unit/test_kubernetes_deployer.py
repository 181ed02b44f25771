"""The kubernetes deployer through plan/apply (memory double, no cluster): the rendered
SparkApplication + ConfigMap have the shape the Spark operator expects, secrets only as Secret
references, hot changes touch only the ConfigMap, restarts change the application, and
`kubectl_apply` runs kubectl (a fake one here)."""

from __future__ import annotations

import json
import os
import re
import stat

import pytest
import yaml

from reconciler.cli.main import main
from reconciler.contract.spec import JobSpec
from reconciler.deploy import Deployers
from reconciler.deploy.kubernetes import KubernetesDeployer, render, resource_name
from reconciler.jobs.backend import JobBackend
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
    image: registry.example/reconciler:1.4.0
    namespace: replication
    manifests_dir: "{dir}"
    parallelism: 3
    kubectl_apply: {kubectl}
flows:
  - {{source: west, target: east, topics: {{include: {topics}}}, delivery: {delivery}}}
{extra}
"""


class K8sEnv:
    def __init__(self, tmp_path, monkeypatch, capsys):
        self.tmp, self.capsys = tmp_path, capsys
        self.dir = tmp_path / "deploy" / "k8s"
        monkeypatch.setenv("EAST_PASSWORD", SECRET)
        self.kubectl_log = tmp_path / "kubectl.log"
        kubectl = tmp_path / "bin" / "kubectl"
        kubectl.parent.mkdir()
        kubectl.write_text(
            f'#!/bin/sh\necho "$@" >> {self.kubectl_log}\n'
            'if [ "$1" = get ]; then echo \'{"status": {"applicationState": {"state": "RUNNING"}, '
            '"driverInfo": {"podName": "mirror-west-east-driver"}}}\'; '
            'else echo "sparkapplication.sparkoperator.k8s.io/x configured"; fi\n'
        )
        kubectl.chmod(kubectl.stat().st_mode | stat.S_IEXEC)
        self.world = World(
            topology("flows:\n  - {source: west, target: east}", {"west": "west-kafka:9092", "east": "east-kafka:9092"})
        )
        self.world["west"].add_topic("orders", 2)
        self.board = StatusBoard()
        self.backend = JobBackend(Deployers(tmp_path / "state", kubectl=str(kubectl)), self.board.reader)
        self.cli = self.world.backend(self.backend)  # what the CLI runs against
        self.path = tmp_path / "t.yaml"
        self.write()

    def write(self, topics='["orders"]', delivery="at-least-once", kubectl="false", extra="") -> None:
        self.path.write_text(TOPO.format(dir=self.dir, topics=topics, delivery=delivery, kubectl=kubectl, extra=extra))

    def jobs(self) -> list[dict]:
        main(["plan", str(self.path), "--format", "json"], self.cli)
        return [a for a in json.loads(self.capsys.readouterr().out)["actions"] if a["kind"].endswith("_job")]

    def apply(self) -> str:
        assert main(["apply", str(self.path), "--auto-approve"], self.cli) == 0, self.capsys.readouterr()
        out = self.capsys.readouterr().out
        assert SECRET not in out
        return out

    def manifest(self) -> tuple[dict, dict, str]:
        path = self.dir / f"{resource_name('west->east')}.yaml"
        text = path.read_text()
        cm, app = list(yaml.safe_load_all(text))
        assert not re.search(r"[&*]id\d+", text), "rendered manifests use no YAML anchors or aliases"
        return cm, app, text


@pytest.fixture
def k8s(tmp_path, monkeypatch, capsys):
    return K8sEnv(tmp_path, monkeypatch, capsys)


def test_rendered_manifests_have_the_operators_shape_and_no_secret(k8s):
    [deploy] = k8s.jobs()
    assert (
        deploy["kind"] == "deploy_job"
        and "kubernetes replication, image registry.example/reconciler:1.4.0" in deploy["description"]
    )
    out = k8s.apply()
    assert "rendered" in out
    cm, app, text = k8s.manifest()
    assert SECRET not in text
    name = resource_name("west->east")
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 63

    assert cm["apiVersion"] == "v1" and cm["kind"] == "ConfigMap" and cm["metadata"]["namespace"] == "replication"
    spec = JobSpec.from_json(cm["data"]["spec.json"])
    assert spec.flow == "west->east" and spec.target.config["sasl.password"] == "${EAST_PASSWORD}"
    assert cm["metadata"]["annotations"]["reconciler/spec-hash"] == spec.spec_hash() == deploy["spec_hash"]

    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2" and app["kind"] == "SparkApplication"
    assert app["metadata"] == {**app["metadata"], "name": name, "namespace": "replication"}
    s = app["spec"]
    assert s["type"] == "Python" and s["mode"] == "cluster" and s["image"] == "registry.example/reconciler:1.4.0"
    assert s["mainApplicationFile"] == "local:///opt/reconciler/jobs/mirror_job.py"
    assert s["arguments"] == ["--spec", "/etc/reconciler/spec.json", "--master", "inherit"]
    assert s["restartPolicy"]["type"] == "Always" and re.fullmatch(r"\d+\.\d+\.\d+.*", s["sparkVersion"])
    assert s["volumes"] == [{"name": "job-spec", "configMap": {"name": cm["metadata"]["name"]}}]
    assert s["driver"]["volumeMounts"] == [{"name": "job-spec", "mountPath": "/etc/reconciler", "readOnly": True}]
    assert s["driver"]["serviceAccount"] == "spark-operator-spark" and s["executor"]["instances"] == 3
    ref = {"EAST_PASSWORD": {"name": "reconciler-secrets", "key": "EAST_PASSWORD"}}
    assert "envSecretKeyRefs" not in s["driver"] and "envSecretKeyRefs" not in s["executor"]
    for pod in (s["driver"], s["executor"]):
        secret_env = {
            e["name"]: e["valueFrom"]["secretKeyRef"] for e in pod["env"] if "secretKeyRef" in e.get("valueFrom", {})
        }
        assert secret_env == ref
    assert all(isinstance(v, str) for v in s["sparkConf"].values())
    assert not k8s.kubectl_log.exists(), "kubectl only when asked"


def test_hot_changes_touch_only_the_configmap_restarts_change_the_application(k8s):
    k8s.apply()
    assert k8s.jobs() == [], "rendered just now: starting, not down"
    cm1, app1, _ = k8s.manifest()

    k8s.write(topics='["orders", "refunds"]')
    [update] = k8s.jobs()
    assert update["kind"] == "update_job"
    k8s.apply()
    cm2, app2, _ = k8s.manifest()
    assert JobSpec.from_json(cm2["data"]["spec.json"]).settings.topics.include == ("orders", "refunds")
    assert app2["spec"] == app1["spec"], "the operator must not resubmit for a hot change"

    k8s.write(topics='["orders", "refunds"]', delivery="exactly-once")
    [restart] = k8s.jobs()
    assert restart["kind"] == "restart_job"
    k8s.apply()
    _, app3, _ = k8s.manifest()
    hash_of = lambda app: app["spec"]["driver"]["annotations"]["reconciler/restart-hash"]  # noqa: E731
    assert hash_of(app3) != hash_of(app2)

    # down (its status is stale and the rendering is old): restarted by a changed annotation
    spec = JobSpec.from_json(k8s.manifest()[0]["data"]["spec.json"])
    k8s.board.report("west->east", spec, age=120)
    path = k8s.dir / f"{resource_name('west->east')}.yaml"
    os.utime(path, (path.stat().st_atime - 600, path.stat().st_mtime - 600))
    [restart] = k8s.jobs()
    assert restart["kind"] == "restart_job" and "no fresh status" in restart["reason"]
    k8s.apply()
    _, app4, _ = k8s.manifest()
    assert app4["spec"]["driver"]["annotations"]["reconciler/restarts"] == "1"


def test_kubectl_apply_and_delete_when_asked(k8s):
    k8s.write(kubectl="true")
    k8s.apply()
    path = k8s.dir / f"{resource_name('west->east')}.yaml"
    assert f"apply -f {path}" in k8s.kubectl_log.read_text()
    [dep] = KubernetesDeployer(str(k8s.tmp / "bin" / "kubectl")).deployments([{"manifests_dir": str(k8s.dir)}])
    assert dep.alive and dep.where.endswith(", driver pod mirror-west-east-driver"), dep.where
    k8s.board.report("west->east", JobSpec.from_json(k8s.manifest()[0]["data"]["spec.json"]))
    assert k8s.jobs() == []
    k8s.path.write_text(k8s.path.read_text().split("flows:")[0] + "flows: []\nprune: {flows: true}\n")
    [stop] = k8s.jobs()
    assert stop["kind"] == "stop_job" and stop["deployer"] == "kubernetes"
    k8s.apply()
    assert f"delete -f {path} --ignore-not-found" in k8s.kubectl_log.read_text() and not path.exists()


def test_render_needs_an_image():
    topo = topology("flows:\n  - {source: west, target: east}")
    spec = JobSpec.from_flow(topo, topo.flows[0])
    with pytest.raises(ValueError, match="needs job.image"):
        render(spec, {})
    assert KubernetesDeployer().deploy(spec, {"manifests_dir": "/nonexistent/x"}).code.value == "failed"


def test_driver_pod_exposes_the_metrics_port_with_scrape_annotations():
    topo = topology("flows:\n  - {source: west, target: east, job: {deployer: kubernetes, image: img:1}}")
    spec = JobSpec.from_flow(topo, topo.flows[0])
    _, app = render(spec, {"image": "img:1"})
    driver = app["spec"]["driver"]
    assert driver["ports"] == [{"name": "metrics", "containerPort": 9404, "protocol": "TCP"}]
    assert {"name": "RECONCILER_METRICS_PORT", "value": "9404"} in driver["env"]
    # each driver pod is an instance of its own (the job's self-fencing tells a zombie pod from its successor)
    assert {"name": "RECONCILER_JOB_INSTANCE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}} in driver[
        "env"
    ]
    assert (
        driver["annotations"]["prometheus.io/scrape"] == "true"
        and driver["annotations"]["prometheus.io/port"] == "9404"
    )
    _, app = render(spec, {"image": "img:1", "metrics_port": 0})
    driver = app["spec"]["driver"]
    assert "ports" not in driver and "prometheus.io/scrape" not in driver["annotations"]
    assert {"name": "RECONCILER_METRICS_PORT", "value": "0"} in driver["env"]
