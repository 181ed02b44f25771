"""The contracts below planning and the job: one rule of job health, used by plan, status and drift."""

from __future__ import annotations

import json

import pytest

from reconciler.contract.spec import DEFAULT_STATUS_INTERVAL_SECONDS, ClusterSpec, RuntimeSettings
from reconciler.contract.status import (
    DOWN_STATES,
    LIVE_STATES,
    StatusRecord,
    StatusState,
    health,
    is_replicating,
    stale_after_seconds,
    status_age_seconds,
)
from reconciler.drift.report import job_health
from reconciler.jobplan.state import JobState, classify
from tests.spec_helpers import job_spec

NOW = 1_700_000_000_000
WEST, EAST = ClusterSpec("west", "127.0.0.1:1"), ClusterSpec("east", "127.0.0.1:2")


def record(state: str, age: float) -> StatusRecord:
    return StatusRecord.from_dict(
        {"flow": "west->east", "state": state, "heartbeat_at": NOW - int(age * 1000), "started_at": NOW - 600_000}
    )


@pytest.mark.parametrize("state", [s.value for s in StatusState])
@pytest.mark.parametrize("age", [1.0, 14.9, 15.1, 29.9, 30.1, 59.0, 61.0])
def test_plan_status_and_drift_read_health_with_one_rule(state, age):
    # One classifier (contract/status.py `health`) with one set of thresholds: drift by default and
    # plan/status agree for every state, age and status interval (drift used to apply 60 s, plan 15 s).
    status = record(state, age)
    live = StatusState(state) in LIVE_STATES
    for interval in (None, 10.0):
        want = live and age <= stale_after_seconds(interval)
        assert is_replicating(status, NOW, stale_after_seconds(interval)) is want
        assert health(status, NOW, interval).replicating is want
        assert job_health(status, None, NOW, status_interval_seconds=interval).running is want, "drift"
        spec = None if interval is None else job_spec("west->east", WEST, EAST, status_interval_seconds=interval)
        # plan and status: a job no deployment here knows of is "running elsewhere" exactly when it replicates
        running = classify("west->east", status, None, NOW, spec)[0] is JobState.ELSEWHERE
        assert running is want, "plan and status"
    # drift's --job-stale-seconds is an explicit override of the threshold, not a second default
    assert job_health(status, None, NOW, 60.0).running is (live and age <= 60.0)
    assert health(status, NOW, None, 60.0).stale_after == 60.0 and health(status, NOW, None).stale_after == 15.0


def test_states_split_into_live_and_down():
    assert LIVE_STATES | DOWN_STATES == set(StatusState) and not LIVE_STATES & DOWN_STATES
    assert StatusState.parse("running") is StatusState.RUNNING and StatusState.parse("dancing") is None


def test_stale_after_and_age():
    assert stale_after_seconds(None) == 15.0 and stale_after_seconds(10.0) == 30.0
    # one default interval (contract/spec.py): a spec that does not say and a job whose spec is unknown agree
    assert RuntimeSettings().status_interval_seconds == DEFAULT_STATUS_INTERVAL_SECONDS == 3.0
    assert stale_after_seconds(None) == stale_after_seconds(RuntimeSettings().status_interval_seconds)
    assert status_age_seconds(None, NOW) is None and status_age_seconds(record("running", 2.5), NOW) == 2.5
    assert not is_replicating(StatusRecord.from_dict({"state": "running"}), NOW, 60.0), "no heartbeat_at: stale"
    dancing = StatusRecord.from_dict({"state": "dancing", "heartbeat_at": NOW})
    assert not is_replicating(dancing, NOW, 60.0), "an unknown state is not live"
    assert dancing.state is None and dancing.state_name == "dancing" and dancing.to_dict()["state"] == "dancing"


# --- the status record: one typed record, the same bytes on the status topic ---------------------------

#: A record as the job published it before the record was typed (json.dumps(record, sort_keys=True)).
WRITTEN = json.dumps(
    {
        "flow": "west->east",
        "spec_hash": "f00d",
        "git_revision": "abc123",
        "delivery": "at-least-once",
        "state": "degraded",
        "started_at": 1699999000000,
        "heartbeat_at": 1700000000000,
        "records": 2000,
        "bytes": 20480,
        "records_per_second": 150.5,
        "batches": 12,
        "partitions": 4,
        "lag_total": 20,
        "lag": [
            {"topic": "orders", "partition": 0, "remote": "west.orders", "next": 100, "end": 120, "lag": 20},
            {"topic": "orders", "partition": 1, "remote": "west.orders", "next": -1, "end": None, "lag": None},
        ],
        "latency_ms": {"p50": 12.0, "p95": 40.0, "p99": 55.0, "samples": 300},
        "errors": 1,
        "last_error": "ledger[0]: out of range: gone; halted",
        "findings": ["east:west.orders has 2 partitions, source 3"],
        "out_of_range": [
            {
                "topic": "ledger",
                "partition": 0,
                "position": 10,
                "low": 50,
                "high": 90,
                "reason": "gone",
                "action": "halted",
                "at": 1699999999000,
            }
        ],
        "halted": ["ledger:0"],
        "checkpoints_emitted": 3,
        "instance_id": "0123abcd4567",
        "pid": 4321,
        "metrics_port": 40123,
        "lag_seconds": 1.5,
        "lag_read_at": 1699999999500,
    },
    sort_keys=True,
)


def test_a_written_record_round_trips_byte_for_byte():
    record = StatusRecord.from_json(WRITTEN)
    assert record.state is StatusState.DEGRADED and record.lag[0].lag == 20 and record.latency_ms.p99 == 55.0
    assert record.out_of_range[0].action == "halted" and record.halted == ("ledger:0",)
    assert (record.instance_id, record.pid, record.metrics_port, record.lag_seconds) == (
        "0123abcd4567",
        4321,
        40123,
        1.5,
    )
    assert record.to_json() == WRITTEN
    assert StatusRecord.from_json(record.to_json()) == record


def test_older_and_foreign_records_still_parse():
    old = StatusRecord.from_json('{"flow": "west->east", "state": "running", "heartbeat_at": 1700000000000}')
    assert old.records is None and old.checkpoints_emitted is None and old.latency_ms.p99 is None
    assert old.is_replicating(NOW, 15.0)
    odd = StatusRecord.from_dict({"state": "running", "records": "many", "lag": "?", "future_field": [1]}, "a->b")
    assert odd.flow == "a->b" and odd.records is None and odd.lag == ()
    assert odd.to_dict()["future_field"] == [1], "keys this version does not know are kept"
