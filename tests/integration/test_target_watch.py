"""bench/common.py `TargetWatch`, on a real Tansu broker: a copy is complete only once every expected record has been
read back from the target, whatever the topic's listed ends say. Tansu lists a partition's end as its last batch's
base offset + 1 and counts transaction markers as offsets, so the listed ends can add up to the expected count while
records are still missing (bench/ratelimit.py saw a capped flow's topic taken for complete ~10 s early). No timing is
asserted: only what was counted and the order of the watch's first and last record against the producer's."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from bench.common import TargetWatch
from reconciler import logs
from tests.integration.mirror_helpers import create_topic, wait_for

pytestmark = [pytest.mark.kafka]


def listed_ends(bootstrap: str, topic: str, partitions: int) -> int:
    c = Consumer(logs.client_config({"bootstrap.servers": bootstrap, "group.id": f"ends-{time.monotonic_ns()}"}))
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions))
    finally:
        c.close()


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> None:
    p = Producer(logs.client_config({"bootstrap.servers": bootstrap}))
    for i in range(records):
        p.produce(topic, b"v", partition=i % partitions)
    assert p.flush(30) == 0


def test_listed_ends_past_the_count_do_not_complete_the_watch(two_clusters):
    _, east = two_clusters
    topic = "watch-markers"
    create_topic(east.bootstrap, topic, 2)
    p = Producer(logs.client_config({"bootstrap.servers": east.bootstrap, "transactional.id": f"watch-{topic}"}))
    p.init_transactions(30)
    for _ in range(10):  # 90 records in 10 transactions: 10 commit markers take offsets too
        p.begin_transaction()
        for i in range(9):
            p.produce(topic, b"v", partition=i % 2)
        p.commit_transaction(30)
    assert listed_ends(east.bootstrap, topic, 2) >= 95  # what the old watch took for 95 records copied
    watch = TargetWatch(east.bootstrap, topic, 2, 95)
    try:
        wait_for(lambda: watch.listed_early, 30, 0.1, "the watch to find records missing under the listed ends")
        assert watch.last is None and watch.counted == 90
        before = time.monotonic()
        produce(east.bootstrap, topic, 5, 2)
        watch.wait(30)
        assert watch.counted == 95
        assert watch.last is not None and watch.last >= before  # timed by the read of the last record
    finally:
        watch.close()


def test_a_copy_is_timed_from_its_first_record_to_its_last(two_clusters):
    _, east = two_clusters
    topic = "watch-plain"
    create_topic(east.bootstrap, topic, 2)
    watch = TargetWatch(east.bootstrap, topic, 2, 3_000)
    try:
        started = time.monotonic()
        for _ in range(2):  # three bursts, the copy a watch sees: it is not complete before the last
            produce(east.bootstrap, topic, 1_000, 2)
            assert watch.last is None
        produce(east.bootstrap, topic, 1_000, 2)
        watch.wait(60)
        assert watch.counted == 3_000 and not watch.listed_early
        assert watch.first is not None and watch.last is not None
        assert started <= watch.first[0] <= watch.last
        assert watch.rate() > 0
    finally:
        watch.close()
