"""Jobs in the plan, without Spark: job states from status + deployment, and plan/apply through the
CLI against the memory double with a recording deployer (deploy, update in place, restart, stop,
unmanaged, disabled flows, saved plans)."""

from __future__ import annotations

import json

import pytest

from reconciler.cli.main import main
from reconciler.contract.spec import ClusterSpec, JobSpec
from reconciler.deployers.base import Deployment
from reconciler.jobplan.state import JobState, classify
from tests.job_helpers import FakeDeployer, StatusBoard, fake_backend
from tests.plan_helpers import World, topology
from tests.spec_helpers import job_spec

TOPO = """apiVersion: reconciler/v1
kind: Topology
metadata: {{name: jobs}}
clusters:
  west: {{bootstrap_servers: "127.0.0.1:1"}}
  east: {{bootstrap_servers: "127.0.0.1:2"}}
defaults:
  job: {{master: "local[1]", parallelism: 1}}
flows:
{flows}
{extra}
"""
FLOW = "  - {{source: west, target: east, topics: {{include: {topics}}}, delivery: {delivery}{more}}}"


def spec(**kw) -> JobSpec:
    return job_spec("west->east", ClusterSpec("west", "w:1"), ClusterSpec("east", "e:1"), **kw)


NOW = 1_700_000_000_000


def status(state="running", age=1.0, started_age=60.0, **kw):
    return {
        "flow": "west->east",
        "spec_hash": spec().spec_hash(),
        "state": state,
        "heartbeat_at": NOW - int(age * 1000),
        "started_at": NOW - int(started_age * 1000),
        **kw,
    }


def dep(alive=True, started_age=120.0, stopped=False, detail=""):
    return Deployment(
        "west->east", "local", "pid 7, local[1]", spec(), alive, NOW / 1000 - started_age, stopped, None, detail
    )


@pytest.mark.parametrize(
    "st,d,want",
    [
        (None, None, JobState.NOT_DEPLOYED),
        (status(), None, JobState.ELSEWHERE),
        (status(age=100), None, JobState.NOT_DEPLOYED),
        (status(), dep(), JobState.RUNNING),
        (status(age=100), dep(), JobState.DOWN),  # alive, but its status is stale
        (status(), dep(alive=False, detail="process 7 exited with code 1 (failed)"), JobState.DOWN),
        (None, dep(started_age=5), JobState.STARTING),  # just started: no status yet
        (None, dep(started_age=500), JobState.DOWN),
        (status(state="stopped", age=200), dep(alive=False, stopped=True), JobState.STOPPED),
        (
            status(state="restart-required", age=1, started_age=60),
            dep(alive=False, started_age=100),
            JobState.RESTART_REQUIRED,
        ),
        (status(state="restart-required", age=1, started_age=500), dep(alive=False, started_age=100), JobState.DOWN),
        (
            status(age=100),
            Deployment("west->east", "kubernetes", "k8s default/x", spec(), None, NOW / 1000 - 500),
            JobState.DOWN,
        ),  # manifests only: the status decides
        (
            None,
            Deployment("west->east", "kubernetes", "k8s default/x", spec(), None, NOW / 1000 - 600),
            JobState.PENDING_SYNC,
        ),  # rendered 10 minutes ago for a GitOps controller, no status yet: not synced, not down
        (
            status(age=700, started_age=900),
            Deployment("west->east", "kubernetes", "k8s default/x", spec(), None, NOW / 1000 - 600),
            JobState.PENDING_SYNC,
        ),  # only a record older than the render
        (
            status(age=100, started_age=300, spec_hash="0" * 64),
            Deployment("west->east", "kubernetes", "k8s default/x", spec(), None, NOW / 1000 - 600),
            JobState.PENDING_SYNC,
        ),  # only a record of another spec
        (
            status(age=1, started_age=900, spec_hash="0" * 64),
            Deployment("west->east", "kubernetes", "k8s default/x", spec(), None, NOW / 1000 - 600),
            JobState.RUNNING,
        ),  # the engine still runs the flow as it was before the render: running (the cluster syncs later)
        (None, dep(started_age=600), JobState.DOWN),  # a deployer that sees its process: never pending sync
    ],
)
def test_classify(st, d, want):
    state, why = classify("west->east", st, d, NOW)
    assert state is want, why
    if want in (JobState.DOWN, JobState.PENDING_SYNC):
        assert why
    if want is JobState.PENDING_SYNC:
        assert "rendered at" in why and "10m ago" in why, why


