"""At most one instance of a flow copies: a running job that sees a newer instance of its flow stops itself.

The deployers refuse to run two instances of a flow (they end leftovers before a start); this is the second
guard, as Kafka Connect fences zombie tasks (KIP-618): whatever started the other instance (another machine,
another state directory, a deployer that lost its record), the older instance notices and stops.

Every instance publishes status records keyed by its flow on the target's status topic, with its instance id
and start time. `InstanceFence.newer()` tails that topic from where this instance started and answers the
record of a live instance of the same flow that started after this one (None otherwise). Exactly-once jobs are
fenced by their transactional ids as well; this covers at-least-once jobs, which have nothing else.

The fences of an engine's flows into one target read its status topic through one consumer (`StatusTail`, shared as
the engine's clients are: clients.py `Role.FENCE`), and a fence's round reads it only if no read started since its
own previous round: an engine of N flows into one cluster reads the topic once a status interval, not N times
(issue 47: each read keeps a consumer fetching for up to half a second). A newer instance's first status is seen
by the second fencing round after it at the latest: two status intervals (6 s by default), not one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from reconciler import logs
from reconciler.adapters.read_to_end import reader_config
from reconciler.contract.spec import STATUS_TOPIC, JobSpec, job_group
from reconciler.contract.status import LIVE_STATES, StatusRecord
from reconciler.engine.clients import Role, SharedClients


def is_newer_instance(record: StatusRecord, instance_id: str, started_at_ms: int) -> bool:
    """Pure: does `record` come from a live instance of the flow other than ours that started after ours?"""
    return (
        record.instance_id is not None
        and record.instance_id != instance_id
        and record.state in LIVE_STATES
        and (record.started_at or 0) > started_at_ms
    )


class StatusTail:
    """A consumer of a target's status topic from its end at the first read, shared by the fences of an engine's
    flows into that cluster (`Role.FENCE`). Paused between reads: assigned and fetching (END_READER: every 50 ms), it
    cost each idle flow ~20 fetch requests a second. `read()` reads what was published since the last read and
    offers each record to the fences of its flow (`InstanceFence.offer`)."""

    def __init__(self, conf: Mapping[str, Any], *, consumer: Any = None):
        if consumer is None:
            from confluent_kafka import Consumer

            consumer = Consumer(logs.client_config(dict(conf), logs.JOB_CLIENT_LOGGER))
        self._consumer = consumer
        self._lock = threading.Lock()
        self._fences: list[InstanceFence] = []
        self._assigned = False
        self.reads = 0  # the reads started (a fence compares it with its count at its previous round)

    @property
    def lock(self) -> threading.Lock:
        return self._lock

    def register(self, fence: InstanceFence) -> None:
        with self._lock:
            self._fences.append(fence)

    def unregister(self, fence: InstanceFence) -> None:
        with self._lock:
            self._fences = [f for f in self._fences if f is not fence]

    def read(self, max_wait: float = 0.5) -> None:
        """Read what was published since the last read and offer it to the fences: the caller holds `lock`."""
        self.reads += 1
        if not self._assigned and not self._assign():
            return
        parts = self._consumer.assignment()
        self._consumer.resume(parts)
        try:
            while True:
                msgs = self._consumer.consume(1000, max_wait)
                if not msgs:
                    return
                for m in msgs:
                    if m.error() is None and m.key() is not None and m.value() is not None:
                        self._offer(m.key(), m.value())
                max_wait = 0.0
        finally:
            self._consumer.pause(parts)

    def _offer(self, key: bytes, value: bytes) -> None:
        for fence in self._fences:
            if fence.flow.encode() != key:
                continue
            try:
                record = StatusRecord.from_json(value, fence.flow)
            except ValueError:
                continue
            fence.offer(record)

    def _assign(self) -> bool:
        from confluent_kafka import TopicPartition

        md = self._consumer.list_topics(STATUS_TOPIC, timeout=5)
        t = md.topics.get(STATUS_TOPIC)
        if t is None or t.error is not None or not t.partitions:
            return False
        # From the end at the first read: only records published since can come from a newer instance.
        self._consumer.assign([TopicPartition(STATUS_TOPIC, p, -1) for p in sorted(t.partitions)])
        self._assigned = True
        return True

    def close(self) -> None:
        try:
            self._consumer.close()
        except Exception:  # noqa: BLE001
            pass


def fence_config(spec: JobSpec, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The status tail's consumer settings (its `group.id` names it only: it assigns, never joins nor commits)."""
    return reader_config(spec.target.client_config(environ), job_group(spec) + ".fence")


class InstanceFence:
    """One flow's instance (`instance_id`, started at `started_at_ms`) watching for a newer one through the engine's
    status tail of its target (`shared`: the engine's clients; a job of one flow has its own pool)."""

    def __init__(
        self,
        spec: JobSpec,
        instance_id: str,
        started_at_ms: int,
        environ: Mapping[str, str] | None = None,
        shared: SharedClients | None = None,
    ):
        self.flow = spec.flow
        self.instance_id = instance_id
        self.started_at_ms = started_at_ms
        self._shared = shared if shared is not None else SharedClients()
        conf = fence_config(spec, environ)
        self._tail: StatusTail = self._shared.acquire(Role.FENCE, conf, lambda: StatusTail(conf))
        self._found: StatusRecord | None = None
        with self._tail.lock:
            self._seen = self._tail.reads  # the tail's reads as of this fence's previous round (or its start)
        self._tail.register(self)

    def offer(self, record: StatusRecord) -> None:
        """A status record of this flow (the tail holds its lock)."""
        if is_newer_instance(record, self.instance_id, self.started_at_ms):
            self._found = record

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
        """The newest status record of another, newer instance of the flow seen since the last call: the tail is read
        unless a neighbour's round started a read of it since this fence's previous round (or its start)."""
        with self._tail.lock:
            if self._tail.reads == self._seen:
                self._tail.read(max_wait)
            self._seen = self._tail.reads
            found, self._found = self._found, None
        return found

    def close(self) -> None:
        self._tail.unregister(self)
        self._shared.release(self._tail)
