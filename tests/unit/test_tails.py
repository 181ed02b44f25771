"""A tail the source lost and gave to new records (issue 46), without brokers: the fingerprints the job keeps
(engine/tails.py: `divergence_point`, `first_difference`, `TailRing`, `CopiedTails`) and the loss handler's read
back (engine/source_faults.py `SourceFaults.check_tails`) over a fake source and target. Through noida-db:
tests/integration/test_lost_tail.py."""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.contract.spec import ClusterSpec, JobSpec
from reconciler.contract.status import FaultKind
from reconciler.engine.driver_parts import Partitions, Progress
from reconciler.engine.idle_gate import IdleGate, Pacing
from reconciler.engine.source_faults import SourceFaults
from reconciler.engine.tails import (
    RING_DENSE,
    RING_SIZE,
    CopiedTails,
    Fingerprint,
    TailRing,
    digest,
    divergence_point,
    first_difference,
)
from reconciler.engine.tasks import TP
from reconciler.engine.topics import PartitionPlan
from tests.spec_helpers import job_spec, respec

SPEC = job_spec("west->east", ClusterSpec("west", "127.0.0.1:1"), ClusterSpec("east", "127.0.0.1:2"))
TPX: TP = ("orders", 0)


def fp(offset: int, value: bytes | None = None, down: int | None = None, epoch: int | None = None) -> Fingerprint:
    v = value if value is not None else b"old-%d" % offset
    return Fingerprint(offset, 1_000 + offset, digest(b"k", v, None), epoch, down)


# --- divergence_point --------------------------------------------------------------------------------------------
def test_divergence_is_after_the_newest_fingerprint_the_source_still_holds():
    ring = [fp(o) for o in (10, 50, 90, 95, 99)]
    # offsets 90.. were lost and given to new records
    read_back = {10: fp(10), 50: fp(50), 90: fp(90, b"new"), 95: fp(95, b"new"), 99: None}
    assert divergence_point(ring, read_back) == 51


def test_nothing_lost_is_the_offset_after_the_newest():
    ring = [fp(o) for o in (10, 50, 99)]
    assert divergence_point(ring, {o: fp(o) for o in (10, 50, 99)}) == 100


def test_no_fingerprint_matches_is_none():
    ring = [fp(o) for o in (10, 50)]
    assert divergence_point(ring, {10: None, 50: fp(50, b"new")}) is None
    assert divergence_point([], {}) is None


def test_an_offset_not_read_back_is_passed_over():
    ring = [fp(o) for o in (10, 50, 99)]
    assert divergence_point(ring, {10: fp(10), 99: None}) == 11


def test_a_different_leader_epoch_is_another_record_whatever_its_bytes():
    ring = [fp(10, epoch=3), fp(20, epoch=3)]
    assert divergence_point(ring, {10: fp(10, epoch=3), 20: fp(20, epoch=4)}) == 11
    # where the broker gives no epoch, the bytes and timestamp decide
    assert divergence_point(ring, {10: fp(10), 20: fp(20)}) == 21


def test_the_same_bytes_at_another_time_is_another_record():
    assert not fp(5).matches(Fingerprint(5, 1, fp(5).digest))
    assert not fp(5).matches(fp(6))
    assert fp(5).matches(Fingerprint(5, -1, fp(5).digest))  # a time not known (read from a copy): the bytes decide


def test_a_copy_is_the_same_record_whatever_time_the_target_gave_it():
    assert fp(5).same_record(Fingerprint(900, 123, fp(5).digest))  # LogAppendTime on the remote topic
    assert not fp(5).same_record(fp(5, b"new"))


def test_digest_tells_none_from_empty_and_headers_apart():
    assert digest(None, b"v", None) != digest(b"", b"v", None)
    assert digest(b"k", b"v", [("h", b"1")]) != digest(b"k", b"v", [("h", b"2")])
    assert digest(b"k", b"v", []) == digest(b"k", b"v", None)


