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

Users: the status reader (`contract/status.py`), the heartbeat and checkpoint reader
(`adapters/mirror_kafka.py`), the Kafka admin's `read_to_end` (lease and applied records), the demo,
and the replication job's offset-sync, checkpoint and end-offset reads (`replication/emitters.py`,
`replication/offsets.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any


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
