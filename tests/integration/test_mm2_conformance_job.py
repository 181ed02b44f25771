"""MirrorMaker 2 conformance end to end (issue 11), real Tansu brokers and real Spark:
with separator `__` the job writes Kafka's internal topic names (DefaultReplicationPolicy with
`replication.policy.internal.topic.separator.enabled=true`), checkpoints carry the upstream commit
metadata the source broker keeps (MirrorCheckpointTask.checkpoint; Tansu keeps none, so here it is ""
and the copy itself is proven by tests/unit/test_mm2_conformance.py) and never move backwards
(MirrorCheckpointTask.checkpointIsMoreRecent)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from reconciler import logs
from reconciler.mirror.records import Checkpoint, OffsetSync
from tests.integration.mirror_helpers import create_topic, read_topic, spec_for, wait_for
from tests.integration.test_replication_job import RunningJob

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


def _checkpoints(bootstrap: str, topic: str, group: str) -> list[Checkpoint]:
    cons = Consumer(
        logs.client_config(
            {"bootstrap.servers": bootstrap, "group.id": f"cp-{time.monotonic_ns()}", "enable.partition.eof": True}
        )
    )
    cons.assign([TopicPartition(topic, 0, 0)])
    out = []
    while True:
        m = cons.poll(3)
        if m is None or (m.error() and m.error().code() == KafkaError._PARTITION_EOF):
            break
        if not m.error():
            cp = Checkpoint.deserialize(m.key(), m.value())
            if cp.consumer_group_id == group:
                out.append(cp)
    cons.close()
    return out


def _commit(bootstrap: str, group: str, offset: int, metadata: str) -> str:
    """Commit with metadata; returns the metadata the broker gives back (Tansu keeps none: "")."""
    c = Consumer(logs.client_config({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}))
    c.commit(offsets=[TopicPartition("ledger", 0, offset, metadata)], asynchronous=False)
    kept = c.committed([TopicPartition("ledger", 0)], timeout=10)[0].metadata or ""
    c.close()
    return kept


def test_separator_internal_names_and_monotonic_checkpoints_with_metadata(fresh_clusters, spark):  # noqa: F811
    source, target = fresh_clusters
    create_topic(source.bootstrap, "ledger", 1)
    p = Producer(logs.client_config({"bootstrap.servers": source.bootstrap, "linger.ms": 2}))
    for i in range(300):
        p.produce("ledger", f"{i}".encode(), partition=0)
        if i % 40 == 0:
            p.flush(10)
    p.flush(10)
    kept1 = _commit(source.bootstrap, "ledger-app", 120, "streams:v1")
    spec = spec_for(
        source, target, separator="__", topics_include=("ledger",), groups_include=("ledger-.*",), offset_lag_max=10
    )
    cp_topic = "west__checkpoints__internal"
    with RunningJob(spec, spark):
        first = wait_for(
            lambda: _checkpoints(target.bootstrap, cp_topic, "ledger-app"), 120, what=f"a checkpoint in {cp_topic}"
        )
        kept2 = _commit(source.bootstrap, "ledger-app", 250, "streams:v2")
        wait_for(
            lambda: any(c.upstream_offset == 250 for c in _checkpoints(target.bootstrap, cp_topic, "ledger-app")),
            90,
            what="the checkpoint of the advanced group",
        )
    cps = _checkpoints(target.bootstrap, cp_topic, "ledger-app")
    assert first[0].topic == "west__ledger" and first[0].upstream_offset == 120 and first[0].metadata == kept1
    assert cps[-1].upstream_offset == 250 and cps[-1].metadata == kept2
    downstream = [c.downstream_offset for c in cps]
    assert downstream == sorted(downstream), f"checkpoints moved backwards: {downstream}"
    assert len({(c.upstream_offset, c.downstream_offset) for c in cps}) == len(cps), "a repeated checkpoint was emitted"
    syncs = [
        OffsetSync.deserialize(r.key, r.value)
        for r in read_topic(source.bootstrap, "mm2-offset-syncs__east__internal", 1)[0]
    ]
    assert any(s.topic == "ledger" for s in syncs)


def test_a_restarted_job_reads_its_checkpoints_and_never_moves_them_backwards(fresh_clusters, spark):  # noqa: F811
    """MirrorCheckpointTask.start reads the CheckpointStore before the offset syncs: after a restart the
    checkpoints already written are the baseline, and a group committed before the last replayed sync
    still gets a checkpoint (OffsetSyncStore.start(false))."""
    source, target = fresh_clusters
    create_topic(source.bootstrap, "ledger", 1)
    p = Producer(logs.client_config({"bootstrap.servers": source.bootstrap, "linger.ms": 2}))
    for i in range(200):
        p.produce("ledger", f"{i}".encode(), partition=0)
        if i % 30 == 0:
            p.flush(10)
    p.flush(10)
    _commit(source.bootstrap, "ledger-app", 150, "")
    spec = spec_for(source, target, topics_include=("ledger",), groups_include=("ledger-.*",), offset_lag_max=10)
    with RunningJob(spec, spark):
        wait_for(
            lambda: _checkpoints(target.bootstrap, "west.checkpoints.internal", "ledger-app"),
            120,
            what="a first checkpoint",
        )
    before = _checkpoints(target.bootstrap, "west.checkpoints.internal", "ledger-app")
    _commit(source.bootstrap, "ledger-app", 40, "")  # the group rewinds upstream, behind the last sync
    with RunningJob(spec, spark) as driver:
        wait_for(
            lambda: getattr(driver, "checkpoints", None) is not None and len(driver.checkpoints.checkpoint_store) >= 1,
            60,
            what="the checkpoints already written read back",
        )
        wait_for(
            lambda: any(
                c.upstream_offset == 40
                for c in _checkpoints(target.bootstrap, "west.checkpoints.internal", "ledger-app")
            ),
            90,
            what="the rewound group's checkpoint after the restart",
        )
    after = _checkpoints(target.bootstrap, "west.checkpoints.internal", "ledger-app")
    assert after[: len(before)] == before and after[-1].upstream_offset == 40
