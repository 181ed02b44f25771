"""The job's typed seams: tasks and results travel pickled to Spark workers, the delivery mode is
one object per mode, and a rolled-back partition reports no progress."""

from __future__ import annotations

import pickle

from reconciler.contract.spec import ClusterSpec, JobSpec
from reconciler.replication.delivery import AtLeastOnce, ExactlyOnce, mode_of
from reconciler.replication.tasks import CopyTask, PartitionTask, TaskResult
from reconciler.replication.worker import PartitionCopy
from tests.spec_helpers import job_spec


def spec(delivery: str) -> JobSpec:
    return job_spec(
        "west->east",
        ClusterSpec("west", "w:9092", {"client.id": "x"}),
        ClusterSpec("east", "e:9092"),
        delivery=delivery,
    )


def test_one_mode_object_per_delivery_and_it_travels_with_the_spec():
    assert isinstance(mode_of(spec("at-least-once")), AtLeastOnce)
    assert isinstance(mode_of(spec("exactly-once")), ExactlyOnce)
    s = spec("exactly-once")
    task = CopyTask(1, 7, (PartitionTask("orders", 3, "west.orders", 42, [1, 2]),), "host:1", 2)
    again = pickle.loads(pickle.dumps((s, task, mode_of(s))))
    assert again[0] == s and again[1] == task and isinstance(again[2], ExactlyOnce)
    assert again[1].partitions[0].tp == ("orders", 3)


def test_a_rolled_back_round_returns_to_the_last_durable_round_and_a_reset_to_the_task_start():
    p = PartitionCopy.of(PartitionTask("orders", 0, "west.orders", 10, [5]))
    # a first round, made durable (acknowledged, or its transaction committed)
    p.next, p.count, p.bytes = 25, 15, 1500
    p.round_syncs, p.round_state, p.round_last = [(10, 90)], [24, 104, 90], (24, 104)
    p.durable()
    # a second round in flight, then rolled back (its transaction aborted)
    p.next, p.count, p.bytes = 40, 30, 3000
    p.round_syncs, p.round_state, p.round_last = [(39, 119)], [39, 119, 119], (39, 119)
    assert p.round_count == 15
    p.roll_back()
    back = p.result()
    assert (back.next, back.count, back.bytes, back.syncs, back.sync_state, back.last) == (
        25,
        15,
        1500,
        [(10, 90)],
        [24, 104, 90],
        (24, 104),
    )
    assert p.round_count == 0 and p.runs == [] and p.round_state is None
    # at-least-once gives up the whole task on any unacknowledged record
    p.reset()
    start = p.result()
    assert (start.next, start.count, start.bytes, start.syncs, start.sync_state, start.last) == (
        10,
        0,
        0,
        [],
        [5],
        None,
    )
    result = TaskResult(0, "host:1", error="delivery failed", partitions=[start])
    assert result.partitions[0].tp == ("orders", 0) and not result.committed
