"""`reconciler render PATH --out DIR`: the kubernetes manifests of a topology without reaching any cluster (every
bootstrap a closed port), deterministic (two renders byte-identical, whether pyspark can be imported or not), what
the directory holds (a restart token, deployed-at) kept, flows of other deployers named as not rendered."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import yaml

from reconciler.contract.engine_status import crd
from reconciler.contract.spec import JobSpec
from reconciler.deployers.base import deployment_options
from reconciler.deployers.kubernetes import CRD_FILE, KubernetesDeployer
from reconciler.topology.build import load_topology_text

TOPO = """apiVersion: reconciler/v1
kind: Topology
metadata: {{name: render}}
clusters:
  west: {{bootstrap_servers: "127.0.0.1:{port}"}}
  east:
    bootstrap_servers: "127.0.0.1:{port}"
    config: {{security.protocol: SASL_SSL, sasl.mechanisms: PLAIN, sasl.username: mirror, sasl.password: "${{EAST_PASSWORD}}"}}
  north: {{bootstrap_servers: "127.0.0.1:{port}"}}
defaults:
  job: {{deployer: kubernetes, image: "registry.example/reconciler:1.4.0", namespace: replication,
         manifests_dir: deploy/k8s}}
flows:
  - {{source: west, target: east, name: orders, topics: {{include: [orders]}}}}
  - {{source: north, target: east, topics: {{include: [refunds]}}}}
  - {{source: east, target: north, job: {{engine: big}}}}
  - {{source: east, target: west, job: {{deployer: local}}}}
"""
#: A bound, not a timing: a render that tried to reach a cluster would wait for its timeouts far longer.
BOUND = 120


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the socket is: nothing listens there


def topology_file(tmp_path: Path) -> Path:
    path = tmp_path / "topology.yaml"
    path.write_text(TOPO.format(port=closed_port()))
    return path


def render(topo: Path, out: Path, *, pyspark: bool = True) -> subprocess.CompletedProcess:
    block = "sys.modules['pyspark'] = None; " if not pyspark else ""
    code = f"import sys; {block}from reconciler.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, "render", str(topo), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=BOUND,
        cwd=topo.parent,
    )


def files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_render_reaches_no_cluster_and_writes_every_engine(tmp_path):
    topo = topology_file(tmp_path)
    done = render(topo, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    out = files(tmp_path / "out")
    assert sorted(out) == [CRD_FILE, "engine-big.yaml", "engine-east.yaml"]
    assert yaml.safe_load(out[CRD_FILE]) == crd()
    cm, app, *_ = yaml.safe_load_all(out["engine-east.yaml"])
    assert sorted(cm["data"]) == ["engine.json", "flow.north.east.json", "flow.west.east.orders.json"]
    assert app["kind"] == "SparkApplication" and app["spec"]["image"] == "registry.example/reconciler:1.4.0"
    assert app["metadata"]["namespace"] == "replication"
    assert "EAST_PASSWORD" == cm["metadata"]["annotations"]["reconciler/secret-variables"]
    assert "reconciler/deployed-at" not in app["metadata"]["annotations"], "outside git no time is known"
    assert "not rendered: flow east->west (deployer local" in done.stdout
    assert "wrote" in done.stdout and not (tmp_path / "deploy").exists(), "only into --out"

    again = render(topo, tmp_path / "out")
    assert again.returncode == 0, again.stderr
    assert files(tmp_path / "out") == out and again.stdout.count("unchanged") == 3


def test_renders_with_and_without_pyspark_are_byte_identical(tmp_path):
    topo = topology_file(tmp_path)
    assert render(topo, tmp_path / "a").returncode == 0
    assert render(topo, tmp_path / "b", pyspark=False).returncode == 0
    assert files(tmp_path / "a") == files(tmp_path / "b")


def test_render_keeps_what_the_directory_holds(tmp_path):
    """The directory `apply` writes (`job.manifests_dir`: a deployed-at, a restart token): a render into it changes
    nothing."""
    out = tmp_path / "out"
    topo_path = topology_file(tmp_path)
    topo_path.write_text(topo_path.read_text().replace("manifests_dir: deploy/k8s", f"manifests_dir: '{out}'"))
    topo = load_topology_text(topo_path.read_text())
    deployer = KubernetesDeployer(kubectl="false")
    kubernetes = [f for f in topo.flows if f.job.deployer == "kubernetes"]
    for flow in kubernetes:  # as apply deploys them
        assert deployer.deploy(JobSpec.from_flow(topo, flow), deployment_options(flow.job, flow.engine)).ok
    orders = kubernetes[0]
    assert deployer.restart(JobSpec.from_flow(topo, orders), deployment_options(orders.job, orders.engine)).ok
    before = files(out)
    assert b"flow.west.east.orders.restart" in before["engine-east.yaml"], "a restart token"
    done = render(topo_path, out)
    assert done.returncode == 0, done.stderr
    assert files(out) == before and done.stdout.count("unchanged") == 3, done.stdout


def test_render_refuses_an_engine_without_an_image(tmp_path):
    topo = tmp_path / "t.yaml"
    topo.write_text(TOPO.format(port=closed_port()).replace('image: "registry.example/reconciler:1.4.0", ', ""))
    done = render(topo, tmp_path / "out")
    assert done.returncode == 1 and f"{topo}:14:5: error: flow west->east:orders" in done.stderr, done.stderr
    assert "image" in done.stderr
    assert not (tmp_path / "out").exists()
