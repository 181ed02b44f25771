"""Reading the job status topic of a (target) cluster: the latest JSON object per key (the flow name).

The record format is the contract's (`reconciler.contract.status.StatusRecord`: what a job writes, what every
reader parses); this is only the cluster I/O (a consumer that reads the compacted topic to its end), so
`contract/` holds no Kafka client. Its typed callers: `reconciler.jobplan.backend` (`read_all_job_status`,
`read_job_status`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reconciler.adapters.connect_errors import ErrorCollector, list_topics
from reconciler.adapters.read_to_end import read_to_end, reader_config


def read_latest_objects(
    conf: Mapping[str, Any], topic: str, timeout: float = 10.0, group: str = "__reconciler.status-reader"
) -> dict[str, Mapping[str, Any]]:
    """key -> the latest value of a compacted topic of JSON objects (a tombstone removes its key; a value that is
    not a JSON object is skipped). `conf`: the librdkafka settings of the cluster (resolved, with its logger).
    Raises connect_errors.ConnectionFailed when the cluster cannot be talked to for a reason librdkafka names
    (TLS, SASL)."""
    from confluent_kafka import Consumer, TopicPartition

    errors = ErrorCollector()
    consumer = Consumer(reader_config({**conf, "error_cb": conf.get("error_cb") or errors}, group))
    out: dict[str, Mapping[str, Any]] = {}
    try:
        # a TLS or SASL failure: ConnectionFailed at once (the caller names the cluster)
        md = list_topics(consumer, errors, timeout, str(conf.get("security.protocol", "PLAINTEXT")), topic)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            return out
        parts = sorted(t.partitions)
        consumer.assign([TopicPartition(topic, p, -2) for p in parts])

        def latest(m) -> None:
            if m.key() is None:
                return
            key = m.key().decode()
            if m.value() is None:
                out.pop(key, None)
                return
            try:
                value = json.loads(m.value())
            except ValueError:
                return
            if isinstance(value, Mapping):
                out[key] = value

        read_to_end(consumer, timeout, latest, partitions=[(topic, p) for p in parts], poll_seconds=0.5)
    finally:
        consumer.close()
    return out
