"""Fair scheduling between the flows of one engine (engine/fair_share.py, issue 47), without Spark: a batch's tasks
get a short time budget while another flow of the engine runs batches, the flow's own `max_batch_ms` otherwise; the
engine's executor hands it to the tasks (driver.py `SparkExecutor`, its SparkContext a fake). Measured through the
deployed engine: bench/blast.py, fairness."""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.contract.spec import ClusterSpec
from reconciler.engine.delivery import mode_of
from reconciler.engine.driver import SparkExecutor
from reconciler.engine.fair_share import BUSY_AFTER_S, FAIR_SLICE_MS, FairShare, Share
from reconciler.engine.tasks import CopyTask, PartitionTask, TaskBudget, joined, merged
from reconciler.topology.model import RateLimit
from tests.spec_helpers import job_spec, respec


class Clock:
    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        return self.now


def test_a_batch_is_sliced_while_the_busy_flows_want_more_slots_than_the_engine_has():
    clock = Clock()
    share = FairShare(slots=2, clock=clock)
    with share.batch("a", 2) as alone:
        assert alone == Share(2), "alone in its engine: the flow's own max_batch_ms"
        with share.batch("b", 1) as beside:
            assert beside == Share(1, FAIR_SLICE_MS), "a runs 2 tasks on the 2 slots: b's task ends after the slice"
        assert share.contended("a", 2), "b ended a batch just now: it runs batches"
    with share.batch("a", 2) as again:
        assert again == Share(2, FAIR_SLICE_MS)
    assert not share.contended("a", 1), "a task of a beside b's fits the slots"
    clock.now += BUSY_AFTER_S
    with share.batch("a", 2) as later:
        assert later == Share(2), "b ran no batch for BUSY_AFTER_S (caught up: no Spark job)"
    assert not share.contended("a", 2), "a flow's own batches never count against it"
    wide = FairShare(slots=4, clock=clock)
    with wide.batch("a", 2), wide.batch("b", 1) as fits:
        assert fits == Share(1), "an engine started with both flows has a slot for each task"
    unknown = FairShare(clock=clock)
    with unknown.batch("a", 1), unknown.batch("b", 1) as sliced:
        assert sliced == Share(1, FAIR_SLICE_MS), "slots not known: any busy neighbour counts"


def test_a_batch_whose_tasks_can_be_merged_takes_the_slots_its_neighbours_leave_free():
    """At-least-once (a task's slot is not its partitions' identity) a batch takes fewer tasks rather than shorter
    ones: a flow catching up beside a stream takes the one slot the stream leaves; where even one task each is more
    than the slots, the tasks are cut to the slice too."""
    clock = Clock()
    share = FairShare(slots=2, clock=clock)
    with share.batch("stream", 1) as stream:
        assert stream == Share(1)
        with share.batch("behind", 2, mergeable=True) as behind:
            assert behind == Share(1), "one task for its partitions, beside the stream's: no slice"
        assert share.share("stream", 1) == Share(1), "behind's batch took one slot: the stream's task fits"
        with share.batch("third", 2, mergeable=True) as third:
            assert third == Share(1, FAIR_SLICE_MS), "three flows of one task each on two slots: sliced"
    assert share.share("behind", 2, mergeable=False) == Share(2, FAIR_SLICE_MS), "exactly-once: its tasks, sliced"


def test_merged_tasks_keep_the_lowest_slots_and_every_partition():
    parts = [PartitionTask("orders", p, "west.orders", 0) for p in range(5)]
    tasks = [CopyTask(s, 1, tuple(parts[s::3]), at_end_only=True) for s in (2, 0, 1)]
    (one,) = merged(tasks, 1)
    assert one.slot == 0 and one.at_end_only and sorted(p.partition for p in one.partitions) == [0, 1, 2, 3, 4]
    two = merged(tasks, 2)
    assert [t.slot for t in two] == [0, 1] and sorted(p.partition for t in two for p in t.partitions) == [0, 1, 2, 3, 4]
    assert merged(tasks, 3) == tasks