# --- first_difference ------------------------------------------------------------------------------------------
def test_first_difference_record_by_record_against_the_copies():
    source = [fp(o) for o in (11, 12)] + [fp(o, b"new") for o in (13, 14)]
    copies = [fp(o) for o in (11, 12, 13, 14)]  # their offsets on the target do not matter
    assert first_difference(11, source, copies, 15) == 13


def test_first_difference_of_a_tail_lost_and_not_refilled_is_the_source_end():
    assert first_difference(11, [fp(11), fp(12)], [fp(o) for o in (11, 12, 13, 14)], 15) == 13
    assert first_difference(11, [], [fp(11)], 15) == 11


def test_first_difference_none_is_the_position():
    assert first_difference(11, [fp(11), fp(12)], [fp(11), fp(12)], 13) == 13


def test_first_difference_a_copy_missing_copies_again_from_there():
    assert first_difference(11, [fp(11), fp(12)], [fp(11)], 13) == 12


# --- the ring --------------------------------------------------------------------------------------------------
def test_the_ring_keeps_the_newest_dense_and_reaches_back():
    ring = TailRing()
    ring.add(fp(o) for o in range(0, 1000, 10))
    offsets = [e.offset for e in ring.entries]
    assert len(offsets) == RING_SIZE
    assert offsets[-RING_DENSE:] == [990 - 10 * i for i in reversed(range(RING_DENSE))]
    assert offsets[0] == 0  # the oldest stays: the ring reaches back over every copy
    assert offsets == sorted(offsets)


def test_the_ring_copied_again_from_an_earlier_offset_forgets_what_followed():
    ring = TailRing()
    ring.add([fp(1), fp(5), fp(9)])
    ring.add([fp(4, b"again")])
    assert [e.offset for e in ring.entries] == [1, 4]
    ring.cut(2)
    assert [e.offset for e in ring.entries] == [1]


def test_copied_tails_suspects_only_partitions_with_fingerprints_and_a_changed_epoch():
    tails = CopiedTails()
    tails.suspect([TPX], "the source answered again")
    assert not tails.suspects  # nothing copied: nothing to read back
    tails.copied(TPX, [fp(1, epoch=2)])
    tails.copied(TPX, [fp(2, epoch=2)])
    assert not tails.suspects
    tails.copied(TPX, [fp(3, epoch=3)])
    assert "leader epoch changed from 2 to 3" in tails.suspects[TPX]
    tails.cleared(TPX)
    tails.forget(TPX)
    assert tails.ring(TPX) == [] and not tails.suspects


# --- the loss handler's read back -------------------------------------------------------------------------------
@dataclass
class Source:
    """The source's records now (offset -> fingerprint), its copies on the target (in order from offset 0), and the
    job's commits."""

    records: dict[int, Fingerprint]
    copies: list[Fingerprint]
    down: bool = False
    commits: list[dict[TP, int]] = field(default_factory=list)
    moved: list[tuple[dict[TP, int], dict[TP, str]]] = field(default_factory=list)

    def _up(self) -> None:
        if self.down:
            raise ConnectionError("the source does not answer")

    def watermarks(self, tp: TP) -> tuple[int, int]:
        self._up()
        return 0, max(self.records) + 1 if self.records else 0

    def true_end(self, tp: TP) -> int | None:
        return self.watermarks(tp)[1]

    def records_at(self, tp: TP, offsets) -> dict[int, Fingerprint | None]:
        self._up()
        return {o: self.records.get(o) for o in offsets}

    def records_first(self, wanted) -> dict[TP, Fingerprint | None]:
        self._up()
        return {tp: self.records.get(o) for tp, o in wanted.items()}

    def copies_first(self, wanted) -> dict[TP, Fingerprint]:
        return {tp: self.copies[o] for tp, o in wanted.items() if o < len(self.copies)}

    def records_from(self, tp: TP, start: int, stop: int) -> list[Fingerprint]:
        self._up()
        return [self.records[o] for o in sorted(self.records) if start <= o < stop]

    def copies_from(self, remote: str, partition: int, start: int, count: int) -> list[Fingerprint]:
        return self.copies[start : start + count]

    def commit(self, positions) -> None:
        self.commits.append(dict(positions))

    def move_back(self, store, positions, remotes, slots) -> None:
        self.moved.append((dict(positions), dict(remotes)))


