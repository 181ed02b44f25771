"""An engine: one Spark application that runs several flows (by default every flow into one target cluster,
as Strimzi runs one KafkaMirrorMaker2 per target: "remote consume, local produce").

    spark-submit jobs/mirror_job.py --engine-dir DIR

    DIR/engine.json        what the deployer says of the engine (`EngineRecord`): its name and Spark settings
    DIR/flows/<flow>.json  one job spec per flow; the deployer adds, rewrites and removes them
    DIR/flows/<flow>.restart
                           a token: a new value restarts that flow in place (its neighbours keep running)
    DIR/runtime.json       written by the engine (`write_runtime`): instance, driver pid, metrics port, Spark
                           application id, and each flow's state (`FlowRuntime`)

Each flow is a `ReplicationDriver` (driver.py) in a thread of its own, with its own spec, filters, policy,
delivery mode, offsets, syncs, checkpoints, heartbeats, status record and metrics labels; the flows share the
SparkContext (their micro-batches are Spark jobs submitted side by side, FAIR scheduling) and the Python workers
(whose client caches are keyed by flow). `EngineHost.reconcile()` makes the running flows match the files, once
a second:

    a new spec file                 -> the flow starts
    a spec file rewritten           -> the flow's driver re-reads it (hot reload); a change it cannot take makes
                                       it stop with EXIT_RESTART_REQUIRED, and the engine starts it again at once
    a spec file removed             -> the flow stops gracefully (finishes its batch, commits, final status)
    a new restart token             -> the flow stops gracefully and starts again
    a flow failed (bad source, ...) -> it starts again after a back-off (2 s, doubling to 60 s); only it is down
    a flow superseded (EXIT_SUPERSEDED: a newer instance copies it elsewhere) -> it stays stopped until its spec
                                       or token changes

A flow's failure degrades that flow, not its neighbours; the engine ends only when asked (SIGTERM: every flow
stops gracefully) or when its JVM is gone (the entry point's lifeline).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from reconciler.contract.engine import RESTART_SUFFIX, FlowRuntime, FlowState, flow_files
from reconciler.contract.spec import EXIT_RESTART_REQUIRED, EXIT_SUPERSEDED

log = logging.getLogger(__name__)

SCAN_SECONDS = 1.0
BACKOFF_SECONDS = (2.0, 4.0, 8.0, 16.0, 32.0, 60.0)


class FlowDriver(Protocol):
    """What the engine needs of a flow's driver (ReplicationDriver; tests use small fakes)."""

    stop_event: threading.Event
    exit_code: int

    @property
    def flow(self) -> str: ...

    @property
    def spec_hash(self) -> str: ...

    def run(self) -> int: ...


