"""Job status: published by the running job, read back by the reconciler.

Every few seconds the driver writes one JSON record to the compacted topic
`reconciler.status.internal` on the TARGET cluster, keyed by the flow name ("west->east"), so the
latest value per flow is the job's current status whatever runs the job (local process, Spark
standalone, Kubernetes). `read_job_status(cluster_config, flow_name)` returns it (or None).

Value (JSON object):
    flow, spec_hash, git_revision, delivery, state ("starting" | "running" | "degraded" |
    "stopping" | "stopped" | "restart-required" | "failed"), started_at and heartbeat_at (epoch ms),
    records, bytes (copied since start), records_per_second (recent), batches,
    lag_total, lag: [{topic, partition, remote, next, end, lag}], latency_ms: {p50, p95, p99, samples}
    (record age at acknowledgement, recent window), errors (count), last_error,
    findings: [str] (remote topic problems), out_of_range: [{topic, partition, position, low, high,
    action, at}], halted: ["topic:partition"].
Secrets never appear: cluster addresses and configs are not included and error texts pass through
the redactor of the job's resolved secret values.

The one rule of job health lives here too: planning (`reconciler.jobs.state.classify`, which `plan`,
`apply` and `status` use) and drift (`reconciler.drift.report.job_health`) both decide "is this job
replicating?" with `is_replicating`: a record in a live state (`LIVE_STATES`) not older than
`stale_after`. They differ only in that threshold: plan and status use `stale_after_seconds` of the
job's status interval (three intervals, at least 15 s); drift takes `--job-stale-seconds` (default
60 s, a report's tolerance).
"""

from __future__ import annotations

import enum
import json
import time
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from reconciler import logs
from reconciler.contract.spec import STATUS_TOPIC


class StatusState(str, enum.Enum):
    """The `state` a job reports in its status record."""

    STARTING = "starting"
    RUNNING = "running"
    DEGRADED = "degraded"  # running, but some partitions halted (offset_reset: halt)
    STOPPING = "stopping"
    STOPPED = "stopped"
    RESTART_REQUIRED = "restart-required"  # its spec changed in a field it cannot take: it exits
    FAILED = "failed"

    @classmethod
    def parse(cls, value: Any) -> StatusState | None:
        """The state of a record's `state` value (None: absent or not a state this version knows)."""
        try:
            return cls(value)
        except ValueError:
            return None


#: A job in one of these states is copying records (or about to).
LIVE_STATES: frozenset[StatusState] = frozenset({StatusState.STARTING, StatusState.RUNNING, StatusState.DEGRADED})
#: A job in one of these states is not replicating.
DOWN_STATES: frozenset[StatusState] = frozenset(set(StatusState) - LIVE_STATES)

STALE_INTERVALS = 3
STALE_MIN_SECONDS = 15.0
DEFAULT_STATUS_INTERVAL_SECONDS = 3.0


def stale_after_seconds(status_interval_seconds: float | None) -> float:
    """How old a status record may be before its job counts as not reporting (plan and status)."""
    interval = DEFAULT_STATUS_INTERVAL_SECONDS if status_interval_seconds is None else status_interval_seconds
    return max(STALE_MIN_SECONDS, STALE_INTERVALS * interval)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def status_age_seconds(status: Mapping[str, Any] | None, now_ms: float) -> float | None:
    """Seconds since the record's `heartbeat_at` (None: no record, or no heartbeat in it)."""
    beat = _number((status or {}).get("heartbeat_at"))
    return None if beat is None else max(0.0, (now_ms - beat) / 1000)


def is_stale(status: Mapping[str, Any] | None, now_ms: float, stale_after: float) -> bool:
    age = status_age_seconds(status, now_ms)
    return age is None or age > stale_after


def is_replicating(status: Mapping[str, Any] | None, now_ms: float, stale_after: float) -> bool:
    """The one rule of job health: a record in a live state, not older than `stale_after` seconds."""
    if not status or StatusState.parse(status.get("state")) not in LIVE_STATES:
        return False
    return not is_stale(status, now_ms, stale_after)


