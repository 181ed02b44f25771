"""Many groups' committed offsets: the batched reader (FindCoordinator v4, OffsetFetch v8 over our own socket) and the
per-group reader (librdkafka) give the same answer, on real Tansu and real noida-db brokers and over TLS
(adapters/group_offsets.py). The batched reader's requests are counted on the wire (bench/kafka_wire.py
`RequestCounter`: a count, never a time): 3,000 groups are 3 OffsetFetch requests instead of 3,000.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.kafka_wire import RequestCounter
from reconciler import logs
from reconciler.adapters.group_offsets import (
    BatchedReader,
    GroupOffsets,
    PerGroupReader,
    choose_reader,
)
from reconciler.adapters.probe import open_socket
from reconciler.dev.brokers import Broker, Engine, free_port, start_broker, stop_pid
from reconciler.engine.emitters import CheckpointEmitter
from reconciler.mirror.checkpoints import OffsetAndMetadata
from tests.integration.mirror_helpers import spec_for

pytestmark = pytest.mark.kafka

OFFSET_FETCH, FIND_COORDINATOR = 9, 10
MANY = 3_000


@dataclass
class Counted:
    """A broker and a `RequestCounter` in front of it. Tansu advertises the relay, so every client connection crosses
    it; noida-db cannot advertise another address, so only connections made to the relay (`via_relay`) are counted."""

    engine: Engine
    broker: Broker
    relay: RequestCounter

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.relay.port}"

    @property
    def config(self) -> dict[str, str]:
        return {"bootstrap.servers": self.bootstrap}

    def admin(self) -> AdminClient:
        return AdminClient(logs.client_config(self.config))

    def via_relay(self, host: str, port: int, config: Mapping[str, str], timeout: float):
        """A broker connection made to the relay whatever address the cluster named (BatchedReader's `connect`)."""
        return open_socket("127.0.0.1", self.relay.port, config, timeout)

    def offset_fetches(self) -> int:
        return self.relay.counts()[OFFSET_FETCH]


@pytest.fixture(scope="module", params=[Engine.TANSU, Engine.NOIDA], ids=["tansu", "noida"])
def cluster(request, tmp_path_factory) -> Iterator[Counted]:
    engine = request.param
    work = tmp_path_factory.mktemp(f"group-offsets-{engine.value}")
    port = free_port()
    relay = RequestCounter(free_port(), ("127.0.0.1", port))
    advertised = ("127.0.0.1", relay.port) if engine is Engine.TANSU else None
    data = work / "data" if engine is Engine.NOIDA else None
    broker = start_broker("127.0.0.1", port, work / "broker.log", engine=engine, data_dir=data, advertised=advertised)
    try:
        yield Counted(engine, broker, relay)
    finally:
        relay.close()
        if broker.pid:
            stop_pid(broker.pid)


def create_topic(admin: AdminClient, topic: str, partitions: int) -> None:
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    p = Producer(logs.client_config({"bootstrap.servers": bootstrap, "linger.ms": 5}))
    for part in range(partitions):
        for i in range(per_partition):
            p.produce(topic, b"%d" % i, partition=part)
    assert p.flush(30) == 0


def alter(admin: AdminClient, offsets: Mapping[str, list[TopicPartition]]) -> None:
    """AlterConsumerGroupOffsets for each group (one group a request, the admin API's rule), 500 in flight."""
    groups = sorted(offsets)
    for i in range(0, len(groups), 500):
        futures = [
            f
            for g in groups[i : i + 500]
            for f in admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(g, offsets[g])]).values()
        ]
        for f in futures:
            f.result(30)


def consumer_commits(bootstrap: str, group: str, offsets: list[TopicPartition]) -> None:
    """A real consumer of `group` that commits `offsets` (with their metadata) and leaves."""
    c = Consumer(logs.client_config({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}))
    try:
        c.commit(offsets=offsets, asynchronous=False)
    finally:
        c.close()


