"""Faults of the clusters (issue 34), on the embedded brokers with the driver in process: what is copied and what is
reported. A record the target refuses (`on_refused_record`): noida-db enforces a topic's `max.message.bytes` (Tansu
does not), so those tests run on noida-db."""

from __future__ import annotations

import dataclasses
import threading

import pytest
from confluent_kafka import Producer
from prometheus_client import generate_latest

from reconciler.contract.spec import ClusterSpec, dead_letters_topic_name
from reconciler.contract.status import FaultKind, StatusState
from reconciler.engine.driver import LocalExecutor, ReplicationDriver
from reconciler.jobplan.backend import read_job_status
from tests.integration.mirror_helpers import create_topic, read_topic, spec_for, wait_for

pytestmark = [pytest.mark.kafka]

BIG = 2_000_000  # bytes: the source topic takes it (5 MB), the remote topic does not (1 MB)


def _refused_record_setup(source, target, topic: str, **kw):
    """100 small records around one of 2 MB (offset 50) on `topic`; the remote topic exists and takes 1 MB; the
    job's producer takes 10 MB (the target cluster's client config), so the remote topic is what refuses it."""
    create_topic(source.bootstrap, topic, 1, {"max.message.bytes": "5000000"})
    create_topic(target.bootstrap, f"west.{topic}", 1, {"max.message.bytes": "1000000"})
    p = Producer({"bootstrap.servers": source.bootstrap, "message.max.bytes": 10_000_000, "linger.ms": 5})
    for i in range(101):
        p.produce(topic, b"B" * BIG if i == 50 else b"r%d" % i, key=b"k%d" % i, partition=0)
    assert p.flush(30) == 0
    spec = spec_for(source, target, topics_include=(topic,), heartbeats_enabled=False, checkpoints_enabled=False, **kw)
    big_producer = ClusterSpec("east", target.bootstrap, {"message.max.bytes": "10000000"})
    return dataclasses.replace(spec, target=big_producer)


def _run(driver: ReplicationDriver) -> threading.Thread:
    thread = threading.Thread(target=driver.run, kwargs={"max_seconds": 60}, daemon=True)
    thread.start()
    return thread


def test_refused_record_fails_its_partition_once_the_records_before_it_are_copied(noida_clusters):
    source, target = noida_clusters
    spec = _refused_record_setup(source, target, "sized")
    assert spec.settings.on_refused_record == "fail"  # the default
    driver = ReplicationDriver(spec, LocalExecutor())
    thread = _run(driver)
    try:
        status = wait_for(
            lambda: (s := read_job_status({"bootstrap.servers": target.bootstrap}, spec.flow)) and s.faults and s,
            40,
            what="a fault in the status record",
        )
        # A few more batches: the halted partition is not copied again.
        batches = driver.progress.batches
        wait_for(lambda: driver.progress.batches >= batches + 3, 30, what="three more batches")
    finally:
        driver.stop_event.set()
        thread.join(30)
    fault = status.faults[0]
    assert (fault.topic, fault.partition, fault.kind, fault.offset) == ("sized", 0, FaultKind.REFUSED_RECORD, 50)
    assert fault.since is not None
    assert "larger than the remote topic west.sized takes" in (fault.reason or ""), fault
    assert status.state is StatusState.DEGRADED and status.halted == ("sized:0",)
    # The 50 records before it, each once; nothing after it.
    copied = [r.value for r in read_topic(target.bootstrap, "west.sized", 1)[0]]
    assert copied == [b"r%d" % i for i in range(50)]
    assert driver.parts.positions[("sized", 0)] == 50
    # The metrics say so too (the alert rule MirrorPartitionFault reads this series).
    metrics = generate_latest(driver.metrics.registry).decode()
    assert "mirror_partition_fault_since_seconds{" in metrics and 'kind="refused-record"' in metrics, metrics[-2000:]
    assert 'mirror_job_state{family="",flow="west->east",source="west",state="degraded",target="east"} 1.0' in metrics


@pytest.mark.parametrize("delivery", ["at-least-once", "exactly-once"])
def test_refused_record_skipped_to_the_dead_letter_topic(noida_clusters, delivery):
    source, target = noida_clusters
    spec = _refused_record_setup(source, target, "sized2", on_refused_record="skip", delivery=delivery)
    driver = ReplicationDriver(spec, LocalExecutor())
    thread = _run(driver)
    isolation = "read_committed" if delivery == "exactly-once" else "read_uncommitted"
    try:
        wait_for(lambda: driver.parts.positions.get(("sized2", 0)) == 101, 40, what="the partition copied to its end")
        status = wait_for(
            lambda: (s := read_job_status({"bootstrap.servers": target.bootstrap}, spec.flow)) and s.dead_letters and s,
            20,
            what="the dead letter counted in the status record",
        )
    finally:
        driver.stop_event.set()
        thread.join(30)
    copied = [r.value for r in read_topic(target.bootstrap, "west.sized2", 1, isolation=isolation)[0]]
    assert copied == [b"r%d" % i for i in range(101) if i != 50]  # each once, in order
    assert [(c.topic, c.partition, c.count) for c in status.dead_letters] == [("sized2", 0, 1)]
    assert status.state is StatusState.RUNNING and not status.faults
    dlq = dead_letters_topic_name(spec)
    assert dlq == "west.dead-letters.internal"
    [letter] = read_topic(target.bootstrap, dlq, 1, isolation=isolation)[0]
    headers = dict(letter.headers or [])
    assert letter.key == b"k50" and letter.value is None
    assert headers["__connect.errors.topic"] == b"sized2" and headers["__connect.errors.offset"] == b"50"
    assert b"larger than the remote topic" in headers["__connect.errors.exception.message"]
