"""Helpers for the replication job tests: topics, a sequenced producer, reading a topic back."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.kafka_wire import LeaderRelay
from reconciler import logs
from reconciler.adapters.read_to_end import read_to_end
from reconciler.contract.spec import ClusterSpec, JobSpec
from reconciler.dev.brokers import Broker, free_port, start_broker, stop_pid
from tests.spec_helpers import job_spec


def create_topic(bootstrap: str, name: str, partitions: int, config: dict | None = None) -> None:
    admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap}))
    for f in admin.create_topics([NewTopic(name, partitions, 1, config=config or {})]).values():
        f.result(15)


def spec_for(source, target, *, source_alias="west", target_alias="east", **kw) -> JobSpec:
    defaults = dict(
        master="local[2]",
        parallelism=2,
        refresh_interval_seconds=1.0,
        heartbeats_interval_seconds=1.0,
        checkpoints_interval_seconds=1.0,
        status_interval_seconds=1.0,
        trigger_interval_ms=100,
    )
    defaults.update(kw)
    return job_spec(
        f"{source_alias}->{target_alias}",
        ClusterSpec(source_alias, source.bootstrap),
        ClusterSpec(target_alias, target.bootstrap),
        **defaults,
    )


@dataclass
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list | None
    timestamp: tuple[int, int]


def read_topic(
    bootstrap: str, topic: str, partitions: int, *, isolation: str = "read_uncommitted", timeout: float = 20.0
) -> dict[int, list[Rec]]:
    """Every record of `topic`, per partition, read to end-of-partition."""
    c = Consumer(
        logs.client_config(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"verify-{time.monotonic_ns()}",
                "enable.partition.eof": True,
                "enable.auto.commit": False,
                "isolation.level": isolation,
            }
        )
    )
    out: dict[int, list[Rec]] = {p: [] for p in range(partitions)}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        pending = read_to_end(
            c,
            timeout,
            lambda m: out[m.partition()].append(
                Rec(m.partition(), m.offset(), m.key(), m.value(), m.headers(), m.timestamp())
            ),
            partitions=[(topic, p) for p in range(partitions)],
            batch=10_000,
            poll_seconds=0.5,
        )
        assert not pending, f"did not reach the end of {topic}: {sorted(p for _, p in pending)} still pending"
    finally:
        c.close()
    return out


def wait_for(predicate, timeout: float, interval: float = 0.5, what: str = "condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def count_topic(bootstrap: str, topic: str, partitions: int) -> int:
    try:
        return sum(len(v) for v in read_topic(bootstrap, topic, partitions, timeout=10).values())
    except Exception:  # noqa: BLE001 - topic not there yet
        return 0


class SequencedProducer(threading.Thread):
    """Produces `total` records round-robin over partitions, value = b"<partition>:<seq>" where
    seq counts per partition from 0, at about `rate` records/s; `stop()` ends it early (then
    `expected()` covers what was produced)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, total: int, rate: float):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions, self.total, self.rate = bootstrap, topic, partitions, total, rate
        self.produced = 0
        self.error: Exception | None = None
        self._stop_event = threading.Event()

    def stop(self, timeout: float = 60.0) -> None:
        self._stop_event.set()
        self.join(timeout)

    def run(self) -> None:
        try:
            p = Producer(
                logs.client_config({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "enable.idempotence": True})
            )
            seq = [0] * self.partitions
            start = time.monotonic()
            for i in range(self.total):
                if self._stop_event.is_set():
                    break
                part = i % self.partitions
                p.produce(
                    self.topic,
                    f"{part}:{seq[part]}".encode(),
                    f"k{seq[part]}".encode(),
                    part,
                    headers=[("seq", str(seq[part]).encode())],
                )
                seq[part] += 1
                self.produced += 1
                if i % 100 == 0:
                    p.poll(0)
                    ahead = (i / self.rate) - (time.monotonic() - start)
                    if ahead > 0:
                        time.sleep(ahead)
            p.flush(30)
        except Exception as exc:  # noqa: BLE001
            self.error = exc

    def expected(self) -> dict[int, list[int]]:
        per = {p: 0 for p in range(self.partitions)}
        for i in range(self.produced if self._stop_event.is_set() else self.total):
            per[i % self.partitions] += 1
        return {p: list(range(n)) for p, n in per.items()}


def seqs(records: list[Rec]) -> list[int]:
    return [int(r.value.split(b":")[1]) for r in records]


def broker_hides_aborted(bootstrap: str, topic: str) -> bool:
    """Whether a read_committed consumer on this broker skips records of aborted transactions
    (Kafka does; the Tansu test broker does not)."""
    create_topic(bootstrap, topic, 1)
    p = Producer(logs.client_config({"bootstrap.servers": bootstrap, "transactional.id": f"probe-{topic}"}))
    p.init_transactions(15)
    p.begin_transaction()
    p.produce(topic, b"aborted", partition=0)
    p.flush(10)
    p.abort_transaction(15)
    p.begin_transaction()
    p.produce(topic, b"committed", partition=0)
    p.commit_transaction(15)
    values = [r.value for r in read_topic(bootstrap, topic, 1, isolation="read_committed")[0]]
    return values == [b"committed"]


@dataclass
class RelayedSource:
    """A Tansu broker whose clients reach it through a `LeaderRelay` (bench/kafka_wire.py; its advertised address):
    the relay can make partitions led by a node that hangs, or topics listed without partitions."""

    broker: Broker
    relay: LeaderRelay

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.relay.port}"


@contextmanager
def relayed_source(tmp_path: Path, moved: set[tuple[str, int]]) -> Iterator[RelayedSource]:
    """A `RelayedSource` whose relay moves the partitions `moved` (topic, partition) to the node it can hang, stopped
    at the block's end."""
    port = free_port()
    relay = LeaderRelay(("127.0.0.1", port), moved)
    broker = start_broker("127.0.0.1", port, tmp_path / "source.log", advertised=("127.0.0.1", relay.port))
    try:
        yield RelayedSource(broker, relay)
    finally:
        relay.close()
        if broker.pid:
            stop_pid(broker.pid)
