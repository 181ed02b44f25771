"""A flow's `rate_limit` on real brokers (issue 47): a limited flow copies every record of a backlog, no faster than its
cap allows, in the driver's process and in Spark's Python workers, while its heartbeats keep their interval; and
`reconciler plan` warns, with the numbers, when a backlog at the cap outlives the source topic's retention.

The time bound is a correctness bound, not a speed assertion: a task starts with an empty bucket that fills at its
share of the cap, so the backlog cannot be copied in less than backlog / cap (the test allows 10 % for the odd
record a read takes beyond its allowance). How fast a flow gets near its cap is bench/ratelimit.py's."""

from __future__ import annotations

import json
import re
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from reconciler import logs
from reconciler.cli.main import main
from reconciler.contract.spec import job_group
from reconciler.engine.driver import LocalExecutor, ReplicationDriver, SparkExecutor
from tests.integration.mirror_helpers import create_topic, read_topic, spec_for, wait_for

pytestmark = [pytest.mark.kafka]

PARTITIONS = 2
PER_PARTITION = 3_000
CAP = 1_000  # records/s: the backlog takes at least 6 s (unpaced, the same backlog is copied in well under 1 s)


def produce(bootstrap: str, topic: str, per_partition: int, batch: int = 1000) -> None:
    """`per_partition` records of ~100 B to each partition, flushed every `batch` of them (Tansu lists a partition's
    end as its last batch's base offset + 1: engine/ends.py)."""
    p = Producer(logs.client_config({"bootstrap.servers": bootstrap, "linger.ms": 5}))
    for i in range(per_partition):
        for part in range(PARTITIONS):
            v = b"%d-%d" % (part, i)
            p.produce(topic, b"x" * 90 + v, key=v, partition=part)
        if i % batch == batch - 1:
            assert p.flush(30) == 0
    assert p.flush(30) == 0


@pytest.mark.parametrize(
    ("delivery", "executor"),
    [
        ("at-least-once", "local"),
        pytest.param("exactly-once", "spark", marks=[pytest.mark.spark, pytest.mark.slow]),
    ],
)
def test_a_limited_flow_copies_everything_and_no_faster_than_its_cap(
    fresh_clusters, driver_runs, request, delivery, executor
):
    source, target = fresh_clusters
    create_topic(source.bootstrap, "rl", PARTITIONS)
    produce(source.bootstrap, "rl", PER_PARTITION)
    total = PARTITIONS * PER_PARTITION
    spec = spec_for(
        source,
        target,
        topics_include=("rl",),
        delivery=delivery,
        records_per_second=CAP,
        heartbeats_interval_seconds=1.0,
        max_batch_ms=3000,  # several batches: each task's bucket starts empty
    )
    run_in = SparkExecutor(request.getfixturevalue("spark")) if executor == "spark" else LocalExecutor()
    driver = ReplicationDriver(spec, run_in)
    started = time.monotonic()
    run = driver_runs.run(driver, max_seconds=240)
    try:
        wait_for(
            lambda: all(driver.parts.positions.get(("rl", p), 0) >= PER_PARTITION for p in range(PARTITIONS)),
            120,
            interval=0.1,
            what="the backlog copied",
        )
        elapsed = time.monotonic() - started
        beats = sum(len(r) for r in read_topic(source.bootstrap, "heartbeats", 1).values())
    finally:
        assert run.stop(60)
    isolation = "read_committed" if delivery == "exactly-once" else "read_uncommitted"
    copied = read_topic(target.bootstrap, "west.rl", PARTITIONS, isolation=isolation)
    held = read_topic(source.bootstrap, "rl", PARTITIONS)
    for p in range(PARTITIONS):
        on_source = [(r.key, r.value) for r in held[p]]
        on_target = [(r.key, r.value) for r in copied[p]]
        assert set(on_source) <= set(on_target), f"partition {p}: {len(set(on_source) - set(on_target))} missing"
        if delivery == "exactly-once":
            assert on_target == on_source, p
    print(f"{delivery} ({executor}): {total} records at a cap of {CAP}/s in {elapsed:.1f} s; {beats} heartbeats")
    assert elapsed >= 0.9 * total / CAP, f"copied {total} records in {elapsed:.1f} s: faster than the cap of {CAP}/s"
    assert beats >= 0.5 * elapsed, "the flow's heartbeats (1 s) kept their interval while it was paced"


TOPOLOGY = """apiVersion: reconciler/v1
kind: Topology
clusters:
  west: {{bootstrap_servers: "{west}"}}
  east: {{bootstrap_servers: "{east}"}}
flows:
  - source: west
    target: east
    topics: {{include: ["short"]}}
    rate_limit: {{records_per_second: {rate}}}
"""


