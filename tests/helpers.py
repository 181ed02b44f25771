"""Small test helpers shared by unit and integration tests."""

from __future__ import annotations

import sys
import textwrap
import threading
import traceback
from pathlib import Path
from typing import Any

from reconciler.topology.build import load_topology
from reconciler.topology.diagnostics import Diagnostics

MINIMAL = """\
apiVersion: reconciler/v1
kind: Topology
clusters:
  west:
    bootstrap_servers: 127.0.0.1:19092
  east:
    bootstrap_servers: 127.0.0.1:19093
flows:
  - source: west
    target: east
    topics:
      include: ["orders.*", "payments"]
      exclude: [".*\\\\.tmp"]
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def diagnose(*paths: Path) -> Diagnostics:
    """Load + validate + analyse; returns every diagnostic."""
    from reconciler.analysis.hazards import analyse

    topology, diags = load_topology(paths)
    if topology is not None:
        analyse(topology, diags)
    return diags


def rendered_errors(diags: Diagnostics) -> list[str]:
    return [d.render().splitlines()[0] for d in diags.sorted() if d.severity.value == "error"]


# --- replication drivers run in a thread of the test's process -------------------------------------------------------
#: How long a driver is given to stop at a test's end (its loop ends at the batch in progress: `max_batch_ms`, 10 s by
#: default, plus its close, which waits at most 60 s on a side channel's round).
DRIVER_STOP_S = 90.0


class DriverRun:
    """A `ReplicationDriver` (reconciler/engine/driver.py) whose `run(**run_kwargs)` runs in a daemon thread, from
    `start()`. `stop()` sets its stop event and waits a bounded time for `run` to return; `exit_code` is what it
    returned. Use it through the `driver_runs` fixture (tests/conftest.py), which stops every run at the test's end
    and makes one that did not stop a test error, or as a context manager (the same, at the block's end)."""

    def __init__(self, driver: Any, **run_kwargs: Any):
        self.driver = driver
        self.exit_code: int | None = None
        self._thread = threading.Thread(target=self._run, kwargs=run_kwargs, name=f"driver {driver.flow}", daemon=True)

    def _run(self, **run_kwargs: Any) -> None:
        self.exit_code = self.driver.run(**run_kwargs)

    def start(self) -> DriverRun:
        self._thread.start()
        return self

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float) -> bool:
        """Wait up to `timeout` s for the driver to end by itself (no stop asked); whether it has ended."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def stop(self, timeout: float = DRIVER_STOP_S) -> bool:
        """Ask the driver to stop and wait up to `timeout` s; whether it has stopped (never raises, never hangs)."""
        self.driver.stop_event.set()
        return self.join(timeout)

    def where(self) -> str:
        """Where the driver's thread is (its stack), for the report of one that did not stop."""
        frame = sys._current_frames().get(self._thread.ident or -1)
        return "".join(traceback.format_stack(frame)) if frame is not None else "(ended)"

    def __enter__(self) -> DriverRun:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if not self.stop():
            raise AssertionError(f"{self._thread.name} did not stop within {DRIVER_STOP_S:.0f} s:\n{self.where()}")


class DriverRuns:
    """The drivers a test runs in threads (`run`); `stop_all` at its end (the `driver_runs` fixture)."""

    def __init__(self) -> None:
        self.runs: list[DriverRun] = []

    def run(self, driver: Any, **run_kwargs: Any) -> DriverRun:
        """Start `driver.run(**run_kwargs)` in a daemon thread."""
        started = DriverRun(driver, **run_kwargs).start()
        self.runs.append(started)
        return started

    def stop_all(self, timeout: float = DRIVER_STOP_S) -> list[str]:
        """Stop every run (stop events first, so they stop together), each waited for at most `timeout` s; the
        report of each that did not stop (its thread's name and stack)."""
        for started in self.runs:
            started.driver.stop_event.set()
        return [f"{r._thread.name}:\n{r.where()}" for r in self.runs if not r.stop(timeout)]
