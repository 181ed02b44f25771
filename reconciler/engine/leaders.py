"""The probe of the partitions held out because their leader does not answer (engine/unanswered.py, issue 47).

A held partition is asked for its end again now and then (`PROBE_EVERY_S`), in a thread of its own so that the
driver's loop never waits for a leader that hangs (`PROBE_TIMEOUT_S` a read): once its leader answers, the partition
is copied again from its position, its tail read back first where the job copied some (engine/tails.py: a leader
that came back, or another replica that took over, may not hold what the job copied last).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Protocol

from reconciler.engine.driver_parts import Partitions, UsesClients
from reconciler.engine.ends import EndsRead
from reconciler.engine.tasks import TP

log = logging.getLogger(__name__)

#: How often the leaders of the held partitions are asked again (at most: a read that waits runs to its timeout first).
PROBE_EVERY_S = 5.0
#: How long one probe waits for them.
PROBE_TIMEOUT_S = 10.0


class LatestEnds(Protocol):
    """Reads the source's ends (engine/ends.py `PartitionEnds`, safe from any thread)."""

    def read_latest(self, partitions: list[TP], timeout: float = ...) -> EndsRead: ...


class ProbeClients(Protocol):
    """What the probe uses of the driver's clients (driver_parts.py `Connections`)."""

    @property
    def ends(self) -> LatestEnds: ...


Spawn = Callable[[Callable[[], EndsRead]], "Future[EndsRead]"]


def in_thread(read: Callable[[], EndsRead]) -> Future[EndsRead]:
    """Run `read` in a daemon thread of its own; its future."""
    future: Future[EndsRead] = Future()

    def run() -> None:
        try:
            future.set_result(read())
        except BaseException as exc:  # noqa: BLE001 - the probe's caller reads it
            future.set_exception(exc)

    threading.Thread(target=run, name="leader probe", daemon=True).start()
    return future


class LeaderProbe(UsesClients[ProbeClients]):
    """Lets go of the held partitions whose leader answers again. It is given the flow's partitions, and its clients
    when the driver opens them (`connect`); `spawn` runs a read without waiting for it (a thread; a test runs it at
    once) and `clock` is monotonic seconds."""

    def __init__(
        self,
        parts: Partitions,
        log: logging.Logger | logging.LoggerAdapter[logging.Logger] = log,
        *,
        clients: ProbeClients | None = None,
        spawn: Spawn = in_thread,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.parts, self.log, self._clients, self._spawn, self._clock = parts, log, clients, spawn, clock
        self._pending: Future[EndsRead] | None = None  # the probe in flight
        self._next = 0.0  # when the next probe may start

    def step(self) -> list[TP]:
        """Once per step of the driver, never waiting: takes the answer of the probe in flight, if it came (the
        partitions whose leader answered are let go, their tail to be read back), and starts the next one when due.
        The partitions let go."""
        back = self._answered()
        held = self.parts.unanswered.held
        now = self._clock()
        if held and self._pending is None and now >= self._next:
            self._next = now + PROBE_EVERY_S
            wanted, ends = sorted(held), self.clients.ends
            self._pending = self._spawn(lambda: ends.read_latest(wanted, PROBE_TIMEOUT_S))
        return back

    def _answered(self) -> list[TP]:
        pending = self._pending
        if pending is None or not pending.done():
            return []
        self._pending = None
        try:
            read = pending.result()
        except Exception as exc:  # noqa: BLE001 - none answered: asked again
            self.log.info("the leaders of the held partitions still do not answer: %s", exc)
            return []
        back = self.parts.unanswered.answered(read.ends)
        if back:
            self.parts.tails.suspect(back, "its leader answered again after not answering")
            self.log.warning("%s: the leader answers again: copied again", ", ".join(f"{t}[{p}]" for t, p in back))
        return back