def test_the_task_time_budget_is_the_shorter_of_the_slice_and_max_batch_ms():
    task = CopyTask(0, 1, ())
    assert task.time_budget_s(10_000) == 10.0
    assert CopyTask(0, 1, (), max_ms=2_000).time_budget_s(10_000) == 2.0
    assert CopyTask(0, 1, (), max_ms=2_000).time_budget_s(500) == 0.5


@dataclass
class FakeRdd:
    tasks: list

    def mapPartitions(self, fn):  # noqa: N802 - pyspark's name
        return self

    def collect(self):
        return []


@dataclass
class FakeContext:
    """A SparkContext as the executor uses it: the tasks it was handed, per job."""

    jobs: list = field(default_factory=list)
    pools: list = field(default_factory=list)
    defaultParallelism: int = 2  # noqa: N815 - pyspark's name

    def setLocalProperty(self, key, value):  # noqa: N802
        self.pools.append(value)

    def parallelize(self, tasks, n):
        self.jobs.append(list(tasks))
        return FakeRdd(list(tasks))


def test_the_engines_executor_hands_the_share_to_the_tasks_of_a_contended_batch():
    spec = job_spec("west->east", ClusterSpec("west", "127.0.0.1:1"), ClusterSpec("east", "127.0.0.1:2"))
    other = job_spec("north->east", ClusterSpec("north", "127.0.0.1:3"), ClusterSpec("east", "127.0.0.1:2"))
    eos = job_spec("south->east", ClusterSpec("south", "127.0.0.1:4"), ClusterSpec("east", "127.0.0.1:2"))
    eos = respec(eos, delivery="exactly-once")
    sc = FakeContext()
    executor = SparkExecutor(sc)
    assert executor.share.slots == 2, "the application's default parallelism"
    a = CopyTask(0, 1, (PartitionTask("orders", 0, "west.orders", 5),))
    b = CopyTask(1, 1, (PartitionTask("orders", 1, "west.orders", 5),))
    executor.run(spec, [a, b], mode_of(spec))
    assert [t.max_ms for t in sc.jobs[-1]] == [None, None] and sc.pools == ["west->east"]
    executor.run(other, [a, b], mode_of(other))
    assert len(sc.jobs[-1]) == 1 and len(sc.jobs[-1][0].partitions) == 2, "at-least-once: one task for both"
    assert sc.jobs[-1][0].max_ms == FAIR_SLICE_MS, "west->east's 2 tasks ended just now: more than the 2 slots"
    executor.run(eos, [a, b], mode_of(eos))
    assert [t.max_ms for t in sc.jobs[-1]] == [FAIR_SLICE_MS] * 2, "exactly-once: each slot its task, sliced"


def test_merged_tasks_keep_the_flows_whole_rate_limit():
    """A paced flow's tasks merged (fewer slots free) carry their parts of the flow's rate and tokens: the flow is
    paced to its whole rate_limit, not to the part of the tasks kept."""
    parts = [PartitionTask("orders", p, "west.orders", 0) for p in range(3)]
    tasks = [
        CopyTask(0, 1, (parts[0],), budget=TaskBudget(RateLimit(600.0, None), 60.0, 600.0)),
        CopyTask(1, 1, (parts[1],), budget=TaskBudget(RateLimit(300.0, None), 30.0, 300.0)),
        CopyTask(2, 1, (parts[2],), budget=TaskBudget(RateLimit(100.0, None), 10.0, 100.0)),
    ]
    (one,) = merged(tasks, 1)
    assert one.budget == TaskBudget(RateLimit(1000.0, None), 100.0, 1000.0)
    assert joined([None, None]) is None
    assert joined([TaskBudget(RateLimit(5.0, 50.0)), TaskBudget(RateLimit(5.0, None))]) == TaskBudget(RateLimit(10.0))
