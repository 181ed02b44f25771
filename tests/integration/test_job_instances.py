"""Runtime truth of the local deployer (issue 21): one instance of a flow's job, every process of it accounted
for. Killing any process of a running job ends the whole instance (or, for a Spark Python worker, Spark replaces
it and the instance goes on); a leftover instance is shown by `plan` and stopped by `apply`, `stop` and
`dev down`; jobs started together never fight over a metrics port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import reconciler.deployers.instance as instance
from reconciler.deployers.instance import Role
from reconciler.deployers.local import LocalDeployer
from reconciler.deployers.process import LocalJob
from reconciler.jobplan.backend import read_job_status
from tests.integration.mirror_helpers import SequencedProducer, count_topic, create_topic, spec_for, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


def _ready(deployer: LocalDeployer, flow: str) -> list[instance.JobProcess]:
    """The job's processes once the driver runs and Spark's Python workers are up (tasks have run)."""

    def up():
        procs = deployer._processes(flow)
        roles = [p.role for p in procs]
        return procs if Role.DRIVER in roles and Role.WORKER in roles and Role.JVM in roles else None

    return wait_for(up, 120, interval=0.5, what=f"the job of {flow} running with its Python workers")


def test_killing_any_process_of_a_job_ends_the_instance_and_a_deploy_runs_exactly_one(fresh_clusters, tmp_path):
    west, east = fresh_clusters
    create_topic(west.bootstrap, "orders", 2)
    SequencedProducer(west.bootstrap, "orders", 2, 500, 5_000.0).run()
    spec = spec_for(west, east, topics_include=("orders",))
    deployer = LocalDeployer(root=tmp_path / "state", stop_timeout=20)
    assert deployer.deploy(spec).ok
    try:
        for role in (Role.SUPERVISOR, Role.JVM, Role.DRIVER):
            procs = _ready(deployer, spec.flow)
            [inst] = {p.instance_id for p in procs}
            victim = next(p for p in procs if p.role is role)
            os.kill(victim.pid, signal.SIGKILL)
            wait_for(
                lambda: not deployer._processes(spec.flow),
                30,
                interval=0.2,
                what=f"every process gone after {role.value} was killed",
            )
            dep = deployer.inspect(spec.flow)
            assert dep is not None and dep.alive is False and not dep.strays, dep
            assert dep.where.startswith(f"engine east, instance {inst} (ended)"), "no pid of a dead instance is shown"
            if role is not Role.SUPERVISOR:  # the supervisor writes the code it saw: the signal
                assert "killed by SIGKILL" in dep.detail, dep.detail
            res = deployer.deploy(spec)
            assert res.ok and "leftover" not in res.message, res.message
            assert {p.instance_id for p in _ready(deployer, spec.flow)} - {inst}, "a new instance"
            assert len({p.instance_id for p in deployer._processes(spec.flow)}) == 1

        # A Spark Python worker killed: Spark runs the next task in a new worker; the instance goes on, alone.
        procs = _ready(deployer, spec.flow)
        [inst] = {p.instance_id for p in procs}
        os.kill(next(p for p in procs if p.role is Role.WORKER).pid, signal.SIGKILL)
        SequencedProducer(west.bootstrap, "orders", 2, 500, 5_000.0).run()
        wait_for(lambda: count_topic(east.bootstrap, "west.orders", 2) >= 1_000, 90, what="copying goes on")
        assert deployer.deploy(spec).message.startswith("already running")
        assert {p.instance_id for p in deployer._processes(spec.flow)} == {inst}
    finally:
        deployer.stop_all()
    assert instance.scan(under=(tmp_path / "state").resolve()) == []


def test_a_leftover_instance_is_drift_and_start_stop_and_dev_down_end_it(fresh_clusters, tmp_path):
    west, east = fresh_clusters
    create_topic(west.bootstrap, "orders", 2)
    SequencedProducer(west.bootstrap, "orders", 2, 200, 5_000.0).run()
    spec = spec_for(west, east, topics_include=("orders",))
    deployer = LocalDeployer(root=tmp_path / "state", stop_timeout=20)
    job_dir = deployer.job_dir(spec.flow)
    try:
        assert deployer.deploy(spec).ok
        running = {p.instance_id for p in _ready(deployer, spec.flow)}
        # What a deployer killed after starting a job but before recording it leaves: a second instance in
        # the job directory that the record does not name.
        stray = LocalJob.start(spec, job_dir, spec_path=job_dir / "spec.json", log_path=tmp_path / "stray.log")
        wait_for(lambda: stray.driver_pids(), 60, what="the stray's driver")
        dep = deployer.inspect(spec.flow)
        assert dep.alive and len(dep.strays) == 1 and stray.instance_id in dep.strays[0], dep
        from reconciler.jobplan.state import JobState, classify

        state, why = classify(spec.flow, None, dep, int(time.time() * 1000), spec)
        assert state is JobState.DUPLICATED and why.startswith(f"2 instances of flow {spec.flow} run"), why

        # restart (what apply does for a duplicated job): every instance ends, exactly one new one runs
        res = deployer.restart(spec)
        assert res.ok and f"stopped a leftover instance {stray.instance_id}" in res.message, res.message
        now = {p.instance_id for p in _ready(deployer, spec.flow)}
        assert len(now) == 1 and not now & (running | {stray.instance_id})

        # stop ends a leftover too
        stray2 = LocalJob.start(spec, job_dir, spec_path=job_dir / "spec.json", log_path=tmp_path / "stray2.log")
        wait_for(lambda: stray2.driver_pids(), 60, what="the second stray's driver")
        res = deployer.stop(spec.flow)
        assert f"stopped a leftover instance {stray2.instance_id}" in res.message, res.message
        assert deployer._processes(spec.flow) == []

        # dev down (stop_all) ends an instance whose job directory has no record at all
        other = tmp_path / "state" / "jobs" / "gone.east"
        stray3 = LocalJob.start(spec, other, log_path=tmp_path / "stray3.log")
        wait_for(lambda: stray3.driver_pids(), 60, what="the third stray's driver")
        results = deployer.stop_all()
        assert any("unrecorded instance" in r.message for _, r in results), results
    finally:
        deployer.stop_all()
    assert instance.scan(under=(tmp_path / "state").resolve()) == []


def test_four_flows_deployed_at_once_share_one_engine_and_its_metrics_port_five_times_in_a_row(
    fresh_clusters, tmp_path
):
    """Deploys of the flows of one engine handled in parallel (as apply does) start the engine once: every flow
    runs, in one Spark application, and the status records name the port the engine bound."""
    west, east = fresh_clusters
    create_topic(west.bootstrap, "orders", 1)
    SequencedProducer(west.bootstrap, "orders", 1, 100, 5_000.0).run()
    specs = [
        spec_for(west, east, source_alias=alias, topics_include=("orders",), master="local[1]", parallelism=1)
        for alias in ("a", "b", "c", "d")
    ]
    deployer = LocalDeployer(root=tmp_path / "state", stop_timeout=20)
    try:
        for round_ in range(5):
            with ThreadPoolExecutor(4) as pool:
                results = list(pool.map(deployer.deploy, specs))
            assert all(r.ok for r in results), [r.message for r in results]
            messages = [r.message for r in results]
            assert sum("started engine east" in m for m in messages) == 1, messages
            assert all(
                m.startswith(
                    (
                        "started engine east",  # one of them starts it
                        "handed to engine east, which is starting",  # the others hand it their flows
                        "added to the running",
                        "already",  # rounds 2-5: the flow files stay with the stopped engine, which runs them
                    )
                )
                for m in messages
            ), messages

            def all_running():
                # running, by the engine of this round: its port bound and named in every record (the records of the
                # engine stopped last round may still say running for a moment under load)
                port = deployer.metrics_port(specs[0].flow)
                got = [read_job_status({"bootstrap.servers": east.bootstrap}, s.flow, timeout=3) for s in specs]
                fresh = port is not None and all(g is not None and g.metrics_port == port for g in got)
                return got if fresh and all(g is not None and g.state_name == "running" for g in got) else None

            statuses = wait_for(all_running, 150, interval=1, what=f"4 flows running (round {round_ + 1})")
            ports = {deployer.metrics_port(s.flow) for s in specs}
            assert len(ports) == 1 and None not in ports, ports
            [port] = ports
            assert {st.metrics_port for st in statuses} == {port}, "the status records name the port bound"
            assert len({st.instance_id for st in statuses}) == 1, "one engine instance"
            jvms = [p for p in instance.scan(under=(tmp_path / "state").resolve()) if p.role is Role.JVM]
            assert len(jvms) == 1, jvms
            for s in specs:
                dep = deployer.inspect(s.flow)
                assert dep.alive and f"metrics http://127.0.0.1:{port}/metrics" in dep.where
            assert all(r.ok for _, r in deployer.stop_all())
            assert instance.scan(under=(tmp_path / "state").resolve()) == []
    finally:
        deployer.stop_all()


def test_a_running_job_stops_itself_when_a_newer_instance_of_its_flow_runs(fresh_clusters, tmp_path):
    """The second guard (as KIP-618 fences zombie tasks): an instance started from somewhere no deployer here
    knows (another state directory, another machine) makes the older one stop, saying why."""
    west, east = fresh_clusters
    create_topic(west.bootstrap, "orders", 1)
    spec = spec_for(west, east, topics_include=("orders",), master="local[1]", parallelism=1)
    older = LocalJob.start(spec, tmp_path / "here", exit_code_path=tmp_path / "here" / "exit_code")
    newer = None
    try:
        wait_for(
            lambda: (
                (s := read_job_status({"bootstrap.servers": east.bootstrap}, spec.flow, timeout=3))
                and s.instance_id == older.instance_id
                and s.state_name == "running"
            ),
            120,
            what="the first instance running",
        )
        newer = LocalJob.start(spec, tmp_path / "elsewhere")
        code = older.wait(120)
        assert code == 4, older.log_tail()
        assert f"a newer instance {newer.instance_id} of flow {spec.flow} runs" in older.log_tail(200)
        assert newer.alive(), newer.log_tail()
        assert older.processes() == []
    finally:
        older.kill()
        if newer is not None:
            newer.kill()


TOPOLOGY = """apiVersion: reconciler/v1
kind: Topology
metadata: {{name: instances-it}}
clusters:
  west: {{bootstrap_servers: "{west}"}}
  east: {{bootstrap_servers: "{east}"}}
