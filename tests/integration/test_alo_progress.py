"""At-least-once progress with the default task length (10 s): the worker commits its acknowledged
positions on the source as the task goes (issue 21), so a kill repeats at most about one round of
records per partition, not everything since the task began.

Run with `-s` to see the figures (kills, missing, duplicates per kill, time to recover)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from reconciler import logs
from reconciler.contract.spec import job_group
from reconciler.deployers.instance import Role
from reconciler.deployers.process import LocalJob
from reconciler.engine.delivery import AtLeastOnce
from reconciler.engine.tasks import CopyTask, PartitionTask, TaskResult
from reconciler.engine.worker import copy_task
from reconciler.jobplan.backend import read_job_status
from tests.integration.mirror_helpers import (
    SequencedProducer,
    create_topic,
    read_topic,
    seqs,
    spec_for,
    wait_for,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PARTITIONS = 4
RATE = 2_000.0  # records/s over all partitions
KILLS = 3
KILL_AFTER_S = 3.5  # after records start arriving on the target (well inside the first 10-s task)
BOUND_S = 2.0  # issue 21: at most rate x 2 s of duplicates per kill


class TargetEnd:
    """The sum of the remote topic's high watermarks: enough to see records arrive."""

    def __init__(self, bootstrap: str, topic: str):
        self.topic = topic
        self.consumer = Consumer(
            logs.client_config({"bootstrap.servers": bootstrap, "group.id": f"watch-{time.monotonic_ns()}"})
        )

    def __call__(self) -> int:
        try:
            tps = [TopicPartition(self.topic, p) for p in range(PARTITIONS)]
            return sum(max(self.consumer.get_watermark_offsets(tp, timeout=5)[1], 0) for tp in tps)
        except KafkaException:
            return 0  # the remote topic is not there yet

    def close(self) -> None:
        self.consumer.close()


def _start_and_wait_for_records(spec, workdir, end: TargetEnd) -> tuple[LocalJob, float]:
    """Start the job; return it with the seconds until its first records reached the target."""
    before = end()
    started = time.monotonic()
    job = LocalJob.start(spec, workdir)
    try:
        wait_for(lambda: end() > before or not job.alive(), 180, interval=0.1, what="records on the target")
        assert job.alive(), job.log_tail()
    except BaseException:
        job.kill()
        raise
    return job, time.monotonic() - started


def _rewinds(s: list[int]) -> list[int]:
    """The size of each rewind of a partition's sequence on the target (one per restart that
    repeated records): the records copied again."""
    return [a - b + 1 for a, b in zip(s, s[1:]) if b <= a]


def test_an_at_least_once_task_commits_its_progress_on_the_source_while_it_runs(fresh_clusters):
    source, target = fresh_clusters
    create_topic(source.bootstrap, "ticks", 2)
    create_topic(target.bootstrap, "west.ticks", 2)
    spec = spec_for(source, target, topics_include=("ticks",), delivery="at-least-once")
    assert spec.engine.max_batch_ms == 10_000
    producer = SequencedProducer(source.bootstrap, "ticks", 2, 16_000, 2_000.0)  # 8 s of records
    task = CopyTask(0, 0, tuple(PartitionTask("ticks", p, "west.ticks", -2) for p in range(2)))
    results: list[TaskResult] = []
    runner = threading.Thread(target=lambda: results.append(copy_task(spec, task, AtLeastOnce())))
    group = Consumer(logs.client_config({"bootstrap.servers": source.bootstrap, "group.id": job_group(spec)}))
    tps = [TopicPartition("ticks", p) for p in range(2)]
    seen: list[tuple[float, int]] = []  # (seconds since the task began, committed offsets summed)
    producer.start()
    # Records flowing before the task starts (a task that finds nothing for a second ends).
    wait_for(lambda: all(group.get_watermark_offsets(tp, timeout=5)[1] > 0 for tp in tps), 30, interval=0.1)
    began = time.monotonic()
    runner.start()
    try:
        while runner.is_alive():
            committed = sum(max(tp.offset, 0) for tp in group.committed(tps, timeout=10))
            seen.append((time.monotonic() - began, committed))
            time.sleep(0.1)
        final = {tp.partition: tp.offset for tp in group.committed(tps, timeout=10)}
    finally:
        group.close()
        producer.join(30)
    took = time.monotonic() - began
    [result] = results
    assert result.error is None, result
    assert producer.error is None and producer.produced == 16_000, (producer.error, producer.produced)
    moves = [t for (t, c), (_, before) in zip(seen[1:], seen) if c > before]
    gaps = [b - a for a, b in zip(moves, moves[1:])]
    print(
        f"\ntask of {took:.1f} s copied {sum(p.count for p in result.partitions)} records: the committed "
        f"offsets moved {len(moves)} times while it ran, first after {moves[0] if moves else -1:.2f} s, "
        f"largest gap {max(gaps, default=0):.2f} s (at {[round(t, 2) for t in moves]})",
        file=sys.stderr,
    )
    assert [c for _, c in seen] == sorted(c for _, c in seen), "the group's offsets never go back"
    # Committed as it went, judged by records rather than the clock (the machine's load sets the clock): the group
    # held several positions short of the task's final one while the task ran, the first of them early in the task.
    total = sum(p.count for p in result.partitions)
    along = sorted({c for _, c in seen if 0 < c < total})
    assert len(along) >= 3, ("the task committed only at its end", seen[:40], result)
    assert along[0] < total / 2, ("the first durable round did not commit at once", along[:5], total)
    # The task's end commits its final positions (synchronously: nothing of it is in flight after).
    assert final == {p.partition: p.next for p in result.partitions}
    assert sum(final.values()) == total > 8_000


