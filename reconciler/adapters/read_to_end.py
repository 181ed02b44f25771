"""The one read-to-end-of-partition loop: poll an assigned consumer until every partition reports
end of partition (`enable.partition.eof`), handing each record to the caller.

    pending = read_to_end(consumer, timeout, on_record, partitions=..., on_error=...)

Returns the partitions (topic, partition) that did not reach their end within `timeout` (empty when
all did); the caller decides whether that is an error. `on_error(err)` sees every other consumer
error (default: ignored; raise from it to stop).
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
    poll_seconds: float = 0.2,
    batch: int = 1,
) -> set[tuple[str, int]]:
    from confluent_kafka import KafkaError

    pending = set(partitions)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        msgs = consumer.consume(batch, poll_seconds) if batch > 1 else [consumer.poll(poll_seconds)]
        for m in msgs:
            if m is None:
                continue
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    pending.discard((m.topic(), m.partition()))
                elif on_error is not None:
                    on_error(err)
                continue
            on_record(m)
    return pending
