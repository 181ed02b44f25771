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

What lives where (issue 37: the driver keeps the loop, the lifecycle and the reload; each behaviour is a class of
its own, given its dependencies and testable without brokers):

    driver.py         `ReplicationDriver`: the loop (`run`, `step`, `tick`), the lifecycle (`start`, `close`, the
                      fencing, checkpoint and source-end rounds), the reload (`reload_spec`, `refresh`); `Threads`,
                      `Periodic`, the executors
    driver_parts.py   what it holds: `progress` (Progress), `parts` (Partitions), `timers` (Timers), `conn`
                      (Connections, opened at start), `Pacing` (the idle gate's state), `StuckWatch`
    idle_gate.py      `gate` (IdleGate): is there work (`work_waiting`), what the arrival watch listens to, the
                      idle wait
    source_faults.py  `faults` (SourceFaults): data lost at the source and refused records, `offset_reset`
                      (the pure rules are source_loss.py's)
    batches.py        `shaper` (BatchShaper): the tasks of a batch; `absorber` (Absorber): its results taken in
                      and committed, the delayed offset syncs
    reporting.py      `reporter` (Reporter): lag, state, faults, the status record and the lag metrics (the
                      metrics, metrics.py, read the flow through it)
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import KafkaException

from reconciler.contract.spec import EXIT_RESTART_REQUIRED, EXIT_SUPERSEDED, JobSpec, SpecFile
from reconciler.contract.status import StatusState
from reconciler.engine.batches import Absorber, BatchShaper
from reconciler.engine.clients import SharedClients
from reconciler.engine.delivery import DeliveryMode, mode_of
from reconciler.engine.driver_parts import (
    Cluster,
    Connections,
    Pacing,
    Partitions,
    Progress,
    ReachWatch,
    StuckWatch,
    Timers,
)
from reconciler.engine.emitters import CheckpointEmitter
from reconciler.engine.fencing import InstanceFence
from reconciler.engine.idle_gate import IdleGate, Work
from reconciler.engine.metrics import JobMetrics
from reconciler.engine.reporting import Reporter
from reconciler.engine.source_faults import SourceFaults
from reconciler.engine.source_loss import recreated_topics
from reconciler.engine.tasks import CopyTask, TaskResult
from reconciler.engine.topics import plan_partitions
from reconciler.engine.worker import run_tasks
from reconciler.settings import INSTANCE_ENV
from reconciler.topology import secrets
from reconciler.topology.choices import OnRefusedRecord

log = logging.getLogger(__name__)

TICK_S = 0.5  # how often the side channels are looked at while a batch runs


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


class BatchRunner:
    """The one thread the batches run in, one after another (`submit` -> a Future the loop waits on while it ticks).
    A daemon thread: a batch that never returns (a cluster that does not answer, a Spark job held up) does not keep
    the process from exiting; a `ThreadPoolExecutor`'s worker would (concurrent.futures joins its workers at the
    interpreter's exit, so a job, or a test, whose batch hung never ended)."""

    def __init__(self, name: str = "batch"):
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._queue.put((future, fn, args))
        return future

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as exc:  # noqa: BLE001 - the loop's `batch.result()` raises it
                future.set_exception(exc)
            else:
                future.set_result(result)
            del item, future, fn, args  # no reference to a batch's tasks or results kept while waiting for the next

    def shutdown(self, timeout: float) -> bool:
        """Stop once the batch in progress (if any) has ended; False if it did not end within `timeout`."""
        self._queue.put(None)
        self._thread.join(timeout)
        return not self._thread.is_alive()


@dataclass
class Threads:
    """The driver's threads beside its loop, from start to close: the side channels (`Periodic`) of the checkpoint
    rounds, of the fencing rounds (with their `fence`, when the job has an instance id), of the source end reads
    and of the status (a loop held up by a cluster that does not answer must not hold up the status that says so),
    and `runner`, the one thread a batch runs in (the loop ticks the side channels while it runs)."""

    status: Periodic | None = None
    checkpointing: Periodic | None = None
    fencing: Periodic | None = None
    fence: InstanceFence | None = None
    lag_reading: Periodic | None = None
    runner: BatchRunner | None = None

    def batch_runner(self) -> BatchRunner:
        if self.runner is None:
            self.runner = BatchRunner()
        return self.runner

    def stop(self) -> tuple[bool, bool]:
        """Stop them all, the fence closed once its thread has stopped; whether the source end reads and the
        checkpoint rounds stopped in time (if not, their clients are still in use)."""
        if self.status is not None:
            self.status.stop(timeout=15)
        if self.fencing is not None and self.fencing.stop(timeout=10) and self.fence is not None:
            self.fence.close()
        lag_idle = self.lag_reading is None or self.lag_reading.stop(timeout=15)
        checkpoints_idle = self.checkpointing is None or self.checkpointing.stop(timeout=30)
        if self.runner is not None:
            if not self.runner.shutdown(timeout=60):  # a batch in progress (close called while `step` waits on it)
                log.warning("a batch did not end within 60 s of the job stopping: left to the process's exit")
            self.runner = None
        return lag_idle, checkpoints_idle


class Executor(Protocol):
    def run(self, spec: JobSpec, tasks: list[CopyTask], mode: DeliveryMode) -> list[TaskResult]: ...


class LocalExecutor:
    """Runs the tasks in this process, one after another (unit tests, debugging)."""

    def run(self, spec: JobSpec, tasks: list[CopyTask], mode: DeliveryMode) -> list[TaskResult]:
        return list(run_tasks(spec, tasks, mode))


IN_DRIVER = LocalExecutor()  # a batch of heartbeats alone runs here, not as a Spark job


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


def _spec_of(spec: JobSpec | str | Path, spec_file: SpecFile | None) -> tuple[SpecFile | None, JobSpec]:
    """A driver's spec file, re-read at each refresh (None: a spec given as a value; `spec_file`: for tests), and
    its spec."""
    if isinstance(spec, JobSpec):
        return None, spec
    file = spec_file or SpecFile(Path(spec))
    return file, file.read()


class ReplicationDriver:
    """One flow's replication job (the module's docstring): the loop (`run`, `step`, `tick`), the lifecycle (`start`,
    `close`, the fencing, checkpoint and source-end rounds) and the spec reload (`reload_spec`, `refresh`). Besides
    its spec, executor, lifecycle (`state`, `stop_event`, `exit_code`) and metrics, it holds typed parts
    (driver_parts.py): `progress` (Progress), `parts` (Partitions), `timers` (Timers), `conn` (Connections, from
    start) and `threads` (Threads); and the parts that act on them: `gate` (IdleGate), `faults` (SourceFaults),
    `shaper` (BatchShaper), `absorber` (Absorber) and `reporter` (Reporter)."""

    def __init__(
        self,
        spec: JobSpec | str | Path,
        executor: Executor,
        *,
        environ: Mapping[str, str] | None = None,
        install_signal_handlers: bool = False,
        metrics: JobMetrics | None = None,
        shared: SharedClients | None = None,
        spec_file: SpecFile | None = None,
    ):
        self.spec_file, self.spec = _spec_of(spec, spec_file)
        self.executor = executor
        self.environ = environ
        self.shared = shared  # the engine's clients, shared by its flows (None: this flow's own)
        pacing = Pacing()  # the idle gate's state, shared with the batch parts
        self.stop_event = LinkedEvent(pacing.wake)  # a stop ends an idle wait at once
        self.exit_code = 0
        self.state: StatusState = StatusState.STARTING
        self.instance_id = (environ if environ is not None else os.environ).get(INSTANCE_ENV)
        self.progress = Progress()  # counts, errors, findings: what the status record and the metrics report
        for c in (self.spec.source, self.spec.target):
            self.progress.redact.add_from(dict(c.config), environ)
        self.parts = Partitions()  # the partitions copied: plan, positions, slots, sync state, lag, halted
        self.timers = Timers()  # when the loop's periodic actions are next due
        self.conn: Connections | None = None  # the clients, opened at start (_connect)
        self.threads = Threads()  # the side channels' threads and the batch runner, from start to close
        self.metrics = metrics if metrics is not None else JobMetrics(self.spec.flow)  # served by jobs/mirror_job.py
        # The flow on each line (an engine's log holds the lines of all its flows): a field in JSON, `[flow]` in text.
        self.log = logging.LoggerAdapter(log, {"flow": self.spec.flow})
        spec_now, mode_now = (lambda: self.spec), (lambda: self.mode)
        self.gate = IdleGate(spec_now, self.parts, lambda: self.conn, pacing, self.stop_event, self.log, ReachWatch())
        self.faults = SourceFaults(
            spec_now,
            self.parts,
            pacing,
            self.progress,
            lambda: self.connections,
            self._error,
            self._fail,
            self.log,
        )
        self.shaper = BatchShaper(self.parts, pacing, self.progress, mode_now)
        self.absorber = Absorber(
            spec_now, mode_now, self.parts, pacing, self.progress, self.faults, lambda: self.connections, self._error
        )
        self.reporter = Reporter(
            spec_now,
            self.parts,
            self.progress,
            StuckWatch(),
            self.gate.reach,  # the clusters that do not answer: told by the gate, the side channel, the status
            self.metrics,
            lambda: self.conn,
            lambda: self.state,
            self.instance_id,
        )
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

    @property
    def records(self) -> int:
        return self.progress.records

    @property
    def errors(self) -> int:
        return self.progress.errors

    @property
    def last_error(self) -> str | None:
        return self.progress.last_error

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
        self.conn = Connections.open(self.spec, self.mode, self.environ, self.gate.pacing.wake, self.shared)

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
        self.timers = Timers(
            refresh=now + self.spec.settings.refresh_interval_seconds,
            heartbeat=now,
            delayed_syncs=now + self.spec.settings.checkpoints.interval_seconds,
        )
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
        self.reporter.publish_status()
        self.threads.status = Periodic(
            "status", self.reporter.publish_status, lambda: self.spec.engine.status_interval_seconds, self.log.warning
        )
        self.threads.status.start()

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
        idle = self.gate.idle_source_ends(copy, positions, int(1000 * self._lag_interval()), self.reporter.heard())
        if idle is not None:
            self.parts.source_ends = idle
            return
        seen = {tp: lp.end for tp, lp in dict(self.parts.lag).items() if lp.end is not None}
        last, reader = self.parts.source_ends, self.conn.end_reader
        self.parts.source_ends = self.reporter.reach.call(
            Cluster.SOURCE, lambda: reader.read(copy, positions, seen, last.oldest if last is not None else None)
        )

    def close(self) -> None:
        lag_idle, checkpoints_idle = self.threads.stop()
        if not checkpoints_idle:  # its clients are still in use: left to the process's exit
            self.log.warning("a checkpoint round did not end within 30 s of the job stopping")
        if self.conn is not None:
            self.conn.close(end_reader_idle=lag_idle, checkpoints_idle=checkpoints_idle)

    def _error(self, text: str) -> None:
        self.log.warning("%s", self.progress.error(text))  # _error is called from the side channels' threads too

    def _fail(self) -> None:
        """The job fails and stops (`offset_reset: fail`)."""
        self.state = StatusState.FAILED
        self.exit_code = self.exit_code or 1
        self.stop_event.set()

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
                if self.exit_code or self.connections.credentials.stops(self):  # rotated: restart in place
                    break
                if not moved:
                    self.gate.idle(self.gate.idle_wait())
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
                    self.absorber.flush_delayed_syncs()
                except Exception as exc:  # noqa: BLE001
                    self.log.warning("cannot publish the last offset syncs: %s", exc)
            try:
                self.reporter.publish_status()
            except Exception:  # noqa: BLE001
                pass
            self.close()
        return self.exit_code

    # --- one iteration ----------------------------------------------------------------------
    def step(self) -> bool:
        now = time.monotonic()
        if now >= self.timers.refresh:
            self.timers.refresh = now + self.spec.settings.refresh_interval_seconds
            if self.reload_spec():
                try:
                    self.refresh()
                except KafkaException as exc:  # a cluster not answering (issue 34): the last plan stands till the next
                    self._error(f"topic refresh: {exc}")
        gate, shaper, pacing = self.gate, self.shaper, self.gate.pacing
        tasks = shaper.plan_tasks()
        work = gate.work_waiting() if tasks else Work.RECORDS
        if bool(pacing.moved_back and self.faults.ends_moved_back()) | self.faults.check_tails():
            tasks, work = shaper.plan_tasks(), Work.RECORDS  # positions moved, partitions halted or let through
        executor = self.executor
        if self.conn is not None:
            if work is Work.RECORDS:
                self.conn.arrivals.disarm()  # the tasks read what arrives
            else:
                self.conn.arrivals.arm(gate.watched_positions())
        if work is Work.NONE:
            tasks = []  # idle: no Spark job while there is nothing to fetch
        elif work is Work.HEARTBEATS:
            # Heartbeats alone: copied by this driver (the tasks' own code, in this process), not a Spark job.
            tasks, executor = gate.heartbeat_tasks(tasks), IN_DRIVER
        elif shaper.one_task():
            tasks = shaper.plan_tasks(one_task=True)
        else:
            tasks = shaper.split_tasks(tasks)
        pacing.idle_steps = 0 if work is Work.RECORDS else pacing.idle_steps + 1
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
                pacing.caught_up.clear()
                self.mode.recover(self.absorber.reload_positions, list(self.parts.plan.copy))
                self.stop_event.wait(min(5.0, 0.5 * (1 + self.progress.batch_failures)))
                self.progress.batch_failures += 1
                results = []
            else:
                self.progress.batch_failures = 0
            moved = self.absorber.absorb(results)
        self.progress.batches += 1
        self.metrics.observe(self.reporter, results)  # the same task results and counters as the status record
        # Heartbeats alone are not traffic (issue 39): the loop waits after them as after an idle step (a record
        # arriving at a watched partition ends the wait), not stepping at once to find nothing due.
        return moved > 0 and work is not Work.HEARTBEATS

    def tick(self) -> None:
        now = time.monotonic()
        spec, timers = self.spec, self.timers
        try:
            if spec.emits_heartbeats and now >= timers.heartbeat:
                timers.heartbeat = now + spec.settings.heartbeats.interval_seconds
                self.connections.heartbeats.emit()
            if now >= timers.delayed_syncs:
                timers.delayed_syncs = now + spec.settings.checkpoints.interval_seconds
                self.absorber.flush_delayed_syncs(max(1.0, spec.engine.status_interval_seconds))
        except Exception as exc:  # noqa: BLE001 - side channels are retried next time
            self._error(f"{type(exc).__name__}: {exc}")

    # --- spec reload and topic refresh ------------------------------------------------------
    def reload_spec(self) -> bool:
        """Re-read a changed spec file (SpecFile), apply hot-reloadable changes; False if the job must stop."""
        if self.spec_file is None:
            return True
        try:
            new = self.spec_file.changed()
        except Exception as exc:  # noqa: BLE001 - a half-written or broken file: keep the current spec
            self._error(f"cannot re-read spec {self.spec_file.path}: {exc}")
            return True
        if new is None or new.spec_hash() == self.spec.spec_hash():
            return True
        restart = self.spec.restart_fields(new)
        if restart or self.connections.credentials.rotated_in(self, new):  # rotated: reconnect by a restart in place
            if restart:
                self.state = StatusState.RESTART_REQUIRED
                self._error(f"spec changed in fields that need a restart: {', '.join(sorted(restart))}")
            self.exit_code = EXIT_RESTART_REQUIRED
            self.stop_event.set()
            return False
        self.log.info("applying new spec %s (changed: %s)", new.spec_hash()[:12], sorted(self.spec.changed_fields(new)))
        self.spec = new
        self.connections.update_spec(new)
        if new.settings.on_refused_record == OnRefusedRecord.SKIP:  # its dead-letter topic
            for e in self.connections.topics.ensure_internal():
                self._error(e)
        self.faults.release_halted()  # the partitions halted under a policy the new spec changed resume
        return True

    def refresh(self, first: bool = False) -> None:
        """Discover source topics/partitions, create missing remote topics, load new positions."""
        flow, conn = self.spec.mirror_flow, self.connections
        source = self.reporter.reach.call(Cluster.SOURCE, lambda: conn.topics.describe(conn.source_admin, 15, ids=True))
        target = self.reporter.reach.call(Cluster.TARGET, lambda: conn.topics.describe(conn.target_admin, 15))
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
                self.faults.recreated(tp, self.parts.topic_ids[topic], ids[topic] or "")
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
