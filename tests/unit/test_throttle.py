"""A flow's rate limit (engine/throttle.py), without brokers: the token bucket and a task's throttle on a clock the
test moves, the shares of a batch's tasks, and the batch shaper handing them out (one task for an at-least-once flow
whose cap one task copies, shares by backlog for exactly-once, none for heartbeats or a flow without a cap)."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from reconciler.contract.spec import ClusterSpec, JobSpec
from reconciler.engine.batches import BatchShaper
from reconciler.engine.driver_parts import Partitions, Progress
from reconciler.engine.idle_gate import IdleGate, Pacing, Work
from reconciler.engine.tasks import CopyTask, PartitionTask, TaskBudget, TaskResult
from reconciler.engine.throttle import (
    BURST_S,
    ONE_TASK_BYTES_PER_SECOND,
    ONE_TASK_RECORDS_PER_SECOND,
    FlowAllowance,
    Throttle,
    TokenBucket,
    budgets,
    consumer_prefetch,
    one_task_copies,
    shares,
)
from reconciler.engine.topics import PartitionPlan
from reconciler.topology.model import RateLimit
from tests.spec_helpers import job_spec, respec


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_fills_at_its_rate_up_to_its_burst_and_owes_what_was_taken_beyond():
    b = TokenBucket(rate=100, burst=10, now=0.0)
    assert b.level(0.0) == 0 and b.wait(5, 0.0) == pytest.approx(0.05)
    assert b.level(0.05) == pytest.approx(5) and b.level(10.0) == 10, "held up to its burst"
    b.take(30, 10.0)
    assert b.level(10.0) == -20 and b.wait(1, 10.0) == pytest.approx(0.21), "a debt is paid before the next read"
    assert b.wait(0, 10.2) == pytest.approx(0.0)


def copy_for(throttle: Throttle, clock: Clock, seconds: float, size=lambda: 100, available: int = 10**9):
    """The copy loop's use of a throttle (worker.py `Copier.run`) over `seconds` of the test's clock: ask, wait or
    read what is allowed (each record of `size()` bytes, while `available` records are there), tell what was copied.
    Returns the records and bytes copied and the number of reads."""
    end, records, nbytes, reads = clock.now + seconds, 0, 0, 0
    while clock.now < end:
        most, wait = throttle.allowance(10_000)
        if not most:
            assert wait > 0
            clock.now += wait
            continue
        n = min(most, available - records)
        sizes = [size() for _ in range(n)]
        throttle.spent(n, sum(sizes))
        records, nbytes, reads = records + n, nbytes + sum(sizes), reads + 1
        clock.now += 0.001  # the read and the copy take a little time
    return records, nbytes, reads


def test_a_task_copies_at_its_records_cap_in_reads_of_some_size():
    clock = Clock()
    throttle = Throttle(TaskBudget(RateLimit(records_per_second=20_000)), clock)
    records, _, reads = copy_for(throttle, clock, 10.0)
    assert 0.97 * 200_000 <= records <= 200_000, "a task starts with no tokens: never above its cap"
    assert reads <= 10 * 60, "a read takes a tick of the rate (about 400 records), not one record"


def test_a_task_copies_at_its_bytes_cap_whatever_the_records_size():
    clock, rng = Clock(), random.Random(7)
    throttle = Throttle(TaskBudget(RateLimit(bytes_per_second=1_000_000)), clock)
    records, nbytes, _ = copy_for(throttle, clock, 10.0, size=lambda: rng.choice((10, 100, 5_000)))
    assert 0.95 * 10_000_000 <= nbytes <= 10_000_000 + 1_000_000 * BURST_S + 5_000 * 50
    assert records > 0


def test_with_both_caps_the_tighter_holds():
    clock = Clock()
    throttle = Throttle(TaskBudget(RateLimit(records_per_second=1_000, bytes_per_second=1_000_000)), clock)
    records, nbytes, _ = copy_for(throttle, clock, 10.0, size=lambda: 100)  # 100 B: the records cap binds
    assert records <= 10_000 + 1_000 * BURST_S and nbytes <= 1_100_000
    clock2 = Clock()
    throttle2 = Throttle(TaskBudget(RateLimit(records_per_second=1_000, bytes_per_second=10_000)), clock2)
    records2, nbytes2, _ = copy_for(throttle2, clock2, 10.0, size=lambda: 100)  # the bytes cap binds
    assert nbytes2 <= 100_000 + 10_000 * BURST_S + 100 and records2 <= 1_010


def test_the_first_read_under_a_bytes_cap_takes_one_record_and_a_large_record_is_paid_for_after():
    clock = Clock()
    throttle = Throttle(TaskBudget(RateLimit(bytes_per_second=1_000)), clock)
    most, wait = throttle.allowance(10_000)
    assert most == 0 and wait > 0, "a task starts with an empty bucket: it never copies above its cap"
    clock.now += wait
    assert throttle.allowance(10_000) == (1, 0.0), "the records' size is not known yet"
    throttle.spent(1, 50_000)  # larger than the bucket holds: copied, then paid for
    most, wait = throttle.allowance(10_000)
    assert most == 0 and wait == pytest.approx(50.0, abs=0.1)


def test_a_slow_source_does_not_bank_more_than_a_burst():
    clock = Clock()
    throttle = Throttle(TaskBudget(RateLimit(records_per_second=1_000)), clock)
    clock.now += 60  # nothing came for a minute
    assert throttle.allowance(100_000) == (int(1_000 * BURST_S), 0.0)


def test_no_budget_no_throttle():
    assert Throttle.of(None) is None and Throttle.of(TaskBudget(RateLimit())) is None
    assert Throttle.of(TaskBudget(RateLimit(records_per_second=5))) is not None


def test_a_batch_shares_the_rate_by_backlog_with_a_floor():
    assert shares([300, 100]) == pytest.approx([0.75, 0.25])
    assert shares([1_000, 0]) == pytest.approx([1_000 / 1_050, 50 / 1_050]), "a caught-up task keeps a tenth of even"
    assert shares([10, None]) == [0.5, 0.5] and shares([0, 0]) == [0.5, 0.5], "not known, or nothing: even"
    assert shares([7]) == [1.0]


def task(slot: int, *starts: tuple[str, int, int]) -> CopyTask:
    return CopyTask(slot, 1, tuple(PartitionTask(t, p, f"west.{t}", start) for t, p, start in starts))


def test_budgets_add_up_to_the_flows_cap_when_the_tasks_run_at_once():
    limit = RateLimit(records_per_second=1_000, bytes_per_second=None)
    tasks = [task(0, ("a", 0, 0)), task(1, ("a", 1, 100), ("b", 0, -2))]
    ends = {("a", 0): 900, ("a", 1): 400, ("b", 0): 50}
    even = budgets(limit, tasks, ends, parallel=True, tokens=(200.0, 0.0))
    assert [t.budget for t in even] == [TaskBudget(RateLimit(500.0), 100.0), TaskBudget(RateLimit(500.0), 100.0)], (
        "a position not known: even shares, of the rate and of the flow's tokens"
    )
    tasks[1] = task(1, ("a", 1, 100))
    by_backlog = budgets(limit, tasks, ends, parallel=True)
    assert [t.budget.rate.records_per_second for t in by_backlog if t.budget] == pytest.approx([750, 250])
    one_by_one = budgets(limit, tasks, ends, parallel=False, tokens=(-50.0, 0.0))
    assert [t.budget for t in one_by_one] == [TaskBudget(RateLimit(1_000), -25.0)] * 2, (
        "one after another (the driver's process): each may take the whole rate; a debt is shared"
    )
    assert budgets(RateLimit(), tasks, ends, parallel=True) == tasks, "no cap: nothing changes"


def test_the_flow_keeps_what_its_tasks_left_and_refills_it_between_batches_up_to_a_burst():
    clock = Clock()
    allowance = FlowAllowance(clock)
    limit = RateLimit(records_per_second=1_000, bytes_per_second=10_000)
    assert allowance.take(limit) == (0.0, 0.0), "the first batch starts with nothing"
    clock.now += 5  # the batch runs
    allowance.give_back([(30.0, -2_000.0), (10.0, 500.0)])
    clock.now += 0.25  # its results absorbed, the next Spark job started
    assert allowance.take(limit) == pytest.approx((40 + 250, -1_500 + 2_500)), "the gap counts, a debt is paid"
    allowance.give_back([])  # a failed batch: what it held is gone
    clock.now += 60
    assert allowance.take(limit) == pytest.approx((1_000 * BURST_S, 10_000 * BURST_S)), "no more than a burst"
    task_left = Throttle(TaskBudget(RateLimit(records_per_second=100), records=-20.0), clock)
    clock.now += 0.1
    assert task_left.left() == pytest.approx((-10.0, 0.0))


def test_a_limited_flow_over_batches_copies_no_more_than_its_cap_and_close_to_it():
    """The shaper's allowance and the tasks' throttles together, over batches of 2 s with 0.5 s between them (a Spark
    job's start, the results absorbed): the flow copies at most its cap over the whole window, and the gaps are made
    up (up to a burst)."""
    clock = Clock()
    allowance, limit, copied = FlowAllowance(clock), RateLimit(records_per_second=10_000), 0
    start = clock.now
    for _ in range(20):
        (t,) = budgets(limit, [task(0, ("a", 0, 0))], {}, parallel=True, tokens=allowance.take(limit))
        assert t.budget is not None
        throttle = Throttle(t.budget, clock)
        copied += copy_for(throttle, clock, 2.0)[0]
        allowance.give_back([throttle.left()])
        clock.now += 0.5
    elapsed = clock.now - start
    assert 0.95 * 10_000 * elapsed <= copied <= 10_000 * elapsed


def test_the_whole_gap_between_batches_counts_its_results_way_back_and_the_next_jobs_start_included():
    """Issue 47: the gap between two batches is mostly Spark's (the results' way back to the driver, the next job's
    start: 0.2-0.3 s of 0.22-0.37 s traced through bench/ratelimit.py), which the flow's tokens did not count: they
    refilled from the results' absorption to the next batch's shaping only. Counted whole (the task's end,
    `budget_left_at`; its start, `TaskBudget.since`), the flow copies at its cap across batches and never above it:
    over any window at most its cap times the window plus a burst."""
    clock = Clock()  # one clock for the driver and the worker here (the wall clock, in the engine)
    allowance, limit = FlowAllowance(clock), RateLimit(records_per_second=10_000)
    reads: list[tuple[float, int]] = []
    start = clock.now
    for _ in range(20):
        tokens = allowance.take(limit)
        (t,) = budgets(limit, [task(0, ("a", 0, 0))], {}, parallel=True, tokens=tokens, since=allowance.taken_at)
        assert t.budget is not None and t.budget.since == allowance.taken_at
        clock.now += 0.25  # the Spark job starts
        throttle = Throttle(t.budget, clock, wall=clock)
        end = clock.now + 2.0
        while clock.now < end:
            most, wait = throttle.allowance(10_000)
            if not most:
                clock.now += wait
                continue
            throttle.spent(most, 100 * most)
            reads.append((clock.now, most))
        left, left_at = throttle.left(), clock.now
        clock.now += 0.25  # the results' way back to the driver
        allowance.give_back([left], counted_at=left_at)
        clock.now += 0.1  # absorbed, the next batch planned
    elapsed = clock.now - start
    copied = sum(n for _, n in reads)
    assert 0.95 * 10_000 * elapsed <= copied <= 10_000 * elapsed, copied / elapsed
    for i, (at, _) in enumerate(reads):
        for window in (0.02, 0.3, 1.0, 2.5):
            inside = sum(n for t, n in reads[i:] if t <= at + window)
            assert inside <= 10_000 * (window + BURST_S) + 1, (at, window, inside)
    sequential = budgets(limit, [task(0, ("a", 0, 0)), task(1, ("a", 1, 0))], {}, parallel=False, since=clock.now)
    assert all(t.budget is not None and t.budget.since is None for t in sequential), (
        "one after another: the time the others ran is no gap"
    )


def test_a_capped_flows_consumer_fetches_little_ahead_of_its_reads():
    """Half a second of the cap queued (the job's consumer otherwise prefetches 64 MB: a whole backlog at full speed,
    past the cap); a changed cap makes a new consumer (worker.py `_consumer_key`)."""
    from reconciler.engine.worker import _consumer_key

    assert consumer_prefetch(RateLimit()) == {}
    assert consumer_prefetch(RateLimit(records_per_second=20_000)) == {"queued.min.messages": 10_000}
    assert consumer_prefetch(RateLimit(records_per_second=10, bytes_per_second=10_485_760)) == {
        "queued.min.messages": 1_000,
        "queued.max.messages.kbytes": 5_120,
    }
    assert consumer_prefetch(RateLimit(records_per_second=1e12, bytes_per_second=1e15)) == {
        "queued.min.messages": 100_000,
        "queued.max.messages.kbytes": 65_536,
    }, "never more than the job's own (and within librdkafka's ranges)"
    capped = respec(SPEC, records_per_second=20_000)
    assert _consumer_key(capped, 0) != _consumer_key(respec(capped, records_per_second=5_000), 0)


def test_an_at_least_once_flow_whose_cap_one_task_copies_is_one_task():
    assert one_task_copies(RateLimit(records_per_second=ONE_TASK_RECORDS_PER_SECOND))
    assert one_task_copies(RateLimit(records_per_second=10**9, bytes_per_second=ONE_TASK_BYTES_PER_SECOND))
    assert not one_task_copies(RateLimit(records_per_second=ONE_TASK_RECORDS_PER_SECOND + 1))
    assert not one_task_copies(RateLimit())


# --- the batch shaper hands the budgets out -----------------------------------------------------------------------

SPEC = job_spec("west->east", ClusterSpec("west", "127.0.0.1:1"), ClusterSpec("east", "127.0.0.1:2"))
A0, A1 = ("a", 0), ("a", 1)


@dataclass
class Flow:
    spec: JobSpec


def shaper(spec: JobSpec) -> BatchShaper:
    parts = Partitions(
        plan=PartitionPlan(copy={A0: "west.a", A1: "west.a"}), positions={A0: 0, A1: 0}, slots={A0: 0, A1: 1}
    )
    gate = IdleGate(Flow(spec), parts, pacing=Pacing(ends_before={A0: 3_000_000, A1: 1_000_000}))
    return BatchShaper(Flow(spec), parts, gate, Progress())


def test_the_shaper_gives_a_limited_flows_tasks_their_budgets():
    limited = respec(SPEC, records_per_second=20_000)
    s = shaper(limited)
    (one,) = s.shape(Work.RECORDS, s.plan_tasks())
    assert one.budget == TaskBudget(RateLimit(20_000)), "the first batch starts with nothing, its job's start too"
    assert [p.tp for p in one.partitions] == [A0, A1], (
        "at-least-once: one task holds the whole rate, however the engine's cores are shared"
    )
    s.batch_ended([TaskResult(0, "p1", budget_left=(1_000.0, 0.0))])
    (again,) = s.shape(Work.RECORDS, s.plan_tasks())
    assert again.budget is not None and again.budget.records >= 1_000, "what the batch before left"
    assert again.budget.since is not None, "refilled from when the tokens were counted: its Spark job's start counts"
    eos = shaper(respec(limited, delivery="exactly-once"))
    split = eos.shape(Work.RECORDS, eos.plan_tasks())
    assert [t.budget.rate.records_per_second for t in split if t.budget] == pytest.approx([15_000, 5_000]), (
        "exactly-once: a task per slot, shares by backlog"
    )
    sequential = eos.shape(Work.RECORDS, eos.plan_tasks(), parallel=False)
    assert [t.budget.rate for t in sequential if t.budget] == [RateLimit(20_000)] * 2
    plain = shaper(SPEC)
    assert all(t.budget is None for t in plain.shape(Work.RECORDS, plain.plan_tasks())), "no cap: not paced"
    beats = [CopyTask(0, 1, (PartitionTask("heartbeats", 0, "heartbeats", 3),))]
    assert s.shape(Work.HEARTBEATS, beats)[0].budget is None, "the driver's own heartbeat copies are not paced"
