"""The contracts below planning and the job: one rule of job health, used by plan, status and drift."""

from __future__ import annotations

import pytest

from reconciler.contract.status import (
    DOWN_STATES,
    LIVE_STATES,
    StatusState,
    is_replicating,
    stale_after_seconds,
    status_age_seconds,
)
from reconciler.drift.report import job_health
from reconciler.jobs.state import JobState, classify

NOW = 1_700_000_000_000


def record(state: str, age: float) -> dict:
    return {"flow": "west->east", "state": state, "heartbeat_at": NOW - int(age * 1000), "started_at": NOW - 600_000}


@pytest.mark.parametrize("state", [s.value for s in StatusState])
@pytest.mark.parametrize("age", [1.0, 14.9, 15.1, 59.0, 61.0])
def test_plan_status_and_drift_read_health_with_one_rule(state, age):
    status = record(state, age)
    for stale_after in (stale_after_seconds(None), 60.0):
        want = StatusState(state) in LIVE_STATES and age <= stale_after
        assert is_replicating(status, NOW, stale_after) is want
        assert job_health(status, None, NOW, stale_after).running is want, "drift"
    # plan and status: a job no deployment here knows of is "running elsewhere" exactly when it replicates
    running = classify("west->east", status, None, NOW)[0] is JobState.ELSEWHERE
    assert running is is_replicating(status, NOW, stale_after_seconds(None)), "plan and status"


def test_states_split_into_live_and_down():
    assert LIVE_STATES | DOWN_STATES == set(StatusState) and not LIVE_STATES & DOWN_STATES
    assert StatusState.parse("running") is StatusState.RUNNING and StatusState.parse("dancing") is None


def test_stale_after_and_age():
    assert stale_after_seconds(None) == 15.0 and stale_after_seconds(10.0) == 30.0
    assert status_age_seconds(None, NOW) is None and status_age_seconds(record("running", 2.5), NOW) == 2.5
    assert not is_replicating({"state": "running"}, NOW, 60.0), "a record without heartbeat_at is stale"
    assert not is_replicating({"state": "dancing", "heartbeat_at": NOW}, NOW, 60.0), "an unknown state is not live"
