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

What lives where (issue 37: the driver keeps the loop, the lifecycle and the reload; each behaviour is a part of
its own, given its dependencies and testable without brokers; issue 49: each piece of state has one owner, the others
tell it what happened or ask it through its methods):

    driver.py         `ReplicationDriver`: the loop (`run`, `step`, `tick`), the lifecycle (`start`, `close`, the
                      fencing and checkpoint rounds), the spec reload (`reload_spec`); `Threads`, `Periodic`, the
                      executors. The parts read the spec through the driver (`FlowSpec`) and get the clients at start
    driver_parts.py   what it holds: `progress` (Progress), `parts` (Partitions: the one owner of where each partition
                      stands), `timers` (Timers), `conn` (Connections, opened at start), `StuckWatch`, `ReachWatch`
    idle_gate.py      `gate` (IdleGate): is there work (`work_waiting`), what the arrival watch listens to, the idle
                      wait; it owns its pacing state (what is caught up, the ends read) and the flow's stop event
    refresh.py        `refresher` (TopicRefresh): the partitions copied, their positions loaded, the record limits
    source_faults.py  `faults` (SourceFaults): data lost at the source and refused records, `offset_reset`
                      (the pure rules are source_loss.py's)
    leaders.py        `leaders` (LeaderProbe): lets go of the partitions held out because their leader does not
                      answer (unanswered.py: the gate and the loss handler hold them; a fault of their own meanwhile)
    batches.py        `shaper` (BatchShaper): the tasks of a batch; `absorber` (Absorber): its results taken in
                      and committed, a failed batch, the delayed offset syncs
    reporting.py      `reporter` (Reporter): lag and the side channel reading the source's ends, state, faults, the
                      status record; it hands the metrics (metrics.py) a frozen snapshot after each batch
"""

from __future__ import annotations

import dataclasses
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
from reconciler.engine.driver_parts import Connections, Partitions, Progress, Timers
from reconciler.engine.emitters import CheckpointEmitter
from reconciler.engine.fair_share import FairShare
from reconciler.engine.fencing import InstanceFence
from reconciler.engine.idle_gate import IdleGate, Work
from reconciler.engine.leaders import LeaderProbe
from reconciler.engine.metrics import JobMetrics
from reconciler.engine.refresh import FULL_REFRESH_S, TopicRefresh
from reconciler.engine.reporting import Reporter
from reconciler.engine.source_faults import SourceFaults
from reconciler.engine.tasks import CopyTask, TaskResult, merged
from reconciler.engine.worker import run_tasks
from reconciler.settings import INSTANCE_ENV
from reconciler.topology import secrets
from reconciler.topology.choices import OnRefusedRecord

log = logging.getLogger(__name__)

TICK_S = 0.5  # how often the side channels are looked at while a batch runs


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

    def start(self, driver: ReplicationDriver) -> None:
        """The side channels of a started driver, each interval read at each round (a reloaded spec applies): its
        checkpoint rounds, its fencing rounds (when it has a `fence`), the lag's source end reads (each status sees
        a read this fresh) and its status (published once first, from the loop's thread)."""
        reporter = driver.reporter

        def every(
            name: str, action: Callable[[], object], interval: Callable[[], float], on_error: Callable[[str], None]
        ) -> Periodic:
            side = Periodic(name, action, interval, on_error)
            side.start()
            return side

        self.checkpointing = every(
            "checkpoints",
            driver.checkpoint_round,
            lambda: driver.spec.settings.checkpoints.interval_seconds,
            driver.error,
        )
        if self.fence is not None:
            self.fencing = every(
                "fencing",
                driver.fence_round,
                lambda: max(1.0, driver.spec.engine.status_interval_seconds),
                driver.error,
            )
        self.lag_reading = every("source end offsets", reporter.read_source_ends, reporter.lag_interval, driver.error)
        reporter.publish_status()
        self.status = every(
            "status", reporter.publish_status, lambda: driver.spec.engine.status_interval_seconds, driver.log.warning
        )

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
    #: Does it run a batch's tasks at once? Their shares of the flow's rate limit add up to it (throttle.py); False:
    #: one after another, each may take the whole rate.
    parallel: bool

    def run(self, spec: JobSpec, tasks: list[CopyTask], mode: DeliveryMode) -> list[TaskResult]: ...


class LocalExecutor:
    """Runs the tasks in this process, one after another (unit tests, debugging)."""

    parallel = False

    def run(self, spec: JobSpec, tasks: list[CopyTask], mode: DeliveryMode) -> list[TaskResult]:
        return list(run_tasks(spec, tasks, mode))


IN_DRIVER = LocalExecutor()  # a batch of heartbeats alone runs here, not as a Spark job


def _slots(spark_context: Any) -> int | None:
    """How many tasks the application runs at once (its default parallelism: `local[N]`'s N, a cluster's cores)."""
    try:
        return int(spark_context.defaultParallelism)
    except Exception:  # noqa: BLE001 - not known: any neighbour's batch counts as taking every slot
        return None


class PendingSpark(Protocol):
    """A SparkContext being made while the flows start (session.py `PendingContext`)."""

    def get(self, timeout: float | None = None) -> Any: ...


class SparkExecutor:
    """One Spark partition per task; records move inside the Python workers. Given the SparkContext, or the context
    being made (`PendingSpark`: an engine's flows start while the JVM makes it), which the first batch waits for. An
    engine's flows share one (and its `share`): while its busy flows want more task slots than it has, a batch takes
    fewer tasks where its delivery allows, else its tasks end sooner (engine/fair_share.py)."""

    parallel = True

    def __init__(
        self, spark_context: Any = None, *, pending: PendingSpark | None = None, share: FairShare | None = None
    ):
        if (spark_context is None) == (pending is None):
            raise ValueError("a SparkExecutor is given either a SparkContext or a pending one")
        self._sc, self._pending, self._share = spark_context, pending, share
        self._share_lock = threading.Lock()

    @property
    def sc(self) -> Any:
        if self._sc is None:
            assert self._pending is not None
            self._sc = self._pending.get()  # the first batch waits for the context; raises if it failed
        return self._sc

    @property
    def share(self) -> FairShare:
        """The engine's fair share of its task slots, made at the first batch (the slots are the context's)."""
        with self._share_lock:  # the flows' batch threads ask at once: one share for all of them
            if self._share is None:
                self._share = FairShare(_slots(self.sc))
            return self._share

    def run(self, spec: JobSpec, tasks: list[CopyTask], mode: DeliveryMode) -> list[TaskResult]:
        if not tasks:
            return []
        sc = self.sc
        with self.share.batch(spec.flow, len(tasks), not mode.slot_is_identity) as share:
            tasks = merged(tasks, share.tasks)  # the slots the engine's other busy flows leave free
            if share.max_ms is not None:  # still more tasks than slots: one frees every slice
                tasks = [dataclasses.replace(t, max_ms=min(share.max_ms, t.max_ms or share.max_ms)) for t in tasks]
            # In an engine the flows' batches run side by side: each flow is a pool of its own (FAIR between pools).
            sc.setLocalProperty("spark.scheduler.pool", spec.flow)
            rdd = sc.parallelize(tasks, len(tasks))
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
    `close`, the fencing and checkpoint rounds) and the spec reload (`reload_spec`). Besides its spec, executor,
    lifecycle (`state`, `stop_event`, `exit_code`) and metrics, it holds typed parts (driver_parts.py): `progress`
    (Progress), `parts` (Partitions), `timers` (Timers), `conn` (Connections, from start) and `threads` (Threads);
    and the parts that act on them, each given the driver to read the spec through and the clients at start: `gate`
    (IdleGate), `refresher` (TopicRefresh), `faults` (SourceFaults), `shaper` (BatchShaper), `absorber` (Absorber)
    and `reporter` (Reporter)."""

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
        self.exit_code = 0
        self.state: StatusState = StatusState.STARTING
        self.instance_id = (environ if environ is not None else os.environ).get(INSTANCE_ENV)
        self.progress = Progress()  # counts, errors, findings: what the status record and the metrics report
        for c in (self.spec.source, self.spec.target):
            self.progress.redact.add_from(dict(c.config), environ)
        self.parts = Partitions()  # the partitions copied and where each stands: their one owner
        self.timers = Timers()  # when the loop's periodic actions are next due
        self.conn: Connections | None = None  # the clients, opened at start (_connect)
        self.threads = Threads()  # the side channels' threads and the batch runner, from start to close
        self.metrics = metrics if metrics is not None else JobMetrics(self.spec.flow)  # served by jobs/mirror_job.py
        # The flow on each line (an engine's log holds the lines of all its flows): a field in JSON, `[flow]` in text.
        self.log = logging.LoggerAdapter(log, {"flow": self.spec.flow})
        self.gate = IdleGate(self, self.parts, log=self.log)
        self.stop_event = self.gate.stop  # the gate's: a stop ends an idle wait at once
        self.faults = SourceFaults(self, self.parts, self.gate, self.progress, self.error, self._fail, self.log)
        self.leaders = LeaderProbe(self.parts, self.log)  # lets go of the partitions whose leader answers again
        self.refresher = TopicRefresh(
            self, self.parts, self.progress, self.faults, self.gate.reach, self.error, self.log
        )
        self.shaper = BatchShaper(self, self.parts, self.gate, self.progress)
        self.absorber = Absorber(self, self.parts, self.gate, self.progress, self.faults, self.error)
        self.reporter = Reporter(self, self.parts, self.progress, self.gate, self.metrics, self.instance_id)
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
        """Open the clients and hand them to the parts that use them."""
        self.conn = conn = Connections.open(self.spec, self.mode, self.environ, self.gate.wake, self.shared)
        self.gate.connect(conn)
        self.refresher.connect(conn)
        self.faults.connect(conn)
        self.leaders.connect(conn)
        self.absorber.connect(conn)
        self.reporter.connect(conn)

    def start(self) -> None:
        self._connect()
        conn = self.connections
        for e in conn.topics.ensure_internal():
            self.error(e)
        self.mode.prepare(self.spec, self.environ)
        self.refresher.refresh()
        # Replay the offset syncs written before this start (MM2's OffsetSyncStore.start()), so the
        # syncs this run writes are added with their full history.
        conn.checkpoints.read_syncs(timeout=15)
        now = time.monotonic()
        settings = self.spec.settings
        self.timers = Timers(
            refresh=now + settings.refresh_interval_seconds,
            full_refresh=now + FULL_REFRESH_S,
            heartbeat=now,
            delayed_syncs=now + settings.checkpoints.interval_seconds,
        )
        self.state = StatusState.RUNNING
        if self.instance_id:
            self.threads.fence = InstanceFence(
                self.spec, self.instance_id, self.progress.started_at, self.environ, self.shared
            )
        self.threads.start(self)

    def fence_round(self) -> None:
        """Stop this instance if a newer instance of the flow runs (engine/fencing.py)."""
        why = self.threads.fence.superseded() if self.threads.fence is not None else None
        if why is None or self.stop_event.is_set():
            return
        self.error(why)
        self.exit_code = EXIT_SUPERSEDED
        self.stop_event.set()

    def checkpoint_round(self) -> None:
        if self.conn is not None and self.spec.settings.checkpoints.enabled:
            self.conn.checkpoints.emit()

    def close(self) -> None:
        lag_idle, checkpoints_idle = self.threads.stop()
        if not checkpoints_idle:  # its clients are still in use: left to the process's exit
            self.log.warning("a checkpoint round did not end within 30 s of the job stopping")
        if self.conn is not None:
            self.conn.close(end_reader_idle=lag_idle, checkpoints_idle=checkpoints_idle)

    def error(self, text: str) -> None:
        """Count an error (redacted) and log it; called from the side channels' threads and the parts too."""
        self.log.warning("%s", self.progress.error(text))

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
                if not moved:  # an idle flow waits on to its next round due (QUIET_WAIT_MAX_S), a record ends the wait
                    next_round = self.timers.next_due(time.monotonic(), self.spec.emits_heartbeats)
                    self.gate.idle(self.gate.idle_wait(next_round))
            if self.state not in (StatusState.RESTART_REQUIRED, StatusState.FAILED):
                self.state = StatusState.STOPPED
        except Exception as exc:
            self.state = StatusState.FAILED
            self.error(f"{type(exc).__name__}: {exc}")
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
            full = now >= self.timers.full_refresh
            if full:
                self.timers.full_refresh = now + FULL_REFRESH_S
            if self.reload_spec():
                try:
                    self.refresher.refresh(full)
                except KafkaException as exc:  # a cluster not answering (issue 34): the last plan stands till the next
                    self.error(f"topic refresh: {exc}")
        gate, shaper, faults = self.gate, self.shaper, self.faults
        self.leaders.step()  # the partitions held out whose leader answers again are copied again
        self.absorber.reload_unread()  # positions a failed batch left unknown (exactly-once), read before copying
        tasks = shaper.plan_tasks()
        work = gate.work_waiting() if tasks else Work.RECORDS
        if gate.take_held_out():  # their leader did not answer the gate: not in this batch (engine/unanswered.py)
            tasks = shaper.plan_tasks()
        moved_back = gate.take_moved_back()
        if bool(moved_back and faults.ends_moved_back(moved_back)) | faults.check_tails():
            tasks, work = shaper.plan_tasks(), Work.RECORDS  # positions moved, partitions halted or let through
        gate.stepping(work)
        # Heartbeats alone: copied by this driver (the tasks' own code, in this process), not a Spark job.
        executor = IN_DRIVER if work is Work.HEARTBEATS else self.executor
        tasks = shaper.shape(work, tasks, executor.parallel)
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
                self.error(f"batch failed: {type(exc).__name__}: {str(exc)[:500]}")
                self.absorber.batch_failed()
                self.stop_event.wait(min(5.0, 0.5 * (1 + self.progress.batch_failures)))
                self.progress.batch_failures += 1
            else:
                self.progress.batch_failures = 0
            moved = self.absorber.absorb(results)
            shaper.batch_ended(results)
        self.progress.batches += 1
        # The metrics: the same task results and figures as the status record (an idle step's: once a status interval).
        self.reporter.step_ended(results, ran=bool(tasks))
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
            self.error(f"{type(exc).__name__}: {exc}")

    # --- spec reload ------------------------------------------------------------------------
    def reload_spec(self) -> bool:
        """Re-read a changed spec file (SpecFile), apply hot-reloadable changes; False if the job must stop."""
        if self.spec_file is None:
            return True
        try:
            new = self.spec_file.changed()
        except Exception as exc:  # noqa: BLE001 - a half-written or broken file: keep the current spec
            self.error(f"cannot re-read spec {self.spec_file.path}: {exc}")
            return True
        if new is None or new.spec_hash() == self.spec.spec_hash():
            return True
        restart = self.spec.restart_fields(new)
        if restart or self.connections.credentials.rotated_in(self, new):  # rotated: reconnect by a restart in place
            if restart:
                self.state = StatusState.RESTART_REQUIRED
                self.error(f"spec changed in fields that need a restart: {', '.join(sorted(restart))}")
            self.exit_code = EXIT_RESTART_REQUIRED
            self.stop_event.set()
            return False
        self.log.info("applying new spec %s (changed: %s)", new.spec_hash()[:12], sorted(self.spec.changed_fields(new)))
        self.spec = new
        self.connections.update_spec(new)
        if new.settings.on_refused_record == OnRefusedRecord.SKIP:  # its dead-letter topic
            for e in self.connections.topics.ensure_internal():
                self.error(e)
        self.faults.release_halted()  # the partitions halted under a policy the new spec changed resume
        return True


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
