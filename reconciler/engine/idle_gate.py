"""The idle gate of a flow's driver: is there anything to copy, and how long to wait when there is not.

A caught-up flow launches no Spark job: before each batch the gate reads the source's end offsets (or, while the
arrival watch hears nothing, reads nothing: engine/arrivals.py) and compares them with where each partition was
caught up. Heartbeats alone are copied by the driver itself, once a heartbeat interval. After a step that copied
nothing the driver waits (`idle`), longer each step in a row (`idle_wait`), until a record arrives at a watched
partition or the flow stops.

The gate owns its pacing state (`Pacing`: the ends read, what is caught up, its timers), private to it: the other
parts tell it what happened (`task_ended`, `records_lost`, `record_refused`, `batch_failed`, `stepping`) and ask
it what they need (`ends_before`, `caught_up`, `take_moved_back`, `idle_source_ends`).
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from reconciler.engine.driver_parts import Cluster, FlowSpec, Partitions, ReachWatch, UsesClients
from reconciler.engine.ends import EndsRead
from reconciler.engine.lag import SourceEnds
from reconciler.engine.source_loss import ends_moved_back
from reconciler.engine.tasks import TP, CopyTask, PartitionResult

GATE_RECHECK_S = 60.0  # a caught-up flow reads the source's ends this often, however quiet the arrival watch
GATE_BATCH_S = 600.0  # and runs a batch all the same this often (work_waiting)
IDLE_WAIT_MAX_S = 1.0  # the gate's wait between two reads of the source's ends grows to this while nothing comes
#: While the gate reads nothing (the arrival watch hears nothing at every partition) an idle flow's wait grows on to
#: the driver's next due round (a heartbeat, the topic refresh, the offset syncs, the heartbeats' copy, the gate's
#: own recheck), never more than this, never less than IDLE_WAIT_MAX_S (issue 47: an idle mesh's flows stepped
#: every second to find nothing due). A record arriving ends the wait at once, as before.
QUIET_WAIT_MAX_S = 5.0

log = logging.getLogger(__name__)


class LinkedEvent(threading.Event):
    """An event whose `set` also sets `linked` (the flow's stop also ends the gate's idle wait on `wake`)."""

    def __init__(self, linked: threading.Event):
        super().__init__()
        self._linked = linked

    def set(self) -> None:
        super().set()
        self._linked.set()


class Work(enum.Enum):
    """What the idle gate found to copy (IdleGate.work_waiting)."""

    NONE = "none"  # every partition caught up: no batch
    HEARTBEATS = "heartbeats"  # only heartbeats records: the driver copies them itself
    RECORDS = "records"  # anything else: a batch (a Spark job)


class EndOffsets(Protocol):
    """Lists the source's ends (engine/ends.py `PartitionEnds`): the ends answered, and the partitions whose leader
    did not answer while the others did."""

    def read_latest(self, partitions: list[TP]) -> EndsRead: ...


class Arrivals(Protocol):
    """Whether a record arrived at the watched partitions, and what to watch (arrivals.py `ArrivalWatch`)."""

    def quiet(self, positions: Mapping[TP, int]) -> bool: ...

    def arm(self, positions: Mapping[TP, int]) -> None: ...

    def disarm(self) -> None: ...


class GateClients(Protocol):
    """What the gate reads of the driver's clients (driver_parts.py `Connections`)."""

    @property
    def ends(self) -> EndOffsets: ...

    @property
    def arrivals(self) -> Arrivals: ...


