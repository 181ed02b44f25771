"""A flow's rate limit (`rate_limit`: records and bytes a second, the flow's total over its partitions and tasks),
enforced on the tasks that copy it: a token bucket per kind, of which each task holds a part while it runs.

The driver hands each task of a batch its `TaskBudget` (tasks.py; `budgets`, called by batches.py
`BatchShaper.shape`): its share of the flow's rate and of the tokens the flow holds. Each task paces itself with a
`Throttle`: a bucket per kind refilled at its share, which the copy loop (worker.py `Copier.run`) asks before each
read how many records it may take (`allowance`; none: it waits, serving its producer's delivery reports) and tells
what it copied (`spent`). Nothing is shared between tasks while they run, so it works the same in the driver's
process (LocalExecutor: the tasks one after another, each may take the whole rate) and in Spark's Python workers
(the tasks of a batch at once: shares that add up to the flow's rate). The tokens each task has left at its end
(`TaskResult.budget_left`) go back to the flow (`FlowAllowance`), which refills them at the flow's rate until its
next batch: the time between batches (the results' way back, absorbing them, the next Spark job's start: each task's
buckets refill from when the flow's tokens were counted, `TaskBudget.since`) counts, up to BURST_S of the rate.
A paced task's consumer queues about PREFETCH_S of the cap ahead of its reads (`consumer_prefetch`; librdkafka
fetches while its queue has room), so the source's link carries what the flow copies, not more.

How a batch's rate is shared:

* an at-least-once flow whose cap one task copies (`one_task_copies`: ONE_TASK_RECORDS_PER_SECOND,
  ONE_TASK_BYTES_PER_SECOND) runs one task a batch (`BatchShaper.one_task`): the whole rate in one bucket, however
  Spark schedules the tasks of the engine's flows on its cores; that task leaves out the partitions at rest
  (`BatchShaper.busy_only`), whose cost would lengthen the gap between batches past BURST_S;
* otherwise by the backlog of each task's partitions (the source's ends read before the batch less their positions),
  each task at least MIN_SHARE of an even share (a task whose partitions are caught up still copies what arrives);
  even shares where a backlog is not known. Tasks that cannot all run at once (fewer cores than tasks) copy less than
  the cap, never more.

Over any window a flow copies at most its cap times the window's length plus BURST_S of it (the flow's first batch
starts with no tokens at all). A record larger than what a bucket holds is copied, and its task then waits until the
bucket has paid for it (a debt the flow's next batch inherits).

Pure: the clock is given (`time.monotonic` by default), so it is tested without brokers (tests/unit/test_throttle.py).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from reconciler.engine.tasks import TP, CopyTask, TaskBudget
from reconciler.topology.model import RateLimit

#: The least a task waits for: a read takes at least this much of its rate (fewer, larger reads: at 20,000 records/s
#: about 400 records a read, 50 reads a second).
TICK_S = 0.02
#: What a bucket holds at most, in seconds of its rate: what a flow may copy at once after a pause (the time between
#: two batches, a source that had nothing).
BURST_S = 1.0
#: An at-least-once flow capped at or below these copies with one task a batch (one bucket: exact whatever Spark's
#: scheduling), for one task copies a backlog at 200,000+ records/s (docs/replication-job.md, "One task for a stream";
#: bench/engines.py: 480k 100-byte records/s, 48 MB/s, on one partition): half of that, with room for a busy machine.
ONE_TASK_RECORDS_PER_SECOND = 100_000
ONE_TASK_BYTES_PER_SECOND = 20_000_000
#: The least share of a batch's rate a task gets, as a fraction of an even share.
MIN_SHARE = 0.1
#: How far a paced task's consumer fetches ahead of its reads, in seconds of the flow's cap (`consumer_prefetch`).
PREFETCH_S = 0.5


def burst(rate: float) -> float:
    """The most tokens a bucket of `rate` holds (BURST_S of it, at least one)."""
    return max(rate * BURST_S, 1.0)


class TokenBucket:
    """`rate` tokens a second, held up to `burst`; `take` may leave it below zero (a debt the next `wait` counts)."""

    def __init__(self, rate: float, burst: float, now: float, tokens: float = 0.0):
        self.rate, self.burst = rate, burst
        self._tokens, self._at = min(tokens, burst), now

    def level(self, now: float) -> float:
        """The tokens held at `now`."""
        if now > self._at:
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
        return self._tokens

    def take(self, amount: float, now: float) -> None:
        self._tokens = self.level(now) - amount

    def wait(self, need: float, now: float) -> float:
        """Seconds until the bucket holds `need` tokens (0: it does, or within a microsecond: a clock's rounding)."""
        seconds = (need - self.level(now)) / self.rate
        return seconds if seconds > 1e-6 else 0.0


def _bucket(rate: float | None, tokens: float, now: float) -> tuple[TokenBucket, float] | None:
    """A bucket for `rate` (None: no cap of that kind) starting with `tokens`, and the tokens a read waits for."""
    if rate is None:
        return None
    most = burst(rate)
    return TokenBucket(rate, most, now, tokens), min(max(rate * TICK_S, 1.0), most)


class Throttle:
    """One task's pacing to its `TaskBudget`: a records bucket and a bytes bucket (either absent when the flow sets no
    cap of that kind). Before a read, `allowance` says how many records it may take (records: the whole records the
    bucket holds; bytes: what the bucket holds over the mean size of the records copied so far, one record before
    any), or how long to wait; after it, `spent` takes what was copied; `left` is what the buckets hold at the end."""

    def __init__(
        self, budget: TaskBudget, clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time
    ):
        self._clock = clock
        now = clock()
        # Since the flow's tokens were counted (`TaskBudget.since`): its Spark job's start, which copied nothing.
        waited = 0.0 if budget.since is None else max(0.0, wall() - budget.since)
        records, nbytes = budget.rate.records_per_second, budget.rate.bytes_per_second
        self._records = _bucket(records, budget.records + waited * (records or 0.0), now)
        self._bytes = _bucket(nbytes, budget.bytes + waited * (nbytes or 0.0), now)
        self.records = self.bytes = 0  # copied so far

    @classmethod
    def of(cls, budget: TaskBudget | None, clock: Callable[[], float] = time.monotonic) -> Throttle | None:
        return None if budget is None or not budget.rate.limited else cls(budget, clock)

    def allowance(self, most: int) -> tuple[int, float]:
        """(how many records a read may take now, at most `most`; 0: none), and when none, the seconds to wait."""
        now = self._clock()
        wait = 0.0
        if self._records is not None:
            bucket, need = self._records
            wait = bucket.wait(need, now)
            most = min(most, int(bucket.level(now)))
        if self._bytes is not None:
            bucket, need = self._bytes
            wait = max(wait, bucket.wait(need, now))
            if not self.records:
                most = 1  # the records' size is not known yet
            elif self.bytes:
                most = min(most, max(1, int(bucket.level(now) * self.records / self.bytes)))
        if wait > 0:
            return 0, wait
        return max(most, 1), 0.0

    def spent(self, records: int, nbytes: int) -> None:
        """`records` records of `nbytes` bytes (keys and values) copied."""
        if not records:
            return
        now = self._clock()
        self.records += records
        self.bytes += nbytes
        if self._records is not None:
            self._records[0].take(records, now)
        if self._bytes is not None:
            self._bytes[0].take(nbytes, now)

    def left(self) -> tuple[float, float]:
        """The tokens the buckets hold now (records, bytes; 0 for a kind without a cap; below zero: owed)."""
        now = self._clock()
        records, nbytes = self._records, self._bytes
        return (
            records[0].level(now) if records is not None else 0.0,
            nbytes[0].level(now) if nbytes is not None else 0.0,
        )


class FlowAllowance:
    """The flow's tokens between its batches, in the driver: a batch's tasks take them all when it starts (`take`:
    what the batch before left, refilled at the flow's rate since it ended, up to `burst`; nothing before the first
    batch; `taken_at`, when) and give back what they have left at their end (`give_back`), debts included.

    The clock is the wall clock (epoch seconds), the tasks' own: the gap between two batches counts whole, from the
    last task's end (`TaskResult.budget_left_at`: the results' way back to the driver) to the next tasks' start
    (`TaskBudget.since`: their Spark job's start). Counted from the results' absorption to the next batch's shaping
    alone, it counted 0.02-0.06 s of gaps of 0.22-0.37 s, and 0.48-0.87 s of 1.65-2.27 s (issue 47,
    bench/ratelimit.py traced). Each stretch of the gap counts once, so over any window the flow copies at most its
    cap times the window plus `burst` of it (a skew between the driver's clock and a worker's moves time from one
    stretch to the other)."""

    def __init__(self, clock: Callable[[], float] = time.time):
        self._clock = clock
        self._tokens = (0.0, 0.0)
        # when the tasks counted what they gave back (None: never yet, or a batch holds them)
        self._at: float | None = None
        self.taken_at: float | None = None  # when the last `take` counted the tokens (None: the first batch's)

    def take(self, limit: RateLimit) -> tuple[float, float]:
        records, nbytes = self._tokens
        now = self._clock()
        if self._at is not None:
            elapsed = max(0.0, now - self._at)
            records = _refilled(records, limit.records_per_second, elapsed)
            nbytes = _refilled(nbytes, limit.bytes_per_second, elapsed)
        # the flow's first batch starts with none: no refill for its Spark job's start either
        self._tokens, self._at, self.taken_at = (0.0, 0.0), None, None if self._at is None else now
        return records, nbytes

    def give_back(self, left: Iterable[tuple[float, float]], counted_at: float | None = None) -> None:
        """What the tasks left, counted at `counted_at` (the last task's end; None: now): the flow refills it from
        then."""
        left = list(left)
        now = self._clock()
        self._tokens = (sum(r for r, _ in left), sum(b for _, b in left))
        self._at = now if counted_at is None else min(now, counted_at)


def _refilled(tokens: float, rate: float | None, seconds: float) -> float:
    return 0.0 if rate is None else min(burst(rate), tokens + rate * seconds)


def consumer_prefetch(limit: RateLimit) -> dict[str, int]:
    """The librdkafka settings of a capped flow's task consumer ({} without a cap): it keeps about PREFETCH_S of the
    cap queued ahead of the task's reads (`queued.min.messages` per partition, `queued.max.messages.kbytes` in all;
    not less than 1,000 records or 1 MB, never more than the job's own: 100,000 records a partition and 64 MB, so a
    huge cap stays within librdkafka's ranges), not the job's 64 MB. With the job's prefetch a capped flow's consumer
    fetched ahead at full speed and what a task had fetched but not copied was dropped at its end and fetched again:
    300,000 records cost 92 MB of source traffic through a counting relay, 67 MB with this. (Its effect on an
    unlimited flow beside it was not shown: 0.87x against 0.91x of its solo rate, records read back.)"""
    out: dict[str, int] = {}
    if limit.records_per_second is not None:
        out["queued.min.messages"] = int(min(max(1_000, limit.records_per_second * PREFETCH_S), 100_000))
    if limit.bytes_per_second is not None:
        out["queued.max.messages.kbytes"] = int(min(max(1_024, limit.bytes_per_second * PREFETCH_S / 1024), 65_536))
    return out


def one_task_copies(limit: RateLimit) -> bool:
    """Does one task copy the flow at its cap (ONE_TASK_RECORDS_PER_SECOND, ONE_TASK_BYTES_PER_SECOND)?"""
    records, nbytes = limit.records_per_second, limit.bytes_per_second
    return (records is not None and records <= ONE_TASK_RECORDS_PER_SECOND) or (
        nbytes is not None and nbytes <= ONE_TASK_BYTES_PER_SECOND
    )


def shares(backlogs: Sequence[int | None]) -> list[float]:
    """Each task's share of a batch's rate (they add up to 1), by its backlog (None: not known) with a floor of
    MIN_SHARE of an even share; even shares when a backlog is not known or there is none."""
    n = len(backlogs)
    known = [b for b in backlogs if b is not None]
    total = sum(known)
    if len(known) < n or total <= 0:
        return [1.0 / n] * n
    floor = MIN_SHARE * total / n
    weights = [max(float(b), floor) for b in known]
    return [w / sum(weights) for w in weights]


def backlog(task: CopyTask, ends: Mapping[TP, int]) -> int | None:
    """Records between the task's start positions and `ends` (None: a partition's end or position is not known)."""
    total = 0
    for p in task.partitions:
        end = ends.get(p.tp)
        if end is None or p.start < 0:
            return None
        total += max(0, end - p.start)
    return total


def budgets(
    limit: RateLimit,
    tasks: list[CopyTask],
    ends: Mapping[TP, int],
    parallel: bool,
    tokens: tuple[float, float] = (0.0, 0.0),
    since: float | None = None,
) -> list[CopyTask]:
    """`tasks` with their budgets: shares of the flow's rate (`shares`) when they run at once (`parallel`), else (one
    after another) each the whole rate; the flow's `tokens` (records, bytes: `FlowAllowance.take`, counted at `since`)
    split by the same shares (one after another: evenly, and each task's buckets refill from its own start, not from
    `since`: the time the others ran is not a gap). Unchanged when the flow has no cap."""
    if not limit.limited or not tasks:
        return tasks
    split = shares([backlog(t, ends) for t in tasks]) if parallel else [1.0 / len(tasks)] * len(tasks)
    return [
        dataclasses.replace(
            t,
            budget=TaskBudget(
                share(limit, s if parallel else 1.0), tokens[0] * s, tokens[1] * s, since if parallel else None
            ),
        )
        for t, s in zip(tasks, split, strict=True)
    ]


def share(limit: RateLimit, fraction: float) -> RateLimit:
    """`fraction` of the flow's `limit`."""
    records, nbytes = limit.records_per_second, limit.bytes_per_second
    return RateLimit(None if records is None else records * fraction, None if nbytes is None else nbytes * fraction)
