"""Engines end to end (issue 23): the flows into one target cluster run in one Spark application, each with its own
settings; a flow added or removed while the others keep running (no restart, no duplicates); a change of the
engine's Spark settings replaces it once, as one plan action naming its flows; a failing flow does not stop its
neighbours; a flow's job of an earlier release (one application per flow) moves into its engine without
copying anything twice or skipping anything. Real Tansu brokers, real Spark, through plan/apply."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path

import pytest

import reconciler.deployers.instance as instance
from reconciler.contract.engine import EngineRecord, FlowState
from reconciler.contract.status import StatusRecord
from reconciler.deployers.instance import Role
from reconciler.deployers.local import LocalDeployer
from reconciler.deployers.process import LocalJob
from reconciler.jobplan.backend import read_job_status
from tests.integration.mirror_helpers import (
    SequencedProducer,
    count_topic,
    create_topic,
    read_topic,
    seqs,
    spec_for,
    wait_for,
)
from tests.integration.test_jobs_apply import Env, _produce

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.jobs]

ORDERS = '  - {source: west, target: east, name: orders, topics: {include: ["orders"]}}'
PAYMENTS = '  - {source: west, target: east, name: payments, topics: {include: ["payments"]}, delivery: exactly-once}'
AUDIT = '  - {source: west, target: east, name: tracking, topics: {include: ["audit"]}}'  # sorts last: heartbeats stay
BACK = '  - {source: east, target: west, topics: {include: ["returns"]}}'


def _status(bootstrap: str, flow: str) -> StatusRecord:
    return read_job_status({"bootstrap.servers": bootstrap}, flow, timeout=5) or StatusRecord.from_dict({})


def _running(bootstrap: str, flow: str) -> StatusRecord:
    return wait_for(
        lambda: s if (s := _status(bootstrap, flow)).state_name == "running" else None, 120, what=f"{flow} running"
    )


def _jvms(state: Path) -> dict[str, set[str]]:
    """Engine directory name -> instance ids of its JVMs."""
    out: dict[str, set[str]] = {}
    for p in instance.scan(under=state.resolve()):
        if p.role is Role.JVM:
            out.setdefault(Path(p.job_dir).name, set()).add(p.instance_id)
    return out


def _no_duplicates(bootstrap: str, topic: str, producer: SequencedProducer) -> None:
    expected = producer.expected()

    def arrived():
        got = read_topic(bootstrap, topic, len(expected))
        return got if all(set(expected[p]) <= set(seqs(got[p])) for p in expected) else None

    got = wait_for(arrived, 150, interval=2, what=f"every record of {topic}")
    for p in expected:
        assert seqs(got[p]) == expected[p], f"{topic}[{p}]: every record once, in order"


def test_one_engine_per_target_flows_added_and_removed_while_the_others_run(
    fresh_clusters, tmp_path, capsys, state_dir
):
    env = Env(fresh_clusters, tmp_path, capsys)
    for topic in ("orders", "payments", "audit"):
        create_topic(env.west, topic, 2)
    create_topic(env.east, "returns", 2)
    _produce(env.west, "payments", 200)
    _produce(env.east, "returns", 100)
    deployer = LocalDeployer(root=state_dir)
    env.write(flows="\n".join([ORDERS, PAYMENTS, BACK]), extra="prune: {flows: true}")
    producer = SequencedProducer(env.west, "orders", 2, 12_000, 300.0)
    try:
        out = env.apply()
        assert "+ deploy job west->east:orders (engine east, local" in out, out
        assert "+ deploy job west->east:payments (engine east, local" in out, out
        assert "+ deploy job east->west (engine west, local" in out, out
        producer.start()

        # --- one Spark application per target: 3 flows, 2 JVMs; each flow with its own settings -----------
        orders = _running(env.east, "west->east:orders")
        payments = _running(env.east, "west->east:payments")
        _running(env.west, "east->west")
        jvms = _jvms(state_dir)
        assert sorted(jvms) == ["east", "west"] and all(len(ids) == 1 for ids in jvms.values()), jvms
        assert orders.instance_id == payments.instance_id and orders.pid == payments.pid, "one driver process"
        # started by the first flow's deploy (asking local[1]), sized for both (engine_slots: 2 flows x parallelism 1)
        assert EngineRecord.load(state_dir / "engines" / "east").master == "local[2]"
        assert (orders.delivery, payments.delivery) == ("at-least-once", "exactly-once")
        wait_for(lambda: count_topic(env.east, "west.payments", 2) >= 200, 120, what="payments copied")
        wait_for(lambda: count_topic(env.west, "east.returns", 2) >= 100, 120, what="returns copied")
        port = wait_for(lambda: deployer.metrics_port("west->east:orders"), 60, what="the engine's metrics port")
        assert port == deployer.metrics_port("west->east:payments")
        scrape = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        for flow in ("west->east:orders", "west->east:payments"):
            assert f'flow="{flow}"' in scrape, f"the engine's /metrics has {flow}'s own series"
        types = [line for line in scrape.splitlines() if line.startswith("# TYPE ")]
        assert types and len(types) == len(set(types)), "each family described once"
        assert env.plan()["code"] == 0

        # --- a flow added: the engine takes it, its other flows keep running ------------------------------
        _produce(env.west, "audit", 150)
        env.write(flows="\n".join([ORDERS, PAYMENTS, AUDIT, BACK]), extra="prune: {flows: true}")
        [add] = env.job_actions()
        assert add["kind"] == "deploy_job" and add["flow"] == "west->east:tracking"
        out = env.apply()
        assert (
            "added to the running engine (it runs local[2] for 3 task slots: its flows share those threads until "
            "it restarts); 2 other flows of engine east kept running" in out
        ), out
        wait_for(lambda: count_topic(env.east, "west.audit", 2) >= 150, 120, what="the added flow copies")
        assert _jvms(state_dir) == jvms, "no Spark application restarted"
        assert _status(env.east, "west->east:orders").started_at == orders.started_at, "orders not restarted"
        assert _status(env.east, "west->east:payments").started_at == payments.started_at

        # --- a flow removed: stopped alone --------------------------------------------------------------
        env.write(flows="\n".join([ORDERS, PAYMENTS, BACK]), extra="prune: {flows: true}")
        [stop] = env.job_actions()
        assert stop["kind"] == "stop_job" and stop["flow"] == "west->east:tracking"
        out = env.apply()
        assert "removed from engine east (2 other flows kept running)" in out, out
        assert wait_for(lambda: _status(env.east, "west->east:tracking").state_name == "stopped", 30, what="stopped")
        assert _jvms(state_dir) == jvms
        assert _status(env.east, "west->east:orders").started_at == orders.started_at, "orders not restarted"
        assert env.job_actions() == []

        # --- a failing flow (its source refuses connections) degrades itself, not its neighbours --------------
        gone = spec_for(type("B", (), {"bootstrap": "127.0.0.1:1"})(), fresh_clusters[1], source_alias="gone")
        res = deployer.deploy(gone, {"engine": "east"})
        assert res.ok, res.message
        eng = deployer._engine("east")
        wait_for(
            lambda: (f := eng.flows().get("gone->east")) is not None and f.state is FlowState.BACKOFF,
            120,
            what="the failing flow backs off",
        )
        assert eng.flows()["west->east:orders"].state is FlowState.RUNNING
        dep = deployer.inspect("gone->east")
        assert dep is not None and dep.alive is False and "the engine retries it" in dep.detail, dep
        assert deployer.stop("gone->east").ok
        assert _jvms(state_dir) == jvms

        producer.join(120)
        assert producer.error is None
        _no_duplicates(env.east, "west.orders", producer)
        assert _status(env.east, "west->east:orders").started_at == orders.started_at
    finally:
        producer.stop(5)
        deployer.stop_all()
        if os.environ.get("SHOW_OUTPUT"):
            print("\n".join(env.outputs))
    assert instance.scan(under=state_dir.resolve()) == []


def test_a_change_of_the_engines_spark_settings_replaces_it_once_with_every_flow(
    fresh_clusters, tmp_path, capsys, state_dir
):
    """Issue 49: a change of an engine's Spark settings is one `-/+ replace engine` action listing each of its flows;
    apply replaces the engine once (one new instance), and every flow resumes from its committed offsets: nothing
    copied twice, nothing skipped."""
    env = Env(fresh_clusters, tmp_path, capsys)
    for topic in ("orders", "payments"):
        create_topic(env.west, topic, 2)
    _produce(env.west, "payments", 200)
    deployer = LocalDeployer(root=state_dir)
    env.write(flows="\n".join([ORDERS, PAYMENTS]))
    producer = SequencedProducer(env.west, "orders", 2, 8_000, 400.0)
    try:
        env.apply()
        orders = _running(env.east, "west->east:orders")
        _running(env.east, "west->east:payments")
        before = _jvms(state_dir)
        assert list(before) == ["east"] and len(before["east"]) == 1, before
        producer.start()
        wait_for(lambda: count_topic(env.east, "west.orders", 2) >= 1_000, 120, what="orders copying")
        wait_for(lambda: count_topic(env.east, "west.payments", 2) >= 200, 120, what="payments copied")

        conf = 'trigger_interval_ms: 100, spark_conf: {"spark.reconciler.test.round": "2"}}'
        env.path.write_text(env.path.read_text().replace("trigger_interval_ms: 100}", conf))
        [replace] = env.job_actions()
        assert (replace["kind"], replace["engine"], replace["reason_kind"]) == (
            "replace_engine",
            "east",
            "job-engine-settings",
        ), replace
        assert [(e["flow"], e["op"]) for e in replace["restarts"]] == [
            ("west->east:orders", "restart"),
            ("west->east:payments", "restart"),
        ]
        assert replace["settings"] == [
            {"path": "engine.spark_conf.spark.reconciler.test.round", "old": None, "new": "2", "sensitive": False}
        ]
        _, text = env.run("plan", "TOPO")
        assert text.count("-/+ replace engine east") == 1 and "Plan: 0 to create, 1 to replace" in text, text

        out = env.apply()
        assert out.count("its Spark settings (master, spark_conf, metrics port or address) changed") == 1, out
        assert "Apply complete: 0 created, 1 replaced, 0 changed, 0 deleted" in out, out
        after = wait_for(
            lambda: j if (j := _jvms(state_dir)).get("east", before["east"]) != before["east"] else None,
            60,
            what="the new instance's JVM",
        )
        assert list(after) == ["east"] and len(after["east"]) == 1, after
        [new_instance] = after["east"]
        assert EngineRecord.load(state_dir / "engines" / "east").spark_conf == {"spark.reconciler.test.round": "2"}
        for flow in ("west->east:orders", "west->east:payments"):
            wait_for(
                lambda f=flow: (s := _status(env.east, f)).state_name == "running" and s.instance_id == new_instance,
                120,
                what=f"{flow} running in the new instance",
            )
        assert _status(env.east, "west->east:orders").started_at != orders.started_at
        assert _jvms(state_dir) == after, "replaced once: no second instance since"
        producer.join(120)
        assert producer.error is None
        _no_duplicates(env.east, "west.orders", producer)
        assert count_topic(env.east, "west.payments", 2) == 200
        assert env.job_actions() == []
    finally:
        producer.stop(5)
        deployer.stop_all()
        if os.environ.get("SHOW_OUTPUT"):
            print("\n".join(env.outputs))
    assert instance.scan(under=state_dir.resolve()) == []


def test_a_job_of_an_earlier_release_moves_into_its_engine_without_copying_twice(
    fresh_clusters, tmp_path, capsys, state_dir
):
    """Before engines every flow was a Spark application of its own ($RECONCILER_STATE_DIR/jobs/<flow>/). The plan
    shows the move; apply stops that job gracefully (it commits) and starts the flow in its engine, which resumes
    from the committed offsets."""
    from reconciler.jobplan.state import desired_jobs
    from reconciler.topology.build import load_topology

    env = Env(fresh_clusters, tmp_path, capsys)
    create_topic(env.west, "orders", 2)
    env.write(topics='["orders"]')
    topo, _ = load_topology([env.path])
    assert topo is not None
    [desired] = desired_jobs(topo).values()
    legacy_dir = state_dir / "jobs" / "west.east"
    legacy = LocalJob.start(
        desired.spec,
        legacy_dir,
        master="local[1]",
        spec_path=legacy_dir / "spec.json",
        log_path=legacy_dir / "job.log",
        exit_code_path=legacy_dir / "exit_code",
    )
    (legacy_dir / "job.json").write_text(
        json.dumps(
            {
                "flow": "west->east",
                "deployer": "local",
                "instance_id": legacy.instance_id,
                "pid": legacy.pid,
                "pid_start": legacy.start_time,
                "master": "local[1]",
                "started_at": time.time(),
                "metrics_port": None,
            }
        )
    )
    producer = SequencedProducer(env.west, "orders", 2, 8_000, 400.0)
    deployer = LocalDeployer(root=state_dir)
    try:
        _running(env.east, "west->east")
        producer.start()
        wait_for(lambda: count_topic(env.east, "west.orders", 2) >= 1_000, 120, what="the old job copying")
        [move] = env.job_actions()
        assert move["kind"] == "restart_job", move
        assert move["reason"] == "flow west->east moves from its own Spark application into engine east", move
        code, text = env.run("plan", "TOPO")
        assert "moves from its own Spark application into engine east" in text and "nothing copied twice" in text
        out = env.apply()
        assert "stopped its own application" in out, out
        assert instance.scan(job_dir=str(legacy_dir.resolve())) == [], "nothing of the old job runs"
        status = _running(env.east, "west->east")
        assert status.instance_id != legacy.instance_id
        assert deployer.engines_of("west->east") == ["east"]
        producer.join(120)
        assert producer.error is None
        _no_duplicates(env.east, "west.orders", producer)
        assert env.job_actions() == []
    finally:
        producer.stop(5)
        legacy.kill()
        deployer.stop_all()
    assert instance.scan(under=state_dir.resolve()) == []