@pytest.mark.spark
def test_at_least_once_kills_repeat_at_most_a_round(fresh_clusters, tmp_path):
    source, target = fresh_clusters
    topic, remote = "events-progress", "west.events-progress"
    create_topic(source.bootstrap, topic, PARTITIONS)
    spec = spec_for(source, target, topics_include=(topic,), delivery="at-least-once")
    assert spec.engine.max_batch_ms == 10_000, "the default task length: a kill lands inside a task"
    producer = SequencedProducer(source.bootstrap, topic, PARTITIONS, int(RATE * 900), RATE)
    end = TargetEnd(target.bootstrap, remote)
    recover_s: list[float] = []
    producer.start()
    try:
        for i in range(KILLS):
            began_ms = int(time.time() * 1000)
            job, took = _start_and_wait_for_records(spec, tmp_path / f"run-{i}", end)
            recover_s.append(took)
            time.sleep(KILL_AFTER_S)

            def counted(since_ms: int = began_ms):  # by this run's job (not the record the job killed last wrote)
                r = read_job_status({"bootstrap.servers": target.bootstrap}, spec.flow, timeout=5)
                return r if r is not None and (r.started_at or 0) >= since_ms and (r.records or 0) > 0 else None

            # the status record counts what the running task has committed (issue 21: not RECORDS 0); under load
            # its status round may come after KILL_AFTER_S, so the kill waits for it
            wait_for(counted, 30, what="the status record counting the task's records")
            alive = job.alive()
            job.kill()  # SIGKILL: the task in flight never reports to the driver
            assert alive, job.log_tail()
            # ... and its last status record still counts them
            last = read_job_status({"bootstrap.servers": target.bootstrap}, spec.flow, timeout=5)
            assert last is not None and (last.records or 0) > 0 and (last.started_at or 0) >= began_ms, last
        job, took = _start_and_wait_for_records(spec, tmp_path / "final", end)
        recover_s.append(took)
        try:
            # A Spark Python worker killed inside a task: the batch fails, the instance goes on, and the next
            # batch resumes where the killed task had committed, not at the task's start.
            time.sleep(KILL_AFTER_S)
            workers = [p for p in job.processes() if p.role is Role.WORKER]
            assert workers, job.processes()
            for w in workers:
                os.kill(w.pid, signal.SIGKILL)
            producer.stop()
            assert producer.error is None
            expected = producer.expected()

            def caught_up():
                got = read_topic(target.bootstrap, remote, PARTITIONS)
                return got if all(set(expected[p]) <= set(seqs(got[p])) for p in expected) else None

            got = wait_for(caught_up, 180, interval=2, what="all records replicated")
            assert job.alive(), job.log_tail()
        finally:
            job.stop()
    finally:
        producer.stop()
        end.close()

    missing = sum(len(set(expected[p]) - set(seqs(got[p]))) for p in expected)
    duplicates = sum(len(got[p]) - len(set(seqs(got[p]))) for p in expected)
    rewinds = {p: _rewinds(seqs(got[p])) for p in expected}
    print(
        f"\nALO progress: {KILLS} kills (and one of the Python workers) at {RATE:.0f} records/s over {PARTITIONS} partitions, each "
        f"{KILL_AFTER_S} s after records arrived, task length {spec.engine.max_batch_ms} ms: "
        f"{sum(len(v) for v in expected.values())} records produced, missing {missing}, "
        f"duplicates {duplicates} (bound {RATE * BOUND_S * (KILLS + 1):.0f}; per partition and restart "
        f"{rewinds}), time to first records after each start {[round(s, 1) for s in recover_s]} s",
        file=sys.stderr,
    )
    assert missing == 0
    kills = KILLS + 1  # the instance killed KILLS times, then its Python workers once
    assert duplicates <= RATE * BOUND_S * kills, f"{duplicates} duplicates after {kills} kills"