@dataclass
class Pacing:
    """The idle gate's state, private to it (`IdleGate`; a gate can be given one to start from: tests):
    `ends_before`, the source's ends read before the last batch, and when (`ends_read_at_ms`, epoch ms); `caught_up`,
    the partitions caught up as of such an end; `ends_answered`, each partition's end as the source last answered it
    (kept across failed reads: where a lost tail shows); `moved_back`, the ends read below those (before, now), until
    the loss handler takes them; `idle_steps`, the steps in a row the gate found nothing to copy (`idle_wait` backs
    off by it); and the gate's timers (monotonic seconds): `gate_recheck`, when a caught-up flow reads the source's ends
    however quiet the arrival watch, `batch_recheck`, when it runs a batch all the same, and `heartbeats_copy`, when
    the driver next copies heartbeats."""

    ends_before: dict[TP, int] = field(default_factory=dict)
    ends_read_at_ms: int = 0
    ends_answered: dict[TP, int] = field(default_factory=dict)
    moved_back: dict[TP, tuple[int, int]] = field(default_factory=dict)
    caught_up: dict[TP, int] = field(default_factory=dict)
    idle_steps: int = 0
    gate_recheck: float = 0.0
    batch_recheck: float = 0.0
    heartbeats_copy: float = 0.0

    def idle_ends(self, copy: Mapping[TP, str], positions: Mapping[TP, int], max_age_ms: int) -> SourceEnds | None:
        """The gate's last read as the lag side channel's, while the flow is idle: every partition copied caught
        up at an end read at most `max_age_ms` ago, at a known position (nothing lags, nothing is committed
        beyond the positions). None otherwise: the side channel reads for itself. One read of the ends a second
        then serves both (an idle flow saved a ListOffsets and an OffsetFetch every half status interval)."""
        if self.idle_steps < 2 or not copy or int(time.time() * 1000) - self.ends_read_at_ms > max_age_ms:
            return None
        ends, caught = self.ends_before, self.caught_up
        if any(tp not in ends or caught.get(tp) != ends[tp] or positions.get(tp, -1) < 0 for tp in copy):
            return None
        return SourceEnds({tp: ends[tp] for tp in copy}, self.ends_read_at_ms, committed=dict(positions))

    def mark_caught_up(self, p: PartitionResult) -> None:
        """After a task: `p.tp` is caught up (at the end its task saw) as of the end read before the batch."""
        at_end = p.eof and p.hw is not None and 0 <= p.hw <= p.next and not p.error and not p.out_of_range
        end = self.ends_before.get(p.tp)
        if at_end and end is not None:
            self.caught_up[p.tp] = end
        else:
            self.caught_up.pop(p.tp, None)


