"""The one verdict on a job (`reconciler.contract.jobstate`): what a job reports of itself maps to a verdict in
code, the deployment overrides it where it knows better, and drift shows the verdict it is handed (the plan's)
in its items, its flows table, its JSON and its Prometheus output alike."""

from __future__ import annotations

import json

import pytest

from reconciler.contract.jobstate import REPORTED_VERDICT, Deployment, JobState, LiveJobs, classify, reported_verdict
from reconciler.contract.spec import JobSpec
from reconciler.contract.status import LIVE_STATES, StatusRecord, StatusState, stale_after_seconds
from reconciler.drift.report import Category
from reconciler.jobplan.state import assemble, desired_jobs
from reconciler.render import drift_prometheus, drift_text
from tests.unit import test_drift_report as drift_cases
from tests.unit.test_drift_prometheus import samples, value
from tests.unit.test_drift_report import NOW, flow_of, healthy, report_of

world = drift_cases.world


def test_every_reported_state_maps_to_a_verdict_and_only_live_states_to_running():
    assert set(REPORTED_VERDICT) == set(StatusState)
    assert {s for s, v in REPORTED_VERDICT.items() if v is JobState.RUNNING} == LIVE_STATES
    assert REPORTED_VERDICT[StatusState.RESTART_REQUIRED] is JobState.RESTART_REQUIRED
    assert {REPORTED_VERDICT[s] for s in (StatusState.STOPPING, StatusState.STOPPED, StatusState.FAILED)} == {
        JobState.DOWN
    }


@pytest.mark.parametrize("state", [s.value for s in StatusState] + ["dancing"])
@pytest.mark.parametrize("age", [1.0, 14.0, 16.0, 100.0])
def test_the_reported_verdict_is_the_mapping_of_a_fresh_report_and_down_for_a_stale_one(state, age):
    record = StatusRecord.from_dict({"flow": "west->east", "state": state, "heartbeat_at": NOW - int(age * 1000)})
    got = reported_verdict(record, NOW, None)
    if age > stale_after_seconds(None) or record.state is None:
        assert got is JobState.DOWN
    else:
        assert got is REPORTED_VERDICT[record.state]
    assert reported_verdict(None, NOW, None) is JobState.NOT_DEPLOYED
    assert reported_verdict(record, NOW, None, stale_after=1000.0) is (
        REPORTED_VERDICT[record.state] if record.state is not None else JobState.DOWN
    )
    # classify agrees where no deployment is known: a job that replicates runs elsewhere, else is not deployed
    expected = JobState.ELSEWHERE if got is JobState.RUNNING else JobState.NOT_DEPLOYED
    assert classify("west->east", record, None, NOW)[0] is expected


def _live(world, flow: str, record: dict, dep: Deployment) -> LiveJobs:
    desired = desired_jobs(world.topology)
    others = {f.name: healthy(world.topology, f.name) for f in world.topology.active_flows if f.name != flow}
    deps = [dep] + [
        Deployment(f, "local", "engine", desired[f].spec, True, started_at=NOW / 1000 - 600) for f in others
    ]
    return assemble(desired, {**others, flow: record}, deps, {}, NOW)


def _everywhere(report, flow: str) -> dict:
    f = flow_of(report, flow)
    text = drift_text.render(report)
    row = next(line for line in text.splitlines() if line.strip().startswith(flow + " "))
    found = samples(drift_prometheus.render(report))
    doc = next(x for x in json.loads(drift_text.render_json(report))["flows"] if x["flow"] == flow)
    return {
        "items": [i.message for i in report.drift if i.category is Category.JOB and flow in i.flows],
        "row": row,
        "json": doc["job"],
        "up": value(found, "reconciler_drift_job_up", flow=flow),
        "verdicts": [s.labels["verdict"] for s in found["reconciler_drift_job_verdict"] if s.labels["flow"] == flow],
        "job": f.job,
    }


def test_a_dead_process_with_a_fresh_running_record_is_down_in_every_part_of_drift(world):
    # 4 s after a kill -9 the record still says running; the deployment says the process is gone
    topo = world.topology
    spec = JobSpec.from_flow(topo, topo.flow("west->east"))
    dead = Deployment(
        "west->east",
        "local",
        "engine east (ended)",
        spec,
        False,
        started_at=NOW / 1000 - 600,
        detail="was killed by SIGKILL (exit code 137)",
    )
    record = healthy(topo, "west->east", heartbeat_at=NOW - 4_000, started_at=NOW - 500_000)
    live = _live(world, "west->east", record, dead)
    assert live.jobs["west->east"].state is JobState.DOWN
    got = _everywhere(report_of(world, statuses={}, live_jobs=live), "west->east")
    assert len(got["items"]) == 1 and "is down: was killed by SIGKILL" in got["items"][0], got["items"]
    assert " down (last: running)" in got["row"], got["row"]
    assert got["json"]["verdict"] == "down" and got["json"]["running"] is False and got["json"]["state"] == "running"
    assert got["up"] == 0 and got["verdicts"] == ["down"]
    assert got["job"].live is live.jobs["west->east"], "drift's job health is the verdict itself, not a copy"
    # the other flow runs, and says so everywhere
    ok = _everywhere(report_of(world, statuses={}, live_jobs=live), "east->west")
    assert ok["items"] == [] and ok["json"]["verdict"] == "running" and ok["up"] == 1 and ok["verdicts"] == ["running"]


def test_two_instances_are_duplicated_in_every_part_of_drift(world):
    topo = world.topology
    spec = JobSpec.from_flow(topo, topo.flow("west->east"))
    two = Deployment(
        "west->east",
        "local",
        "engine east",
        spec,
        True,
        started_at=NOW / 1000 - 600,
        instance_id="i-1",
        strays=("instance i-0 (pid 42)",),
    )
    live = _live(world, "west->east", healthy(topo, "west->east", started_at=NOW - 500_000), two)
    got = _everywhere(report_of(world, statuses={}, live_jobs=live), "west->east")
    assert len(got["items"]) == 1 and "is duplicated: 2 instances of flow west->east run" in got["items"][0]
    assert " duplicated (last: running)" in got["row"], got["row"]
    assert got["json"]["verdict"] == "duplicated" and got["up"] == 0 and got["verdicts"] == ["duplicated"]


def test_a_job_starting_is_not_drift_and_job_stale_seconds_is_the_verdicts_threshold(world):
    topo = world.topology
    spec = JobSpec.from_flow(topo, topo.flow("west->east"))
    starting = Deployment("west->east", "local", "engine east", spec, True, started_at=NOW / 1000 - 2)
    live = _live(world, "west->east", None, starting)  # no record yet
    got = _everywhere(report_of(world, statuses={}, live_jobs=live), "west->east")
    assert got["items"] == [] and got["json"]["verdict"] == "starting" and got["verdicts"] == ["starting"]
    # a process that runs but reports no more: down by the one rule, running with an explicit looser threshold
    runs = Deployment("west->east", "local", "engine east", spec, True, started_at=NOW / 1000 - 600)
    record = healthy(topo, "west->east", heartbeat_at=NOW - 20_000, started_at=NOW - 500_000)
    desired = desired_jobs(topo)
    strict = assemble(desired, {"west->east": record}, [runs], {}, NOW).jobs["west->east"]
    lenient = assemble(desired, {"west->east": record}, [runs], {}, NOW, stale_after=60.0).jobs["west->east"]
    assert strict.state is JobState.DOWN and "stale after 15s" in strict.why
    assert lenient.state is JobState.RUNNING
