"""The demo's own traffic on the embedded clusters: sample topics, a consumer group's offsets, a live
stream, record counts, end-to-end latency samples and a config changed by hand.

Dev tooling like `sample_data.produce`: it talks to local brokers by bootstrap address with the Kafka
clients directly. What the product itself does (plan, apply, status, drift, checkpoints, heartbeats) the
demo does through the operations and the Backend (`reconciler/cli/demo.py`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from reconciler import logs
from reconciler.adapters.read_to_end import read_to_end, reader_config
from reconciler.dev.sample_data import sample_records


def create_topics(bootstrap: str, topics: Mapping[str, int], configs: Mapping[str, Mapping[str, str]]) -> None:
    """Create the topics (name -> partitions, with `configs`) that do not exist yet."""
    admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap}))
    existing = set(admin.list_topics(timeout=10).topics)
    new = [NewTopic(t, n, 1, config=dict(configs.get(t, {}))) for t, n in topics.items() if t not in existing]
    for fut in admin.create_topics(new).values() if new else ():
        fut.result(15)


def commit_group(bootstrap: str, group: str, topic: str, partitions: int, offset: int) -> None:
    """Commit `offset` on every partition of `topic` for `group` (a group that has processed that much)."""
    c = Consumer(logs.client_config({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}))
    try:
        c.commit(offsets=[TopicPartition(topic, p, offset) for p in range(partitions)], asynchronous=False)
    finally:
        c.close()


def set_topic_config(bootstrap: str, topic: str, key: str, value: str) -> None:
    """Change one config of a topic (incrementally), as a person would by hand."""
    admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap}))
    res = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)],
    )
    for fut in admin.incremental_alter_configs([res]).values():
        fut.result(15)


def count_records(bootstrap: str, topics: list[str], timeout: float = 20.0) -> dict[str, int]:
    """Records per topic, read to the end of every partition (ListOffsets is not trusted: Tansu
    answers the last batch's base offset there). Missing topics count 0."""
    admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap}))
    md = admin.list_topics(timeout=10).topics
    tps = [TopicPartition(t, p, 0) for t in topics if t in md and md[t].error is None for p in md[t].partitions]
    out = {t: 0 for t in topics}
    if not tps:
        return out
    c = Consumer(logs.client_config(reader_config({"bootstrap.servers": bootstrap}, "__demo.counter")))
    try:
        c.assign(tps)

        def count(m) -> None:
            out[m.topic()] += 1

        read_to_end(
            c, timeout, count, partitions=[(tp.topic, tp.partition) for tp in tps], batch=10_000, poll_seconds=0.5
        )
    finally:
        c.close()
    return out


class LiveStream(threading.Thread):
    """Sample records to every source cluster at a steady rate, until stopped."""

    def __init__(self, clusters: dict[str, str], topics: list[str], rate: float):
        super().__init__(daemon=True, name="demo-live-stream")
        self.clusters, self.topics, self.rate = clusters, topics, rate
        self.produced = 0
        self.error: str | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            producers = {
                a: Producer(logs.client_config({"bootstrap.servers": b, "linger.ms": 5}))
                for a, b in self.clusters.items()
            }
            gens = {a: sample_records(a, self.topics, 10**9, seed=1) for a in self.clusters}
            start, n = time.monotonic(), 0
            while not self._halt.is_set():
                for alias, p in producers.items():
                    r = next(gens[alias])
                    p.produce(r.topic, r.value, r.key, headers=list(r.headers), timestamp=int(time.time() * 1000))
                    p.poll(0)
                    self.produced += 1
                n += 1
                ahead = n / self.rate - (time.monotonic() - start)
                if ahead > 0:
                    self._halt.wait(ahead)
            for p in producers.values():
                p.flush(10)
        except Exception as exc:  # noqa: BLE001 - reported in the summary, never a trace
            self.error = f"{type(exc).__name__}: {exc}"

    def stop(self) -> None:
        self._halt.set()
        self.join(15)


def e2e_latency(
    remotes: Mapping[str, list[str]], bootstraps: Mapping[str, str], seconds: float
) -> dict[tuple[str, str], list[float]]:
    """End-to-end latency samples (ms) of records arriving from now on: from the producer's timestamp on the
    source to a consumer receiving the record on the target. `remotes`: target alias -> the topics to watch;
    the samples are keyed by (target alias, topic)."""
    t0 = int(time.time() * 1000)
    consumers = []
    for target, topics in sorted(remotes.items()):
        c = Consumer(
            logs.client_config(
                {
                    "bootstrap.servers": bootstraps[target],
                    "group.id": "__demo.latency",
                    "enable.auto.commit": False,
                    "fetch.wait.max.ms": 20,
                }
            )
        )
        md = c.list_topics(timeout=10).topics
        c.assign([TopicPartition(r, p, OFFSET_END) for r in topics if r in md for p in md[r].partitions])
        consumers.append((target, c))
    samples: dict[tuple[str, str], list[float]] = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for target, c in consumers:
            for m in c.consume(1000, 0.05):
                if m.error():
                    continue
                now = time.time() * 1000
                ts = m.timestamp()[1]
                if ts >= t0:
                    samples.setdefault((target, m.topic() or ""), []).append(now - ts)
    for _, c in consumers:
        c.close()
    return samples
