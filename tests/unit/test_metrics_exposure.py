"""Issue 45, exposure: a job's /metrics (no authentication) listens on this machine only unless a setting opens it;
on Kubernetes on the pod network."""

import pytest

from reconciler import settings
from reconciler.contract.spec import JobSpec
from reconciler.deployers import engine_dirs
from reconciler.deployers.base import deployment_options
from reconciler.deployers.engine_dirs import EngineDirs
from reconciler.deployers.kubernetes import render
from reconciler.engine import metrics
from reconciler.engine.metrics import JobMetrics, serve_merged
from tests.plan_helpers import topology


def test_the_job_serves_metrics_on_loopback_by_default():
    m = JobMetrics("west->east")
    server = m.serve(0)
    try:
        assert server.server_address[0] == "127.0.0.1" and m.port
    finally:
        server.shutdown()
        server.server_close()


def test_the_engine_serves_its_merged_metrics_on_loopback_by_default(monkeypatch):
    seen = {}

    class Server:
        server_port = 12345

    def fake(port, addr, registry):
        seen["addr"] = addr
        return Server(), None

    monkeypatch.setattr("prometheus_client.start_http_server", fake)
    assert serve_merged(lambda: [], 0) == 12345 and seen["addr"] == "127.0.0.1"
    assert metrics.LOOPBACK == "127.0.0.1"


def test_the_bind_setting_defaults_to_loopback_and_is_an_address():
    assert settings.metrics_bind({}) == "127.0.0.1"
    assert settings.metrics_bind({"RECONCILER_METRICS_BIND": "0.0.0.0"}) == "0.0.0.0"
    assert settings.metrics_bind({"RECONCILER_METRICS_BIND": "::"}) == "::"
    bad = {"RECONCILER_METRICS_BIND": "everywhere"}
    assert settings.metrics_bind(bad) == "127.0.0.1"
    assert settings.errors(bad) and "is not an IP address" in settings.errors(bad)[0]


def test_the_job_entry_point_binds_what_the_deployer_says(monkeypatch):
    from reconciler.resources import mirror_job

    seen = {}
    monkeypatch.setattr(mirror_job, "run_flow", lambda args: seen.setdefault("bind", args.metrics_bind) and 0)
    monkeypatch.setattr(mirror_job, "watch_parent", lambda _: None)
    monkeypatch.setattr(mirror_job.faulthandler, "register", lambda *a, **k: None)
    mirror_job.main(["--spec", "x.json"])
    assert seen["bind"] == "127.0.0.1"


@pytest.mark.parametrize("job, bind", [("{}", "127.0.0.1"), ("{metrics_bind: 0.0.0.0}", "0.0.0.0")])
def test_a_local_engine_is_started_with_loopback_unless_the_topology_opens_it(tmp_path, monkeypatch, job, bind):
    topo = topology(f"flows:\n  - {{source: west, target: east, job: {job}}}")
    flow = topo.flows[0]
    options = deployment_options(flow.job, flow.engine)
    assert options["metrics_bind"] == (None if bind == "127.0.0.1" else bind)
    started = {}

    class Job:
        pid, start_time = 1, 0.0

        def wait(self, _):
            return None

    def start_engine(d, **kw):
        started.update(kw["env"])
        return Job()

    monkeypatch.setattr(engine_dirs.LocalJob, "start_engine", start_engine)
    monkeypatch.setattr(EngineDirs, "end_leftovers", lambda self, d: "")
    monkeypatch.setattr(EngineDirs, "engine", lambda self, name: type("E", (), {"where": lambda s: "here"})())
    dirs = EngineDirs(tmp_path, "local", 1.0, {})
    dirs.engine_dir(flow.engine).mkdir(parents=True)
    spec = JobSpec.from_flow(topo, flow)
    wanted = engine_dirs.EngineRecord(flow.engine, spec.engine.master, {})
    assert dirs.start(flow.engine, wanted, options).ok
    assert started["RECONCILER_METRICS_BIND"] == bind


def test_an_address_that_is_not_one_is_refused_at_validation(tmp_path):
    from tests.helpers import diagnose, rendered_errors, write

    f = write(
        tmp_path,
        "t.yaml",
        """\
        apiVersion: reconciler/v1
        kind: Topology
        clusters:
          west: {bootstrap_servers: "127.0.0.1:1"}
          east: {bootstrap_servers: "127.0.0.1:2"}
        flows:
          - {source: west, target: east, job: {metrics_bind: "everywhere"}}
        """,
    )
    [line] = rendered_errors(diagnose(f))
    assert line.startswith(f"{f}:7:") and "metrics_bind" in line


def test_kubernetes_pods_listen_on_the_pod_network():
    topo = topology("flows:\n  - {source: west, target: east, job: {deployer: kubernetes, image: img:1}}")
    spec = JobSpec.from_flow(topo, topo.flows[0])
    _, app, *_ = render(spec, {"image": "img:1"})
    [container] = app["spec"]["driver"]["template"]["spec"]["containers"]
    assert {"name": "RECONCILER_METRICS_BIND", "value": "0.0.0.0"} in container["env"]
