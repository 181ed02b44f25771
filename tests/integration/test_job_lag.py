"""Lag while the job's Python workers are held up (issue 21): the job under spark-submit copies a live stream of
~2,000 records/s; its Spark Python workers are SIGSTOPped for ~12 s. The records that arrive meanwhile must show
as lag (records and seconds) in the status record and the metrics while the workers are stopped, not only once a
task ends, and the lag must fall back once they go on."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from reconciler.contract.status import StatusRecord, StatusState, read_job_status
from reconciler.deploy.process import LocalJob
from reconciler.replication.metrics import free_port
from tests.integration.mirror_helpers import SequencedProducer, create_topic, spec_for, wait_for
from tests.integration.test_job_metrics import scrape, total

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PARTITIONS = 4
RATE = 2_000.0
HOLD_SECONDS = 12.0
WORKER_MARKS = (b"pyspark.daemon", b"pyspark/daemon.py", b"pyspark.worker", b"pyspark/worker.py")


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (/proc/<pid>/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = list(Path(f"/proc/{parent}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                children = [int(x) for x in (task / "children").read_text().split()]
            except OSError:
                continue
            out += children
            todo += children
    return out


def python_workers(job_pid: int) -> list[int]:
    """The job's Spark Python worker processes (the pyspark daemon and the workers it forks)."""
    found = []
    for pid in descendants(job_pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if any(mark in cmdline for mark in WORKER_MARKS):
            found.append(pid)
    return found


def signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def test_lag_grows_while_the_python_workers_are_held_up_and_falls_back_after(fresh_clusters, tmp_path):
    source, target = fresh_clusters
    topic = "clicks"
    create_topic(source.bootstrap, topic, PARTITIONS)
    spec = spec_for(source, target, topics_include=(topic,), max_batch_ms=500, status_interval_seconds=1.0)
    port = free_port()
    job = LocalJob.start(spec, tmp_path / "job", env={"RECONCILER_METRICS_PORT": str(port)})
    # Enough records for the warm-up, the hold and the catch-up at RATE (the producer stops after them).
    producer = SequencedProducer(source.bootstrap, topic, PARTITIONS, total=int(RATE * 240), rate=RATE)
    stopped: list[int] = []

    def status() -> StatusRecord | None:
        return read_job_status({"bootstrap.servers": target.bootstrap}, spec.flow, timeout=3)

    try:
        wait_for(
            lambda: (s := status()) is not None and s.state is StatusState.RUNNING or not job.alive(),
            120,
            what="the job running",
        )
        assert job.alive(), job.log_tail()
        producer.start()
        wait_for(lambda: (s := status()) and (s.records or 0) >= 4_000, 90, what="the job copying the stream")
        caught_up = wait_for(
            lambda: (s := status()) is not None and s.lag_total is not None and s.lag_total < 2_000 and s,
            60,
            what="the job keeping up before the hold",
        )
        assert caught_up.lag_read_at is not None  # the source's ends are read beside the batches

        stopped = python_workers(job.pid)
        assert stopped, f"no pyspark worker process under the job's pid {job.pid}"
        signal_all(stopped, signal.SIGSTOP)
        held_at = time.monotonic()
        stopped += [p for p in python_workers(job.pid) if p not in stopped]  # forked meanwhile
        signal_all(stopped, signal.SIGSTOP)

        behind = wait_for(
            lambda: (s := status()) is not None and (s.lag_total or 0) > 5_000 and (s.lag_seconds or 0) > 2 and s,
            HOLD_SECONDS - 1,
            interval=0.5,
            what="lag in records and seconds growing while the workers are stopped",
        )
        assert behind.state is StatusState.RUNNING
        assert sum(p.lag or 0 for p in behind.lag) == behind.lag_total
        metrics = scrape(port)  # the metrics move between batches too
        assert total(metrics["mirror_partition_lag_records"], "mirror_partition_lag_records") > 5_000
        assert total(metrics["mirror_lag_seconds"], "mirror_lag_seconds") > 2
        time.sleep(max(0.0, HOLD_SECONDS - (time.monotonic() - held_at)))
    finally:
        signal_all(stopped, signal.SIGCONT)

    try:
        after = wait_for(
            lambda: (
                (s := status()) is not None
                and s.lag_total is not None
                and s.lag_total < 2_000
                and (s.lag_seconds or 0) < 2
                and s
            ),
            90,
            what="lag falling back once the workers go on",
        )
        assert after.state is StatusState.RUNNING and job.alive(), job.log_tail()
        assert producer.error is None
    finally:
        job.stop()