def percentiles(samples: Iterable[float], points: Iterable[float] = (50, 95, 99)) -> dict[str, float | None]:
    """Nearest-rank percentiles (None when there are no samples)."""
    data = sorted(samples)
    out: dict[str, float | None] = {}
    for pt in points:
        if not data:
            out[f"p{pt:g}"] = None
            continue
        rank = max(1, -(-len(data) * pt // 100))  # ceil(n * p / 100)
        out[f"p{pt:g}"] = float(data[int(rank) - 1])
    return out


class LatencyWindow:
    """Latency samples of the last `seconds` (bounded count)."""

    def __init__(self, seconds: float = 60.0, max_samples: int = 50_000):
        self.seconds = seconds
        self._samples: deque[tuple[float, float]] = deque(maxlen=max_samples)

    def add(self, values: Iterable[float], now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self._samples.extend((now, v) for v in values)

    def snapshot(self, now: float | None = None) -> dict[str, Any]:
        now = time.monotonic() if now is None else now
        while self._samples and self._samples[0][0] < now - self.seconds:
            self._samples.popleft()
        values = [v for _, v in self._samples]
        return {**percentiles(values), "samples": len(values)}


class RateWindow:
    def __init__(self, seconds: float = 10.0):
        self.seconds = seconds
        self._points: deque[tuple[float, int]] = deque()

    def add(self, count: int, now: float | None = None) -> None:
        self._points.append((time.monotonic() if now is None else now, count))

    def rate(self, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        while self._points and self._points[0][0] < now - self.seconds:
            self._points.popleft()
        if not self._points:
            return 0.0
        span = max(now - self._points[0][0], 1.0)
        return sum(c for _, c in self._points) / span


class StatusPublisher:
    """Writes status records for one flow to the target cluster."""

    def __init__(self, producer: Any, flow_name: str, topic: str = STATUS_TOPIC):
        self.producer = producer
        self.flow_name = flow_name
        self.topic = topic

    def publish(self, status: Mapping[str, Any], flush_timeout: float = 5.0) -> None:
        self.producer.produce(
            self.topic, json.dumps(status, sort_keys=True).encode(), self.flow_name.encode(), partition=0
        )
        self.producer.flush(flush_timeout)


def _client_config(cluster_config: Any) -> dict[str, Any]:
    if hasattr(cluster_config, "client_config"):  # ClusterSpec
        return dict(cluster_config.client_config())
    if hasattr(cluster_config, "bootstrap_servers"):  # topology Cluster
        from reconciler.topology.connection import client_config

        return client_config(cluster_config)
    return dict(cluster_config)


def read_all_job_status(cluster_config: Any, timeout: float = 10.0) -> dict[str, dict[str, Any]]:
    """Latest status of every flow that reports to this (target) cluster: flow name -> status."""
    from confluent_kafka import Consumer, TopicPartition

    from reconciler.adapters.read_to_end import read_to_end

    conf = _client_config(cluster_config)
    conf.update(
        {
            "group.id": "__reconciler.status-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    consumer = Consumer(logs.client_config(conf))
    out: dict[str, dict[str, Any]] = {}
    try:
        md = consumer.list_topics(STATUS_TOPIC, timeout=timeout)
        t = md.topics.get(STATUS_TOPIC)
        if t is None or t.error is not None:
            return out
        parts = sorted(t.partitions)
        consumer.assign([TopicPartition(STATUS_TOPIC, p, -2) for p in parts])

        def latest(m) -> None:
            if m.key() is None:
                return
            if m.value() is None:
                out.pop(m.key().decode(), None)
                return
            try:
                out[m.key().decode()] = json.loads(m.value())
            except ValueError:
                pass

        read_to_end(consumer, timeout, latest, partitions=[(STATUS_TOPIC, p) for p in parts], poll_seconds=0.5)
    finally:
        consumer.close()
    return out


def read_job_status(cluster_config: Any, flow_name: str, timeout: float = 10.0) -> dict[str, Any] | None:
    """The latest status the job of `flow_name` published on its target cluster, or None.

    `cluster_config`: librdkafka settings ({"bootstrap.servers": ...}, resolved), a ClusterSpec, or
    a topology Cluster (its `${ENV_VAR}` references are resolved here).
    """
    return read_all_job_status(cluster_config, timeout).get(flow_name)