@dataclass
class Clients:
    ends: Source
    offsets: Source


@dataclass
class Flow:
    """The flow as the loss handler reads it (the driver's `FlowSpec`)."""

    spec: JobSpec


def setup(lost_from: int, refilled_to: int, position: int = 100, offset_reset: str = "resume"):
    """A partition the job copied to `position` (a fingerprint every 10 offsets, the copy's offset known every 20);
    the source lost the records from `lost_from` and holds new ones up to `refilled_to`."""
    records = {o: fp(o) for o in range(lost_from)} | {o: fp(o, b"new") for o in range(lost_from, refilled_to)}
    source = Source(records, copies=[fp(o) for o in range(position)])
    parts = Partitions(positions={TPX: position}, plan=PartitionPlan(copy={TPX: "west.orders"}))
    parts.tails.copied(TPX, [fp(o, down=o if o % 20 == 19 else None) for o in range(9, position, 10)])
    progress, errors = Progress(), []
    flow = Flow(respec(SPEC, offset_reset=offset_reset))
    gate = IdleGate(flow, parts, pacing=Pacing(caught_up={TPX: position}))
    faults = SourceFaults(
        flow, parts, gate, progress, errors.append, lambda: None, clients=Clients(source, source), mode=source
    )
    return faults, parts, progress, source


def test_a_refilled_tail_is_copied_again_from_where_it_diverges_and_reported_with_its_reused_offsets():
    faults, parts, progress, source = setup(lost_from=63, refilled_to=140)
    parts.tails.suspect([TPX], "the task's consumer lost the source broker")
    assert faults.check_tails()
    assert parts.positions[TPX] == 63  # record by record against the copies, between fingerprints 59 and 69
    assert source.moved == [({TPX: 63}, {TPX: "west.orders"})]  # where the delivery keeps its positions
    [event] = progress.out_of_range
    assert event.kind is FaultKind.LOST_TAIL and event.reused == 37 and event.position == 100
    assert "37 offsets reused" in (event.reason or "") and "resumed at offset 63" in (event.action or "")
    assert progress.reused[(TPX, FaultKind.LOST_TAIL)] == 37
    assert not parts.tails.suspects and [e.offset for e in parts.tails.ring(TPX)][-1] == 59
    assert TPX not in faults.gate.caught_up


def test_an_intact_tail_costs_one_read_and_moves_nothing():
    faults, parts, progress, source = setup(lost_from=100, refilled_to=130)
    parts.tails.suspect([TPX], "the source answered again after failing")
    assert faults.check_tails()  # the partition is let through
    assert parts.positions[TPX] == 100 and not progress.out_of_range and not source.moved


def test_a_tail_that_cannot_be_read_back_is_held_out_of_the_batches():
    faults, parts, progress, source = setup(lost_from=63, refilled_to=140)
    source.down = True
    parts.tails.suspect([TPX], "the task's consumer lost the source broker")
    assert not faults.check_tails()
    assert parts.copied() == [] and faults.held_back() == {TPX}
    source.down = False
    assert faults.check_tails() and parts.copied() == [TPX] and parts.positions[TPX] == 63


def test_a_position_past_the_end_resumes_where_the_tail_diverges_not_at_the_end():
    # the source lost 60..99 and new records refilled 60..79 before the job read the end: resuming at the end (80)
    # would skip the new records at 60..79
    faults, parts, progress, source = setup(lost_from=60, refilled_to=80)
    faults.out_of_range(TPX, 100, "offset 100 is past the log end 80", 0, 80, FaultKind.LOST_TAIL)
    assert parts.positions[TPX] == 60
    [event] = progress.out_of_range
    assert event.reused == 40 and event.kind is FaultKind.LOST_TAIL


