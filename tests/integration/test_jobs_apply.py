"""Jobs through plan/apply on real brokers and real Spark (the local and spark-standalone deployers).

One job's life, through the CLI: apply deploys it and records flow; the next plan is empty; a
topic-filter change reaches the running job without a restart and the new topic is replicated;
a delivery-mode change restarts it and nothing is lost across the restart; a SIGKILLed job makes
the next plan start its engine again (`replace_engine`); a removed flow is `unmanaged` without pruning and stopped
with it.
"""

from __future__ import annotations

import json
import os
import re
import signal

import pytest

import reconciler.deployers.instance as instance
from reconciler import logs
from reconciler.cli.main import main
from reconciler.contract.status import StatusRecord
from reconciler.deployers.local import LocalDeployer
from reconciler.jobplan.backend import read_job_status
from tests.integration.mirror_helpers import (
    SequencedProducer,
    count_topic,
    create_topic,
    read_topic,
    seqs,
    wait_for,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.jobs]

TOPOLOGY = """apiVersion: reconciler/v1
kind: Topology
metadata: {{name: jobs-it}}
clusters:
  west: {{bootstrap_servers: "{west}"}}
  east: {{bootstrap_servers: "{east}"}}
defaults:
  sync: {{acls: false}}
  refresh_interval_seconds: 1
  heartbeats: {{interval_seconds: 1}}
  checkpoints: {{interval_seconds: 1}}
  job: {{deployer: {deployer}, master: "{master}", parallelism: 1, trigger_interval_ms: 100}}
flows:
{flows}
{extra}
"""
FLOW = "  - {{source: west, target: east, topics: {{include: {topics}}}, delivery: {delivery}}}"


class Env:
    def __init__(self, clusters, tmp_path, capsys, deployer="local", master="local[1]"):
        west, east = clusters
        self.west, self.east = west.bootstrap, east.bootstrap
        self.path = tmp_path / "topology.yaml"
        self.capsys = capsys
        self.deployer, self.master = deployer, master
        self.outputs: list[str] = []

    def write(self, topics='["orders", "payments"]', delivery="at-least-once", flows=None, extra="") -> None:
        flows = FLOW.format(topics=topics, delivery=delivery) if flows is None else flows
        self.path.write_text(
            TOPOLOGY.format(
                west=self.west, east=self.east, deployer=self.deployer, master=self.master, flows=flows, extra=extra
            )
        )

    def run(self, *args) -> tuple[int, str]:
        code = main([a if a != "TOPO" else str(self.path) for a in args])
        out, err = self.capsys.readouterr()
        self.outputs.append(out + err)
        return code, out + err

    def plan(self) -> dict:
        code, out = self.run("plan", "TOPO", "--format", "json", "--detailed-exitcode")
        plan = json.loads(out[: out.rindex("}") + 1])
        plan["code"] = code
        return plan

    def job_actions(self) -> list[dict]:
        return [a for a in self.plan()["actions"] if a["kind"].endswith(("_job", "_engine"))]

    def apply(self) -> str:
        code, out = self.run("apply", "TOPO", "--auto-approve")
        assert code == 0, out
        return out

    def status(self) -> StatusRecord:
        return read_job_status({"bootstrap.servers": self.east}, "west->east", timeout=5) or StatusRecord.from_dict({})

    def record(self) -> dict:
        return json.loads((LocalDeployer().job_dir("west->east") / "job.json").read_text())

    def log(self) -> str:
        try:
            return (LocalDeployer().job_dir("west->east") / "job.log").read_text(errors="replace")[-3000:]
        except OSError:
            return ""