defaults:
  sync: {{acls: false}}
  job: {{deployer: local, master: "local[1]", parallelism: 1}}
flows:
  - {{source: west, target: east, topics: {{include: [orders]}}}}
"""


@pytest.mark.jobs
def test_an_apply_killed_mid_start_leaves_nothing_a_later_apply_duplicates(
    fresh_clusters, tmp_path, capsys, monkeypatch
):
    from reconciler.cli.main import main

    west, east = fresh_clusters
    create_topic(west.bootstrap, "orders", 2)
    path = tmp_path / "topology.yaml"
    path.write_text(TOPOLOGY.format(west=west.bootstrap, east=east.bootstrap))
    state = (tmp_path / "state").resolve()
    env = {**os.environ, "RECONCILER_STATE_DIR": str(state), "RECONCILER_JOBS": "on"}
    apply = subprocess.Popen(
        [sys.executable, "-m", "reconciler.cli.main", "apply", str(path), "--auto-approve"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deployer = LocalDeployer(root=state, stop_timeout=20)
    try:
        # the instant the job's first process exists, the deployer dies (kill -9: no cleanup of its own)
        wait_for(lambda: instance.scan(under=state) or apply.poll() is not None, 120, interval=0.05, what="a start")
        apply.kill()
        apply.wait(10)
        first = {p.instance_id for p in instance.scan(under=state)}
        assert len(first) == 1, first
        monkeypatch.setenv("RECONCILER_STATE_DIR", str(state))  # the in-process apply uses the same state
        assert main(["apply", str(path), "--auto-approve"]) == 0, capsys.readouterr()
        procs = _ready(deployer, "west->east")
        assert len({p.instance_id for p in procs}) == 1, procs
        assert len([p for p in procs if p.role is Role.DRIVER]) == 1, procs
        assert not deployer.inspect("west->east").strays
    finally:
        deployer.stop_all()
    assert instance.scan(under=state) == []
