"""The idle gate of a flow's driver: is there anything to copy, and how long to wait when there is not.

A caught-up flow launches no Spark job: before each batch the gate reads the source's end offsets (or, while the
arrival watch hears nothing, reads nothing: engine/arrivals.py) and compares them with where each partition was
caught up (`Pacing`, driver_parts.py). Heartbeats alone are copied by the driver itself, once a heartbeat interval.
After a step that copied nothing the driver waits (`idle`), longer each step in a row (`idle_wait`), until a record
arrives at a watched partition or the flow stops.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from reconciler.contract.spec import JobSpec
from reconciler.engine.driver_parts import Cluster, Pacing, Partitions, ReachWatch
from reconciler.engine.lag import SourceEnds
from reconciler.engine.source_loss import ends_moved_back
from reconciler.engine.tasks import TP, CopyTask

GATE_RECHECK_S = 60.0  # a caught-up flow still runs a batch this often (work_waiting)
IDLE_WAIT_MAX_S = 1.0  # the gate's wait between two reads of the source's ends grows to this while nothing comes

log = logging.getLogger(__name__)


class Work(enum.Enum):
    """What the idle gate found to copy (IdleGate.work_waiting)."""

    NONE = "none"  # every partition caught up: no batch
    HEARTBEATS = "heartbeats"  # only heartbeats records: the driver copies them itself
    RECORDS = "records"  # anything else: a batch (a Spark job)


class EndOffsets(Protocol):
    """Lists the source's ends (engine/ends.py `PartitionEnds`)."""

    def listed_latest(self, partitions: list[TP]) -> Mapping[TP, int]: ...


class Arrivals(Protocol):
    """Whether a record arrived at the watched partitions (arrivals.py `ArrivalWatch`)."""

    def quiet(self, positions: Mapping[TP, int]) -> bool: ...


class GateClients(Protocol):
    """What the gate reads of the driver's clients (driver_parts.py `Connections`)."""

    @property
    def ends(self) -> EndOffsets: ...

    @property
    def arrivals(self) -> Arrivals: ...


