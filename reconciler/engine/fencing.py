"""At most one instance of a flow copies: a running job that sees a newer instance of its flow stops itself.

The deployers refuse to run two instances of a flow (they end leftovers before a start); this is the second
guard, as Kafka Connect fences zombie tasks (KIP-618): whatever started the other instance (another machine,
another state directory, a deployer that lost its record), the older instance notices and stops.

Every instance publishes status records keyed by its flow on the target's status topic, with its instance id
and start time. `InstanceFence.newer()` tails that topic from where this instance started and answers the
record of a live instance of the same flow that started after this one (None otherwise). Exactly-once jobs are
fenced by their transactional ids as well; this covers at-least-once jobs, which have nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from reconciler import logs
from reconciler.adapters.read_to_end import reader_config
from reconciler.contract.spec import STATUS_TOPIC, JobSpec, job_group
from reconciler.contract.status import LIVE_STATES, StatusRecord


def is_newer_instance(record: StatusRecord, instance_id: str, started_at_ms: int) -> bool:
    """Pure: does `record` come from a live instance of the flow other than ours that started after ours?"""
    return (
        record.instance_id is not None
        and record.instance_id != instance_id
        and record.state in LIVE_STATES
        and (record.started_at or 0) > started_at_ms
    )


class InstanceFence:
    def __init__(self, spec: JobSpec, instance_id: str, started_at_ms: int, environ: Mapping[str, str] | None = None):
        from confluent_kafka import Consumer

        self.flow = spec.flow
        self.instance_id = instance_id
        self.started_at_ms = started_at_ms
        conf = reader_config(spec.target.client_config(environ), job_group(spec) + ".fence")
        self._consumer: Any = Consumer(logs.client_config(conf, logs.JOB_CLIENT_LOGGER))
        self._assigned = False

    def _assign(self) -> bool:
        from confluent_kafka import TopicPartition

        md = self._consumer.list_topics(STATUS_TOPIC, timeout=5)
        t = md.topics.get(STATUS_TOPIC)
        if t is None or t.error is not None or not t.partitions:
            return False
        # From the end at our start: only records published since can come from a newer instance.
        self._consumer.assign([TopicPartition(STATUS_TOPIC, p, -1) for p in sorted(t.partitions)])
        self._assigned = True
        return True

    def superseded(self) -> str | None:
        """Why this instance stops, when a newer instance of the flow runs (None: none does)."""
        newer = self.newer()
        if newer is None:
            return None
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((newer.started_at or 0) / 1000))
        return (
            f"a newer instance {newer.instance_id} of flow {self.flow} runs (started {started}): "
            f"this instance {self.instance_id} stops so that only one copies"
        )

    def newer(self, max_wait: float = 0.5) -> StatusRecord | None:
        """The newest status record of another, newer instance of the flow published since the last call. The
        consumer is paused between calls: assigned and fetching (END_READER: every 50 ms), it cost each idle
        flow ~20 fetch requests a second."""
        if not self._assigned and not self._assign():
            return None
        parts = self._consumer.assignment()
        self._consumer.resume(parts)
        try:
            return self._read(max_wait)
        finally:
            self._consumer.pause(parts)

    def _read(self, max_wait: float) -> StatusRecord | None:
        found = None
        key = self.flow.encode()
        while True:
            msgs = self._consumer.consume(1000, max_wait)
            if not msgs:
                return found
            for m in msgs:
                if m.error() is not None or m.key() != key or m.value() is None:
                    continue
                try:
                    record = StatusRecord.from_json(m.value(), self.flow)
                except ValueError:
                    continue
                if is_newer_instance(record, self.instance_id, self.started_at_ms):
                    found = record
            max_wait = 0.0

    def close(self) -> None:
        try:
            self._consumer.close()
        except Exception:  # noqa: BLE001
            pass