def consumer_without_commits(bootstrap: str, group: str, topic: str) -> None:
    """A consumer that joins `group`, is assigned partitions, reads, and leaves without committing anything."""
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    c = Consumer(logs.client_config({**conf, "auto.offset.reset": "earliest"}))
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        assert c.assignment(), f"{group} was never assigned a partition of {topic}"
    finally:
        c.close()


def view(answers: Mapping[str, GroupOffsets]) -> dict[str, object]:
    """What two readers must agree on: each group's offsets, or that it failed."""
    return {g: ("failed" if a.error is not None else dict(a.offsets)) for g, a in answers.items()}


def both(cluster: Counted, groups: list[str]) -> tuple[dict[str, GroupOffsets], dict[str, GroupOffsets]]:
    """(batched, per-group) answers for `groups`, the batched reader chosen as an engine would choose it."""
    admin = cluster.admin()
    choice = choose_reader(cluster.config, admin)
    assert choice.batched, choice.why
    assert isinstance(choice.reader, BatchedReader)
    return choice.reader.read(groups, 10.0), PerGroupReader(admin).read(groups, 10.0)


def test_both_readers_give_the_same_answer(cluster):
    """Groups committed by a real consumer and by AlterConsumerGroupOffsets, with metadata; a group that joined and
    committed nothing; a group that never existed: the same answer from both readers, as the records say."""
    topic = f"orders-{cluster.engine.value}"
    admin = cluster.admin()
    create_topic(admin, topic, 3)
    produce(cluster.bootstrap, topic, 3, 20)
    consumer_commits(
        cluster.bootstrap, "by-consumer", [TopicPartition(topic, 0, 7, "ü-meta"), TopicPartition(topic, 2, 11)]
    )
    alter(admin, {"by-admin": [TopicPartition(topic, 1, 5, "alter"), TopicPartition(topic, 2, 20, "")]})
    consumer_without_commits(cluster.bootstrap, "no-offsets", topic)
    groups = ["by-admin", "by-consumer", "never-existed", "no-offsets"]

    batched, per_group = both(cluster, groups)

    assert view(batched) == view(per_group)
    assert set(batched) == set(groups)
    keeps_metadata = cluster.engine is Engine.NOIDA  # Tansu answers every committed offset with empty metadata
    assert dict(batched["by-consumer"].offsets) == {
        (topic, 0): OffsetAndMetadata(7, "ü-meta" if keeps_metadata else ""),
        (topic, 2): OffsetAndMetadata(11, ""),
    }
    assert dict(batched["by-admin"].offsets) == {
        (topic, 1): OffsetAndMetadata(5, "alter" if keeps_metadata else ""),
        (topic, 2): OffsetAndMetadata(20, ""),
    }
    for group in ("never-existed", "no-offsets"):
        assert batched[group].error is None and not batched[group].offsets


def test_thousands_of_groups_are_a_handful_of_requests(cluster):
    """3,000 groups (1,000 a request: more than one request to the coordinator): the same offsets from both readers;
    the batched reader sends 3 FindCoordinator and 3 OffsetFetch requests, the per-group reader 3,000 OffsetFetch (counted
    where its connections cross the relay: Tansu)."""
    topic = f"many-{cluster.engine.value}"
    admin = cluster.admin()
    create_topic(admin, topic, 4)
    produce(cluster.bootstrap, topic, 4, 10)
    groups = [f"g{i:05d}" for i in range(MANY)]
    alter(admin, {g: [TopicPartition(topic, i % 4, 1 + i % 9)] for i, g in enumerate(groups)})

    cluster.relay.reset()
    batched = BatchedReader(cluster.config, connect=cluster.via_relay).read(groups, 10.0)
    sent = cluster.relay.counts()
    assert (sent[FIND_COORDINATOR], sent[OFFSET_FETCH]) == (3, 3)

    cluster.relay.reset()
    per_group = PerGroupReader(admin).read(groups, 10.0)
    if cluster.engine is Engine.TANSU:
        assert cluster.offset_fetches() >= MANY

    assert view(batched) == view(per_group)
    assert {g: dict(a.offsets) for g, a in batched.items()} == {
        g: {(topic, i % 4): OffsetAndMetadata(1 + i % 9)} for i, g in enumerate(groups)
    }