def test_the_plan_warns_when_the_backlog_at_the_cap_outlives_the_retention(fresh_clusters, tmp_path, capsys):
    source, target = fresh_clusters
    create_topic(source.bootstrap, "short", PARTITIONS, {"retention.ms": "60000"})
    # 2,000 records (Tansu lists up to 9 fewer a partition): 200 s at 10/s, past the minute the topic keeps them
    produce(source.bootstrap, "short", 1_000, batch=10)
    path = tmp_path / "t.yaml"

    def plan(rate: int, fmt: str = "json") -> str:
        path.write_text(TOPOLOGY.format(west=source.bootstrap, east=target.bootstrap, rate=rate))
        assert main(["plan", str(path), "--format", fmt]) == 0
        return capsys.readouterr().out

    (warning,) = [f for f in json.loads(plan(10))["findings"] if f["kind"] == "retention"]
    assert (warning["severity"], warning["cluster"], warning["subject"]) == ("warning", "west", "west->east")
    found = re.fullmatch(
        r"flow west->east has (1,9\d\d|2,000) records to copy; at its rate_limit \(10 records/s\) that takes "
        r"3\.[23] min, longer than west keeps the records of short \((1,9\d\d|2,000) records, retention\.ms 60,000\): "
        r"records would be deleted before they are copied",
        warning["message"],
    )
    assert found is not None, warning["message"]
    assert re.search(r"records_per_second to at least 3[34]\b", warning["hint"]), warning["hint"]
    assert warning["message"] in plan(10, "text") and found.group(1) + " records to copy" in plan(10, "markdown")
    assert not [f for f in json.loads(plan(100))["findings"] if f["kind"] == "retention"], "20 s: within the minute"


class Recording(LocalExecutor):
    """The driver's process, keeping the partitions of each batch's tasks of records (the heartbeats' own copies
    run in the driver without this executor)."""

    def __init__(self) -> None:
        self.batches: list[set[tuple[str, int]]] = []

    def run(self, spec, tasks, mode):
        self.batches.append({p.tp for t in tasks for p in t.partitions})
        return super().run(spec, tasks, mode)


def test_a_capped_flows_task_leaves_its_partitions_at_rest_out_and_copies_what_arrives_there(
    fresh_clusters, driver_runs
):
    """Issue 47: a capped flow's one task carries the partitions with records to copy, not those caught up at the
    ends read before the batch (their cost lengthened the gap between batches past the tokens carried across it);
    records that arrive at a partition left out are copied by a later batch and its position committed: nothing
    skipped."""
    source, target = fresh_clusters
    create_topic(source.bootstrap, "rest", 3)
    spec = spec_for(source, target, topics_include=("rest",), records_per_second=CAP, max_batch_ms=1000)
    executor = Recording()
    driver = ReplicationDriver(spec, executor)
    run = driver_runs.run(driver, max_seconds=240)
    rest = {("rest", 0), ("rest", 1), ("rest", 2)}
    left_out = {("rest", 1), ("rest", 2)}
    p = Producer(logs.client_config({"bootstrap.servers": source.bootstrap, "linger.ms": 5}))
    try:
        wait_for(lambda: rest <= set(driver.gate.caught_up), 60, interval=0.1, what="the empty partitions caught up")
        for i in range(3_000):  # then a backlog on partition 0 alone: 3 s at the cap
            p.produce("rest", b"x" * 90, key=b"%d" % i, partition=0)
            if i % 1000 == 999:
                assert p.flush(30) == 0
        wait_for(
            lambda: any(("rest", 0) in b and not b & left_out for b in executor.batches),
            60,
            interval=0.1,
            what="a batch of the backlog without the partitions at rest",
        )
        for part in (1, 2):
            for i in range(5):
                p.produce("rest", b"y" * 90, key=b"late-%d-%d" % (part, i), partition=part)
        assert p.flush(30) == 0
        wait_for(
            lambda: (
                all(driver.parts.positions.get(tp, 0) >= 5 for tp in left_out)
                and driver.parts.positions.get(("rest", 0), 0) >= 3_000
            ),
            120,
            interval=0.1,
            what="every record copied",
        )
    finally:
        assert run.stop(60)
    copied = read_topic(target.bootstrap, "west.rest", 3)
    held = read_topic(source.bootstrap, "rest", 3)
    for part in range(3):
        assert {r.key for r in held[part]} <= {r.key for r in copied[part]}, part
    committed = Consumer(logs.client_config({"bootstrap.servers": source.bootstrap, "group.id": job_group(spec)}))
    try:
        offsets = committed.committed([TopicPartition("rest", part) for part in range(3)], timeout=10)
    finally:
        committed.close()
    assert [o.offset for o in offsets] == [len(held[part]) for part in range(3)], "positions committed as before"