@dataclass
class _Slot:
    """A flow file of the engine and the driver that runs it (if any)."""

    path: Path
    driver: FlowDriver | None = None
    thread: threading.Thread | None = None
    flow: str = ""
    state: FlowState = FlowState.RUNNING
    token: str | None = None
    file_stamp: tuple[int, int] | None = None  # (mtime_ns, size) of the spec file when the driver started
    since: float = 0.0
    starts: int = 0
    retry_at: float = 0.0
    failures: int = 0
    last_exit: int | None = None
    restart_asked: bool = False

    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _read_token(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


class EngineHost:
    """Runs the flows of an engine directory; `make_driver(spec_path)` builds a flow's driver."""

    def __init__(
        self,
        engine_dir: Path,
        make_driver: Callable[[Path], FlowDriver],
        *,
        on_change: Callable[[list[FlowRuntime]], None] | None = None,
        backoff: Iterable[float] = BACKOFF_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.dir = engine_dir
        self.make_driver = make_driver
        self.on_change = on_change
        self.backoff = tuple(backoff)
        self.clock = clock
        self.slots: dict[str, _Slot] = {}
        self.stop_event = threading.Event()
        self.reconciled = threading.Event()  # set once the first round has started the flows of the files
        self._last: list[FlowRuntime] | None = None

    # --- one round ----------------------------------------------------------------------------
    def reconcile(self) -> list[FlowRuntime]:
        """Make the running flows match the flow files (see the module's table); the flows as they are now."""
        files = flow_files(self.dir)
        now = self.clock()
        for stem, slot in list(self.slots.items()):
            if stem in files:
                continue
            if slot.running():
                if slot.state is not FlowState.STOPPING:
                    log.info("flow %s removed from the engine: stopping it", slot.flow)
                    self._stop(slot)
            else:
                self._reap(slot)
                del self.slots[stem]
        for stem, path in files.items():
            slot = self.slots.setdefault(stem, _Slot(path))
            token = _read_token(path.with_suffix(RESTART_SUFFIX))
            if slot.running():
                if token != slot.token and slot.state is not FlowState.STOPPING:
                    log.info("flow %s: restart asked", slot.flow)
                    slot.token, slot.restart_asked = token, True
                    self._stop(slot)
                continue
            if slot.thread is not None:
                self._reap(slot)
            if self._should_start(slot, token, now):
                slot.token = token
                self._start(slot, now)
        flows = self.flows()
        self.reconciled.set()
        if flows != self._last:
            self._last = flows
            if self.on_change is not None:
                self.on_change(flows)
        return flows

    def _should_start(self, slot: _Slot, token: str | None, now: float) -> bool:
        if slot.starts == 0 or slot.restart_asked:
            return True
        changed = token != slot.token or _stamp(slot.path) != slot.file_stamp
        if slot.state is FlowState.SUPERSEDED:
            return changed
        if slot.state is FlowState.BACKOFF:
            return changed or now >= slot.retry_at
        return True  # ended on its own (restart required, or stopped): run it again with its file

    def _reap(self, slot: _Slot) -> None:
        """The slot's driver thread has ended: what its exit code means."""
        code = slot.driver.exit_code if slot.driver is not None else 1
        slot.last_exit, slot.thread = code, None
        if slot.restart_asked:
            return
        if code == EXIT_SUPERSEDED:
            slot.state = FlowState.SUPERSEDED
            log.warning("flow %s stopped: a newer instance of it runs elsewhere; it stays stopped here", slot.flow)
        elif code in (0, EXIT_RESTART_REQUIRED):
            slot.state = FlowState.RUNNING  # started again with its file at once
            slot.failures = 0
        else:
            delay = self.backoff[min(slot.failures, len(self.backoff) - 1)]
            slot.failures += 1
            slot.state, slot.retry_at = FlowState.BACKOFF, self.clock() + delay
            log.warning("flow %s failed (exit code %s): starting it again in %.0f s", slot.flow, code, delay)

    def _start(self, slot: _Slot, now: float) -> None:
        slot.restart_asked = False
        slot.file_stamp = _stamp(slot.path)
        slot.starts += 1
        slot.since = time.time()
        try:
            driver = self.make_driver(slot.path)
        except Exception as exc:  # noqa: BLE001 - an unreadable spec file: that flow is down, not the engine
            log.error("flow file %s cannot be run: %s", slot.path, exc)
            slot.flow = slot.flow or slot.path.stem
            slot.driver, slot.thread = None, None
            delay = self.backoff[min(slot.failures, len(self.backoff) - 1)]
            slot.failures += 1
            slot.state, slot.retry_at, slot.last_exit = FlowState.BACKOFF, now + delay, 1
            return
        slot.driver, slot.flow, slot.state = driver, driver.flow, FlowState.RUNNING
        slot.thread = threading.Thread(target=driver.run, name=f"flow {driver.flow}", daemon=True)
        slot.thread.start()
        log.info("flow %s started (spec %s)", driver.flow, driver.spec_hash[:12])

    def _stop(self, slot: _Slot) -> None:
        slot.state = FlowState.STOPPING
        if slot.driver is not None:
            slot.driver.stop_event.set()

    def flows(self) -> list[FlowRuntime]:
        out = []
        for slot in self.slots.values():
            if not slot.flow:
                continue
            out.append(
                FlowRuntime(
                    slot.flow,
                    slot.state,
                    slot.driver.spec_hash if slot.driver is not None else None,
                    slot.since,
                    max(0, slot.starts - 1),
                    slot.last_exit,
                )
            )
        return sorted(out, key=lambda f: f.flow)

    @property
    def last_flows(self) -> list[FlowRuntime]:
        """The flows as the last round left them (read from another thread: the round's own list, never the slots)."""
        return list(self._last or [])

    def drivers(self) -> list[FlowDriver]:
        return [s.driver for s in self.slots.values() if s.driver is not None and s.running()]

    # --- the loop -----------------------------------------------------------------------------
    def run(self, max_seconds: float | None = None, scan_seconds: float = SCAN_SECONDS) -> int:
        deadline = None if max_seconds is None else self.clock() + max_seconds
        try:
            while not self.stop_event.is_set():
                self.reconcile()
                if deadline is not None and self.clock() >= deadline:
                    break
                self.stop_event.wait(scan_seconds)
        finally:
            self.shutdown()
        return 0

    def shutdown(self, timeout: float = 120.0) -> None:
        """Every flow stops gracefully (finishes its batch, commits, publishes its final status)."""
        for slot in self.slots.values():
            if slot.running():
                self._stop(slot)
        end = time.monotonic() + timeout
        for slot in self.slots.values():
            if slot.thread is not None:
                slot.thread.join(max(0.0, end - time.monotonic()))
        for slot in self.slots.values():
            if slot.thread is not None and not slot.thread.is_alive():
                self._reap(slot)
        if self.on_change is not None:
            self.on_change(self.flows())