def test_a_position_past_the_end_whose_tail_cannot_be_read_waits_for_the_read_not_the_log_start():
    # the lost-tail test under load (exactly-once, 2026-11-28): the read back timed out while the source restarted,
    # the partition resumed at the log start and was copied twice
    faults, parts, progress, source = setup(lost_from=60, refilled_to=80)
    answered = source.records_at

    def timed_out(tp, offsets):
        raise TimeoutError("the record at offset 99 was not read back")

    source.records_at = timed_out  # type: ignore[method-assign]
    faults.out_of_range(TPX, 100, "offset 100 is past the log end 80", 0, 80, FaultKind.LOST_TAIL)
    assert parts.positions[TPX] == 100 and not progress.out_of_range and not source.moved
    assert faults.held_back() == {TPX} and parts.copied() == []
    source.records_at = answered  # type: ignore[method-assign]
    assert faults.check_tails()
    assert parts.positions[TPX] == 60 and parts.copied() == [TPX]
    [event] = progress.out_of_range
    assert event.reused == 40


def test_an_offset_out_of_range_whose_watermarks_cannot_be_read_is_decided_at_the_next_batch():
    faults, parts, progress, source = setup(lost_from=60, refilled_to=80)
    source.down = True
    faults.out_of_range(TPX, 100, "Broker: Offset out of range")
    assert parts.positions[TPX] == 100 and TPX not in parts.halted and not progress.out_of_range
    source.down = False
    faults.out_of_range(TPX, 100, "Broker: Offset out of range")
    assert parts.positions[TPX] == 60


def test_other_policies_decide_as_for_any_lost_tail():
    faults, parts, progress, source = setup(lost_from=63, refilled_to=140, offset_reset="pause")
    parts.tails.suspect([TPX], "the source answered again after failing")
    faults.check_tails()
    assert TPX in parts.halted and parts.halted[TPX].kind is FaultKind.LOST_TAIL


# --- reported as the other losses: the status record ----------------------------------------------------------
def test_the_reused_offsets_travel_in_the_status_record_and_older_records_read_without_them():
    from reconciler.contract.status import OutOfRange, PartitionCount

    event = OutOfRange("orders", 0, 100, None, None, "lost", "resumed at offset 63", 1, FaultKind.LOST_TAIL, 37)
    assert event.to_dict()["reused"] == 37 and OutOfRange.from_dict(event.to_dict()) == event
    count = PartitionCount("orders", 0, 1, FaultKind.LOST_TAIL, 37)
    assert PartitionCount.from_dict(count.to_dict()) == count
    older = {"topic": "orders", "partition": 0, "count": 1, "kind": "lost-tail"}
    assert PartitionCount.from_dict(older).reused is None and "reused" not in PartitionCount.from_dict(older).to_dict()


@dataclass
class Sync:
    upstream_offset: int
    downstream_offset: int


@dataclass
class Store:
    held: dict[TP, list[Sync]]

    def syncs(self, topic: str, partition: int) -> tuple[Sync, ...]:
        return tuple(self.held.get((topic, partition), ()))


@dataclass
class Checkpoints:
    store: Store


@dataclass
class StartedClients:
    ends: Source
    offsets: Source
    checkpoints: Checkpoints


def started(lost_from: int, refilled_to: int, position: int = 100):
    """A job started at `position` (its last offset sync: 99 -> 99), no fingerprint of its own yet."""
    records = {o: fp(o) for o in range(lost_from)} | {o: fp(o, b"new") for o in range(lost_from, refilled_to)}
    source = Source(records, copies=[fp(o) for o in range(position)])
    parts = Partitions(positions={TPX: position}, plan=PartitionPlan(copy={TPX: "west.orders"}))
    clients = StartedClients(source, source, Checkpoints(Store({TPX: [Sync(99, 99), Sync(50, 50)]})))
    progress = Progress()
    flow = Flow(respec(SPEC, offset_reset="resume"))
    faults = SourceFaults(
        flow, parts, IdleGate(flow, parts), progress, [].append, lambda: None, clients=clients, mode=source
    )
    return faults, parts, progress