def test_a_broken_bootstrap_address_fails_nothing_when_another_answers(cluster):
    """A bootstrap address that refuses connections, then the broker: every group is read (FindCoordinator goes to
    the next address)."""
    topic = f"fallback-{cluster.engine.value}"
    admin = cluster.admin()
    create_topic(admin, topic, 1)
    alter(admin, {"after-refusal": [TopicPartition(topic, 0, 0)]})
    dead = f"127.0.0.1:{free_port()}"
    reader = BatchedReader({"bootstrap.servers": f"{dead},{cluster.bootstrap}"})
    answer = reader.read(["after-refusal"], 5.0)["after-refusal"]
    assert answer.error is None and dict(answer.offsets) == {(topic, 0): OffsetAndMetadata(0)}


def test_a_cluster_that_cannot_be_reached_fails_its_groups_not_the_read(tmp_path: Path):
    reader = BatchedReader({"bootstrap.servers": f"127.0.0.1:{free_port()}"})
    answers = reader.read(["a", "b"], 2.0)
    assert set(answers) == {"a", "b"}
    assert all(a.error is not None and a.error.code is None and not a.offsets for a in answers.values())


def test_the_checkpoint_round_reads_through_the_batched_reader(cluster):
    """CheckpointEmitter.source_group_offsets: the flow's groups (its filter, not the job's own) read in one
    OffsetFetch request, each with the time it was read."""
    topic = f"round-{cluster.engine.value}"
    admin = cluster.admin()
    create_topic(admin, topic, 2)
    alter(
        admin,
        {
            "billing-a": [TopicPartition(topic, 0, 3, "m")],
            "billing-b": [TopicPartition(topic, 1, 4)],
            "other-c": [TopicPartition(topic, 0, 1)],
        },
    )
    spec = spec_for(cluster, cluster, topics_include=(topic,), groups_include=("billing-.*",))
    emitter = CheckpointEmitter(spec, source_admin=admin, target_producer=None, environ={})
    emitter.group_reader = BatchedReader(cluster.config, connect=cluster.via_relay)
    try:
        cluster.relay.reset()
        before = int(time.time() * 1000)
        read = emitter.source_group_offsets()
        assert cluster.offset_fetches() == 1
    finally:
        emitter.close()
    meta = "m" if cluster.engine is Engine.NOIDA else ""
    assert read == {
        "billing-a": {(topic, 0): OffsetAndMetadata(3, meta)},
        "billing-b": {(topic, 1): OffsetAndMetadata(4)},
    }
    assert all(emitter.read_at[g] >= before for g in read)


def test_over_mutual_tls_the_batched_reader_reads_what_librdkafka_reads(secure_factory):
    """A Tansu broker reachable only through TLS that requires a client certificate (reconciler/dev/tls.py): the
    batched reader connects with the probe's TLS context (the CA, the client certificate and key, as librdkafka
    takes them) and answers what the per-group reader answers."""
    broker = secure_factory.start(mutual=True)
    config = broker.client_config()
    admin = AdminClient(logs.client_config(config))
    create_topic(admin, "tls-orders", 2)
    alter(admin, {f"tls-{i}": [TopicPartition("tls-orders", i % 2, 10 + i)] for i in range(5)})
    groups = [f"tls-{i}" for i in range(5)] + ["tls-none"]

    choice = choose_reader(config, admin)
    assert choice.batched, choice.why
    batched = choice.reader.read(groups, 10.0)

    assert view(batched) == view(PerGroupReader(admin).read(groups, 10.0))
    assert {g: dict(a.offsets) for g, a in batched.items()} == {
        **{f"tls-{i}": {("tls-orders", i % 2): OffsetAndMetadata(10 + i)} for i in range(5)},
        "tls-none": {},
    }


