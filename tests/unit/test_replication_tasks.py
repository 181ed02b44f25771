"""The job's typed seams: tasks and results travel pickled to Spark workers, the delivery mode is
one object per mode, a rolled-back partition reports no progress, and at-least-once commits only
acknowledged positions as it goes, never behind where the task started."""

from __future__ import annotations

import pickle
import time

from reconciler.contract.spec import ClusterSpec, JobSpec
from reconciler.engine.delivery import PROGRESS_COMMIT_S, AtLeastOnce, ExactlyOnce, SourceProgress, mode_of
from reconciler.engine.tasks import CopyTask, PartitionTask, TaskResult
from reconciler.engine.worker import PartitionCopy
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


def _round(p: PartitionCopy, next_offset: int, acknowledged: bool = True) -> None:
    p.next, p.count = next_offset, p.count + max(0, next_offset - max(p.next, 0))
    if acknowledged:
        p.durable()


def test_at_least_once_commits_acknowledged_positions_as_it_goes_at_most_every_second():
    a = PartitionCopy.of(PartitionTask("orders", 0, "west.orders", 100))
    b = PartitionCopy.of(PartitionTask("orders", 1, "west.orders", -2))  # no position yet: from the beginning
    idle = PartitionCopy.of(PartitionTask("orders", 2, "west.orders", 7))
    parts = [a, b, idle]
    progress = SourceProgress.of(parts)
    assert progress.every_s == PROGRESS_COMMIT_S == 1.0
    # the first durable round commits at once, only the partitions that moved
    _round(a, 120)
    _round(b, 5)
    assert progress.due(parts, now=10.0) == {("orders", 0): 120, ("orders", 1): 5}
    # a round later than that within the second commits nothing; the positions wait for the next commit
    _round(a, 130)
    assert progress.due(parts, now=10.5) == {}
    # records read but not yet acknowledged (the round in flight) are never committed
    _round(a, 150, acknowledged=False)
    assert progress.due(parts, now=11.0) == {("orders", 0): 130}
    assert progress.due(parts, now=12.5) == {}  # nothing moved since
    # the task's end: every partition the task moved, at its last acknowledged position
    a.durable()
    assert progress.final(parts) == {("orders", 0): 150, ("orders", 1): 5}


def test_a_failed_at_least_once_task_never_commits_behind_what_it_committed_or_where_it_started():
    a = PartitionCopy.of(PartitionTask("orders", 0, "west.orders", 100))
    b = PartitionCopy.of(PartitionTask("orders", 1, "west.orders", 40))
    parts = [a, b]
    progress = SourceProgress.of(parts)
    _round(a, 120)
    assert progress.due(parts, now=0.0) == {("orders", 0): 120}
    # a later round fails: the task gives up (positions back to the task's start, the driver does
    # not advance); the end commit repeats what was committed, acknowledged records only
    _round(a, 140, acknowledged=False)
    _round(b, 60, acknowledged=False)
    for p in parts:
        p.reset()
    assert (a.base_next, b.base_next) == (100, 40)
    assert progress.final(parts) == {("orders", 0): 120}
    # a task that moved nothing commits nothing
    idle = [PartitionCopy.of(PartitionTask("orders", 0, "west.orders", 100))]
    assert SourceProgress.of(idle).final(idle) == {}


def test_a_transactional_producer_knows_when_it_lost_its_brokers_and_purges_what_it_holds():
    """worker.BrokersLost (issue 34): the first loss is kept and purges the producer's records once; other errors
    do not count. A real producer whose broker refuses connections reports the loss through its poll."""
    from confluent_kafka import KafkaError

    from reconciler.dev.brokers import free_port
    from reconciler.engine.worker import BrokersLost, TxnProducer

    purged = []
    watch = BrokersLost(lambda: purged.append(1))
    watch(KafkaError(KafkaError._MSG_TIMED_OUT, "a record timed out"))
    assert watch.lost is None and not purged
    watch(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    watch(KafkaError(KafkaError._TRANSPORT, "connection refused"))
    assert watch.lost == "_ALL_BROKERS_DOWN: 1/1 brokers are down" and purged == [1]

    producer = TxnProducer.of({"bootstrap.servers": f"127.0.0.1:{free_port()}"})  # no transaction: no init wait
    reports: list = []
    producer.produce("topic", b"held in the queue", on_delivery=lambda err, msg: reports.append(err))
    deadline = time.monotonic() + 15
    while producer.brokers_lost.lost is None and time.monotonic() < deadline:
        producer.poll(0.1)
    assert producer.brokers_lost.lost is not None
    assert producer.brokers_lost.lost.split(":")[0] in BrokersLost.CODES
    producer.flush(5)  # serves the purged record's delivery report
    assert [e.name() for e in reports] == ["_PURGE_QUEUE"] and len(producer) == 0  # purged at the loss