def test_after_a_start_the_last_offset_sync_is_read_back_on_both_clusters():
    faults, parts, progress = started(lost_from=200, refilled_to=210)
    assert faults.check_tails()  # seeded from the sync 99 -> 99 and found intact
    assert parts.positions[TPX] == 100 and not progress.out_of_range and not parts.tails.suspects
    assert [(e.offset, e.down) for e in parts.tails.ring(TPX)] == [(99, 99)]


def test_a_tail_lost_while_the_job_was_away_is_copied_again_from_where_an_older_offset_sync_still_agrees():
    # the one fingerprint (the last sync, 99 -> 99) is lost: the older sync 50 -> 50 still holds the record its copy
    # holds, and from there record by record against the copies: the divergence at 80, not the log start (0..79
    # copied twice) nor the position (80..99's new records skipped)
    faults, parts, progress = started(lost_from=80, refilled_to=150)
    faults.check_tails()
    [event] = progress.out_of_range
    assert event.kind is FaultKind.LOST_TAIL and "the job started" in (event.reason or "")
    assert parts.positions[TPX] == 80 and event.reused == 20


def test_a_tail_lost_past_every_offset_sync_is_copied_again_from_the_log_start_rather_than_skipped():
    # no fingerprint and no sync agrees: where the loss began is not known, so the policy's rule for a loss first
    # seen after a start decides (the log start: copied again, not skipped)
    faults, parts, progress = started(lost_from=30, refilled_to=150)
    faults.check_tails()
    [event] = progress.out_of_range
    assert event.kind is FaultKind.LOST_TAIL and "the job started" in (event.reason or "")
    assert parts.positions[TPX] == 0


def test_records_not_read_back_are_read_again_rather_than_taken_as_lost():
    faults, parts, progress, source = setup(lost_from=63, refilled_to=140)
    answered = source.records_at

    def slow(tp, offsets):  # only the newest answers: the others time out
        return {o: r for o, r in answered(tp, offsets).items() if o == 99}

    source.records_at = slow  # type: ignore[method-assign]
    parts.tails.suspect([TPX], "the task's consumer lost the source broker")
    faults.check_tails()
    assert parts.tails.suspects and parts.positions[TPX] == 100 and not progress.out_of_range
    source.records_at = answered  # type: ignore[method-assign]
    faults.check_tails()
    assert parts.positions[TPX] == 63 and not parts.tails.suspects


# --- the driver's source producer after a restart that lost the broker's sequence state ---------------------------
class _Err:
    def __init__(self, fatal: bool):
        self._fatal = fatal

    def fatal(self) -> bool:
        return self._fatal

    def __str__(self) -> str:
        return "OUT_OF_ORDER_SEQUENCE_NUMBER" if self._fatal else "MSG_TIMED_OUT"


class _Producer:
    def __init__(self, fail: _Err | None = None):
        self.fail, self.produced = fail, []

    def produce(self, topic, value, key, partition, on_delivery=None) -> None:
        self.produced.append(value)
        if on_delivery is not None and self.fail is not None:
            on_delivery(self.fail, None)

    def flush(self, timeout: float = 0) -> int:
        if self.fail is not None and self.fail.fatal():
            raise RuntimeError(self.fail)
        return 0