def test_stale_means_three_status_intervals_but_at_least_15s():
    assert classify("west->east", status(age=14), dep(), NOW)[0] is JobState.RUNNING
    assert classify("west->east", status(age=16), dep(), NOW)[0] is JobState.DOWN
    slow = spec(status_interval_seconds=10.0)
    assert classify("west->east", status(age=25), dep(), NOW, slow)[0] is JobState.RUNNING
    assert classify("west->east", status(age=31), dep(), NOW, slow)[0] is JobState.DOWN


# --- through the CLI, against the memory double and a recording deployer ----------------------------


class Env:
    def __init__(self, tmp_path, monkeypatch, capsys):
        self.path = tmp_path / "t.yaml"
        self.capsys = capsys
        self.world = World(topology("flows:\n  - {source: west, target: east}"))
        self.world["west"].add_topic("orders", 2)
        self.world["west"].add_topic("refunds", 1)
        self.board = StatusBoard()
        self.deployer = FakeDeployer("local")
        self.backend = fake_backend(self.board, self.deployer)
        self.cli = self.world.backend(self.backend)  # what the CLI runs against
        self.write()

    def write(self, topics='["orders"]', delivery="at-least-once", more="", extra="", flows=None) -> None:
        if flows is None:
            flows = FLOW.format(topics=topics, delivery=delivery, more=more)
        self.path.write_text(TOPO.format(flows=flows, extra=extra))

    def plan(self) -> dict:
        code = main(["plan", str(self.path), "--format", "json", "--detailed-exitcode"], self.cli)
        out = json.loads(self.capsys.readouterr().out)
        out["code"] = code
        return out

    def jobs(self, plan: dict) -> list[dict]:
        return [a for a in plan["actions"] if a["kind"].endswith(("_job", "_engine"))]

    def apply(self) -> str:
        assert main(["apply", str(self.path), "--auto-approve"], self.cli) == 0
        return self.capsys.readouterr().out

    def report_running(self) -> None:
        """The job publishes a fresh status with the spec it was given."""
        self.board.report("west->east", self.deployer.jobs["west->east"].spec)


@pytest.fixture
def env(tmp_path, monkeypatch, capsys):
    return Env(tmp_path, monkeypatch, capsys)


def test_deploy_then_nothing_then_update_in_place(env):
    plan = env.plan()
    [deploy] = env.jobs(plan)
    assert (
        deploy["kind"] == "deploy_job"
        and deploy["cluster"] == "east"
        and deploy["reason"] == "no job runs flow west->east"
    )
    assert (
        deploy["spec"]["settings"]["topics"]["include"] == ["orders"]
        and deploy["spec"]["engine"]["master"] == "local[1]"
    )
    assert plan["actions"][-1] == deploy, "jobs start after every topic action"
    out = env.apply()
    assert "+ deploy job west->east (engine east, local local[1], spec" in out and env.deployer.calls == [
        ("deploy", "west->east")
    ]

    plan = env.plan()  # just started: no status yet, but within the start grace period
    assert plan["code"] == 0 and plan["actions"] == []
    env.report_running()
    assert env.plan()["code"] == 0

    env.write(topics='["orders", "refunds"]')
    plan = env.plan()
    [update] = env.jobs(plan)
    assert update["kind"] == "update_job" and update["changes"] == {
        "settings.topics.include": [["orders"], ["orders", "refunds"]]
    }
    assert "no restart" in update["reason"] and update["current_hash"] == env.deployer.jobs["west->east"].spec_hash
    assert ("create_topic", "west.refunds") in {(a["kind"], a.get("topic")) for a in plan["actions"]}
    assert plan["actions"].index(update) > plan["actions"].index(
        next(a for a in plan["actions"] if a.get("topic") == "west.refunds")
    ), "the new remote topic first"
    env.apply()
    assert env.deployer.calls[-1] == ("update", "west->east")
    assert env.plan()["actions"] == [], "compared with the spec handed to the job, not the (lagging) status"


def test_restart_on_a_field_a_running_job_cannot_take(env, capsys):
    env.apply()
    env.report_running()
    env.write(delivery="exactly-once")
    plan = env.plan()
    [restart] = env.jobs(plan)
    assert restart["kind"] == "restart_job" and restart["changes"]["settings.delivery"] == [
        "at-least-once",
        "exactly-once",
    ]
    assert "settings.delivery changed, which a running job cannot take without a restart" == restart["reason"]
    main(["plan", str(env.path)], env.cli)
    text = capsys.readouterr().out
    assert (
        "~ restart job west->east (engine east, local local[1], spec" in text
        and "settings.delivery: at-least-once -> exactly-once" in text
    )
    assert "resumes from its committed offsets" in text
    env.apply()
    assert env.deployer.calls[-1] == ("restart", "west->east")
    assert env.deployer.jobs["west->east"].spec.delivery == "exactly-once"


