"""The loss handler's policy outcomes (engine/source_faults.py `SourceFaults`), without brokers: the source's
ends and offsets are a fake behind `FaultClients`. Each `offset_reset` on a position past the log, below it, or a tail the
job saw lost; a recreated topic; an end moved back; a refused record; and what a reloaded policy releases. The pure
rules are tests/unit/test_source_loss.py's; the handler through real brokers is tests/integration/test_cluster_faults.py's."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from reconciler.contract.spec import ClusterSpec, JobSpec
from reconciler.contract.status import FaultKind
from reconciler.engine.driver_parts import Partitions, Progress
from reconciler.engine.ends import EndsRead
from reconciler.engine.idle_gate import IdleGate, Pacing
from reconciler.engine.source_faults import SourceFaults
from reconciler.engine.tasks import TP, PartitionResult, RefusedRecord
from tests.spec_helpers import job_spec, respec

SPEC = job_spec("west->east", ClusterSpec("west", "127.0.0.1:1"), ClusterSpec("east", "127.0.0.1:2"))
TPX: TP = ("orders", 0)


@dataclass
class Offsets:
    low: int = 100
    high: int = 200
    end: int | None = 200
    commits: list[dict[TP, int]] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)  # the reads of the source, in order
    hung: set[TP] = field(default_factory=set)  # partitions whose leader does not answer
    true: dict[TP, int] = field(default_factory=dict)  # a partition's true end, where not `end`

    def watermarks(self, tp: TP) -> tuple[int, int]:
        self.asked.append("watermarks")
        return self.low, self.high

    def listed_earliest(self, partitions) -> dict[TP, int]:
        self.asked.append("listed_earliest")
        return {tp: self.low for tp in partitions}

    def listed_latest(self, partitions) -> dict[TP, int]:
        self.asked.append("listed_latest")
        return {tp: self.high for tp in partitions}

    def read_latest(self, partitions) -> EndsRead:
        self.asked.append("read_latest")
        answered = {tp: self.high for tp in partitions if tp not in self.hung}
        return EndsRead(answered, {tp: "its leader did not answer within 3 s" for tp in partitions if tp in self.hung})

    def true_end(self, tp: TP) -> int | None:
        self.asked.append("true_end")
        return self.true.get(tp, self.end)

    def true_ends(self, listed) -> dict[TP, int]:
        self.asked.append("true_ends")
        return {tp: end for tp in listed if (end := self.true.get(tp, self.end)) is not None}

    def commit(self, positions) -> None:
        self.commits.append(dict(positions))


@dataclass
class Clients:
    """The driver's clients as the handler sees them: the source's ends and the job's positions (one fake)."""

    ends: Offsets
    offsets: Offsets


@dataclass
class Flow:
    """The flow as the handler reads it (the driver's `FlowSpec`): `spec` is replaced as a reload would."""

    spec: JobSpec


@dataclass
class Handler:
    faults: SourceFaults
    offsets: Offsets
    errors: list[str]
    failed: list[bool]
    flow: Flow


def handler(offset_reset: str = "resume", position: int = 50, **spec) -> Handler:
    flow = Flow(respec(SPEC, offset_reset=offset_reset, **spec))
    offsets, errors, failed = Offsets(), [], []
    parts = Partitions(positions={TPX: position})
    gate = IdleGate(flow, parts, pacing=Pacing(caught_up={TPX: 1}))
    faults = SourceFaults(
        flow, parts, gate, Progress(), errors.append, lambda: failed.append(True), clients=Clients(offsets, offsets)
    )
    return Handler(faults, offsets, errors, failed, flow)


@pytest.mark.parametrize(
    "policy, position, resumed_at",
    [
        ("resume", 50, 100),  # truncated: from the log start
        ("resume", 250, 100),  # past the end at first sight: a lost tail or a recreated topic look alike
        ("resume-at-start", 250, 100),
        ("resume-at-end", 50, 200),
    ],
)
def test_a_resuming_policy_moves_the_position_and_commits_it(policy, position, resumed_at):
    h = handler(policy, position)
    h.faults.check_position(TPX, position)
    parts = h.faults.parts
    assert parts.positions[TPX] == resumed_at and h.offsets.commits == [{TPX: resumed_at}]
    assert TPX not in parts.halted and not h.failed and parts.consumer_epoch == 1
    assert TPX not in h.faults.gate.caught_up
    (event,) = h.faults.progress.out_of_range
    kind = FaultKind.TRUNCATED if position < 100 else FaultKind.LOST_TAIL
    assert event.kind is kind and f"resumed at the log {'start' if resumed_at == 100 else 'end'}" in event.action
    assert h.faults.progress.data_loss == {(TPX, kind): 1} and len(h.errors) == 1


def test_pause_halts_the_partition_and_fail_stops_the_job():
    h = handler("pause", 50)
    h.faults.check_position(TPX, 50)
    fault = h.faults.parts.halted[TPX]
    assert fault.kind is FaultKind.TRUNCATED and fault.offset == 50 and not h.failed and not h.offsets.commits
    assert h.faults.parts.positions[TPX] == 50
    h = handler("fail", 50)
    h.faults.check_position(TPX, 50)
    assert h.failed == [True] and TPX in h.faults.parts.halted and "failed" in h.faults.progress.out_of_range[0].action


def test_a_valid_position_is_left_alone():
    h = handler("resume", 150)
    h.faults.check_position(TPX, 150)
    h.offsets.end = 260  # past the high watermark, within the log end (read_committed): valid
    h.faults.check_position(TPX, 250)
    assert not h.faults.progress.out_of_range and h.faults.parts.positions[TPX] == 150


