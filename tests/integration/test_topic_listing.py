"""A source topic its cluster lists without partitions, on real brokers with the driver in process.

docs/benchmarks.md: a 2,500-partition run left 10 topics (50 partitions) uncopied while `reconciler status` said
caught up, without a word in the job's log. A topic a Metadata answer gives with an error and no partition (topics
created in bulk, a loaded broker) was dropped from the flow's listing in silence: no partition planned, no lag, no
finding. Here the source (Tansu) advertises a relay in front of it (bench/kafka_wire.py `LeaderRelay`) whose
`unlisted` topics every Metadata answer lists with LEADER_NOT_AVAILABLE and no partition: the flow must say so in its
status record (and so in `reconciler status`) while it lasts, and copy the topic once it is listed. Asserts on what is
copied and on the status record, never on timing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from reconciler import logs
from reconciler.engine.driver import LocalExecutor, ReplicationDriver
from reconciler.jobplan.backend import read_job_status
from tests.integration.mirror_helpers import RelayedSource, create_topic, read_topic, relayed_source, spec_for, wait_for

pytestmark = [pytest.mark.kafka]


@pytest.fixture(name="relayed_source")
def relayed_source_fixture(tmp_path) -> Iterator[RelayedSource]:
    with relayed_source(tmp_path, set()) as source:
        yield source


def _produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer(logs.client_config({"bootstrap.servers": bootstrap, "linger.ms": 5}))
    for i in range(n):
        p.produce(topic, b"%s-%d" % (topic.encode(), i), partition=0)
    assert p.flush(30) == 0


def test_a_source_topic_listed_without_partitions_is_a_finding_until_listed_then_copied(
    relayed_source, broker_factory, driver_runs
):
    source, target = relayed_source, broker_factory.start()
    for topic in ("listed", "hidden"):
        create_topic(source.bootstrap, topic, 1)
        _produce(source.bootstrap, topic, 5)
    source.relay.unlisted = frozenset({"hidden"})
    spec = spec_for(source, target, topics_include=("listed", "hidden"), heartbeats_enabled=False)
    driver = ReplicationDriver(spec, LocalExecutor())
    driver_runs.run(driver, max_seconds=300)
    positions = driver.parts.positions
    wait_for(lambda: positions.get(("listed", 0)) == 5, 60, what="the listed topic copied")
    status = wait_for(
        lambda: (s := read_job_status({"bootstrap.servers": target.bootstrap}, spec.flow)) and s.findings and s,
        30,
        what="a finding for the topic listed without partitions",
    )
    assert status.findings == (
        "source topic hidden is listed without its partitions (LEADER_NOT_AVAILABLE: Broker: Leader not available): "
        "not copied until it is listed",
    )
    assert ("hidden", 0) not in positions
    source.relay.unlisted = frozenset()  # listed again: copied from its beginning
    wait_for(lambda: positions.get(("hidden", 0)) == 5, 60, what="the topic copied once listed")
    wait_for(
        lambda: (s := read_job_status({"bootstrap.servers": target.bootstrap}, spec.flow)) and not s.findings,
        30,
        what="the finding gone",
    )
    assert [r.value for r in read_topic(target.bootstrap, "west.hidden", 1)[0]] == [b"hidden-%d" % i for i in range(5)]