def test_a_dead_job_is_restarted_with_the_reason(env):
    """Its engine's only flow dead: nothing of the engine runs, so the engine is replaced (started again), the
    flow's own reason in the replacement."""
    env.apply()
    env.report_running()
    env.deployer.crash("west->east", "process 1001 exited with code 1 (failed)")
    [replace] = env.jobs(env.plan())
    assert replace["reason_kind"] == "job-down" and replace["engine"] == "east" and replace["verb"] == "-/+"
    [flow] = replace["restarts"]
    assert flow["flow"] == "west->east" and flow["state"] == "down" and flow["op"] == "restart"
    assert flow["reason"].startswith(
        "the job is down: process 1001 exited with code 1 (failed); last status 'running' at "
    )
    env.apply()
    assert env.deployer.calls[-1] == ("restart", "west->east")


def test_a_hung_job_is_down_once_its_status_is_stale(env):
    env.apply()
    env.deployer.age("west->east", 600)
    env.board.report("west->east", env.deployer.jobs["west->east"].spec, age=60)
    [restart] = env.jobs(env.plan())
    assert restart["kind"] == "restart_job" and "runs but publishes no status" in restart["reason"]


def test_removed_flow_without_prune_is_unmanaged_with_prune_stopped(env, capsys):
    env.apply()
    env.report_running()
    env.write(flows="  []")
    plan = env.plan()
    assert env.jobs(plan) == []
    [f] = [f for f in plan["findings"] if f["subject"] == "west->east"]
    assert f["kind"] == "unmanaged" and f["severity"] == "warning" and "prune: {flows: true}" in f["hint"]
    env.apply()
    assert env.deployer.jobs["west->east"].alive

    env.write(flows="  []", extra="prune: {flows: true}")
    plan = env.plan()
    [stop] = env.jobs(plan)
    assert stop["kind"] == "stop_job" and stop["verb"] == "-" and "prune.flows is on" in stop["reason"]
    main(["plan", str(env.path)], env.cli)
    text = capsys.readouterr().out
    assert "WARNING: this plan DELETES 1 thing" in text and "- STOP job west->east (local, pid 1001, local[1])" in text
    env.apply()
    assert env.deployer.calls[-1] == ("stop", "west->east") and not env.deployer.jobs["west->east"].alive
    env.board.report("west->east", env.deployer.jobs["west->east"].spec, state="stopped")
    assert env.plan()["code"] == 0


def test_a_disabled_flow_stops_its_job_and_enabling_it_deploys_again(env):
    env.apply()
    env.report_running()
    env.write(more=", enabled: false")
    [stop] = env.jobs(env.plan())
    assert stop["kind"] == "stop_job" and stop["reason"] == "flow west->east is disabled (enabled: false)"
    env.apply()
    env.board.report("west->east", env.deployer.jobs["west->east"].spec, state="stopped")
    assert env.plan()["actions"] == []
    env.write()
    [deploy] = env.jobs(env.plan())
    assert deploy["kind"] == "deploy_job" and "was stopped" in deploy["reason"]


def test_a_job_running_from_elsewhere_is_not_touched(env):
    other = JobSpec.from_dict(env.plan()["actions"][-1]["spec"]).with_engine(parallelism=3)
    env.board.report("west->east", other)
    plan = env.plan()
    assert env.jobs(plan) == []
    [f] = [f for f in plan["findings"] if f["kind"] == "conflict"]
    assert "not deployed from this state directory" in f["message"]


def test_unreadable_statuses_plan_nothing_for_their_jobs(env):
    def broken(cluster):
        raise RuntimeError("status topic not readable")

    env.backend.read_status = broken
    plan = env.plan()
    assert env.jobs(plan) == []
    [f] = [f for f in plan["findings"] if f["subject"] == "west->east"]
    assert "status topic not readable" in f["message"]


