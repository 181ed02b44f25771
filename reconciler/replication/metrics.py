"""Prometheus metrics of a replication job, with MirrorMaker 2's names (docs/monitoring.md).

MM2's own metrics, as Strimzi's JMX exporter publishes them, keep their `kafka_connect_mirror_*`
names (counters get Prometheus' `_total` suffix); what MM2 lacks is under `mirror_*`. Every series
has the labels `flow`, `family` ('' for a pair's only flow), `source` and `target`; per-partition ones
add `topic` (the remote topic on the target, as MM2 labels it) and `partition`.

`JobMetrics.observe(driver, summaries)` is the one hook: the driver calls it once per micro-batch
with the per-task summaries it has just absorbed into its status record, so the status record and
the metrics come from the same numbers. `serve(port)` exposes them over HTTP (prometheus-client).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from reconciler.contract.metrics import KUBERNETES_PORT, PORT_ENV, free_port, metrics_port  # noqa: F401 (re-exported)
from reconciler.replication.tasks import TaskResult
from reconciler.topology.model import flow_ends

SOURCE = "kafka_connect_mirror_source_connector"
CHECKPOINT = "kafka_connect_mirror_checkpoint_connector"
OWN = "mirror"

FLOW_LABELS = ("flow", "family", "source", "target")
PARTITION_LABELS = (*FLOW_LABELS, "topic", "partition")
#: Milliseconds buckets for record age and replication latency (MM2 alerts start around seconds).
LATENCY_BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000)


@dataclass(frozen=True)
class MetricDef:
    name: str  # the family name (counters without `_total`, as prometheus_client takes them)
    kind: str  # counter, gauge, histogram, info
    labels: tuple[str, ...]
    doc: str
    mm2: str | None = None  # MirrorMaker 2's JMX attribute it follows

    @property
    def family(self) -> str:
        """The family name a scrape parses to (an Info is exposed as the gauge `<name>_info`)."""
        return f"{self.name}_info" if self.kind == "info" else self.name

    @property
    def series(self) -> tuple[str, ...]:
        """The sample names a scrape shows (what PromQL names)."""
        return {
            "counter": (f"{self.name}_total",),
            "histogram": (f"{self.name}_bucket", f"{self.name}_count", f"{self.name}_sum"),
            "info": (f"{self.name}_info",),
        }.get(self.kind, (self.name,))


METRICS: tuple[MetricDef, ...] = (
    MetricDef(
        f"{SOURCE}_record_count",
        "counter",
        PARTITION_LABELS,
        "Records replicated to the target partition",
        "kafka.connect.mirror:type=MirrorSourceConnector record-count",
    ),
    MetricDef(
        f"{SOURCE}_byte_count",
        "counter",
        PARTITION_LABELS,
        "Bytes replicated to the target partition",
        "kafka.connect.mirror:type=MirrorSourceConnector byte-count",
    ),
    MetricDef(
        f"{SOURCE}_replication_latency_ms",
        "histogram",
        FLOW_LABELS,
        "Time from a record's timestamp to its acknowledgement by the target (ms)",
        "kafka.connect.mirror:type=MirrorSourceConnector replication-latency-ms",
    ),
    MetricDef(
        f"{SOURCE}_record_age_ms",
        "gauge",
        (*FLOW_LABELS, "stat"),
        "Age of the records of the last batch at acknowledgement: stat=min, max, avg (ms)",
        "kafka.connect.mirror:type=MirrorSourceConnector record-age-ms-{min,max,avg}",
    ),
    MetricDef(
        f"{CHECKPOINT}_checkpoints",
        "counter",
        FLOW_LABELS,
        "Checkpoints emitted to the target",
        "kafka.connect.mirror:type=MirrorCheckpointConnector (checkpoint records)",
    ),
    MetricDef(
        f"{OWN}_partition_lag_records",
        "gauge",
        PARTITION_LABELS,
        "Records in the source partition not replicated yet (source end offset - next offset)",
    ),
    MetricDef(f"{OWN}_offset_syncs", "counter", PARTITION_LABELS, "Offset syncs written for the partition"),
    MetricDef(
        f"{OWN}_out_of_range",
        "counter",
        PARTITION_LABELS,
        "Out-of-range events (source truncated or recreated) of the partition",
    ),
    MetricDef(
        f"{OWN}_transaction_aborts", "counter", FLOW_LABELS, "Exactly-once batches whose transaction was aborted"
    ),
    MetricDef(f"{OWN}_errors", "counter", FLOW_LABELS, "Errors the job reported (its status record's `errors`)"),
    MetricDef(f"{OWN}_batches", "counter", FLOW_LABELS, "Micro-batches run"),
    MetricDef(
        f"{OWN}_batch_failures",
        "counter",
        FLOW_LABELS,
        "Micro-batches whose tasks failed and were retried (task restarts)",
    ),
    MetricDef(f"{OWN}_job_state", "gauge", (*FLOW_LABELS, "state"), "1 for the job's current state"),
    MetricDef(
        f"{OWN}_job_start_time_seconds",
        "gauge",
        FLOW_LABELS,
        "When this job process started; changes() of it counts restarts",
    ),
    MetricDef(f"{OWN}_job_last_batch_timestamp_seconds", "gauge", FLOW_LABELS, "When the last micro-batch ended"),
    MetricDef(f"{OWN}_job", "info", FLOW_LABELS, "The spec the job runs: spec_hash, git_revision, delivery"),
)
BY_NAME = {m.name: m for m in METRICS}
JOB_STATES = ("starting", "running", "degraded", "stopping", "stopped", "failed", "restart-required")


def exported_series() -> frozenset[str]:
    """Every sample name a job's scrape can show (dashboards and alert rules may only name these)."""
    return frozenset(s for m in METRICS for s in m.series)


