"""A realistic sample stream for demos and benchmarks: orders, payments, inventory, clicks.

Keys keep per-entity order (an order's events land in one partition), headers carry a trace id
and the producing region, timestamps are event times.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from confluent_kafka import Producer

from reconciler import logs

SKUS = [f"sku-{i:04d}" for i in range(200)]
CURRENCIES = ["EUR", "EUR", "EUR", "GBP", "CHF"]


@dataclass(frozen=True)
class SampleRecord:
    topic: str
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


def sample_records(region: str, topics: list[str], count: int, seed: int = 0) -> Iterator[SampleRecord]:
    """`count` records spread over `topics`; deterministic for a given seed (apart from timestamps)."""
    rnd = random.Random(f"{region}-{seed}")
    for i in range(count):
        topic = topics[i % len(topics)]
        order_id = f"{region}-o{rnd.randrange(10_000):05d}"
        body: dict
        if topic.startswith("orders"):
            body = {
                "order_id": order_id,
                "customer": f"c{rnd.randrange(5000)}",
                "sku": rnd.choice(SKUS),
                "qty": rnd.randint(1, 5),
                "status": rnd.choice(["created", "paid", "shipped"]),
            }
            key = order_id
        elif topic.startswith("payments"):
            body = {
                "payment_id": uuid.UUID(int=rnd.getrandbits(128)).hex[:12],
                "order_id": order_id,
                "amount": round(rnd.uniform(5, 500), 2),
                "currency": rnd.choice(CURRENCIES),
            }
            key = order_id
        elif topic.startswith("inventory"):
            sku = rnd.choice(SKUS)
            body = {"sku": sku, "warehouse": f"{region}-wh{rnd.randint(1, 3)}", "delta": rnd.randint(-5, 20)}
            key = sku
        else:
            body = {
                "session": f"s{rnd.randrange(100_000)}",
                "page": rnd.choice(["/", "/cart", "/checkout", "/p"]),
                "ms": rnd.randint(5, 900),
            }
            key = body["session"]
        headers = (("trace-id", uuid.UUID(int=rnd.getrandbits(128)).hex.encode()), ("origin", region.encode()))
        yield SampleRecord(topic, key.encode(), json.dumps(body).encode(), headers, int(time.time() * 1000))


def produce(bootstrap: str, records: Iterator[SampleRecord], config: dict | None = None) -> int:
    """Produce and wait for every ack; returns how many were acknowledged without error."""
    producer = Producer(
        logs.client_config(
            {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True, **(config or {})}
        )
    )
    failed = 0

    def on_delivery(err, _msg):
        nonlocal failed
        failed += err is not None

    sent = 0
    for r in records:
        while True:
            try:
                producer.produce(
                    r.topic,
                    key=r.key,
                    value=r.value,
                    headers=list(r.headers),
                    timestamp=r.timestamp_ms,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.1)
        sent += 1
        producer.poll(0)
    producer.flush(30)
    return sent - failed
