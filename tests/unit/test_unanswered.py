"""A partition whose leader does not answer (issue 47), without brokers: held out of the batches (engine/unanswered.py),
let go by the probe once its leader answers (engine/leaders.py `LeaderProbe`, its reads run at once and its clock
injected), reported as a fault of its own with its lag unknown (engine/reporting.py), and held out by the loss
handler when the check of a silent partition's position times out (engine/source_faults.py). The same through real
brokers, a relay in front of the source making one partition's leader hang: tests/integration/test_blast_radius.py."""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException

from reconciler.contract.spec import ClusterSpec, JobSpec
from reconciler.contract.status import FaultKind, StatusState
from reconciler.engine.driver_parts import Cluster, Partitions, Progress
from reconciler.engine.ends import EndsRead
from reconciler.engine.idle_gate import IdleGate
from reconciler.engine.leaders import PROBE_EVERY_S, PROBE_TIMEOUT_S, LeaderProbe
from reconciler.engine.metrics import JobMetrics
from reconciler.engine.reporting import Reporter
from reconciler.engine.source_faults import SourceFaults
from reconciler.engine.tails import Fingerprint
from reconciler.engine.tasks import TP, PartitionResult
from reconciler.engine.topics import PartitionPlan
from tests.spec_helpers import job_spec

SPEC = job_spec("west->east", ClusterSpec("west", "127.0.0.1:1"), ClusterSpec("east", "127.0.0.1:2"))
P0, P1, P2 = ("orders", 0), ("orders", 1), ("orders", 2)
HUNG = "its leader did not answer within 3 s"


def partitions() -> Partitions:
    tps = (P0, P1, P2)
    return Partitions(
        plan=PartitionPlan(copy={tp: "west.orders" for tp in tps}),
        positions={P0: 10, P1: 20, P2: -2},
        slots={P0: 0, P1: 1, P2: 0},
    )


def test_held_partitions_are_copied_by_no_task_until_their_leader_answers():
    parts = partitions()
    assert parts.unanswered.hold({P1: HUNG, P2: HUNG}, parts.positions, at_ms=1000) == [P1, P2]
    assert parts.unanswered.hold({P1: "again"}, parts.positions) == [], "held already: its first fault kept"
    faults = parts.unanswered.faults()
    assert (faults[P1].kind, faults[P1].offset, faults[P1].since) == (FaultKind.LEADER_UNREACHABLE, 20, 1000)
    assert faults[P2].offset is None, "no position yet"
    assert parts.copied() == [P0] and [[p.tp for p in t.partitions] for t in parts.tasks(1)] == [[P0]]
    assert parts.backlog({P0: 15}) == 5, "the backlog of the partitions copied"
    assert parts.unanswered.answered([P1, P0]) == [P1] and parts.copied() == [P0, P1]
    parts.replanned(PartitionPlan(copy={P0: "west.orders"}))
    assert not parts.unanswered.held, "a partition no longer copied is forgotten"


@dataclass
class Ends:
    """The source's ends as the probe reads them: the partitions whose leader hangs answer nothing."""

    hung: set[TP]
    asked: list[tuple[list[TP], float]] = field(default_factory=list)

    def read_latest(self, partitions: list[TP], timeout: float = 3.0) -> EndsRead:
        self.asked.append((list(partitions), timeout))
        unanswered = {tp: HUNG for tp in partitions if tp in self.hung}
        if len(unanswered) == len(partitions):
            raise RuntimeError(f"cannot read the source's end offsets: {HUNG}")
        return EndsRead({tp: 7 for tp in partitions if tp not in unanswered}, unanswered)


@dataclass
class ProbeClients:
    ends: Ends


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def at_once(read):
    """The probe's reads run at once (the driver's run them in a thread of their own)."""
    future: Future = Future()
    try:
        future.set_result(read())
    except Exception as exc:  # noqa: BLE001
        future.set_exception(exc)
    return future