def test_without_a_client_certificate_the_groups_fail_they_are_not_empty(secure_factory):
    """The same broker refuses a client without a certificate: every group is an error (no offsets made up)."""
    broker = secure_factory.start(mutual=True)
    config = {k: v for k, v in broker.client_config().items() if not k.startswith("ssl.certificate")}
    config = {k: v for k, v in config.items() if not k.startswith("ssl.key")}
    answers = BatchedReader(config).read(["a", "b"], 5.0)
    assert all(a.error is not None and not a.offsets for a in answers.values())


def test_sasl_clusters_keep_the_per_group_reader():
    """No broker here enforces SASL (docs/brokers.md): the batched reader never logs in, so a SASL cluster is read
    one group per request by librdkafka, without even an ApiVersions request (the address is never reached)."""
    for protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        config = {"bootstrap.servers": f"127.0.0.1:{free_port()}", "security.protocol": protocol}
        choice = choose_reader(config, admin=None)
        assert not choice.batched and isinstance(choice.reader, PerGroupReader)
        assert "SASL" in choice.why and choice.settled


def test_the_offset_commands_read_many_groups_as_they_read_one(cluster):
    """MirrorKafka.committed_offsets_of (cutover's read of its groups, the target side of sync.group_offsets) gives
    what committed_offsets gives one group at a time, for the partitions asked."""
    from reconciler.adapters.mirror_kafka import MirrorKafka
    from reconciler.mirror.mirror_client import TopicPartition as TP

    topic = f"commands-{cluster.engine.value}"
    admin = cluster.admin()
    create_topic(admin, topic, 3)
    alter(admin, {f"cmd-{i}": [TopicPartition(topic, p, 2 + i + p) for p in range(i % 3 + 1)] for i in range(6)})
    groups = [f"cmd-{i}" for i in range(6)] + ["cmd-none"]
    asked = [TP(topic, 0), TP(topic, 2)]
    client = MirrorKafka(cluster.config, timeout=10.0)
    assert client.committed_offsets_of(groups, asked) == {g: client.committed_offsets(g, asked) for g in groups}


def test_an_answer_too_large_to_read_is_asked_again_in_halves(cluster):
    """Groups that committed on many partitions: an OffsetFetch answer longer than the reader reads is left unread
    and its groups asked again in halves, down to one group a request; a single group's answer too large fails that
    group alone."""
    topic = f"wide-{cluster.engine.value}"
    admin = cluster.admin()
    create_topic(admin, topic, 20)
    groups = [f"wide-{i}" for i in range(8)]
    alter(admin, {g: [TopicPartition(topic, p, 1 + i) for p in range(20)] for i, g in enumerate(groups)})
    alter(admin, {"wide-only-one": [TopicPartition(topic, 0, 1)]})

    one_group = 20 * 27 + 100  # a group's 20 partitions (27 bytes each) and its topic, with room to spare
    reader = BatchedReader(cluster.config, connect=cluster.via_relay, max_frame_bytes=one_group)
    cluster.relay.reset()
    answers = reader.read(groups, 10.0)
    assert cluster.offset_fetches() == 1 + 2 + 4 + 8  # every level of the halving, down to one group a request
    assert {g: dict(a.offsets) for g, a in answers.items()} == {
        g: {(topic, p): OffsetAndMetadata(1 + i) for p in range(20)} for i, g in enumerate(groups)
    }

    small = BatchedReader(cluster.config, max_frame_bytes=200)
    answers = small.read(["wide-0", "wide-only-one"], 10.0)
    assert answers["wide-0"].error is not None and "at most 200" in str(answers["wide-0"].error)
    assert dict(answers["wide-only-one"].offsets) == {(topic, 0): OffsetAndMetadata(1)}