class IdleGate(UsesClients[GateClients]):
    """Decides whether a batch runs (`work_waiting`), what the arrival watch listens to (`watched_positions`) and
    how long an idle driver waits (`idle_wait`, `idle`). It is given the flow (`FlowSpec`: its spec now), its
    partitions, the reach watch it tells whether the source answers its reads, and its clients when the driver opens
    them (`connect`). It makes the flow's `stop` (a stop ends an idle wait) and the `wake` event the arrival watch
    sets; its pacing state is its own (`Pacing`), told by the other parts through its methods."""

    def __init__(
        self,
        flow: FlowSpec,
        parts: Partitions,
        reach: ReachWatch | None = None,
        log: logging.Logger | logging.LoggerAdapter[logging.Logger] = log,
        *,
        clients: GateClients | None = None,
        pacing: Pacing | None = None,
    ):
        self._flow, self.parts, self.log = flow, parts, log
        self.reach = reach if reach is not None else ReachWatch()  # told whether the source answers its reads
        self._clients = clients  # None before the driver starts
        self._pacing = pacing if pacing is not None else Pacing()
        self._wake = threading.Event()  # set to end an idle wait early: a record arrived, or the flow stopped
        self.stop = LinkedEvent(self._wake)  # the flow's stop (the driver's `stop_event`)
        self._ends_answered_at_ms = 0  # when the source last answered the gate's read of its ends (epoch ms)
        self._source_failed = False  # the last read of the source's ends failed
        self._held_out = False  # partitions held out since `take_held_out` (their leader does not answer)
        self._quiet = False  # the last `work_waiting` read nothing: the arrival watch heard nothing anywhere

    @property
    def wake(self) -> threading.Event:
        """Set to end an idle wait early (the arrival watch sets it when a record arrives; the flow's stop too)."""
        return self._wake

    @property
    def ends_before(self) -> Mapping[TP, int]:
        """The source's ends read before this batch (the batch shaper splits a backlog at them)."""
        return self._pacing.ends_before

    @property
    def caught_up(self) -> Mapping[TP, int]:
        """The partitions caught up, each at the end it was caught up at."""
        return self._pacing.caught_up

    def at_rest(self) -> set[TP]:
        """The partitions caught up at the ends read before this batch: nothing to copy there when it starts, by the
        gate's own rule (`work_waiting` launches no batch for them; a moved end, a loss, a refusal, a failed batch or a
        partition held out takes one out of this set)."""
        ends, caught = self._pacing.ends_before, self._pacing.caught_up
        return {tp for tp, end in ends.items() if caught.get(tp) == end}

    # --- what happened ---------------------------------------------------------------------------------------------
    def task_ended(self, p: PartitionResult, advanced: bool) -> None:
        """A task reported `p` (`advanced`: its work counts; a failed task's does not): caught up at the end read
        before the batch if the task ended there, else not."""
        if advanced:
            self._pacing.mark_caught_up(p)
        else:
            self._pacing.caught_up.pop(p.tp, None)

    def records_lost(self, tp: TP) -> None:
        """The source lost records of `tp` and the loss handler moves or halts it: not caught up."""
        self._pacing.caught_up.pop(tp, None)

    def record_refused(self, tp: TP) -> None:
        """`tp` halted at a record the target refuses: not caught up."""
        self._pacing.caught_up.pop(tp, None)

    def batch_failed(self) -> None:
        """A batch failed: nothing is known to be caught up."""
        self._pacing.caught_up.clear()

    def stepping(self, work: Work) -> None:
        """The driver's step goes on with `work` (its last word: the loss handler may have moved positions): while
        nothing is copied the arrival watch listens at the caught-up partitions (`watched_positions`), else the tasks
        read what arrives; the idle steps in a row are counted (`idle_wait`)."""
        if self._clients is not None:
            if work is Work.RECORDS:
                self._clients.arrivals.disarm()
            else:
                self._clients.arrivals.arm(self.watched_positions())
        self._pacing.idle_steps = 0 if work is Work.RECORDS else self._pacing.idle_steps + 1

    def take_held_out(self) -> bool:
        """Whether the gate held partitions out since the last call (their leader did not answer its read of the
        ends while the others did: engine/unanswered.py): the batch's tasks are planned again without them."""
        held, self._held_out = self._held_out, False
        return held

    def take_moved_back(self) -> dict[TP, tuple[int, int]]:
        """The partitions whose end the gate read below the end the source last answered, (before, now) each, since
        the last call (the loss handler's: `SourceFaults.ends_moved_back`)."""
        moved, self._pacing.moved_back = self._pacing.moved_back, {}
        return moved

    # --- what to do ------------------------------------------------------------------------------------------------
    def ends_read_since(self, at_ms: int) -> bool:
        """Whether the gate has read the source's ends (asked at or after `at_ms`, epoch ms, and answered) since:
        its pacing compares the next ends with those."""
        return self._ends_answered_at_ms >= at_ms

    def work_waiting(self) -> Work:
        """What is there to copy? A Spark job is launched unless every partition is *caught up*: its last task
        ended at the end of the partition (end-of-partition seen, its position at the high watermark it saw), and
        the source's end offset (one ListOffsets request per leader) has not moved since the read taken before that
        task. A moved end, not an end past the position, is the signal: a listed end can be below the true end
        (on Tansu: engine/ends.py), but any new batch moves it; a partition deleted and created again moves it too.
        While the arrival watch hears nothing at every partition but the heartbeats'
        (`watch_hears_all`), nothing is read: those partitions are caught up as the watch knows them. An engine
        whose flows have nothing to copy costs no request and no Spark job; heartbeats alone are copied by the
        driver (`Work.HEARTBEATS`)."""
        clients = self._clients
        if clients is None:
            return Work.RECORDS
        pacing = self._pacing
        held = self.parts.unanswered.held
        copy = [tp for tp in self.parts.plan.copy if tp not in self.parts.halted and tp not in held]
        now = time.monotonic()
        self._quiet = now < pacing.gate_recheck and self.watch_hears_all(copy)
        if self._quiet:
            return self._heartbeats_when_due(now, copy)
        at_ms = int(time.time() * 1000)
        try:
            read = clients.ends.read_latest(copy)
        except Exception as exc:  # noqa: BLE001 - the batch finds out what is wrong
            self.log.info("cannot read the source's end offsets before a batch: %s", exc)
            self.reach.failed(Cluster.SOURCE, at_ms, f"{type(exc).__name__}: {exc}")
            self._source_failed = True
            ends = {}
        else:
            ends = dict(read.ends)
            if read.unanswered:  # their leader hangs, the others' answer: not waited for again (unanswered.py)
                self.hold_out(read.unanswered, at_ms)
                copy = [tp for tp in copy if tp not in read.unanswered]
            self.reach.answered(Cluster.SOURCE, at_ms)
            self._ends_answered_at_ms = at_ms
            if self._source_failed:
                # A source that went away may come back without the tail the job copied (issue 46): read back.
                self._source_failed = False
                self.parts.tails.suspect(copy, "the source answered again after failing")
        # Compared with the last ends the source answered, not the last read: a broker that lost its tail is one
        # that went away, and the reads that failed meanwhile must not erase what its end was.
        back = ends_moved_back(pacing.ends_answered, ends)
        pacing.moved_back = {tp: (pacing.ends_answered[tp], end) for tp, end in back.items()}
        pacing.ends_answered = {**pacing.ends_answered, **ends}
        pacing.ends_before, pacing.ends_read_at_ms = ends, int(time.time() * 1000)
        waiting = [tp for tp in copy if tp not in ends or pacing.caught_up.get(tp, -1) != ends[tp]]
        if not waiting:
            if now >= pacing.gate_recheck:  # this was the read a minute (GATE_RECHECK_S): the ends stand
                pacing.gate_recheck = now + GATE_RECHECK_S
            # A batch now and then all the same (GATE_BATCH_S): whatever the gate could misread, it is one Spark
            # job every ten minutes, not a flow that stops copying (issue 47: one a minute, each flow of a mesh's
            # engines, was most of their idle cost; the read a minute is the signal, a moved end).
            if now < pacing.batch_recheck:
                return Work.NONE
            waiting = copy
        pacing.gate_recheck, pacing.batch_recheck = now + GATE_RECHECK_S, now + GATE_BATCH_S
        policy = self._flow.spec.settings.policy
        if all(policy.is_heartbeats_topic(topic) for topic, _ in waiting):
            return self._heartbeats_when_due(now, waiting)
        return Work.RECORDS

    def hold_out(self, unanswered: Mapping[TP, str], at_ms: int | None = None) -> None:
        """Hold out the partitions whose leader did not answer (`unanswered`: each one's error) while the source's
        other partitions did: no batch copies them and no read waits for them until a probe hears their leader
        again (engine/leaders.py)."""
        for tp in self.parts.unanswered.hold(unanswered, self.parts.positions, at_ms):
            self._pacing.caught_up.pop(tp, None)
            self._held_out = True
            self.log.warning(
                "%s[%d]: its leader does not answer (%s): held out of the batches until it does",
                tp[0],
                tp[1],
                unanswered[tp],
            )

    def _heartbeats_when_due(self, now: float, tps: list[TP]) -> Work:
        """Heartbeats (a record every few seconds from each flow of the source) are copied by the driver, at most
        once a heartbeat interval: no Spark job, and their age downstream grows by at most that much. HEARTBEATS
        when that interval has passed and `tps` hold a heartbeats partition, NONE otherwise."""
        spec = self._flow.spec
        policy = spec.settings.policy
        if now < self._pacing.heartbeats_copy or not any(policy.is_heartbeats_topic(t) for t, _ in tps):
            return Work.NONE
        self._pacing.heartbeats_copy = now + spec.settings.heartbeats.interval_seconds
        return Work.HEARTBEATS

    def watch_hears_all(self, copy: list[TP]) -> bool:
        """Whether the arrival watch listens at every partition in `copy` but the heartbeats topics', from the
        flow's positions, and has heard nothing there (engine/arrivals.py): those partitions are at their ends
        without a read of the source."""
        watched = self.watched_positions()
        clients = self._clients
        if not watched or clients is None:
            return False
        policy = self._flow.spec.settings.policy
        listened = all(tp in watched for tp in copy if not policy.is_heartbeats_topic(tp[0]))
        return listened and clients.arrivals.quiet(watched)

    def idle_source_ends(
        self, copy: Mapping[TP, str], positions: Mapping[TP, int], max_age_ms: int, trust_watch: bool = True
    ) -> SourceEnds | None:
        """The source's ends without a read, for the lag side channel (reporting.py `read_source_ends`), while the flow
        is idle: at the positions while the arrival watch hears nothing at any partition (`watch_hears_all`; only
        with `trust_watch`: the source answered a read lately), else the gate's own last read if every partition is
        caught up at it (`Pacing.idle_ends`); None: read them."""
        if trust_watch and self.watch_hears_all(list(copy)):
            return SourceEnds.at_positions(positions)
        return self._pacing.idle_ends(copy, positions, max_age_ms)

    def heartbeat_tasks(self, tasks: list[CopyTask]) -> list[CopyTask]:
        """The tasks cut to their heartbeats partitions (the others are caught up: nothing to read there), ending
        at the partitions' ends (a heartbeat that arrives later is copied the next time). An
        exactly-once slot's transactional id moves between this process and a Spark worker like any change of
        process: `last_owner` tells the next user to initialise it again."""
        policy = self._flow.spec.settings.policy
        out = []
        for t in tasks:
            parts = tuple(p for p in t.partitions if policy.is_heartbeats_topic(p.topic))
            if parts:
                out.append(dataclasses.replace(t, partitions=parts, at_end_only=True))
        return out

    def watched_positions(self) -> dict[TP, int]:
        """What the arrival watch listens to while the flow is idle: each caught-up partition but the heartbeats
        topics' (copied on the heartbeat interval), from the flow's position there."""
        policy = self._flow.spec.settings.policy
        parts = self.parts
        return {
            tp: parts.positions[tp]
            for tp in parts.plan.copy
            if tp in self._pacing.caught_up
            and tp in parts.positions
            and tp not in parts.halted
            and not policy.is_heartbeats_topic(tp[0])
        }

    def idle(self, seconds: float) -> None:
        """Wait after a step that copied nothing: `seconds`, or until a record arrives at a watched partition or
        the flow is stopped (both set `wake`)."""
        wake = self._wake
        if wake.wait(seconds):
            wake.clear()
            if self.stop.is_set():
                wake.set()  # a stop stays seen by every later wait

    def idle_wait(self, next_round_s: float | None = None) -> float:
        """Seconds to wait after a step that copied nothing: the trigger interval, doubled for each step in a row
        the idle gate held back, up to IDLE_WAIT_MAX_S (a record arriving at an idle flow ends the wait sooner: the
        arrival watch sets `wake`; a flow with traffic keeps the trigger interval). While the gate reads nothing
        (its last `work_waiting` trusted the arrival watch) and no partition waits for a probe or a read-back of its
        tail (`quiet`), on to the next round due, `next_round_s` (the driver's timers) or the gate's own (the
        heartbeats' copy, its recheck), up to QUIET_WAIT_MAX_S: no round is later than the 1 s step made it."""
        trigger = self._flow.spec.engine.trigger_interval_ms / 1000.0
        wait = max(trigger, min(IDLE_WAIT_MAX_S, trigger * 2 ** min(self._pacing.idle_steps, 16)))
        if not self.quiet or wait < IDLE_WAIT_MAX_S:
            return wait
        pacing, now = self._pacing, time.monotonic()
        due = [pacing.gate_recheck - now]  # the batch recheck acts only at a read, so at this one
        policy = self._flow.spec.settings.policy
        if any(policy.is_heartbeats_topic(topic) for topic, _ in self.parts.plan.copy):
            due.append(pacing.heartbeats_copy - now)
        if next_round_s is not None:
            due.append(next_round_s)
        return max(wait, min(QUIET_WAIT_MAX_S, *due))

    @property
    def quiet(self) -> bool:
        """Whether the gate read nothing at its last `work_waiting` (the arrival watch heard nothing at any
        partition) and no partition waits for its leader's probe (engine/leaders.py) or the read-back of its tail
        (engine/tails.py), both of which the driver's step runs: an idle wait may then last to the next round due."""
        return self._quiet and not self.parts.unanswered.held and not self.parts.tails.suspects