def flow_labels(flow: str) -> dict[str, str]:
    source, target, family = flow_ends(flow)
    return {"flow": flow, "family": family or "", "source": source, "target": target}


class JobMetrics:
    """The job's metric families in their own registry (tests make several)."""

    def __init__(self, flow: str, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        self.flow = flow_labels(flow)
        self.families: dict[str, Any] = {}
        for m in METRICS:
            if m.kind == "counter":
                fam: Any = Counter(m.name, m.doc, m.labels, registry=self.registry)
            elif m.kind == "gauge":
                fam = Gauge(m.name, m.doc, m.labels, registry=self.registry)
            elif m.kind == "histogram":
                fam = Histogram(m.name, m.doc, m.labels, buckets=LATENCY_BUCKETS_MS, registry=self.registry)
            else:
                fam = Info(m.name, m.doc, m.labels, registry=self.registry)
            self.families[m.name] = fam
        self._seen_out_of_range: list[dict[str, Any]] = []  # the events counted (held: identity compare)
        self._errors = 0
        self._checkpoints = 0
        self.get(f"{OWN}_job_start_time_seconds").set(time.time())

    def get(self, name: str, **extra: Any) -> Any:
        return self.families[name].labels(**self.flow, **{k: str(v) for k, v in extra.items()})

    # --- the hook -------------------------------------------------------------------------
    def observe(self, driver: Any, results: Iterable[TaskResult]) -> None:
        """One micro-batch: the task results the driver absorbed and the driver's state after absorbing them."""
        spec = driver.spec
        latencies: list[float] = []
        for r in results:
            latencies += r.latency_ms
            aborted = bool(spec.exactly_once and r.error)
            if aborted and r.partitions:
                self.get(f"{OWN}_transaction_aborts").inc()
            for p in r.partitions:
                if p.out_of_range or aborted:
                    continue  # the driver counts none of these records either (absorb)
                tp = {"topic": p.remote, "partition": p.partition}
                if p.count:
                    self.get(f"{SOURCE}_record_count", **tp).inc(p.count)
                    self.get(f"{SOURCE}_byte_count", **tp).inc(p.bytes)
                if p.syncs:
                    self.get(f"{OWN}_offset_syncs", **tp).inc(len(p.syncs))
        hist = self.get(f"{SOURCE}_replication_latency_ms")
        for ms in latencies:
            hist.observe(ms)
        if latencies:
            for stat, value in (
                ("min", min(latencies)),
                ("max", max(latencies)),
                ("avg", sum(latencies) / len(latencies)),
            ):
                self.get(f"{SOURCE}_record_age_ms", stat=stat).set(value)
        for (_topic, partition), lag in list(driver.lag.items()):
            if lag.end is not None and lag.next >= 0:
                self.get(f"{OWN}_partition_lag_records", topic=lag.remote, partition=partition).set(
                    max(0, lag.end - lag.next)
                )
        for event in driver.out_of_range:
            if not any(event is seen for seen in self._seen_out_of_range):
                remote = driver.plan.copy.get((event["topic"], event["partition"]), event["topic"])
                self.get(f"{OWN}_out_of_range", topic=remote, partition=event["partition"]).inc()
        self._seen_out_of_range = list(driver.out_of_range)
        self._advance(f"{OWN}_errors", "_errors", driver.errors)
        self._advance(
            f"{CHECKPOINT}_checkpoints", "_checkpoints", getattr(getattr(driver, "checkpoints", None), "emitted", 0)
        )
        if getattr(driver, "_failures", 0):  # this batch's tasks failed (reset by the next good batch)
            self.get(f"{OWN}_batch_failures").inc()
        self.get(f"{OWN}_batches").inc()
        self.get(f"{OWN}_job_last_batch_timestamp_seconds").set(time.time())
        self.set_state(driver)

    def set_state(self, driver: Any) -> None:
        state = "degraded" if driver.state == "running" and driver.halted else driver.state
        for s in JOB_STATES:
            self.get(f"{OWN}_job_state", state=s).set(1.0 if s == state else 0.0)
        spec = driver.spec
        self.get(f"{OWN}_job").info(
            {"spec_hash": spec.spec_hash(), "git_revision": spec.git_revision or "", "delivery": str(spec.delivery)}
        )

    def _advance(self, name: str, attr: str, total: int) -> None:
        before = getattr(self, attr)
        if total > before:
            self.get(name).inc(total - before)
        setattr(self, attr, max(before, total))

    # --- HTTP -----------------------------------------------------------------------------
    def serve(self, port: int, addr: str = "0.0.0.0") -> Any:
        """Serve /metrics on `port` in a daemon thread; returns the server (shutdown() to stop)."""
        from prometheus_client import start_http_server

        server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        return server
