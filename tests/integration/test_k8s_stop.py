"""A driver pod deleted (node drain, rollout): the kubelet sends SIGTERM to the container's PID 1 (tini), SIGKILL
after terminationGracePeriodSeconds. The engine must stop as it does for any other stop request: finish its batch,
commit, publish its final status, exit 0, well within the grace; started again, it copies nothing twice.

The engine runs on this host exactly as the job image runs it: `deploy/image/entrypoint.sh driver ...` with
Debian's tini, SPARK_HOME the pyspark wheel, the engine directory made of the ConfigMap's data that
`render_engine` renders for two flows (at-least-once, exactly-once) between two embedded brokers, the driver
container's environment as rendered (the instance id is the pod's uid), and `--master local[2]` for the
operator's Kubernetes master. The SIGTERM goes to the process started, which the entry point has become tini,
and to it only (the kubelet signals PID 1, not the container's other processes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

import reconciler.deployers.instance as instance
from reconciler import logs
from reconciler.contract.spec import JobSpec, job_group
from reconciler.contract.status import StatusRecord
from reconciler.deployers.kubernetes import APP_ROOT, ENGINE_MOUNT, FlowEntry, render_engine
from reconciler.jobplan.backend import read_job_status
from reconciler.settings import INSTANCE_ENV, KUBE_API_ENV
from tests.integration.mirror_helpers import SequencedProducer, create_topic, read_topic, seqs, spec_for, wait_for
from tests.spec_helpers import respec
from tests.unit.test_engine_status import FakeApi

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "deploy" / "image" / "entrypoint.sh"
TINI = Path("/usr/bin/tini")
FIXTURES = ROOT / "tests" / "unit" / "k8s"
#: terminationGracePeriodSeconds of a driver pod (the deployer's default): after it, the kubelet sends SIGKILL.
GRACE_SECONDS = 60.0
PARTITIONS = 4
RATE = 1_000.0  # records/s per topic, from before the SIGTERM until the second pod runs


class DriverPod:
    """The driver container of a rendered engine, on this host: the image's entry point with the pod's
    environment and the SparkApplication's arguments, the image's paths (/opt/reconciler, the ConfigMap's mount)
    mapped to this checkout and a directory of the ConfigMap's files."""

    def __init__(self, docs: list[dict], tmp: Path, name: str, api: str | None = None):
        cm, app, *_ = docs
        self.uid = str(uuid.uuid4())  # metadata.uid of the pod: a new one for every pod
        self.log = tmp / f"{name}.log"
        engine_dir = tmp / f"{name}-engine"
        engine_dir.mkdir()
        for key, text in cm["data"].items():  # the ConfigMap mounted: one file per key
            (engine_dir / key).write_text(text)
        work = tmp / f"{name}-work-dir"
        work.mkdir()
        spec = app["spec"]

        def here(value: str) -> str:
            return value.replace(ENGINE_MOUNT, str(engine_dir)).replace(APP_ROOT, str(ROOT))

        env = {k: v for k, v in os.environ.items() if not k.startswith(("RECONCILER_JOB_", "SPARK_", "PYSPARK_"))}
        import pyspark

        env.update(
            SPARK_HOME=str(Path(pyspark.__file__).parent),  # the image's /opt/spark links into the wheel
            PYSPARK_PYTHON=sys.executable,  # the image's python3
            PYTHONPATH=str(ROOT),
            SPARK_DRIVER_BIND_ADDRESS="127.0.0.1",  # the pod's IP, set by Spark's driver pod
            TINI=str(TINI),
        )
        [container] = spec["driver"]["template"]["spec"]["containers"]  # the driver pod's template
        grace = spec["driver"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert grace == GRACE_SECONDS, grace  # the kubelet's SIGKILL comes after it: the stop must fit in it
        for item in container["env"]:
            if "value" in item:
                env[item["name"]] = here(item["value"])
            else:
                assert item["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.uid"}}, item
                env[item["name"]] = self.uid
        assert env[INSTANCE_ENV] == self.uid
        if api is not None:  # the pod's Kubernetes API, where the engine writes its ReplicationEngine's status
            env[KUBE_API_ENV] = api
        confs = [a for k, v in spec["sparkConf"].items() for a in ("--conf", f"{k}={here(v)}")]
        main = here(spec["mainApplicationFile"].removeprefix("local://"))
        self.cmd = [
            str(ENTRYPOINT),
            "driver",
            "--master",
            "local[2]",
            *confs,
            "--conf",
            "spark.ui.enabled=false",
            main,
            *[here(a) for a in spec["arguments"]],
        ]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                self.cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def kubelet_stop(self) -> int | None:
        """SIGTERM to PID 1 of the container (tini: the entry point exec'd it); its exit code, None if it is still
        running after the grace (the kubelet would SIGKILL it)."""
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            return None

    def tail(self, n: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-n:]

    def remove(self) -> None:
        """What is left of the pod goes (SIGKILL, as the kubelet's after the grace)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        instance.end(instance.scan(instance=self.uid), 0)


def _written(api: FakeApi, phase: str) -> dict | None:
    """The last ReplicationEngine the engine wrote in `phase` (None: none yet)."""
    with api.lock:
        return next((o for o in reversed(api.history) if o["status"]["phase"] == phase), None)


def _status(bootstrap: str, flow: str) -> StatusRecord | None:
    return read_job_status({"bootstrap.servers": bootstrap}, flow, timeout=5)


def _committed(bootstrap: str, spec: JobSpec, topic: str) -> dict[int, int]:
    """The job's committed positions: next source offset per partition (at-least-once: its group on the source;
    exactly-once: its group on the target, under the remote topic)."""
    c = Consumer(logs.client_config({"bootstrap.servers": bootstrap, "group.id": job_group(spec)}))
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def test_the_kubelets_sigterm_to_the_driver_pod_stops_the_engine_with_its_commits(fresh_clusters, tmp_path, request):
    if not TINI.exists():
        pytest.skip(f"no {TINI} (Debian package tini, the job image's init; scripts/test.sh installs it)")
    west, east = fresh_clusters
    alo = respec(spec_for(west, east, topics_include=("orders",)), flow="west->east:orders", family="orders")
    eos = respec(
        spec_for(west, east, topics_include=("payments",), delivery="exactly-once", carries_heartbeats=False),
        flow="west->east:payments",
        family="payments",
    )
    for topic in ("orders", "payments"):
        create_topic(west.bootstrap, topic, PARTITIONS)
    flows = {s.flow: FlowEntry(s.to_json() + "\n", time.time()) for s in (alo, eos)}
    docs = render_engine("east", flows, {}, {"image": "reconciler-job:test", "metrics_port": 0})
    # The pod's Kubernetes API holds the engine's ReplicationEngine, as synced (generation 1): the engine writes its
    # verdict there; each status it writes is what Argo CD and Flux would read (tests/unit/k8s/README.md).
    api = FakeApi({**docs[2], "metadata": {**docs[2]["metadata"], "generation": 1, "uid": str(uuid.uuid4())}})
    api_url = api.start()
    request.addfinalizer(api.shutdown)
    # Records stream (without end) from before the SIGTERM until the pod after it runs.
    producers = [SequencedProducer(west.bootstrap, t, PARTITIONS, 10**9, RATE) for t in ("orders", "payments")]
    request.addfinalizer(lambda: [p.stop() for p in producers if p.is_alive()])

    def status_of(pod: DriverPod, flow: str) -> StatusRecord | None:
        s = _status(east.bootstrap, flow)
        return s if s is not None and s.instance_id == pod.uid else None

    def wait_all(pod: DriverPod, what: str, ok: Callable[[StatusRecord], bool]) -> None:
        for flow in flows:

            def done(flow: str = flow) -> bool:
                s = status_of(pod, flow)
                return (s is not None and ok(s)) or pod.proc.poll() is not None

            wait_for(done, 180, what=f"{flow} {what}")
        assert pod.proc.poll() is None, pod.tail()

    first = DriverPod(docs, tmp_path, "first", api_url)
    try:
        wait_all(first, "running", lambda s: s.state_name == "running")
        ready = wait_for(lambda: _written(api, "Ready"), 60, what=f"the engine written Ready ({api.history})")
        for p in producers:
            p.start()
        wait_all(first, "copying", lambda s: (s.records or 0) >= 1_500)
        # A stricter SLO synced (generation 2): 1 ms of p99 record age, which no flow meets: the engine says degraded
        with api.lock:
            api.obj["spec"]["slo"] = {"maxLatencyP99Ms": 1}
            api.obj["metadata"]["generation"] = 2
        degraded = wait_for(lambda: _written(api, "Degraded"), 60, what=f"the engine written Degraded ({api.history})")
        assert (
            degraded["status"]["observedGeneration"] == 2
            and "SLO max_latency_p99_ms 1 ms" in degraded["status"]["message"]
        )
        assert all(p.is_alive() for p in producers), "the records stream while the pod stops"
        sent, sent_wall = time.monotonic(), time.time()
        code = first.kubelet_stop()
        took = time.monotonic() - sent
    finally:
        first.remove()
    final = {flow: status_of(first, flow) for flow in flows}
    suspended = _written(api, "Suspended")
    assert suspended is not None and "stopping" in suspended["status"]["message"], api.history[-1]
    progressing = next((o for o in api.history if o["status"]["phase"] == "Progressing"), None)
    assert progressing is not None and api.history[0] is progressing, "starting: progressing first"
    phases = [o["status"]["phase"] for o in api.history]
    assert phases.index("Ready") < phases.index("Degraded") < phases.index("Suspended"), phases
    if os.environ.get("CAPTURE_HEALTH_FIXTURES"):  # tests/unit/k8s/README.md: how the fixtures were captured
        for phase, obj in (
            ("progressing", progressing),
            ("healthy", ready),
            ("degraded", degraded),
            ("suspended", suspended),
        ):
            (FIXTURES / f"replicationengine-{phase}.json").write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n")
    # What was committed is what the target holds: nothing copied beyond the commit, nothing to copy again.
    orders = read_topic(east.bootstrap, "west.orders", PARTITIONS)
    payments = read_topic(east.bootstrap, "west.payments", PARTITIONS, isolation="read_committed")
    positions = {
        alo.flow: (_committed(west.bootstrap, alo, "orders"), {p: len(orders[p]) for p in orders}),
        eos.flow: (_committed(east.bootstrap, eos, "west.payments"), {p: len(payments[p]) for p in payments}),
    }
    print(
        f"exit code {code} after {took:.1f} s;",
        "last status (state, records, seconds after the SIGTERM):",
        {
            f: (s.state_name, s.records, round((s.heartbeat_at or 0) / 1000 - sent_wall, 1)) if s else None
            for f, s in final.items()
        },
        "committed, on the target:",
        positions,
    )
    assert code == 0, f"exit code {code} (None: still running after {GRACE_SECONDS:.0f} s)\n{first.tail()}"
    for flow, s in final.items():
        assert s is not None and s.state_name == "stopped", f"{flow}: the last status {s}\n{first.tail()}"
    for flow, (committed, held) in positions.items():
        assert committed == held, f"{flow}: committed {committed}, the target holds {held}"

    second = DriverPod(docs, tmp_path, "second")  # the operator's next pod, after the restart
    try:
        wait_all(second, "running", lambda s: s.state_name == "running")
        for p in producers:
            p.stop()
            assert p.error is None
        checks = (("orders", producers[0], "read_uncommitted"), ("payments", producers[1], "read_committed"))
        for topic, p, isolation in checks:
            expected = p.expected()

            def arrived(topic: str = topic, expected: dict = expected, isolation: str = isolation):
                got = read_topic(east.bootstrap, f"west.{topic}", PARTITIONS, isolation=isolation)
                return got if all(len(got[q]) >= len(expected[q]) for q in expected) else None

            got = wait_for(arrived, 150, interval=2, what=f"every record of {topic} after the restart")
            for q in expected:
                assert seqs(got[q]) == expected[q], f"west.{topic}[{q}]: every record once, in order"
        assert second.kubelet_stop() == 0, second.tail()
    finally:
        second.remove()
    for flow in flows:
        s = status_of(second, flow)
        assert s is not None and s.state_name == "stopped", f"{flow}: the last status {s}"
