"""Fair scheduling between the flows of one engine (issue 47): a flow that falls behind does not starve the others.

An engine's flows share its Spark application: each flow's batch is a Spark job in a FAIR pool of its own, whose
tasks copy for up to the flow's `max_batch_ms` (10 s by default: alone, long tasks copy fastest). Spark preempts no
running task, so a flow catching up on a backlog, its tasks on every core for 10 s, held every other flow's batch
until one of them ended: through the deployed engine (bench/blast.py, fairness), a flow streaming 5,000 records/s
beside one copying a backlog of 3.2 million records saw its p99 at 9.7 s, against 0.8 s alone. So while the flows
that run batches want more task slots than the engine has (`FairShare.batch`: each busy flow's last batch's tasks
against the application's slots, `defaultParallelism`), a batch's tasks end after `FAIR_SLICE_MS`: a slot frees at
least that often, and the FAIR scheduler hands it to the pool whose job waits. A flow alone in its engine, or whose
neighbours are caught up (an idle flow runs no Spark job) or fit beside it, keeps its long tasks. (An engine started
with its flows has a slot for each of their tasks, `local[N]` raised to their `parallelism` summed: the slots run
short when a flow is added to a running engine, or on a Spark cluster of fixed size.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

#: The time budget of a batch's tasks while another flow of the engine runs batches too (ms).
FAIR_SLICE_MS = 2_000
#: A flow counts as running batches while one runs and this long after it ended (the gap between two of its batches:
#: its results absorbed and committed, the source's ends read, the next batch planned).
BUSY_AFTER_S = 3.0


@dataclass(frozen=True)
class Share:
    """What a batch may take of its engine (`FairShare.batch`): at most `tasks` tasks at once, each copying at most
    `max_ms` (None: the flow's own `max_batch_ms`)."""

    tasks: int
    max_ms: int | None = None


class FairShare:
    """The flows of one engine that run batches (Spark jobs): how many tasks each one's last batch had and when it
    ended; `slots` is how many tasks the application runs at once (None: unknown, any other busy flow counts as
    wanting them all) and `clock` monotonic seconds. Shared by the flows' drivers through the engine's executor
    (driver.py `SparkExecutor`); safe from their batch threads."""

    def __init__(self, slots: int | None = None, clock: Callable[[], float] = time.monotonic):
        self.slots, self._clock = slots, clock
        self._running: dict[str, int] = {}
        self._tasks: dict[str, int] = {}  # each flow's last batch's task count
        self._ended: dict[str, float] = {}
        self._lock = threading.Lock()

    def _others(self, flow: str) -> list[int] | None:
        """The task counts of the last batches of the flows other than `flow` that run one, or ended one within
        BUSY_AFTER_S (None: none does)."""
        now = self._clock()
        busy = [
            f
            for f in set(self._running) | set(self._ended)
            if f != flow and (self._running.get(f, 0) > 0 or now - self._ended.get(f, -BUSY_AFTER_S) < BUSY_AFTER_S)
        ]
        return [self._tasks.get(f, 1) for f in busy] or None

    def share(self, flow: str, tasks: int, mergeable: bool = False) -> Share:
        """What a batch of `tasks` tasks of `flow` may take: all of it while the busy flows' tasks fit the slots; else
        what the others leave free, at least one task (`mergeable`: its partitions can be copied by fewer tasks), and
        where even that is more than the slots, tasks cut to FAIR_SLICE_MS."""
        with self._lock:
            others = self._others(flow)
        if others is None:
            return Share(tasks)
        if self.slots is None:
            return Share(tasks, FAIR_SLICE_MS)
        wanted = min(tasks, max(1, self.slots - sum(others))) if mergeable else tasks
        return Share(wanted, FAIR_SLICE_MS if wanted + sum(others) > self.slots else None)

    def contended(self, flow: str, tasks: int) -> bool:
        """Whether a batch of `tasks` tasks of `flow` beside the busy flows' wants more slots than the engine has."""
        return self.share(flow, tasks).max_ms is not None

    @contextmanager
    def batch(self, flow: str, tasks: int, mergeable: bool = False) -> Iterator[Share]:
        """A batch of `flow` with `tasks` tasks runs within the block: what it may take (`share`)."""
        share = self.share(flow, tasks, mergeable)
        with self._lock:
            self._running[flow] = self._running.get(flow, 0) + 1
            self._tasks[flow] = share.tasks
        try:
            yield share
        finally:
            with self._lock:
                self._running[flow] -= 1
                self._ended[flow] = self._clock()
