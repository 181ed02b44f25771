"""The driver loop of a replication job: refresh topics, plan a micro-batch, run it, commit, report.

    start: internal topics, topics and partitions (route()), remote topics created, transactional
           ids fenced (exactly-once), positions loaded
    loop:  re-read the spec file and rediscover topics/partitions every refresh interval
           plan one task per slot: its partitions and the offset each starts from
           run the tasks (Spark: one Spark partition per task, `mapPartitions(worker.run_tasks)`)
           absorb the task results: positions, counts, lag, latency, offset syncs, out-of-range
           at-least-once: write offset syncs, then commit the next offsets on the source cluster
           heartbeats and status when due
    beside: checkpoints in a thread of their own (`Periodic`), as MM2 runs them in a connector of their
           own: a checkpoint round lists groups and reads their offsets on the source, and a slow
           cluster there must not hold up the batches
           the source's end offsets, read in a thread of their own every half status interval
           (`SourceEndReader`, lag.py), so lag is the source's current end - the driver's position
           even while a batch's tasks are held up
           sleep `trigger_interval_ms` when the batch copied nothing

Partitions are assigned to slots stickily (a partition keeps its slot, new ones go to the least
loaded), and exactly-once commits record the slot, so a partition's transactional id is stable
across batches and restarts.

What the driver holds is in typed parts (driver_parts.py, and `Threads` here): `progress` (counts, errors,
findings), `parts` (the partitions: plan, positions, slots, sync state, lag), `pacing` (when each periodic action
is due, the idle gate's state), `conn` (the clients, opened at start) and `threads` (the side channels' threads
and the batch runner).
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from reconciler.contract.spec import (
    EXIT_RESTART_REQUIRED,
    EXIT_SUPERSEDED,
    JobSpec,
    OffsetReset,
    dead_letters_topic_name,
)
from reconciler.contract.status import (
    FaultKind,
    Latency,
    OutOfRange,
    PartitionCount,
    PartitionFault,
    StatusRecord,
    StatusState,
)
from reconciler.engine.clients import SharedClients
from reconciler.engine.delivery import DeliveryMode, mode_of
from reconciler.engine.driver_parts import Connections, Pacing, Partitions, Progress, StuckWatch
from reconciler.engine.emitters import CheckpointEmitter
from reconciler.engine.fencing import InstanceFence
from reconciler.engine.lag import (
    JobLag,
    LagPosition,
    SourceEnds,
    committed_ahead,
    job_lag,
)
from reconciler.engine.metrics import JobMetrics
from reconciler.engine.source_loss import ends_moved_back, position_loss, recreated_topics, resume_at
from reconciler.engine.tasks import TP, CopyTask, PartitionResult, TaskResult
from reconciler.engine.topics import plan_partitions
from reconciler.engine.worker import run_tasks
from reconciler.settings import INSTANCE_ENV
from reconciler.topology import secrets

log = logging.getLogger(__name__)

#: The faults a loss at the source halts a partition with (`offset_reset: pause` or `fail`).
LOSS_KINDS = frozenset({FaultKind.OUT_OF_RANGE, FaultKind.TRUNCATED, FaultKind.LOST_TAIL, FaultKind.RECREATED})
#: A partition whose source is ahead while its position does not move is stuck (FaultKind.STUCK) after this many
#: status intervals, and at least two batch deadlines (`max_batch_ms`: a task's count arrives when it ends).
STUCK_INTERVALS = 5
TICK_S = 0.5  # how often the side channels are looked at while a batch runs
GATE_RECHECK_S = 60.0  # a caught-up flow still runs a batch this often (work_waiting)
IDLE_WAIT_MAX_S = 1.0  # the gate's wait between two reads of the source's ends grows to this while nothing comes
#: A flow with at most this many records to copy (the source's ends read before the batch less its positions) is
#: copied by one task for all its partitions, not one per slot, where its delivery allows it
#: (`DeliveryMode.slot_is_identity`): a stream needs one consumer fetching from the source, not `parallelism` of
#: them. Measured through the deployed job at 10,000 records/s on Tansu, whose cost per fetch grows with the
#: partition's length (README, "Measured numbers"), with a plain reader of the source topic beside the job: two task
#: consumers saturated the source broker within 30 s (p99 3.98 s), one did not (0.40 s). One task copies a backlog
#: at 200,000+ records/s, so this is at most ~0.1 s of its work; a stream faster than one task copies leaves more
#: than this at the next batch, which is split again.
ONE_TASK_BACKLOG = 20_000


class LinkedEvent(threading.Event):
    """An event whose `set` also sets `linked` (the driver's stop also ends its idle wait on `wake`)."""

    def __init__(self, linked: threading.Event):
        super().__init__()
        self._linked = linked

    def set(self) -> None:
        super().set()
        self._linked.set()


class Periodic:
    """A side channel in a thread of its own: `action()` every `interval()` seconds (read each time, so
    a reloaded spec applies) until `stop()`; an exception goes to `on_error` and the action runs again
    at the next interval. A slow action delays only itself."""

    def __init__(
        self, name: str, action: Callable[[], object], interval: Callable[[], float], on_error: Callable[[str], None]
    ):
        self.name = name
        self._action, self._interval, self._on_error = action, interval, on_error
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> bool:
        """Stop and wait for a round in progress to end; False if it did not within `timeout`."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.wait(self._interval()):
            try:
                self._action()
            except Exception as exc:  # noqa: BLE001 - a side channel is retried at its next interval
                self._on_error(f"{self.name}: {type(exc).__name__}: {exc}")


@dataclass
class Threads:
    """The driver's threads beside its loop, from start to close: the side channels (`Periodic`) of the checkpoint
    rounds, of the fencing rounds (with their `fence`, when the job has an instance id) and of the source end
    reads, and `runner`, the one thread a batch runs in (the loop ticks the side channels while it runs)."""

    checkpointing: Periodic | None = None
    fencing: Periodic | None = None
    fence: InstanceFence | None = None
    lag_reading: Periodic | None = None
    runner: ThreadPoolExecutor | None = None

    def batch_runner(self) -> ThreadPoolExecutor:
        if self.runner is None:
            self.runner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batch")
        return self.runner

    def stop(self) -> tuple[bool, bool]:
        """Stop them all, the fence closed once its thread has stopped; whether the source end reads and the
        checkpoint rounds stopped in time (if not, their clients are still in use)."""
        if self.fencing is not None and self.fencing.stop(timeout=10) and self.fence is not None:
            self.fence.close()
        lag_idle = self.lag_reading is None or self.lag_reading.stop(timeout=15)
        checkpoints_idle = self.checkpointing is None or self.checkpointing.stop(timeout=30)
        if self.runner is not None:
            self.runner.shutdown(wait=True)
            self.runner = None
        return lag_idle, checkpoints_idle


class Executor(Protocol):
    def run(self, spec: JobSpec, tasks: list[CopyTask], mode: DeliveryMode) -> list[TaskResult]: ...


class LocalExecutor:
    """Runs the tasks in this process, one after another (unit tests, debugging)."""

    def run(self, spec: JobSpec, tasks: list[CopyTask], mode: DeliveryMode) -> list[TaskResult]:
        return list(run_tasks(spec, tasks, mode))


IN_DRIVER = LocalExecutor()  # a batch of heartbeats alone runs here, not as a Spark job


class Work(enum.Enum):
    """What the idle gate found to copy (ReplicationDriver.work_waiting)."""

    NONE = "none"  # every partition caught up: no batch
    HEARTBEATS = "heartbeats"  # only heartbeats records: the driver copies them itself
    RECORDS = "records"  # anything else: a batch (a Spark job)


class SparkExecutor:
    """One Spark partition per task; records move inside the Python workers."""

    def __init__(self, spark_context: Any):
        self.sc = spark_context

    def run(self, spec: JobSpec, tasks: list[CopyTask], mode: DeliveryMode) -> list[TaskResult]:
        if not tasks:
            return []
        # In an engine the flows' batches run side by side: each flow is a pool of its own (FAIR between pools).
        self.sc.setLocalProperty("spark.scheduler.pool", spec.flow)
        rdd = self.sc.parallelize(tasks, len(tasks))
        return rdd.mapPartitions(lambda it: run_tasks(spec, it, mode)).collect()


class ReplicationDriver:
    """One flow's replication job (the module's docstring). Besides its spec, executor, lifecycle (`state`,
    `stop_event`, `exit_code`) and metrics, it holds typed parts (driver_parts.py): `progress` (Progress),
    `parts` (Partitions), `pacing` (Pacing), `conn` (Connections, from start) and `threads` (Threads)."""

    def __init__(
        self,
        spec: JobSpec | str | Path,
        executor: Executor,
        *,
        environ: Mapping[str, str] | None = None,
        install_signal_handlers: bool = False,
        shared: SharedClients | None = None,
    ):
        self.spec_path = None if isinstance(spec, JobSpec) else Path(spec)
        self.spec = spec if isinstance(spec, JobSpec) else JobSpec.load(spec)
        self.executor = executor
        self.environ = environ
        self.shared = shared  # the engine's clients, shared by its flows (None: this flow's own)
        self.pacing = Pacing()  # when each periodic action is due, and the idle gate's state
        self.stop_event = LinkedEvent(self.pacing.wake)  # a stop ends an idle wait at once
        self.exit_code = 0
        self.state: StatusState = StatusState.STARTING
        self.instance_id = (environ if environ is not None else os.environ).get(INSTANCE_ENV)
        self.progress = Progress()  # counts, errors, findings: what the status record and the metrics report
        for c in (self.spec.source, self.spec.target):
            self.progress.redact.add_from(dict(c.config), environ)
        self.parts = Partitions()  # the partitions copied: plan, positions, slots, sync state, lag, halted
        self.stuck = StuckWatch()  # the partitions that do not progress while their source is ahead
        self.conn: Connections | None = None  # the clients, opened at start (_connect)
        self.threads = Threads()  # the side channels' threads and the batch runner, from start to close
        self.metrics = JobMetrics(self.spec.flow)  # served by the job's entry point (jobs/mirror_job.py)
        # The flow on each line (an engine's log holds the lines of all its flows): a field in JSON, `[flow]` in text.
        self.log = logging.LoggerAdapter(log, {"flow": self.spec.flow})
        if install_signal_handlers:
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stop_event.set())

    @property
    def flow(self) -> str:
        return self.spec.flow

    @property
    def spec_hash(self) -> str:
        return self.spec.spec_hash()

    @property
    def mode(self) -> DeliveryMode:
        return mode_of(self.spec)

    # --- lifecycle --------------------------------------------------------------------------
    @property
    def connections(self) -> Connections:
        """The clients; the methods that use them run after start."""
        if self.conn is None:
            raise RuntimeError(f"flow {self.spec.flow}: the driver has not started (no clients)")
        return self.conn

    @property
    def checkpoints(self) -> CheckpointEmitter | None:
        """The checkpoint emitter (None before start)."""
        return self.conn.checkpoints if self.conn is not None else None

    def _connect(self) -> None:
        self.conn = Connections.open(self.spec, self.mode, self.environ, self.pacing.wake, self.shared)

    def start(self) -> None:
        self._connect()
        conn = self.connections
        errs = conn.topics.ensure_internal()
        for e in errs:
            self._error(e)
        self.mode.prepare(self.spec, self.environ)
        self.refresh(first=True)
        # Replay the offset syncs written before this start (MM2's OffsetSyncStore.start()), so the
        # syncs this run writes are added with their full history.
        conn.checkpoints.read_syncs(timeout=15)
        now = time.monotonic()
        self.pacing.next = {
            "refresh": now + self.spec.settings.refresh_interval_seconds,
            "heartbeat": now,
            "status": now,
            "delayed_syncs": now + self.spec.settings.checkpoints.interval_seconds,
        }
        self.state = StatusState.RUNNING
        self.threads.checkpointing = Periodic(
            "checkpoints",
            self.checkpoint_round,
            lambda: self.spec.settings.checkpoints.interval_seconds,
            self._error,
        )
        self.threads.checkpointing.start()
        if self.instance_id:
            self.threads.fence = InstanceFence(self.spec, self.instance_id, self.progress.started_at, self.environ)
            self.threads.fencing = Periodic(
                "fencing", self.fence_round, lambda: max(1.0, self.spec.engine.status_interval_seconds), self._error
            )
            self.threads.fencing.start()
        self.threads.lag_reading = Periodic(
            "source end offsets",
            self.read_source_ends,
            self._lag_interval,  # each status sees a read this fresh
            self._error,
        )
        self.threads.lag_reading.start()
        self.publish_status()

    def fence_round(self) -> None:
        """Stop this instance if a newer instance of the flow runs (engine/fencing.py)."""
        newer = self.threads.fence.newer() if self.threads.fence is not None else None
        if newer is None or self.stop_event.is_set():
            return
        self._error(
            f"a newer instance {newer.instance_id} of flow {self.spec.flow} runs (started "
            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime((newer.started_at or 0) / 1000))}): "
            f"this instance {self.instance_id} stops so that only one copies"
        )
        self.exit_code = EXIT_SUPERSEDED
        self.stop_event.set()

    def checkpoint_round(self) -> None:
        if self.conn is not None and self.spec.settings.checkpoints.enabled:
            self.conn.checkpoints.emit()

    def _lag_interval(self) -> float:
        """Seconds between two rounds of the lag side channel: half a status interval."""
        return max(0.1, self.spec.engine.status_interval_seconds / 2)

    def read_source_ends(self) -> None:
        """The side channel's round: the current end of every partition copied (and the oldest unreplicated
        record's timestamp of those that lag most), for the next status record and metrics."""
        if self.conn is None:
            return
        # Copies taken at once (the loop's thread replaces `plan` and moves `positions`; a dict copy is atomic).
        copy = dict(self.parts.plan.copy)
        positions = {tp: pos for tp, pos in dict(self.parts.positions).items() if tp in copy}
        if self.watch_hears_all(list(copy)):
            idle: SourceEnds | None = SourceEnds.at_positions(positions)
        else:
            idle = self.pacing.idle_ends(copy, positions, max_age_ms=int(1000 * self._lag_interval()))
        if idle is not None:
            self.parts.source_ends = idle
            return
        seen = {tp: lp.end for tp, lp in dict(self.parts.lag).items() if lp.end is not None}
        last = self.parts.source_ends
        self.parts.source_ends = self.conn.end_reader.read(
            copy, positions, seen, last.oldest if last is not None else None
        )

    def close(self) -> None:
        lag_idle, checkpoints_idle = self.threads.stop()
        if not checkpoints_idle:  # its clients are still in use: left to the process's exit
            self.log.warning("a checkpoint round did not end within 30 s of the job stopping")
        if self.conn is not None:
            self.conn.close(end_reader_idle=lag_idle, checkpoints_idle=checkpoints_idle)

    def run(self, max_batches: int | None = None, max_seconds: float | None = None) -> int:
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        try:
            self.start()
            while not self.stop_event.is_set():
                if max_batches is not None and self.progress.batches >= max_batches:
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    break
                moved = self.step()
                if self.exit_code:
                    break
                if not moved:
                    self.idle(self.idle_wait())
            if self.state not in (StatusState.RESTART_REQUIRED, StatusState.FAILED):
                self.state = StatusState.STOPPED
        except Exception as exc:
            self.state = StatusState.FAILED
            self._error(f"{type(exc).__name__}: {exc}")
            self.log.exception("replication job failed")
            self.exit_code = self.exit_code or 1
        finally:
            if self.conn is not None and self.state is not StatusState.FAILED:
                # MM2 fires its pending offset syncs at the offset commit a task's stop makes: the last mapping
                # of each partition is published before the job ends, not one interval later or never.
                try:
                    self.flush_delayed_syncs()
                except Exception as exc:  # noqa: BLE001
                    self.log.warning("cannot publish the last offset syncs: %s", exc)
            try:
                self.publish_status()
            except Exception:  # noqa: BLE001
                pass
            self.close()
        return self.exit_code

    # --- one iteration ----------------------------------------------------------------------
    def step(self) -> bool:
        now = time.monotonic()
        if now >= self.pacing.next["refresh"]:
            self.pacing.next["refresh"] = now + self.spec.settings.refresh_interval_seconds
            if self.reload_spec():
                self.refresh()
        tasks = self.plan_tasks()
        work = self.work_waiting() if tasks else Work.RECORDS
        if self.pacing.moved_back and self._ends_moved_back():
            tasks = self.plan_tasks()  # positions moved (or partitions halted): the batch starts from them
        executor = self.executor
        if self.conn is not None:
            if work is Work.RECORDS:
                self.conn.arrivals.disarm()  # the tasks read what arrives
            else:
                self.conn.arrivals.arm(self.watched_positions())
        if work is Work.NONE:
            tasks = []  # idle: no Spark job while there is nothing to fetch
        elif work is Work.HEARTBEATS:
            # Heartbeats alone: copied by this driver (the tasks' own code, in this process), not a Spark job.
            tasks, executor = self._heartbeat_tasks(tasks), IN_DRIVER
        elif self.one_task():
            tasks = self.plan_tasks(one_task=True)
        else:
            tasks = self.split_tasks(tasks)
        self.pacing.idle_steps = 0 if work is Work.RECORDS else self.pacing.idle_steps + 1
        moved = 0
        results: list[TaskResult] = []
        if not tasks:
            self.tick()
        else:
            # The side channels (heartbeats, delayed offset syncs, status) run while the batch runs: they
            # read what the previous batches absorbed, and the gap between two batches (records
            # wait there) stays the Spark job's own scheduling plus absorbing the results.
            batch = self.threads.batch_runner().submit(executor.run, self.spec, tasks, self.mode)
            self.tick()
            while not wait_futures([batch], timeout=TICK_S).done:
                self.tick()  # a long batch keeps heartbeats and status on time
            try:
                results = batch.result()
            except Exception as exc:  # noqa: BLE001 - e.g. a Python worker died: nothing was committed
                self._error(f"batch failed: {type(exc).__name__}: {str(exc)[:500]}")
                self.parts.consumer_epoch += 1
                self.parts.last_owner.clear()
                self.pacing.caught_up.clear()
                self.mode.recover(self._reload_positions, list(self.parts.plan.copy))
                self.stop_event.wait(min(5.0, 0.5 * (1 + self.progress.batch_failures)))
                self.progress.batch_failures += 1
                results = []
            else:
                self.progress.batch_failures = 0
            moved = self.absorb(results)
        self.progress.batches += 1
        self.metrics.observe(self, results)  # the same task results and counters as the status record
        return moved > 0

    def work_waiting(self) -> Work:
        """What is there to copy? A Spark job is launched unless every partition is *caught up*: its last task
        ended at the end of the partition (end-of-partition seen, its position at the high watermark it saw), and
        the source's end offset (one ListOffsets request per leader) has not moved since the read taken before that
        task. A moved end, not an end past the position, is the signal: Tansu answers ListOffsets with its last
        batch's base offset + 1, below the true end, but any new batch moves it; a partition deleted and created
        again moves it too. While the arrival watch hears nothing at every partition but the heartbeats'
        (`watch_hears_all`), nothing is read: those partitions are caught up as the watch knows them. An engine
        whose flows have nothing to copy costs no request and no Spark job; heartbeats alone are copied by the
        driver (`Work.HEARTBEATS`)."""
        if self.conn is None:
            return Work.RECORDS
        copy = [tp for tp in self.parts.plan.copy if tp not in self.parts.halted]
        now = time.monotonic()
        if now < self.pacing.next.get("gate_recheck", 0.0) and self.watch_hears_all(copy):
            return self._heartbeats_when_due(now, copy)
        try:
            ends = self.conn.end_reader.end_offsets(copy)
        except Exception as exc:  # noqa: BLE001 - the batch finds out what is wrong
            self.log.info("cannot read the source's end offsets before a batch: %s", exc)
            ends = {}
        back = ends_moved_back(self.pacing.ends_before, ends)
        self.pacing.moved_back = {tp: (self.pacing.ends_before[tp], end) for tp, end in back.items()}
        self.pacing.ends_before, self.pacing.ends_read_at_ms = ends, int(time.time() * 1000)
        waiting = [tp for tp in copy if tp not in ends or self.pacing.caught_up.get(tp, -1) != ends[tp]]
        if not waiting:
            # A batch now and then all the same (GATE_RECHECK_S): whatever the gate could misread, it is one
            # Spark job a minute, not a flow that stops copying.
            if now < self.pacing.next.get("gate_recheck", 0.0):
                return Work.NONE
            waiting = copy
        self.pacing.next["gate_recheck"] = now + GATE_RECHECK_S
        policy = self.spec.settings.policy
        if all(policy.is_heartbeats_topic(topic) for topic, _ in waiting):
            return self._heartbeats_when_due(now, waiting)
        return Work.RECORDS

    def _heartbeats_when_due(self, now: float, tps: list[TP]) -> Work:
        """Heartbeats (a record every few seconds from each flow of the source) are copied by the driver, at most
        once a heartbeat interval: no Spark job, and their age downstream grows by at most that much. HEARTBEATS
        when that interval has passed and `tps` hold a heartbeats partition, NONE otherwise."""
        policy = self.spec.settings.policy
        if now < self.pacing.next.get("heartbeats_copy", 0.0) or not any(policy.is_heartbeats_topic(t) for t, _ in tps):
            return Work.NONE
        self.pacing.next["heartbeats_copy"] = now + self.spec.settings.heartbeats.interval_seconds
        return Work.HEARTBEATS

    def watch_hears_all(self, copy: list[TP]) -> bool:
        """Whether the arrival watch listens at every partition in `copy` but the heartbeats topics', from the
        flow's positions, and has heard nothing there (engine/arrivals.py): those partitions are at their ends
        without a read of the source."""
        watched = self.watched_positions()
        if not watched or self.conn is None:
            return False
        policy = self.spec.settings.policy
        listened = all(tp in watched for tp in copy if not policy.is_heartbeats_topic(tp[0]))
        return listened and self.conn.arrivals.quiet(watched)

    def _heartbeat_tasks(self, tasks: list[CopyTask]) -> list[CopyTask]:
        """The tasks cut to their heartbeats partitions (the others are caught up: nothing to read there), ending
        at the partitions' ends (a heartbeat that arrives later is copied the next time). An
        exactly-once slot's transactional id moves between this process and a Spark worker like any change of
        process: `last_owner` tells the next user to initialise it again."""
        policy = self.spec.settings.policy
        out = []
        for t in tasks:
            parts = tuple(p for p in t.partitions if policy.is_heartbeats_topic(p.topic))
            if parts:
                out.append(dataclasses.replace(t, partitions=parts, at_end_only=True))
        return out

    def watched_positions(self) -> dict[TP, int]:
        """What the arrival watch listens to while the flow is idle: each caught-up partition but the heartbeats
        topics' (copied on the heartbeat interval), from the flow's position there."""
        policy = self.spec.settings.policy
        return {
            tp: self.parts.positions[tp]
            for tp in self.parts.plan.copy
            if tp in self.pacing.caught_up
            and tp in self.parts.positions
            and tp not in self.parts.halted
            and not policy.is_heartbeats_topic(tp[0])
        }

    def idle(self, seconds: float) -> None:
        """Wait after a step that copied nothing: `seconds`, or until a record arrives at a watched partition or
        the flow is stopped (both set `wake`)."""
        wake = self.pacing.wake
        if wake.wait(seconds):
            wake.clear()
            if self.stop_event.is_set():
                wake.set()  # a stop stays seen by every later wait

    def idle_wait(self) -> float:
        """Seconds to wait after a step that copied nothing: the trigger interval, doubled for each step in a row
        the idle gate held back, up to IDLE_WAIT_MAX_S (a record arriving at an idle flow ends the wait sooner: the
        arrival watch sets `wake`; a flow with traffic keeps the trigger interval)."""
        trigger = self.spec.engine.trigger_interval_ms / 1000.0
        return max(trigger, min(IDLE_WAIT_MAX_S, trigger * 2 ** min(self.pacing.idle_steps, 16)))

    def tick(self) -> None:
        now = time.monotonic()
        spec = self.spec
        try:
            if spec.emits_heartbeats and now >= self.pacing.next["heartbeat"]:
                self.pacing.next["heartbeat"] = now + spec.settings.heartbeats.interval_seconds
                self.connections.heartbeats.emit()
            if now >= self.pacing.next["delayed_syncs"]:
                self.pacing.next["delayed_syncs"] = now + spec.settings.checkpoints.interval_seconds
                self.flush_delayed_syncs()
        except Exception as exc:  # noqa: BLE001 - side channels are retried next time
            self._error(f"{type(exc).__name__}: {exc}")
        if now >= self.pacing.next["status"]:
            self.pacing.next["status"] = now + spec.engine.status_interval_seconds
            try:
                self.publish_status()
            except Exception as exc:  # noqa: BLE001
                self.log.warning("cannot publish status: %s", exc)

    # --- spec reload and topic refresh ------------------------------------------------------
    def reload_spec(self) -> bool:
        """Re-read the spec file; apply hot-reloadable changes. False if the job must stop."""
        if self.spec_path is None:
            return True
        try:
            new = JobSpec.load(self.spec_path)
        except Exception as exc:  # noqa: BLE001 - a half-written or broken file: keep the current spec
            self._error(f"cannot re-read spec {self.spec_path}: {exc}")
            return True
        if new.spec_hash() == self.spec.spec_hash():
            return True
        restart = self.spec.restart_fields(new)
        if restart:
            self.state = StatusState.RESTART_REQUIRED
            self._error(f"spec changed in fields that need a restart: {', '.join(sorted(restart))}")
            self.exit_code = EXIT_RESTART_REQUIRED
            self.stop_event.set()
            return False
        self.log.info("applying new spec %s (changed: %s)", new.spec_hash()[:12], sorted(self.spec.changed_fields(new)))
        self.spec = new
        self.connections.update_spec(new)
        if new.settings.on_refused_record == "skip":  # its dead-letter topic; the partitions halted on a refusal resume
            for e in self.connections.topics.ensure_internal():
                self._error(e)
            for tp in [tp for tp, f in self.parts.halted.items() if f.kind is FaultKind.REFUSED_RECORD]:
                del self.parts.halted[tp]
        if resume_at(self.offset_reset, 0, 0) is not None:  # partitions paused on a loss: the new policy decides
            for tp in [tp for tp, f in self.parts.halted.items() if f.kind in LOSS_KINDS]:
                del self.parts.halted[tp]
                self.parts.consumer_epoch += 1
        return True

    @property
    def offset_reset(self) -> OffsetReset:
        return OffsetReset.of(self.spec.engine.offset_reset)

    def refresh(self, first: bool = False) -> None:
        """Discover source topics/partitions, create missing remote topics, load new positions."""
        flow, conn = self.spec.mirror_flow, self.connections
        source = conn.topics.describe(conn.source_admin, 15, ids=True)
        target = conn.topics.describe(conn.target_admin, 15)
        plan = plan_partitions(flow, source, target)
        findings = list(plan.findings)
        if plan.create:
            findings += conn.topics.create_remote(plan.create)
            target = conn.topics.describe(conn.target_admin, 15)
            plan = plan_partitions(flow, source, target)
            findings += [f for f in plan.findings if f not in findings]
        if plan.grow:
            findings += conn.topics.grow_remote(plan.grow)
        self.progress.found(findings)
        for f in findings:
            self.log.warning("%s", f)
        new = {tp: remote for tp, remote in plan.copy.items() if tp not in self.parts.positions}
        if new:
            loaded = conn.offsets.load(new)
            for tp, (offset, slot) in loaded.items():
                self.parts.positions[tp] = offset if offset is not None else -2
                if slot is not None and 0 <= slot < self.spec.engine.parallelism:
                    self.parts.slots[tp] = slot
            self.parts.assign_slots(list(new), self.spec.engine.parallelism)
        vanished = sorted(self.parts.known_topics - set(source))
        if vanished:
            self.parts.consumer_epoch += 1
            self._error(
                f"source topics disappeared: {', '.join(vanished)} (their positions are dropped; a topic "
                f"created again under the same name is copied from its beginning)"
            )
        self.parts.known_topics = {t for t, _ in plan.copy}
        ids = {name: info.topic_id for name, info in source.items() if name in self.parts.known_topics}
        for topic in recreated_topics(self.parts.topic_ids, ids):
            for tp in sorted(tp for tp in plan.copy if tp[0] == topic and tp in self.parts.positions):
                self._recreated(tp, self.parts.topic_ids[topic], ids[topic] or "")
        self.parts.topic_ids.update({t: i for t, i in ids.items() if i is not None})
        gone = [tp for tp in self.parts.positions if tp not in plan.copy]
        for tp in gone:  # topic deleted or no longer matching: forget (positions reload if it returns)
            self.parts.forget(tp)
        self.parts.plan = plan
        self.read_record_limits()

    def read_record_limits(self) -> None:
        """The largest record each remote topic takes (Partitions.record_limits), at each refresh: a record larger
        is refused before it is produced (`on_refused_record`), not sent to fail its whole round."""
        try:
            self.parts.record_limits = self.connections.topics.record_limits(list(set(self.parts.plan.copy.values())))
        except Exception as exc:  # noqa: BLE001 - kept from the last read; the broker's answer decides meanwhile
            self.log.info("cannot read the remote topics' max.message.bytes: %s", exc)

    # --- planning and results ---------------------------------------------------------------
    def plan_tasks(self, one_task: bool = False) -> list[CopyTask]:
        return self.parts.tasks(self.progress.batches, one_task)

    def one_task(self) -> bool:
        """Is this batch one task for every partition (ONE_TASK_BACKLOG)? Asked after `work_waiting` found records,
        so the ends are the ones read for this batch."""
        if self.mode.slot_is_identity:
            return False
        backlog = self.parts.backlog(self.pacing.ends_before)
        return backlog is not None and backlog <= ONE_TASK_BACKLOG

    def split_tasks(self, tasks: list[CopyTask]) -> list[CopyTask]:
        """A backlog split over the slots (more than ONE_TASK_BACKLOG records, or positions not yet known). Where the
        delivery allows one task, its tasks end once their partitions reached their ends (`CopyTask.at_end_only`)
        instead of staying on while a stream flows: the tasks of a batch end together (one Spark job), so when one
        task's partitions fall silent and it ends while another streams on, the first one's partitions are not read
        until the batch's deadline (`max_batch_ms`). Seen through the deployed job (bench/deployed.py latency on
        Tansu, 1 repetition in 3 to 8): a new flow's first batch (positions not known: split) had one task end after
        the warm-up's records while the other streamed on into the load, half the partitions 6.6-7.2 s late. Ended
        at their ends (the ends read before the batch: under a stream no end-of-partition event need come), the
        split tasks leave the stream to the next batch: one task (`one_task`)."""
        if len(tasks) < 2 or self.mode.slot_is_identity:
            return tasks
        ends = self.pacing.ends_before
        return [
            dataclasses.replace(
                t, at_end_only=True, partitions=tuple(dataclasses.replace(p, end=ends.get(p.tp)) for p in t.partitions)
            )
            for t in tasks
        ]

    def absorb(self, results: list[TaskResult]) -> int:
        conn = self.connections
        moved = 0
        to_commit: dict[TP, int] = {}
        latency: list[float] = []
        silent: list[PartitionResult] = []
        failed: list[TP] = []
        for r in results:
            if r.process:
                self.parts.last_owner[r.slot] = r.process if not r.fatal else None
            if r.error:
                self._error(f"slot {r.slot}: {r.error}")
                failed += [p.tp for p in r.partitions]
            latency += r.latency_ms
            advances = not r.error  # a failed task rolled back (or aborted) its partitions
            for p in r.partitions:
                tp = p.tp
                if p.error and not r.error:
                    self._error(f"{tp[0]}[{tp[1]}]: {p.error}")
                if p.out_of_range:
                    self._out_of_range(tp, p.start, p.out_of_range)
                    continue
                if p.dead_lettered and advances:
                    self.parts.dead_letters[tp] = self.parts.dead_letters.get(tp, 0) + p.dead_lettered
                    self._error(
                        f"{tp[0]}[{tp[1]}]: {p.dead_lettered} record(s) refused by the target written to the "
                        f"dead-letter topic {dead_letters_topic_name(self.spec)} (on_refused_record: skip)"
                    )
                if p.count == 0 and not p.eof and not r.error and p.start >= 0:
                    silent.append(p)
                if advances and (p.count > 0 or (p.next >= 0 and p.next != self.parts.positions.get(tp))):
                    self.parts.positions[tp] = p.next
                    to_commit[tp] = p.next
                self.progress.records += p.count
                self.progress.bytes += p.bytes
                moved += p.count
                if p.sync_state is not None:
                    self.parts.sync_states[tp] = p.sync_state
                if p.syncs:
                    conn.syncs.write(tp[0], tp[1], p.syncs)
                    self.parts.delayed_syncs.pop(tp, None)
                if p.last is not None:
                    if p.syncs and tuple(p.syncs[-1]) == tuple(p.last):
                        self.parts.delayed_syncs.pop(tp, None)
                    else:
                        self.parts.delayed_syncs[tp] = (p.last[0], p.last[1])  # published at the next flush
                self.parts.lag[tp] = LagPosition(p.remote, self.parts.positions.get(tp, p.next), p.hw)
                if advances:
                    self.pacing.mark_caught_up(p)
                else:
                    self.pacing.caught_up.pop(tp, None)
                if p.refused is not None and advances:
                    self._halt_refused(tp, p)
        if failed:
            self.mode.recover(self._reload_positions, failed)
        conn.syncs.flush()
        conn.offsets.commit(to_commit)
        self.progress.latency.add(latency)
        self.progress.rate.add(moved)
        for p in silent:
            self._check_position(p.tp, p.start)
        return moved

    def flush_delayed_syncs(self) -> None:
        """MM2 publishes the latest unsynced mapping of each partition at offset commit time."""
        if not self.parts.delayed_syncs:
            return
        delayed, self.parts.delayed_syncs = self.parts.delayed_syncs, {}
        syncs = self.connections.syncs
        for (topic, partition), pair in delayed.items():
            syncs.write(topic, partition, [pair])
        syncs.flush()

    def _reload_positions(self, tps: list[TP], forward_only: bool = False) -> None:
        """After a failed batch, the positions the job's group holds (delivery.py: which group, and whether a
        position may move back: exactly-once the target group is the truth, it may have committed)."""
        wanted = {tp: self.parts.plan.copy[tp] for tp in tps if tp in self.parts.plan.copy}
        try:
            for tp, (offset, _slot) in self.connections.offsets.load(wanted).items():
                loaded = offset if offset is not None else -2
                if forward_only:
                    loaded = max(loaded, self.parts.positions.get(tp, -2))
                self.parts.positions[tp] = loaded
        except Exception as exc:  # noqa: BLE001
            self._error(f"cannot re-read the job's committed positions: {exc}")

    def _halt_refused(self, tp: TP, p: PartitionResult) -> None:
        """`on_refused_record: fail`: the partition stops at the record the target refuses (the records before it
        were copied and their position committed); the flow is degraded until the job restarts (after the remote
        topic's limit is raised, or with `on_refused_record: skip`)."""
        refused = p.refused
        assert refused is not None
        reason = f"record at offset {refused.offset} refused by the target: {refused.reason}"
        self.parts.halted[tp] = PartitionFault(
            tp[0], tp[1], FaultKind.REFUSED_RECORD, reason, refused.offset, int(time.time() * 1000)
        )
        self.pacing.caught_up.pop(tp, None)
        self._error(f"{tp[0]}[{tp[1]}]: halted: {reason} (on_refused_record: fail)")

    # --- data lost at the source (engine/source_loss.py) -------------------------------------
    def _check_position(self, tp: TP, position: int) -> None:
        """A partition that answered neither records nor end-of-partition (Tansu answers a fetch outside the log
        with nothing at all): is the position valid?"""
        try:
            offsets = self.connections.offsets
            low, high = offsets.watermarks(*tp)
            if position < low:
                self._out_of_range(
                    tp, position, f"offset {position} is below the log start {low} (truncated)", low, high
                )
                return
            if position <= high:
                return
            end = offsets.end_offset(*tp)
            if end is not None and position > end:
                self._out_of_range(
                    tp, position, f"offset {position} is past the log end {end} (records lost, or recreated)", low, end
                )
        except Exception as exc:  # noqa: BLE001 - transient: checked again next batch
            self.log.info("cannot check position of %s: %s", tp, exc)

    def _ends_moved_back(self) -> bool:
        """The source's end of some partitions, read before this batch, is below the last read (`Pacing.moved_back`):
        the broker lost records at and after it (at-least-once or not, the job may have copied them), and new records
        will get their offsets. Reported each time; a position past the end is handled by `offset_reset` now, before
        the batch copies from it: reused offsets below the position would be skipped. Whether positions moved."""
        moved, self.pacing.moved_back = self.pacing.moved_back, {}
        changed = False
        for tp, (before, end) in sorted(moved.items()):
            if tp in self.parts.halted:
                continue
            position = self.parts.positions.get(tp, -2)
            reason = f"the log end moved back from {before} to {end}: the source lost records it had acknowledged"
            if position > end:
                self._out_of_range(
                    tp, position, f"{reason}; offset {position} is past it", None, end, FaultKind.LOST_TAIL
                )
                changed = True
            else:
                self._report_loss(
                    tp,
                    position,
                    f"{reason} (the job had not copied past it)",
                    None,
                    end,
                    FaultKind.LOST_TAIL,
                    "reported; the job's position is within the log",
                )
        return changed

    def _recreated(self, tp: TP, before: str, now: str) -> None:
        """The source topic's id changed since the last refresh: deleted and created again."""
        position = self.parts.positions.get(tp, -2)
        if position < 0:
            return
        reason = f"topic {tp[0]} was recreated (topic id {before} is now {now})"
        self._out_of_range(tp, position, reason, None, None, FaultKind.RECREATED)

    def _out_of_range(
        self,
        tp: TP,
        position: int,
        reason: str,
        low: int | None = None,
        high: int | None = None,
        kind: FaultKind | None = None,
    ) -> None:
        """The source lost the records at the partition's position (`kind`; classified by the log's range when not
        given): reported, then `offset_reset` decides: resume at the log start or end, halt the partition, or fail
        the job."""
        self.pacing.caught_up.pop(tp, None)
        tail_seen_lost = kind is FaultKind.LOST_TAIL  # told by the caller: the end moved back between two reads
        if low is None or high is None:
            try:
                w_low, w_high = self.connections.offsets.watermarks(*tp)
                low = w_low if low is None else low
                high = w_high if high is None else high
            except Exception:  # noqa: BLE001
                pass
        if kind is None:
            kind = (position_loss(position, low, high) if low is not None and high is not None else None) or (
                FaultKind.OUT_OF_RANGE
            )
        policy = self.offset_reset
        to = resume_at(policy, low, high, kind, tail_seen_lost)
        if policy is OffsetReset.FAIL:
            action = "failed: the job stops (offset_reset: fail)"
        elif to is None:
            action = f"halted (offset_reset: {policy.value})"
        else:
            action = f"resumed at the log {'start' if to == low else 'end'} {to} (offset_reset: {policy.value})"
        at = self._report_loss(tp, position, reason, low, high, kind, action)
        self.parts.consumer_epoch += 1
        if to is None:
            self.parts.halted[tp] = PartitionFault(tp[0], tp[1], kind, reason, position, at)
            if policy is OffsetReset.FAIL:
                self.state = StatusState.FAILED
                self.exit_code = self.exit_code or 1
                self.stop_event.set()
            return
        self.parts.positions[tp] = to
        self.parts.sync_states.pop(tp, None)
        self.connections.offsets.commit({tp: to})  # at-least-once; exactly-once commits inside transactions

    def _report_loss(
        self, tp: TP, position: int, reason: str, low: int | None, high: int | None, kind: FaultKind, action: str
    ) -> int:
        """A loss at the source in the status record (`out_of_range`, counted in `data_loss`), the log and the
        metrics; when (epoch ms)."""
        event = OutOfRange(tp[0], tp[1], position, low, high, reason, action, int(time.time() * 1000), kind)
        self.progress.add_out_of_range(event)
        self._error(f"{tp[0]}[{tp[1]}]: {kind.value}: {reason}; {action}")
        return event.at or 0

    # --- status -----------------------------------------------------------------------------
    def _error(self, text: str) -> None:
        self.log.warning("%s", self.progress.error(text))  # _error is called from the side channels' threads too

    def current_lag(self) -> JobLag:
        """Lag now: the driver's positions against the larger of the ends its tasks saw and the side channel read."""
        return job_lag(
            self.parts.plan.copy, self.parts.positions, self.parts.lag, self.parts.source_ends, int(time.time() * 1000)
        )

    def reported_state(self) -> StatusState:
        """The state the status record and the metrics report: running with partitions that do not progress (halted
        or stuck: `faults`) is degraded."""
        return StatusState.DEGRADED if self.state is StatusState.RUNNING and self.faults() else self.state

    def faults(self) -> tuple[PartitionFault, ...]:
        """The partitions that do not progress: the halted ones, and those stuck (`StuckWatch`)."""
        faults = {**self.stuck.stuck, **self.parts.halted}
        return tuple(faults[tp] for tp in sorted(faults))

    def stuck_after_seconds(self) -> float:
        """How long a partition behind its source may not move before it is stuck (STUCK_INTERVALS)."""
        engine = self.spec.engine
        return max(STUCK_INTERVALS * engine.status_interval_seconds, 2 * engine.max_batch_ms / 1000)

    def status_record(self, lag: JobLag | None = None) -> StatusRecord:
        lag = lag if lag is not None else self.current_lag()
        return StatusRecord(
            flow=self.spec.flow,
            spec_hash=self.spec.spec_hash(),
            git_revision=self.spec.git_revision,
            delivery=self.spec.delivery,
            state=self.reported_state(),
            started_at=self.progress.started_at,
            heartbeat_at=int(time.time() * 1000),
            # what tasks reported, and what a running task has committed since (a kill loses no count but its last
            # second's: the worker commits every round)
            records=self.progress.records + committed_ahead(dict(self.parts.positions), self.parts.source_ends),
            bytes=self.progress.bytes,
            records_per_second=round(self.progress.rate.rate(), 1),
            batches=self.progress.batches,
            partitions=len(self.parts.plan.copy),
            lag_total=lag.total,
            lag=lag.partitions,
            lag_seconds=lag.seconds,
            lag_read_at=lag.read_at,
            latency_ms=Latency.from_dict(self.progress.latency.snapshot()),
            errors=self.progress.errors,
            last_error=self.progress.last_error,
            findings=tuple(self.progress.findings),
            out_of_range=tuple(self.progress.out_of_range),
            halted=tuple(f"{t}:{p}" for t, p in sorted(self.parts.halted)),
            faults=self.faults(),
            dead_letters=tuple(PartitionCount(t, p, n) for (t, p), n in sorted(self.parts.dead_letters.items())),
            data_loss=tuple(
                PartitionCount(t, p, n, kind)
                for ((t, p), kind), n in sorted(
                    self.progress.data_loss.items(), key=lambda kv: (kv[0][0], kv[0][1].value)
                )
            ),
            checkpoints_emitted=self.checkpoints_emitted,
            instance_id=self.instance_id,
            pid=os.getpid(),
            metrics_port=self.metrics.port,
            groups=self.checkpoints.group_syncs if self.checkpoints is not None else (),
        )

    @property
    def records(self) -> int:
        return self.progress.records

    @property
    def errors(self) -> int:
        return self.progress.errors

    @property
    def last_error(self) -> str | None:
        return self.progress.last_error

    @property
    def checkpoints_emitted(self) -> int:
        return self.conn.checkpoints.emitted if self.conn is not None else 0

    def publish_status(self) -> None:
        """The status record, and the lag metrics from the same figures (also between batches: a batch whose
        tasks are held up must not hold up the lag the job reports)."""
        lag = self.current_lag()
        halted = self.parts.halted
        self.stuck.observe(
            [p for p in lag.partitions if (p.topic, p.partition) not in halted],
            int(time.time() * 1000),
            int(1000 * self.stuck_after_seconds()),
            self.progress.last_error,
        )
        record = self.status_record(lag)
        self.metrics.observe_lag(lag)
        if self.conn is not None:
            self.conn.status.publish(record)


def run_job(spec_path: str | Path, executor: Executor, **kw: Any) -> int:
    driver = ReplicationDriver(spec_path, executor, install_signal_handlers=True)
    return driver.run(**kw)


def configure_logging(
    level: str = "INFO", spec: JobSpec | None = None, environ: Mapping[str, str] | None = None
) -> None:
    """The job's log lines on stderr: human lines, or one JSON object per line with the flow as a field when
    RECONCILER_LOG_FORMAT=json; the spec's secrets are redacted either way in JSON (reconciler.logs)."""
    from reconciler import logs

    redact = secrets.Redactor()
    if spec is not None:
        for c in (spec.source, spec.target):
            redact.add_from(dict(c.config), environ)
    logs.setup(level, spec.flow if spec else None, redact, environ)
