"""The idle gate's decisions (engine/idle_gate.py), without brokers: the source's ends and the arrival watch are
fakes behind the gate's small protocols (`EndOffsets`, `Arrivals`). Whether a batch runs, when heartbeats alone are
copied by the driver, what the watch listens to, how long an idle driver waits, and what the other parts tell it.
Its pacing state is its own: a test seeds it by handing the gate a `Pacing` to start from. The gate through real
brokers is tests/integration/test_replication_driver.py's."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from reconciler.contract.spec import ClusterSpec, JobSpec
from reconciler.contract.status import FaultKind, PartitionFault
from reconciler.engine.driver_parts import Cluster, Partitions, Timers
from reconciler.engine.ends import EndsRead
from reconciler.engine.idle_gate import (
    GATE_BATCH_S,
    GATE_RECHECK_S,
    IDLE_WAIT_MAX_S,
    QUIET_WAIT_MAX_S,
    IdleGate,
    Pacing,
    Work,
)
from reconciler.engine.tasks import TP, CopyTask, PartitionResult, PartitionTask
from reconciler.engine.topics import PartitionPlan
from tests.spec_helpers import job_spec

SPEC = job_spec("west->east", ClusterSpec("west", "127.0.0.1:1"), ClusterSpec("east", "127.0.0.1:2"))
ORDERS, BEATS = ("orders", 0), ("heartbeats", 0)


@dataclass
class Ends:
    ends: dict[TP, int]
    reads: int = 0
    down: bool = False  # the source does not answer
    hung: set[TP] = field(default_factory=set)  # partitions whose leader does not answer (the others' do)
    asked: list[list[TP]] = field(default_factory=list)

    def read_latest(self, partitions: list[TP]) -> EndsRead:
        self.reads += 1
        self.asked.append(list(partitions))
        if self.down:
            raise RuntimeError("cannot read the source's end offsets: timed out")
        hung = {tp: "its leader did not answer within 3 s" for tp in partitions if tp in self.hung}
        return EndsRead({tp: self.ends[tp] for tp in partitions if tp in self.ends and tp not in hung}, hung)


@dataclass
class Watch:
    heard: bool = False
    asked: list[dict[TP, int]] = field(default_factory=list)
    armed: dict[TP, int] | None = None  # what it listens to (None: disarmed)

    def quiet(self, positions) -> bool:
        self.asked.append(dict(positions))
        return not self.heard

    def arm(self, positions) -> None:
        self.armed = dict(positions)

    def disarm(self) -> None:
        self.armed = None


@dataclass
class Clients:
    ends: Ends
    arrivals: Watch


@dataclass
class Flow:
    """The flow as the gate reads it (the driver's `FlowSpec`)."""

    spec: JobSpec = SPEC


def gate(ends: dict[TP, int], positions: dict[TP, int], caught_up: dict[TP, int] | None = None, **pacing):
    """A gate over `positions`, its pacing seeded (`caught_up`, `pacing`'s fields); the gate, its clients and the
    pacing it started from (its state: the test's handle on the gate's timers)."""
    parts = Partitions(plan=PartitionPlan(copy={tp: f"west.{tp[0]}" for tp in positions}), positions=dict(positions))
    clients = Clients(Ends(ends), Watch())
    state = Pacing(caught_up=dict(caught_up or {}), **pacing)
    return IdleGate(Flow(), parts, clients=clients, pacing=state), clients, state


def test_before_start_a_batch_runs():
    g = IdleGate(Flow(), Partitions())
    assert g.work_waiting() is Work.RECORDS and not g.watch_hears_all([ORDERS])


def test_records_wait_until_every_partition_is_caught_up_at_the_end_read_before_its_batch():
    g, clients, pacing = gate({ORDERS: 10}, {ORDERS: 4})
    assert g.work_waiting() is Work.RECORDS  # never caught up
    assert g.ends_before == {ORDERS: 10} and pacing.gate_recheck > time.monotonic()
    g.task_ended(PartitionResult("orders", 0, "west.orders", 4, 10, 6, eof=True, hw=10), advanced=True)
    assert g.caught_up == {ORDERS: 10}, "its task ended at that end"
    assert g.work_waiting() is Work.NONE, "caught up, and the end has not moved: no Spark job"
    clients.ends.ends[ORDERS] = 11  # a record arrived, and the arrival watch heard it
    clients.arrivals.heard = True
    assert g.work_waiting() is Work.RECORDS


def test_a_caught_up_flow_still_runs_a_batch_once_a_recheck_interval():
    g, _, pacing = gate({ORDERS: 10}, {ORDERS: 10}, caught_up={ORDERS: 10})
    pacing.gate_recheck = 0.0  # the recheck is due
    assert g.work_waiting() is Work.RECORDS
    assert pacing.gate_recheck >= time.monotonic() + GATE_RECHECK_S - 5
    assert g.work_waiting() is Work.NONE


def test_a_caught_up_flow_reads_the_ends_once_a_minute_and_runs_a_batch_once_ten_minutes():
    """Issue 47: the batch a minute of each caught-up flow (a Spark job over every partition) was most of an idle
    mesh's cost. The minute's recheck is now a read of the ends (one ListOffsets per leader), however quiet the arrival
    watch; a batch runs all the same once a GATE_BATCH_S, or when the read finds an end moved."""
    now = time.monotonic()
    g, clients, pacing = gate(
        {ORDERS: 10}, {ORDERS: 10}, caught_up={ORDERS: 10}, gate_recheck=0.0, batch_recheck=now + GATE_BATCH_S
    )
    g.stepping(Work.NONE)  # the watch listens at the caught-up partition and hears nothing
    assert clients.arrivals.armed == {ORDERS: 10}
    assert g.work_waiting() is Work.NONE and clients.ends.reads == 1, "the minute's read, and no batch"
    assert pacing.gate_recheck >= now + GATE_RECHECK_S - 5
    for _ in range(5):  # within the minute the quiet watch stands for the ends: nothing read
        assert g.work_waiting() is Work.NONE
    assert clients.ends.reads == 1
    pacing.gate_recheck = 0.0  # the next minute: an end moved
    clients.ends.ends[ORDERS] = 12
    assert g.work_waiting() is Work.RECORDS and clients.ends.reads == 2
    assert pacing.batch_recheck >= time.monotonic() + GATE_BATCH_S - 5, "a batch ran: the next one a GATE_BATCH_S on"


def test_an_end_that_moved_back_is_handed_to_the_loss_handler():
    g, clients, _ = gate({ORDERS: 10}, {ORDERS: 10}, caught_up={ORDERS: 10}, ends_answered={ORDERS: 10})
    clients.ends.ends[ORDERS] = 6
    g.work_waiting()
    assert g.take_moved_back() == {ORDERS: (10, 6)}
    assert g.take_moved_back() == {}, "taken once (by the loss handler)"


def test_an_end_moved_back_across_reads_that_failed_is_seen():
    """A source broker that lost its tail went away first: the gate's reads failed meanwhile (its ends before a
    batch are unknown then), and the first read it answers is still compared with the end it last answered."""
    g, clients, pacing = gate({ORDERS: 10}, {ORDERS: 10})
    g.work_waiting()
    clients.ends.down = True
    pacing.gate_recheck = 0.0
    g.work_waiting()
    assert g.ends_before == {} and g.take_moved_back() == {}
    clients.ends.down, clients.ends.ends[ORDERS] = False, 6
    pacing.gate_recheck = 0.0
    g.work_waiting()
    assert g.take_moved_back() == {ORDERS: (10, 6)}
    pacing.gate_recheck = 0.0
    g.work_waiting()
    assert g.take_moved_back() == {}, "reported once: the next read compares with the end it answered now"


def test_ends_read_since_counts_only_reads_the_source_answered():
    g, clients, _ = gate({ORDERS: 10}, {ORDERS: 4})
    before = int(time.time() * 1000)
    assert not g.ends_read_since(before), "nothing read yet"
    clients.ends.down = True
    g.work_waiting()
    assert clients.ends.reads == 1 and not g.ends_read_since(before), "asked, not answered"
    clients.ends.down = False
    g.work_waiting()
    assert g.ends_read_since(before) and g.ends_before == {ORDERS: 10}
    assert not g.ends_read_since(int(time.time() * 1000) + 60_000), "not read since a later time"


def test_an_unreadable_end_means_a_batch():
    g, clients, _ = gate({}, {ORDERS: 10}, caught_up={ORDERS: 10})

    def fail(partitions):
        raise RuntimeError("broker down")

    clients.ends.read_latest = fail  # type: ignore[method-assign]
    assert g.work_waiting() is Work.RECORDS and g.ends_before == {}


def test_heartbeats_alone_are_copied_by_the_driver_once_a_heartbeat_interval():
    g, _, pacing = gate({ORDERS: 10, BEATS: 7}, {ORDERS: 10, BEATS: 3}, caught_up={ORDERS: 10})
    assert g.work_waiting() is Work.HEARTBEATS
    assert pacing.heartbeats_copy >= time.monotonic() + SPEC.settings.heartbeats.interval_seconds - 5
    assert g.work_waiting() is Work.NONE, "the next copy waits a heartbeat interval"
    task = CopyTask(
        0, 1, (PartitionTask("orders", 0, "west.orders", 10), PartitionTask("heartbeats", 0, "heartbeats", 3))
    )
    (only,) = g.heartbeat_tasks([task])
    assert [p.topic for p in only.partitions] == ["heartbeats"] and only.at_end_only
    assert g.heartbeat_tasks([CopyTask(1, 1, (PartitionTask("orders", 0, "west.orders", 10),))]) == []


def test_the_watch_listens_at_caught_up_partitions_but_the_heartbeats_and_the_halted():
    g, clients, _ = gate({}, {ORDERS: 10, ("orders", 1): 5, BEATS: 3}, caught_up={ORDERS: 10, BEATS: 3})
    assert g.watched_positions() == {ORDERS: 10}
    assert not g.watch_hears_all([ORDERS, ("orders", 1), BEATS]), "orders[1] is not listened to"
    assert g.watch_hears_all([ORDERS, BEATS]) and clients.arrivals.asked[-1] == {ORDERS: 10}
    clients.arrivals.heard = True
    assert not g.watch_hears_all([ORDERS, BEATS])
    g.parts.halt(ORDERS, PartitionFault("orders", 0, FaultKind.TRUNCATED, "gone", 10, 1))
    assert g.watched_positions() == {}


def test_while_the_watch_hears_nothing_the_gate_reads_nothing():
    g, clients, pacing = gate({ORDERS: 10}, {ORDERS: 10}, caught_up={ORDERS: 10})
    pacing.gate_recheck, pacing.batch_recheck = time.monotonic() + 60, time.monotonic() + GATE_BATCH_S
    assert g.work_waiting() is Work.NONE and clients.ends.reads == 0
    ends = g.idle_source_ends(g.parts.plan.copy, g.parts.positions, max_age_ms=1_000)
    assert ends is not None and dict(ends.ends) == {ORDERS: 10}
    clients.arrivals.heard = True  # the watch heard something: the gate reads the ends (unmoved here: no batch)
    assert g.work_waiting() is Work.NONE and clients.ends.reads == 1
    clients.ends.ends[ORDERS] = 12
    assert g.work_waiting() is Work.RECORDS and clients.ends.reads == 2


def test_the_gate_tells_whether_the_source_answers_and_an_untrusted_watch_stands_for_no_ends():
    g, clients, pacing = gate({ORDERS: 10}, {ORDERS: 10}, caught_up={ORDERS: 10})
    g.work_waiting()  # a read of the ends (the recheck is due: a batch all the same)
    assert clients.ends.reads == 1 and g.reach.answers(Cluster.SOURCE)
    now_ms = int(time.time() * 1000)
    assert g.reach.answered_within(Cluster.SOURCE, 60_000, now_ms)
    assert not g.reach.answered_within(Cluster.SOURCE, 60_000, now_ms + 120_000), "answered, but too long ago"
    clients.ends.down = True
    pacing.gate_recheck = 0.0
    assert g.work_waiting() is Work.RECORDS, "ends unknown: the batch finds out what is wrong"
    (since, error) = g.reach.failing[Cluster.SOURCE]
    assert since >= now_ms and "timed out" in error and not g.reach.answered_within(Cluster.SOURCE, 60_000, now_ms)
    # The watch hears nothing (a source that does not answer is silent too): not taken for the ends, untrusted.
    pacing.gate_recheck = time.monotonic() + 60
    assert g.watch_hears_all([ORDERS])
    assert g.idle_source_ends(g.parts.plan.copy, g.parts.positions, 1_000, trust_watch=False) is None
    clients.ends.down = False
    pacing.gate_recheck = 0.0
    g.work_waiting()
    assert clients.ends.reads == 3 and g.reach.answers(Cluster.SOURCE), "answered: cleared"


def test_the_idle_wait_doubles_up_to_its_bound_and_a_stop_ends_it_for_good():
    g, _, _ = gate({}, {ORDERS: 0})
    trigger = SPEC.engine.trigger_interval_ms / 1000
    assert g.idle_wait() == trigger
    g.stepping(Work.NONE)  # one step in a row that copied nothing
    assert g.idle_wait() == min(IDLE_WAIT_MAX_S, max(trigger, 2 * trigger))
    for _ in range(39):
        g.stepping(Work.HEARTBEATS)
    assert g.idle_wait() == max(trigger, IDLE_WAIT_MAX_S)
    g.stepping(Work.RECORDS)
    assert g.idle_wait() == trigger, "a step with records: back to the trigger interval"
    g.wake.set()  # a record arrived: the wait ends, and the next one waits again
    g.idle(30)
    assert not g.wake.is_set()
    g.stop.set()
    g.wake.set()
    g.idle(30)
    assert g.wake.is_set(), "a stop stays seen by every later wait"


def quiet_gate(**pacing):
    """A caught-up flow of orders[0] and heartbeats[0] whose arrival watch hears nothing: its last step read nothing
    (`quiet`), its heartbeats' copy and recheck due as `pacing` says, after enough idle steps for the 1 s wait."""
    now = time.monotonic()
    seeded = {"gate_recheck": now + GATE_RECHECK_S, "heartbeats_copy": now + 100, **pacing}
    g, clients, state = gate({ORDERS: 10, BEATS: 3}, {ORDERS: 10, BEATS: 3}, caught_up={ORDERS: 10}, **seeded)
    assert g.work_waiting() is Work.NONE and clients.ends.reads == 0, "the watch heard nothing: nothing read"
    for _ in range(40):
        g.stepping(Work.NONE)
    return g, clients, state


def test_a_quiet_flow_waits_on_to_its_next_round_due_up_to_its_cap():
    """Issue 47: while the arrival watch hears nothing anywhere, an idle flow does not step once a second to find
    nothing due: it waits to the next round due (the driver's timers, the gate's heartbeats copy and recheck), at
    least IDLE_WAIT_MAX_S, at most QUIET_WAIT_MAX_S."""
    g, _, state = quiet_gate()
    assert g.quiet
    assert g.idle_wait() == QUIET_WAIT_MAX_S, "nothing due sooner: the cap"
    assert IDLE_WAIT_MAX_S < g.idle_wait(3.0) <= 3.0, "the driver's next round (a heartbeat) in 3 s: that long"
    assert g.idle_wait(0.0) == IDLE_WAIT_MAX_S, "a round due now: never below the 1 s the step waited before"
    state.heartbeats_copy = time.monotonic() + 2.0
    assert IDLE_WAIT_MAX_S < g.idle_wait() <= 2.0, "the heartbeats' copy is due in 2 s"
    state.heartbeats_copy = time.monotonic() + 100
    state.gate_recheck = time.monotonic() + 1.5
    assert g.idle_wait() <= 1.5, "the gate's recheck (its read of the ends) is not late"


def test_the_drivers_next_round_due_is_its_first_timer():
    timers = Timers(refresh=110.0, full_refresh=160.0, heartbeat=103.0, delayed_syncs=107.0)
    assert timers.next_due(100.0, heartbeats=True) == 3.0, "the heartbeat, in 3 s"
    assert timers.next_due(100.0, heartbeats=False) == 7.0, "a flow that emits none: its offset syncs"
    assert timers.next_due(108.0, heartbeats=False) == 0.0, "overdue: now"


def test_a_flow_that_read_or_waits_for_a_probe_or_a_tail_keeps_the_1_s_step():
    g, clients, state = quiet_gate()
    clients.arrivals.heard = True  # a record arrived: the gate reads the ends
    g.work_waiting()
    assert not g.quiet and g.idle_wait(4.0) == IDLE_WAIT_MAX_S
    clients.arrivals.heard = False
    g.work_waiting()
    assert g.quiet
    g.parts.tails.suspects[ORDERS] = "its leader answered again"  # the step reads its tail back
    assert not g.quiet and g.idle_wait(4.0) == IDLE_WAIT_MAX_S
    g.parts.tails.suspects.clear()
    g.hold_out({ORDERS: "its leader did not answer"})  # the step probes its leader
    assert not g.quiet and g.idle_wait(4.0) == IDLE_WAIT_MAX_S
    g2, _, _ = quiet_gate()
    g2.stepping(Work.RECORDS)  # a step with records: the trigger interval, quiet or not
    assert g2.idle_wait(4.0) == SPEC.engine.trigger_interval_ms / 1000


def test_a_stop_ends_an_idle_wait_at_once():
    g, _, _ = gate({}, {ORDERS: 0})
    waiting = threading.Thread(target=g.idle, args=(600.0,))
    waiting.start()
    g.stop.set()
    waiting.join(10)
    assert not waiting.is_alive() and g.stop.is_set()


def test_the_other_parts_tell_the_gate_what_happened():
    """Its pacing is its own: the absorber, the loss handler and the driver tell it what happened through its
    methods, and what it knows follows (what is caught up, what the arrival watch listens to)."""
    g, clients, _ = gate({ORDERS: 10, ("orders", 1): 8}, {ORDERS: 4, ("orders", 1): 2})
    g.work_waiting()  # the ends read before the batch
    done = PartitionResult("orders", 0, "west.orders", 4, 10, 6, eof=True, hw=10)
    g.task_ended(done, advanced=True)
    g.task_ended(PartitionResult("orders", 1, "west.orders", 2, 5, 3, eof=False, hw=8), advanced=True)
    assert g.caught_up == {ORDERS: 10}, "orders[1] stopped before its end"
    g.task_ended(done, advanced=False)
    assert g.caught_up == {}, "a failed task's partition is not caught up"
    g.task_ended(done, advanced=True)
    g.records_lost(ORDERS)
    assert g.caught_up == {}, "the loss handler moved or halted it"
    g.task_ended(done, advanced=True)
    g.record_refused(ORDERS)
    assert g.caught_up == {}
    g.task_ended(done, advanced=True)
    g.batch_failed()
    assert g.caught_up == {}
    g.task_ended(done, advanced=True)
    g.parts.advanced(ORDERS, 10)
    g.stepping(Work.NONE)
    assert clients.arrivals.armed == {ORDERS: 10}, "idle: the watch listens at the caught-up partitions"
    g.stepping(Work.RECORDS)
    assert clients.arrivals.armed is None, "a batch: the tasks read what arrives"


# --- a partition whose leader does not answer (issue 47) -----------------------------------------------------------
O1 = ("orders", 1)


def test_a_partition_whose_leader_does_not_answer_is_held_out_and_not_read_again():
    """The source answers every partition but one, whose leader hangs: that one is held out (a leader-unreachable
    fault, at its position), the batch's tasks are planned again without it (`take_held_out`, once), the gate decides
    on the others alone (caught up: no batch), and its next reads do not ask for the held one (no wait for it)."""
    g, clients, _ = gate({ORDERS: 10, O1: 8}, {ORDERS: 10, O1: 5}, caught_up={ORDERS: 10})
    clients.ends.hung = {O1}
    g.work_waiting()
    assert g.parts.unanswered.held == {O1} and g.take_held_out() and not g.take_held_out()
    [fault] = g.parts.unanswered.faults().values()
    assert (fault.partition, fault.kind, fault.offset) == (1, FaultKind.LEADER_UNREACHABLE, 5)
    assert "does not answer" in (fault.reason or "") and "3 s" in (fault.reason or "")
    assert O1 not in g.parts.copied() and [p.tp for t in g.parts.tasks(1) for p in t.partitions] == [ORDERS]
    clients.arrivals.heard = True  # the arrival watch heard something: the gate reads the ends
    assert g.work_waiting() is Work.NONE, "the others are caught up: no batch for the held one"
    assert clients.ends.asked == [[ORDERS, O1], [ORDERS]], "the held partition is not asked again"
    assert not g.take_held_out()


def test_a_source_that_answers_nothing_holds_no_partition_out():
    """Every partition unanswered is the source cluster not answering (source-unreachable, ReachWatch): nothing is
    held out, the batch finds out."""
    g, clients, _ = gate({ORDERS: 10}, {ORDERS: 4})
    clients.ends.down = True
    assert g.work_waiting() is Work.RECORDS
    assert not g.parts.unanswered.held and not g.take_held_out() and not g.reach.answers(Cluster.SOURCE)