def test_an_offset_sync_producer_turned_fatal_is_replaced_not_the_end_of_the_job():
    from reconciler.engine.emitters import OffsetSyncWriter

    fresh = _Producer()
    writer = OffsetSyncWriter(SPEC, _Producer(_Err(True)), renew=lambda: fresh)
    writer.write("orders", 0, [(1, 1)])
    writer.flush()  # the fatal producer is replaced; this batch's syncs are lost (written again by the next ones)
    assert writer.producer is fresh
    writer.write("orders", 0, [(2, 2)])
    writer.flush()
    assert len(fresh.produced) == 1
    failing = OffsetSyncWriter(SPEC, _Producer(_Err(False)), renew=lambda: fresh)
    failing.write("orders", 0, [(1, 1)])
    try:
        failing.flush()
    except RuntimeError as exc:  # a delivery that failed, the producer usable: raised as before
        assert "MSG_TIMED_OUT" in str(exc)
    else:
        raise AssertionError("a non-fatal delivery failure must raise")


def test_the_copies_offsets_are_kept_apart_from_the_thinning():
    ring = TailRing()
    ring.add(fp(o, down=o + 1000 if o % 50 == 49 else None) for o in range(0, 2000))
    assert len(ring.entries) == RING_SIZE
    assert [a.offset for a in ring.anchors] == [1649 + 50 * i for i in range(8)]
    ring.cut(1800)
    assert ring.anchors[-1].offset == 1799


# --- what a task fingerprints ------------------------------------------------------------------------------------
def _copied_in_one_round(records: int, run: int = 100) -> list[Fingerprint]:
    """What a task reports it copied (`PartitionCopy.copied`) after one round of `records` records from offset 0,
    handed over by the consumer in runs of `run`, through the task's own copy loop (real `Message`s; the target gives
    each copy the source's offset)."""
    from confluent_kafka import Message

    from reconciler.engine.tasks import PartitionTask
    from reconciler.engine.worker import PartitionCopy, _copy_run, _plan_syncs

    p = PartitionCopy.of(PartitionTask("orders", 0, "west.orders", 0, None))
    sent: list[int] = []

    def produce(topic, value, key, partition, on_delivery, timestamp, headers=None):
        copy = Message(topic=topic, partition=partition, offset=len(sent), key=key, value=value)
        sent.append(1)
        on_delivery(None, copy)

    msgs = [
        Message(topic="orders", partition=0, offset=o, key=b"k", value=b"old-%d" % o, timestamp=(1, 1_000 + o))
        for o in range(records)
    ]
    for i in range(0, records, run):
        chunk = msgs[i : i + run]
        _copy_run(p, chunk, 0, len(chunk), produce, lambda _t: 0, 10**9, 0)
    _plan_syncs(SPEC, p)
    p.durable()
    return p.copied


def test_a_round_of_thousands_of_records_is_fingerprinted_back_to_its_start_with_its_copies_offsets():
    # the lost-tail test under load (exactly-once, CI 2026-11-29): the job's first batch copied 0..4130 of a
    # partition in one round and the task reported only the round's last records; the source lost its last 120
    # records and refilled them, no fingerprint matched, and the partition was copied again from the log start
    copied = _copied_in_one_round(4_000)
    assert len(copied) <= RING_SIZE
    assert copied[0].offset == 99 and copied[-1].offset == 3_999  # from the round's first run to its last record
    assert all(f.down == f.offset for f in copied)  # each copy's offset on the target known
    assert all(f.same_record(fp(f.offset)) and f.matches(fp(f.offset)) for f in copied)


def test_a_lost_tail_longer_than_the_last_round_runs_resumes_exactly_where_it_diverges():
    faults, parts, progress, source = setup(lost_from=3_880, refilled_to=4_100, position=4_000)
    parts.tails.forget(TPX)
    parts.tails.copied(TPX, _copied_in_one_round(4_000))
    parts.tails.suspect([TPX], "the task's consumer lost the source broker")
    assert faults.check_tails()
    assert parts.positions[TPX] == 3_880  # neither the log start (duplicates) nor a fingerprint's offset
    [event] = progress.out_of_range
    assert event.reused == 120
