"""What each of engine/ends.py's `PartitionEnds` methods returns on each embedded broker (a contract: a new release
of either engine that changes an answer fails here, and ends.py's explanation is updated with it). Twenty records
produced as two batches of ten into partition 0, nothing into partition 1."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from reconciler import logs
from reconciler.contract.spec import ClusterSpec
from reconciler.dev.brokers import Broker, Engine
from reconciler.engine.delivery import mode_of
from reconciler.engine.ends import KafkaEndRequests, PartitionEnds
from reconciler.engine.offsets import OffsetStore
from tests.integration.mirror_helpers import create_topic
from tests.spec_helpers import job_spec

pytestmark = [pytest.mark.kafka]
ENGINES = [Engine.TANSU, Engine.NOIDA]


@pytest.fixture(scope="module", params=ENGINES, ids=[e.value for e in ENGINES])
def broker(request, broker_factory) -> Broker:
    return broker_factory.start(request.param)


def test_each_end_on_each_broker(broker):
    name = "ends-contract"
    create_topic(broker.bootstrap, name, 2)
    producer = Producer(logs.client_config({"bootstrap.servers": broker.bootstrap, "linger.ms": 50}))
    for _batch in range(2):
        for _ in range(10):
            producer.produce(name, b"x", partition=0)
        producer.flush(10)
    spec = job_spec("west->east", ClusterSpec("west", broker.bootstrap), ClusterSpec("east", broker.bootstrap))
    admin = AdminClient(logs.client_config({"bootstrap.servers": broker.bootstrap}))
    store = OffsetStore(spec, mode_of(spec))  # the flow's consumer on the source, as the driver's Connections
    ends = PartitionEnds(KafkaEndRequests(spec, admin, lambda: store.source_consumer))
    full, empty = (name, 0), (name, 1)
    try:
        listed = ends.listed_latest([full, empty], timeout=10.0)
        answers = (listed, ends.watermarks(full), ends.true_end(full, timeout=10.0))
        # The log start and an empty partition's ends are the same everywhere.
        assert ends.listed_earliest([full, empty], timeout=10.0) == {full: 0, empty: 0}
        assert (ends.watermarks(empty), ends.true_end(empty, timeout=10.0)) == ((0, 0), 0)
    finally:
        store.close()
    if broker.engine is Engine.TANSU:
        # The listed end and the high watermark: the last batch's base offset (10) + 1; only the read finds 20.
        assert answers == ({full: 11, empty: 0}, (0, 11), 20)
    else:
        # noida-db answers as Apache Kafka: every end is the offset after the last record.
        assert answers == ({full: 20, empty: 0}, (0, 20), 20)
