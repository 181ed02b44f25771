"""The pure rules of data lost at the source (engine/source_loss.py): which loss a position shows, and where each
`job.offset_reset` policy resumes; and that the policy is a declared topology setting that reaches the job spec."""

from __future__ import annotations

import pytest

from reconciler.contract.spec import JobSpec, OffsetReset
from reconciler.contract.status import FaultKind
from reconciler.engine.source_loss import ends_moved_back, position_loss, recreated_topics, resume_at
from tests.plan_helpers import topology


def test_the_loss_a_position_shows():
    assert position_loss(5, low=10, end=20) is FaultKind.TRUNCATED
    assert position_loss(25, low=10, end=20) is FaultKind.LOST_TAIL
    assert position_loss(15, low=10, end=20) is None
    assert position_loss(20, low=10, end=20) is None  # at the end: caught up
    assert position_loss(-1, low=10, end=20) is None  # no position yet
    assert position_loss(15, low=10, end=20, recreated=True) is FaultKind.RECREATED


def test_an_end_that_moved_back_is_a_lost_tail():
    assert ends_moved_back({("t", 0): 500, ("t", 1): 10}, {("t", 0): 70, ("t", 1): 12, ("u", 0): 3}) == {("t", 0): 70}


def test_a_recreated_topic_is_one_whose_id_changed():
    assert recreated_topics({"a": "id1", "b": "id2", "c": None}, {"a": "id1", "b": "id3", "c": "id4"}) == ["b"]


@pytest.mark.parametrize(
    ("policy", "kind", "expected"),
    [
        # resume (the default): nothing the source holds is skipped, nothing is copied twice
        (OffsetReset.RESUME, FaultKind.TRUNCATED, 100),  # retention passed it: what is left, from the start
        (OffsetReset.RESUME, FaultKind.RECREATED, 100),  # a new topic: all of it
        (OffsetReset.RESUME, FaultKind.OUT_OF_RANGE, 100),  # side not known: skip nothing
        (OffsetReset.RESUME, FaultKind.LOST_TAIL, 100),  # past the end at first sight: lost tail or recreated
        (OffsetReset.RESUME_AT_START, FaultKind.LOST_TAIL, 100),
        (OffsetReset.RESUME_AT_END, FaultKind.TRUNCATED, 400),
        (OffsetReset.PAUSE, FaultKind.TRUNCATED, None),
        (OffsetReset.FAIL, FaultKind.LOST_TAIL, None),
    ],
)
def test_where_each_policy_resumes(policy, kind, expected):
    assert resume_at(policy, low=100, end=400, kind=kind) == expected


def test_resume_after_a_tail_the_job_saw_lost_is_at_the_end():
    # the records below the end were copied; the offsets the broker gives new records from there on are
    assert resume_at(OffsetReset.RESUME, low=100, end=400, kind=FaultKind.LOST_TAIL, tail_seen_lost=True) == 400


def test_the_older_names_still_work():
    assert OffsetReset.of("earliest") is OffsetReset.RESUME_AT_START
    assert OffsetReset.of("halt") is OffsetReset.PAUSE


def test_offset_reset_is_declared_in_the_topology_and_reaches_the_spec():
    default = topology("flows:\n  - {source: west, target: east}")
    assert JobSpec.from_flow(default, default.flows[0]).engine.offset_reset == "resume"
    paused = topology("flows:\n  - {source: west, target: east, job: {offset_reset: pause}}")
    spec = JobSpec.from_flow(paused, paused.flows[0])
    assert spec.engine.offset_reset == "pause"
    assert not spec.restart_fields(JobSpec.from_flow(default, default.flows[0])), "a change is taken on the fly"
