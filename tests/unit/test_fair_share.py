"""Fair scheduling between the flows of one engine (engine/fair_share.py, issue 47), without Spark: a batch's tasks
get a short time budget while another flow of the engine runs batches, the flow's own `max_batch_ms` otherwise; the
engine's executor hands it to the tasks (driver.py `SparkExecutor`, its SparkContext a fake). Measured through the
deployed engine: bench/blast.py, fairness."""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.contract.spec import ClusterSpec
from reconciler.engine.delivery import mode_of
from reconciler.engine.driver import SparkExecutor
from reconciler.engine.fair_share import BUSY_AFTER_S, FAIR_SLICE_MS, FairShare
from reconciler.engine.tasks import CopyTask, PartitionTask
from tests.spec_helpers import job_spec


class Clock:
    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        return self.now


def test_a_batch_is_sliced_while_the_busy_flows_want_more_slots_than_the_engine_has():
    clock = Clock()
    share = FairShare(slots=2, clock=clock)
    with share.batch("a", 2) as alone:
        assert alone is None, "alone in its engine: the flow's own max_batch_ms"
        with share.batch("b", 1) as beside:
            assert beside == FAIR_SLICE_MS, "a runs 2 tasks on the 2 slots: b's task ends after the slice"
        assert share.contended("a", 2), "b ended a batch just now: it runs batches"
    with share.batch("a", 2) as again:
        assert again == FAIR_SLICE_MS
    assert not share.contended("a", 1), "a task of a beside b's fits the slots"
    clock.now += BUSY_AFTER_S
    with share.batch("a", 2) as later:
        assert later is None, "b ran no batch for BUSY_AFTER_S (caught up: no Spark job)"
    assert not share.contended("a", 2), "a flow's own batches never count against it"
    wide = FairShare(slots=4, clock=clock)
    with wide.batch("a", 2), wide.batch("b", 1) as fits:
        assert fits is None, "an engine started with both flows has a slot for each task"
    unknown = FairShare(clock=clock)
    with unknown.batch("a", 1), unknown.batch("b", 1) as sliced:
        assert sliced == FAIR_SLICE_MS, "slots not known: any busy neighbour counts"


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


def test_the_engines_executor_hands_the_slice_to_the_tasks_of_a_contended_batch():
    spec = job_spec("west->east", ClusterSpec("west", "127.0.0.1:1"), ClusterSpec("east", "127.0.0.1:2"))
    other = job_spec("north->east", ClusterSpec("north", "127.0.0.1:3"), ClusterSpec("east", "127.0.0.1:2"))
    sc = FakeContext()
    executor = SparkExecutor(sc)
    assert executor.share.slots == 2, "the application's default parallelism"
    task = CopyTask(0, 1, (PartitionTask("orders", 0, "west.orders", 5),))
    executor.run(spec, [task, task], mode_of(spec))
    assert sc.jobs[-1][0].max_ms is None and sc.pools == ["west->east"]
    executor.run(other, [task], mode_of(other))
    assert sc.jobs[-1][0].max_ms == FAIR_SLICE_MS, "west->east's 2 tasks ended just now: 3 tasks on 2 slots"