class IdleGate:
    """Decides whether a batch runs (`work_waiting`), what the arrival watch listens to (`watched_positions`) and
    how long an idle driver waits (`idle_wait`, `idle`). It is given the flow's spec (a getter: a reload replaces
    it), its partitions, its clients (a getter: None before start), the pacing state it keeps (`pacing`) and the
    driver's stop event (a stop ends an idle wait)."""

    def __init__(
        self,
        spec: Callable[[], JobSpec],
        parts: Partitions,
        clients: Callable[[], GateClients | None],
        pacing: Pacing,
        stop: threading.Event,
        log: logging.Logger | logging.LoggerAdapter[logging.Logger] = log,
        reach: ReachWatch | None = None,
    ):
        self._spec, self.parts, self._clients, self.pacing, self.stop, self.log = (
            spec,
            parts,
            clients,
            pacing,
            stop,
            log,
        )
        self.reach = reach if reach is not None else ReachWatch()  # told whether the source answers its reads
        self._ends_answered_at_ms = 0  # when the source last answered the gate's read of its ends (epoch ms)
        self._source_failed = False  # the last read of the source's ends failed

    def ends_read_since(self, at_ms: int) -> bool:
        """Whether the gate has read the source's ends (asked at or after `at_ms`, epoch ms, and answered) since:
        its `pacing` compares the next ends with those."""
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
        clients = self._clients()
        if clients is None:
            return Work.RECORDS
        pacing = self.pacing
        copy = [tp for tp in self.parts.plan.copy if tp not in self.parts.halted]
        now = time.monotonic()
        if now < pacing.gate_recheck and self.watch_hears_all(copy):
            return self._heartbeats_when_due(now, copy)
        at_ms = int(time.time() * 1000)
        try:
            ends = dict(clients.ends.listed_latest(copy))
        except Exception as exc:  # noqa: BLE001 - the batch finds out what is wrong
            self.log.info("cannot read the source's end offsets before a batch: %s", exc)
            self.reach.failed(Cluster.SOURCE, at_ms, f"{type(exc).__name__}: {exc}")
            self._source_failed = True
            ends = {}
        else:
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
            # A batch now and then all the same (GATE_RECHECK_S): whatever the gate could misread, it is one
            # Spark job a minute, not a flow that stops copying.
            if now < pacing.gate_recheck:
                return Work.NONE
            waiting = copy
        pacing.gate_recheck = now + GATE_RECHECK_S
        policy = self._spec().settings.policy
        if all(policy.is_heartbeats_topic(topic) for topic, _ in waiting):
            return self._heartbeats_when_due(now, waiting)
        return Work.RECORDS

    def _heartbeats_when_due(self, now: float, tps: list[TP]) -> Work:
        """Heartbeats (a record every few seconds from each flow of the source) are copied by the driver, at most
        once a heartbeat interval: no Spark job, and their age downstream grows by at most that much. HEARTBEATS
        when that interval has passed and `tps` hold a heartbeats partition, NONE otherwise."""
        spec = self._spec()
        policy = spec.settings.policy
        if now < self.pacing.heartbeats_copy or not any(policy.is_heartbeats_topic(t) for t, _ in tps):
            return Work.NONE
        self.pacing.heartbeats_copy = now + spec.settings.heartbeats.interval_seconds
        return Work.HEARTBEATS

    def watch_hears_all(self, copy: list[TP]) -> bool:
        """Whether the arrival watch listens at every partition in `copy` but the heartbeats topics', from the
        flow's positions, and has heard nothing there (engine/arrivals.py): those partitions are at their ends
        without a read of the source."""
        watched = self.watched_positions()
        clients = self._clients()
        if not watched or clients is None:
            return False
        policy = self._spec().settings.policy
        listened = all(tp in watched for tp in copy if not policy.is_heartbeats_topic(tp[0]))
        return listened and clients.arrivals.quiet(watched)

    def idle_source_ends(
        self, copy: Mapping[TP, str], positions: Mapping[TP, int], max_age_ms: int, trust_watch: bool = True
    ) -> SourceEnds | None:
        """The source's ends without a read, for the lag side channel (driver.py `read_source_ends`), while the flow
        is idle: at the positions while the arrival watch hears nothing at any partition (`watch_hears_all`; only
        with `trust_watch`: the source answered a read lately), else the gate's own last read if every partition is
        caught up at it (`Pacing.idle_ends`); None: read them."""
        if trust_watch and self.watch_hears_all(list(copy)):
            return SourceEnds.at_positions(positions)
        return self.pacing.idle_ends(copy, positions, max_age_ms)

    def heartbeat_tasks(self, tasks: list[CopyTask]) -> list[CopyTask]:
        """The tasks cut to their heartbeats partitions (the others are caught up: nothing to read there), ending
        at the partitions' ends (a heartbeat that arrives later is copied the next time). An
        exactly-once slot's transactional id moves between this process and a Spark worker like any change of
        process: `last_owner` tells the next user to initialise it again."""
        policy = self._spec().settings.policy
        out = []
        for t in tasks:
            parts = tuple(p for p in t.partitions if policy.is_heartbeats_topic(p.topic))
            if parts:
                out.append(dataclasses.replace(t, partitions=parts, at_end_only=True))
        return out

    def watched_positions(self) -> dict[TP, int]:
        """What the arrival watch listens to while the flow is idle: each caught-up partition but the heartbeats
        topics' (copied on the heartbeat interval), from the flow's position there."""
        policy = self._spec().settings.policy
        parts = self.parts
        return {
            tp: parts.positions[tp]
            for tp in parts.plan.copy
            if tp in self.pacing.caught_up
            and tp in parts.positions
            and tp not in parts.halted
            and not policy.is_heartbeats_topic(tp[0])
        }

    def idle(self, seconds: float) -> None:
        """Wait after a step that copied nothing: `seconds`, or until a record arrives at a watched partition or
        the flow is stopped (both set `wake`)."""
        wake = self.pacing.wake
        if wake.wait(seconds):
            wake.clear()
            if self.stop.is_set():
                wake.set()  # a stop stays seen by every later wait

    def idle_wait(self) -> float:
        """Seconds to wait after a step that copied nothing: the trigger interval, doubled for each step in a row
        the idle gate held back, up to IDLE_WAIT_MAX_S (a record arriving at an idle flow ends the wait sooner: the
        arrival watch sets `wake`; a flow with traffic keeps the trigger interval)."""
        trigger = self._spec().engine.trigger_interval_ms / 1000.0
        return max(trigger, min(IDLE_WAIT_MAX_S, trigger * 2 ** min(self.pacing.idle_steps, 16)))