def _produce(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer(logs.client_config({"bootstrap.servers": bootstrap, "linger.ms": 5}))
    for i in range(n):
        p.produce(topic, f"{topic}-{i}".encode(), partition=i % 2 if topic != "refunds" else 0)
    p.flush(30)


def test_job_lifecycle_through_plan_and_apply(fresh_clusters, tmp_path, capsys, state_dir):
    env = Env(fresh_clusters, tmp_path, capsys)
    create_topic(env.west, "orders", 2)
    create_topic(env.west, "payments", 2)
    create_topic(env.west, "refunds", 1)
    _produce(env.west, "orders", 1000)
    _produce(env.west, "refunds", 50)
    env.write()
    try:
        # --- deploy: topics, then the job; records flow; the next plan is empty ---------------------
        [deploy] = env.job_actions()
        assert deploy["kind"] == "deploy_job"
        out = env.apply()
        assert (
            "+ deploy job west->east (engine east, local local[1], spec" in out
            and "started engine east: supervisor pid" in out
        )
        first = env.record()
        assert env.plan()["code"] == 0, "a job that is starting is not planned again"
        wait_for(
            lambda: count_topic(env.east, "west.orders", 2) >= 1000,
            120,
            what=f"orders replicated (job log: {env.log()})",
        )
        status = wait_for(lambda: s if (s := env.status()).state_name == "running" else None, 30, what="status")
        assert status.spec_hash == deploy["spec_hash"]
        assert env.plan()["code"] == 0

        # --- a topic filter change: handed to the running job, no restart -----------------------------
        env.write(topics='["orders", "payments", "refunds"]')
        [update] = env.job_actions()
        assert update["kind"] == "update_job" and "settings.topics.include" in update["changes"]
        env.apply()
        wait_for(lambda: count_topic(env.east, "west.refunds", 1) >= 50, 60, what="the new topic replicated")
        wait_for(lambda: env.status().spec_hash == update["spec_hash"], 30, what="the job runs the new spec")
        assert env.record()["pid"] == first["pid"] and os.path.exists(f"/proc/{first['pid']}")
        assert env.status().started_at == status.started_at, "not restarted"
        assert env.plan()["code"] == 0

        # --- a delivery change: restart; records produced across it all arrive --------------------------
        producer = SequencedProducer(env.west, "payments", 2, 6_000, 400.0)
        producer.start()
        wait_for(lambda: producer.produced >= 1_000, 30, what="producer started")
        env.write(topics='["orders", "payments", "refunds"]', delivery="exactly-once")
        [restart] = env.job_actions()
        assert restart["kind"] == "restart_job" and restart["changes"]["settings.delivery"] == [
            "at-least-once",
            "exactly-once",
        ]
        out = env.apply()
        assert "restarted in place" in out, out  # in its engine: the flow's driver, not the Spark application
        assert env.record()["pid"] == first["pid"]
        producer.join(60)
        assert producer.error is None
        expected = producer.expected()

        def all_arrived():
            got = read_topic(env.east, "west.payments", 2)
            return got if all(set(expected[p]) <= set(seqs(got[p])) for p in expected) else None

        got = wait_for(all_arrived, 150, interval=2, what=f"every payment after the restart (log: {env.log()})")
        for p in expected:  # nothing lost, in order (at-least-once may repeat records after a crash, not here)
            assert list(dict.fromkeys(seqs(got[p]))) == expected[p], f"partition {p}"
        status = wait_for(
            lambda: s if (s := env.status()).spec_hash == restart["spec_hash"] else None,
            30,
            what="restarted job status",
        )
        assert status.delivery == "exactly-once"

        # --- killed: the next plan starts its engine again (nothing of it runs: the engine is replaced) ---------
        os.killpg(env.record()["pid"], signal.SIGKILL)
        wait_for(
            lambda: (
                not os.path.exists(f"/proc/{env.record()['pid']}")
                or open(f"/proc/{env.record()['pid']}/stat").read().split(") ")[1].startswith("Z")
            ),
            10,
            what="job dead",
        )
        # PySpark's daemon and its Python workers are a process group of their own: they leave when their JVM
        # is gone, a moment after the kill, and a plan taken before that shows them, truthfully, as a duplicate.
        wait_for(
            lambda: instance.scan(under=state_dir.resolve()) == [],
            60,
            what="every process of the killed job gone",
        )
        [replace] = env.job_actions()  # nothing of its engine runs: the engine is started again, with its flow
        assert replace["kind"] == "replace_engine" and replace["reason_kind"] == "job-down", replace
        [flow] = replace["restarts"]
        assert (flow["flow"], flow["state"], flow["op"]) == ("west->east", "down", "restart"), replace
        assert flow["reason"].startswith(f"the job is down: instance {env.record()['instance_id']} "), flow
        assert "killed by SIGKILL" in flow["reason"], flow
        env.apply()
        _produce(env.west, "refunds", 10)
        wait_for(
            lambda: count_topic(env.east, "west.refunds", 1) >= 60, 120, what="replicating again after the restart"
        )

        # --- the flow removed: unmanaged without pruning, stopped with it ----------------------------------
        env.write(flows="  []")
        plan = env.plan()
        assert [a for a in plan["actions"] if a["kind"].endswith(("_job", "_engine"))] == []
        assert any(f["kind"] == "unmanaged" and f["subject"] == "west->east" for f in plan["findings"])
        env.write(flows="  []", extra="prune: {flows: true}")
        [stop] = env.job_actions()
        assert stop["kind"] == "stop_job"
        out = env.apply()
        assert "removed from engine east, which had no other flow: engine east stopped cleanly" in out, out
        assert wait_for(lambda: env.status().state_name == "stopped", 20, what="final status")
        assert env.job_actions() == []
    finally:
        LocalDeployer().stop_all()
        if os.environ.get("SHOW_OUTPUT"):
            print("\n".join(env.outputs))


def test_spark_standalone_deployer_runs_a_job_on_a_master_and_worker(fresh_clusters, tmp_path, capsys, state_dir):
    from reconciler.deployers.process import StandaloneCluster

    cluster = StandaloneCluster.start(tmp_path / "spark")
    env = Env(fresh_clusters, tmp_path, capsys, deployer="spark-standalone", master=cluster.master_url)
    try:
        create_topic(env.west, "orders", 2)
        producer = SequencedProducer(env.west, "orders", 2, 2_000, 10_000.0)
        producer.run()
        env.write(topics='["orders"]')
        out = env.apply()
        assert f"+ deploy job west->east (engine east, spark-standalone {cluster.master_url}" in out
        wait_for(
            lambda: count_topic(env.east, "west.orders", 2) >= 2_000,
            150,
            what=f"records replicated through the standalone cluster (log: {env.log()})",
        )
        got = read_topic(env.east, "west.orders", 2)
        assert all(seqs(got[p]) == producer.expected()[p] for p in range(2))
        assert "StandaloneSchedulerBackend" in env.log()
        code, out = env.run("status", "TOPO")
        assert "spark-standalone" in out and cluster.master_url in out
        assert re.search(rf"{re.escape(cluster.master_url)}, app app-\d+-\d+", out), "the driver's application id"
        env.write(topics='["orders"]', flows="  []", extra="prune: {flows: true}")
        assert "stopped cleanly" in env.apply()
        assert env.status().state_name == "stopped" and (env.status().records or 0) >= 2_000
    finally:
        LocalDeployer().stop_all()
        cluster.stop()