def test_the_silent_partitions_of_a_batch_are_checked_with_one_listing_not_a_read_each():
    """Issue 47: a batch's silent partitions were checked one by one (two ListOffsets each); thousands held the loop
    for minutes. Their log ends and starts are listed together; a position below its listed log start is truncated
    (found out of range as before), without a read of its own."""
    h = handler("resume", 150)
    silent = {("orders", p): 150 for p in range(1000)}
    h.faults.parts.loaded({tp: (150, None) for tp in silent}, 1)
    h.faults.check_positions(silent)
    assert h.offsets.asked == ["read_latest", "listed_earliest"], h.offsets.asked[:5]
    assert not h.faults.progress.out_of_range
    h.offsets.asked.clear()
    h.faults.check_positions({**silent, TPX: 50})  # one truncated below the log start
    assert h.offsets.asked == ["read_latest", "listed_earliest"]
    (event,) = h.faults.progress.out_of_range
    assert event.kind is FaultKind.TRUNCATED and (event.topic, event.partition) == TPX
    assert h.faults.parts.positions[TPX] == 100


def test_silent_positions_past_their_listed_end_are_read_to_their_true_end_together():
    """Issue 47: on Tansu the listed end is below the true end by up to a batch, so every silent partition whose last
    batch held more than one record is past it; each was read to its true end on its own (a consumer and two requests
    each: 2,500 partitions held a flow ~3 minutes). Now one read for all of them; the one really past its true end is
    out of range, as before."""
    h = handler("resume", 150)
    h.offsets.high = 120  # the listed end (Tansu): below the positions, below the true end (200)
    silent = {("orders", p): 150 for p in range(2500)}
    h.faults.parts.loaded({tp: (150, None) for tp in silent}, 1)
    lost = ("orders", 7)
    h.offsets.true[lost] = 130  # its records past 130 are gone: the position is past the true end
    h.faults.check_positions(silent)
    assert h.offsets.asked == ["read_latest", "listed_earliest", "true_ends"], h.offsets.asked[:5]
    (event,) = h.faults.progress.out_of_range
    assert (event.topic, event.partition) == lost and "past the log end 130" in event.reason
    assert h.faults.parts.positions[lost] == 100  # resume: a position past the end first seen: from the log start
    assert all(h.faults.parts.positions[tp] == 150 for tp in silent if tp != lost)


def test_silent_partitions_whose_leader_does_not_answer_are_held_out_together():
    """Issue 47: a silent partition the listing did not answer was asked again on its own (its watermarks, 10 s): a
    hung broker leading 800 partitions held the flow's loop over two hours. Those whose leader did not answer while
    the others' did are held out at once (engine/unanswered.py), none asked again."""
    h = handler("resume", 150)
    silent = {("orders", p): 150 for p in range(1000)}
    h.faults.parts.loaded({tp: (150, None) for tp in silent}, 1)
    h.offsets.hung = {("orders", p) for p in range(0, 1000, 3)}
    h.faults.check_positions(silent)
    assert h.offsets.asked == ["read_latest", "listed_earliest"], h.offsets.asked[:5]
    assert h.faults.parts.unanswered.held == h.offsets.hung and h.faults.gate.take_held_out()
    assert not h.faults.progress.out_of_range and not h.errors


def test_a_tail_lost_while_the_job_watched_resumes_at_the_end_and_one_within_the_log_is_only_reported():
    h = handler("resume", 190)
    assert h.faults.ends_moved_back({TPX: (190, 170)}) is True  # the idle gate's `take_moved_back`
    assert h.faults.parts.positions[TPX] == 170
    h = handler("resume", 150)
    assert h.faults.ends_moved_back({TPX: (190, 170)}) is False
    (event,) = h.faults.progress.out_of_range
    assert event.kind is FaultKind.LOST_TAIL and event.action.startswith("reported")
    assert h.faults.parts.positions[TPX] == 150 and not h.offsets.commits


def test_a_recreated_topic_resumes_at_its_start():
    h = handler("resume", 150)
    h.faults.recreated(TPX, "id-1", "id-2")
    assert h.faults.progress.out_of_range[0].kind is FaultKind.RECREATED and h.faults.parts.positions[TPX] == 100
    h = handler("resume", -2)  # no position yet: nothing lost
    h.faults.recreated(TPX, "id-1", "id-2")
    assert not h.faults.progress.out_of_range


def test_a_refused_record_halts_its_partition_and_a_reloaded_policy_releases_the_halted():
    h = handler("pause", 50)
    refused = PartitionResult("orders", 0, "west.orders", 40, 45, 5, refused=RefusedRecord(45, 2_000_000, "too large"))
    h.faults.halt_refused(TPX, refused)
    assert h.faults.parts.halted[TPX].kind is FaultKind.REFUSED_RECORD and TPX not in h.faults.gate.caught_up
    h.faults.release_halted()  # on_refused_record: fail and offset_reset: pause still: nothing released
    assert TPX in h.faults.parts.halted
    skip = handler("pause", 50, on_refused_record="skip")
    skip.faults.parts.halt(TPX, h.faults.parts.halted[TPX])
    skip.faults.release_halted()
    assert skip.faults.parts.halted == {}
    lost = handler("pause", 50)
    lost.faults.check_position(TPX, 50)
    lost.flow.spec = respec(SPEC, offset_reset="resume")  # a reload
    epoch = lost.faults.parts.consumer_epoch
    lost.faults.release_halted()
    assert lost.faults.parts.halted == {} and lost.faults.parts.consumer_epoch == epoch + 1
