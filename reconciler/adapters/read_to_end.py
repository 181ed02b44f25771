"""The one read-to-end-of-partition loop: poll an assigned consumer until every partition reports
end of partition (`enable.partition.eof`), handing each record to the caller.

    pending = read_to_end(consumer, timeout, on_record, partitions=..., on_error=...)

Returns the partitions (topic, partition) that did not reach their end within `timeout` (empty when
all did); the caller decides whether that is an error. `on_error(err)` sees every other consumer
error (default: ignored; raise from it to stop); `on_eof(event)` sees each end-of-partition event
(its `offset()` is the partition's true end, past any transaction markers).

`batch` > 1 takes what the client already holds (up to `batch` records) without waiting, and waits
up to `poll_seconds` for one record only when it holds none, so a read ends as soon as its last
partition reports its end.

`reader_config(conf, group)` is the one set of settings such a consumer is built with (the job's own
consumers start from `END_READER` too, `engine/clients.py`).

Users: the status reader (`adapters/status_read.py`), the heartbeat and checkpoint reader
(`adapters/mirror_kafka.py`), the Kafka admin's `read_to_end` (lease and applied records), the demo,
and the replication job's offset-sync, checkpoint and end-offset reads (`engine/emitters.py`,
`engine/ends.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

#: What every consumer that reads partitions to their end needs.
END_READER: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.partition.eof": True,  # the end is an event (a high watermark is not: see engine/ends.py on Tansu)
    "fetch.wait.max.ms": 50,  # an idle partition answers (its end) within this, not librdkafka's 500 ms
    # librdkafka's default (1,000 ms) stops fetching a partition for a whole second each time its local queue
    # holds queued.min.messages (100,000): a long read then crawls at ~200k records/s instead of ~900k
    # (docs/replication-job.md, "Measured numbers, second pass").
    "fetch.queue.backoff.ms": 10,
}


def reader_config(conf: Mapping[str, Any], group: str) -> dict[str, Any]:
    """Settings of a consumer that reads assigned partitions to their end: `conf` (bootstrap servers,
    security, logger) and END_READER. `group` is required by the client; a reader assigns partitions
    and never joins nor commits to it."""
    return {**conf, "group.id": group, "auto.offset.reset": "earliest", **END_READER}


def read_to_end(
    consumer: Any,
    timeout: float,
    on_record: Callable[[Any], None],
    *,
    partitions: Iterable[tuple[str, int]],
    on_error: Callable[[Any], None] | None = None,
    on_eof: Callable[[Any], None] | None = None,
    poll_seconds: float = 0.2,
    batch: int = 1,
) -> set[tuple[str, int]]:
    from confluent_kafka import KafkaError

    pending = set(partitions)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        msgs = (
            (consumer.consume(batch, 0) or consumer.consume(1, poll_seconds))
            if batch > 1
            else [consumer.poll(poll_seconds)]
        )
        for m in msgs:
            if m is None:
                continue
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    pending.discard((m.topic(), m.partition()))
                    if on_eof is not None:
                        on_eof(m)
                elif on_error is not None:
                    on_error(err)
                continue
            on_record(m)
    return pending