def test_the_probe_lets_a_partition_go_once_its_leader_answers_without_the_loop_waiting():
    parts, clock = partitions(), Clock()
    parts.tails.copied(P1, [Fingerprint(19, 1, b"d")])
    parts.unanswered.hold({P1: HUNG}, parts.positions)
    ends = Ends(hung={P1})
    probe = LeaderProbe(parts, clients=ProbeClients(ends), spawn=at_once, clock=clock)
    assert probe.step() == [] and ends.asked == [([P1], PROBE_TIMEOUT_S)], "asked, with the probe's own timeout"
    assert probe.step() == [] and parts.unanswered.held == {P1}, "still hung: held"
    assert len(ends.asked) == 1, "not asked again before PROBE_EVERY_S"
    clock.now += PROBE_EVERY_S
    ends.hung.clear()
    probe.step()  # asked again: it answers
    assert probe.step() == [P1] and not parts.unanswered.held
    assert parts.tails.suspects == {P1: "its leader answered again after not answering"}, "its tail read back first"
    clock.now += PROBE_EVERY_S
    assert probe.step() == [] and len(ends.asked) == 2, "nothing held: nothing asked"


def test_a_probe_in_flight_is_not_waited_for():
    parts = partitions()
    parts.unanswered.hold({P1: HUNG}, parts.positions)
    pending: Future = Future()
    probe = LeaderProbe(parts, clients=ProbeClients(Ends(hung=set())), spawn=lambda read: pending, clock=Clock())
    assert probe.step() == [] and probe.step() == [], "its answer has not come: the step goes on"
    pending.set_result(EndsRead({P1: 30}))
    assert probe.step() == [P1] and not parts.unanswered.held


@dataclass
class Sink:
    records: list = field(default_factory=list)

    def publish(self, status) -> int:
        self.records.append(status)
        return 0


@dataclass
class Reads:
    asked: list = field(default_factory=list)

    def read(self, copy, positions, seen_ends, known=None):
        from reconciler.engine.lag import SourceEnds

        self.asked.append(dict(copy))
        return SourceEnds({tp: 50 for tp in copy}, int(time.time() * 1000))


@dataclass
class ReportClients:
    status: Sink
    checkpoints: object
    end_reader: Reads


@dataclass
class Flow:
    spec: JobSpec = SPEC
    state: StatusState = StatusState.RUNNING


def test_a_held_partition_is_a_leader_unreachable_fault_with_its_lag_unknown_and_is_not_read():
    """Only the held partition is degraded: its fault (leader-unreachable), its lag unknown (not its last seen end),
    the others' lag as read; the lag side channel does not ask for it (a read would wait for its leader)."""
    from reconciler.engine.emitters import CheckpointEmitter

    parts = partitions()
    parts.advanced(P2, 0)
    for tp in (P0, P1, P2):
        parts.task_reported(PartitionResult(tp[0], tp[1], "west.orders", 0, parts.positions[tp], 0, hw=40))
    flow = Flow()
    reads = Reads()
    emitter = CheckpointEmitter(SPEC, source_admin=None, target_producer=None, environ={})
    r = Reporter(flow, parts, Progress(), IdleGate(flow, parts), JobMetrics(SPEC.flow), "i-1")
    r.connect(ReportClients(Sink(), emitter, reads))
    parts.unanswered.hold({P1: HUNG}, parts.positions, at_ms=5)
    r.read_source_ends()
    assert reads.asked == [{P0: "west.orders", P2: "west.orders"}], "the held partition is not read"
    lag = {(p.topic, p.partition): p.lag for p in r.current_lag().partitions}
    assert lag == {P0: 40, P1: None, P2: 50}
    [fault] = r.faults()
    assert (fault.partition, fault.kind, fault.offset, fault.since) == (1, FaultKind.LEADER_UNREACHABLE, 20, 5)
    assert r.reported_state() is StatusState.DEGRADED
    record = r.status_record()
    assert [f.name for f in record.faults] == ["orders:1"] and record.halted == ()


@dataclass
class Silent:
    """The source's log as the loss handler reads it: its watermarks time out (the leader hangs)."""

    def watermarks(self, tp: TP) -> tuple[int, int]:
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed to get watermark offsets: Local: Timed out"))


@dataclass
class FaultClients:
    ends: Silent
    offsets: object = None


def test_a_silent_partition_whose_watermarks_time_out_is_held_out_while_the_source_answers():
    parts = partitions()
    flow = Flow()
    gate = IdleGate(flow, parts)
    faults = SourceFaults(flow, parts, gate, Progress(), print, lambda: None, clients=FaultClients(Silent()))
    gate.reach.answered(Cluster.SOURCE, 1)
    faults.check_position(P1, 20)
    assert parts.unanswered.held == {P1} and gate.take_held_out()
    gate.reach.failed(Cluster.SOURCE, 2, "down")
    faults.check_position(P0, 10)
    assert parts.unanswered.held == {P1}, "the whole source does not answer: nothing more held (source-unreachable)"