def test_saved_plan_deploys_exactly_the_planned_spec(env, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RECONCILER_PLAN_KEY", "test-plan-key-0123456789abcdef")
    out = tmp_path / "plan.json"
    assert main(["plan", str(env.path), "--out", str(out)], env.cli) == 0
    capsys.readouterr()
    env.write(topics='["refunds"]')  # the topology moved on: the saved plan is not of it, nothing is applied
    assert main(["apply", str(out), str(env.path), "--auto-approve"], env.cli) == 1
    assert "planned from other topology content" in capsys.readouterr().err and "west->east" not in env.deployer.jobs
    env.write(topics='["orders"]')  # the topology planned: exactly the planned spec is deployed
    assert main(["apply", str(out), str(env.path), "--auto-approve"], env.cli) == 0
    assert env.deployer.jobs["west->east"].spec.settings.topics.include == ("orders",)


def test_status_command_lists_every_job(env, capsys):
    env.apply()
    env.report_running()
    assert main(["status", str(env.path)], env.cli) == 0
    out = capsys.readouterr().out
    assert "west->east" in out and "running" in out and "= desired" in out and "40ms" in out and "120ms" in out
    assert "1 of 1 job run the desired spec." in out
    env.write(delivery="exactly-once")
    assert main(["status", str(env.path), "--detailed-exitcode"], env.cli) == 2
    capsys.readouterr()
    assert main(["status", str(env.path), "--format", "json"], env.cli) == 0
    [row] = json.loads(capsys.readouterr().out)["jobs"]
    assert row["state"] == "running" and not row["in_sync"] and row["latency_ms"]["p99"] == 120.0


def test_status_shows_lag_in_records_and_in_seconds(env, capsys):
    env.apply()
    env.board.report("west->east", env.deployer.jobs["west->east"].spec, lag_total=24_000, lag_seconds=12.4)
    assert main(["status", str(env.path)], env.cli) == 0
    out = capsys.readouterr().out
    head, row = out.splitlines()[:2]
    assert row[head.index("LAG ") :].startswith("24000") and row[head.index("LAG AGE") :].startswith("12s ")
    assert "LAG AGE: age of the oldest record not replicated yet" in out
    assert main(["status", str(env.path), "--format", "json"], env.cli) == 0
    [row] = json.loads(capsys.readouterr().out)["jobs"]
    assert (row["lag_total"], row["lag_seconds"]) == (24_000, 12.4)


def test_job_changes_apply_after_a_partial_failure(env, monkeypatch):
    def boom(change):
        raise RuntimeError("spark-submit not found")

    monkeypatch.setattr(env.deployer, "apply", boom)
    assert main(["apply", str(env.path), "--auto-approve"], env.cli) == 1
    captured = env.capsys.readouterr()
    assert "FAILED: RuntimeError: spark-submit not found" in captured.out
    assert "west.orders" in env.world["east"].topics, "topics are applied even when a job fails"


def test_a_credential_change_is_a_rotation_in_place_not_a_restart(env, monkeypatch):
    """Issue 45: a cluster whose credential settings alone change (a password variable, a user name, a certificate
    location) is shown as a credential rotation the running flow takes in place; anything else of the cluster
    still restarts it."""
    monkeypatch.setenv("EAST_PW", "pw-1")
    monkeypatch.setenv("EAST_PW_NEW", "pw-2")
    env.apply()
    env.report_running()
    east = 'east: {bootstrap_servers: "127.0.0.1:2"}'
    env.path.write_text(env.path.read_text().replace(east, east[:-1] + ', config: {sasl.password: "${EAST_PW_NEW}"}}'))
    [update] = env.jobs(env.plan())
    assert update["kind"] == "update_job" and list(update["changes"]) == ["target"], update
    assert update["reason"].startswith("credentials of cluster 'east' rotated (sasl.password)"), update["reason"]
    assert "reconnects with them in place" in update["reason"]
    env.path.write_text(env.path.read_text().replace("sasl.password:", "sasl.mechanisms: PLAIN, sasl.password:"))
    [restart] = env.jobs(env.plan())
    assert restart["kind"] == "restart_job" and "target changed" in restart["reason"], restart["reason"]


def test_credential_change_rule():
    from reconciler.contract.spec import credential_change

    base = {"alias": "east", "bootstrap_servers": "h:1", "config": {"sasl.password": "${EAST_A}"}}
    assert credential_change(base, {**base, "config": {"sasl.password": "${EAST_B}"}}) == ("sasl.password",)
    assert credential_change(base, {**base, "config": {"sasl.password": "${EAST_A}", "ssl.ca.location": "/x"}}) == (
        "ssl.ca.location",
    )
    assert credential_change(base, {**base, "bootstrap_servers": "h:2"}) == ()
    assert credential_change(base, {**base, "config": {"sasl.password": "${EAST_A}", "client.id": "x"}}) == ()
    assert credential_change(base, base) == ()
