"""The drift report as Prometheus metrics (text exposition format 0.0.4), pure.

For the node exporter's textfile collector (`drift --out /var/lib/node_exporter/drift.prom`) or a
Pushgateway (`drift --format prometheus | curl --data-binary @- $PUSHGATEWAY/metrics/job/drift`), so the
scheduled drift job feeds alerting. Every family is a gauge: a drift run is a snapshot, not a process.

| metric | labels | value |
|---|---|---|
| `reconciler_drift_status` | status (`in-sync`, `drift`, `error`) | 1 for the report's status, 0 for the others |
| `reconciler_drift_items` | category, level, cluster | drift/error/note items of that kind on that cluster |
| `reconciler_drift_generated_timestamp_seconds` | | when the report was made |
| `reconciler_drift_cluster_reachable` | cluster | 1 if the cluster could be read |
| `reconciler_drift_certificate_expiry_seconds` | cluster, setting | seconds until the earliest expiry of the certificates of the cluster's setting (`ssl.certificate.location`, `ssl.ca.location`, `ssl.certificate.pem`, `ssl.ca.pem`); negative once expired; absent when it could not be read |
| `reconciler_drift_applied_info` | cluster, commit, short, who, dirty | 1 per cluster with an `applied/<cluster>` record |
| `reconciler_drift_applied_timestamp_seconds` | cluster | when the reconciler last applied to the cluster |
| `reconciler_drift_revision_info` | commit, short | the revision the topology was checked at |
| `reconciler_drift_slo_threshold` | slo | the topology's `slo:` values that are set |
| `reconciler_drift_slo_breach` | flow, family, source, target, slo | 1 if the flow breaches that SLO |
| `reconciler_drift_flow_items` | flow, family, source, target | drift items of the flow |
| `reconciler_drift_job_up` | flow, family, source, target | 1 if the verdict on the job is `running` or `running elsewhere` |
| `reconciler_drift_job_verdict` | flow, family, source, target, verdict | 1 for the verdict on the job (`reconciler.contract.jobstate.JobState`: the plan's, from its status record and its deployment) |
| `reconciler_drift_job_state` | flow, family, source, target, state | 1 for the state the job last reported |
| `reconciler_drift_job_spec_current` | flow, family, source, target | 1 if the job runs the spec the topology wants |
| `reconciler_drift_job_status_age_seconds`, `reconciler_drift_job_lag_records`, `reconciler_drift_job_latency_p99_ms`, `reconciler_drift_heartbeat_age_seconds` | flow, family, source, target | as reported (absent when not reported) |
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from reconciler.drift.report import SLO_CHECKS, Category, DriftReport, FlowReport, JobHealth, Level
from reconciler.topology.model import flow_ends

PREFIX = "reconciler_drift"
STATUSES = ("in-sync", "drift", "error")
FLOW_LABELS = ("flow", "family", "source", "target")
#: Every family this renderer writes (all gauges: the sample name is the family name).
FAMILIES = tuple(
    f"{PREFIX}_{n}"
    for n in (
        "status",
        "items",
        "generated_timestamp_seconds",
        "cluster_reachable",
        "certificate_expiry_seconds",
        "applied_info",
        "applied_timestamp_seconds",
        "revision_info",
        "slo_threshold",
        "slo_breach",
        "flow_items",
        "job_up",
        "job_verdict",
        "job_state",
        "job_spec_current",
        "job_status_age_seconds",
        "job_lag_records",
        "job_latency_p99_ms",
        "heartbeat_age_seconds",
    )
)
#: slo label -> the drift category that reports its breach (the drift report's SLO checks).
SLO_CATEGORIES = {kind.value: check.category for kind, check in SLO_CHECKS.items()}


def _seconds(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _flow_labels(flow: FlowReport) -> list[str]:
    _, _, family = flow_ends(flow.name)
    return [flow.name, family or "", flow.source, flow.target]


def _gauge(name: str, doc: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=list(labels))


def _status(r: DriftReport) -> Iterator[GaugeMetricFamily]:
    status = _gauge("status", "1 for the drift report's status (in-sync, drift, error)", ["status"])
    for s in STATUSES:
        status.add_metric([s], 1.0 if r.status() == s else 0.0)
    yield status
    items = _gauge("items", "Drift report items by category, level and cluster", ["category", "level", "cluster"])
    counts: dict[tuple[str, str, str], int] = {}
    for i in r.items:
        key = (i.category.value, i.level.value, i.cluster)
        counts[key] = counts.get(key, 0) + 1
    for c in r.clusters:  # zero for clean clusters, so alerts can compare with 0
        counts.setdefault((Category.OTHER.value, Level.DRIFT.value, c.alias), 0)
    for key, n in sorted(counts.items()):
        items.add_metric(list(key), n)
    yield items
    generated = _seconds(r.generated_at)
    if generated is not None:
        g = _gauge("generated_timestamp_seconds", "When the drift report was made (Unix seconds)")
        g.add_metric([], generated)
        yield g


def _clusters(r: DriftReport) -> Iterator[GaugeMetricFamily]:
    reachable = _gauge("cluster_reachable", "1 if the cluster could be read", ["cluster"])
    applied_info = _gauge(
        "applied_info",
        "The revision the reconciler last applied to the cluster",
        ["cluster", "commit", "short", "who", "dirty"],
    )
    applied_at = _gauge(
        "applied_timestamp_seconds", "When the reconciler last applied to the cluster (Unix seconds)", ["cluster"]
    )
    for c in r.clusters:
        reachable.add_metric([c.alias], 1.0 if c.reachable else 0.0)
        if c.applied:
            a = c.applied
            dirty = "true" if a.get("dirty") else "false"
            applied_info.add_metric(
                [c.alias, a.get("commit") or "", a.get("short") or "", a.get("who") or "", dirty], 1.0
            )
            at = _seconds(a.get("applied_at"))
            if at is not None:
                applied_at.add_metric([c.alias], at)
    yield from (reachable, applied_info, applied_at)
    expiry = _gauge(
        "certificate_expiry_seconds",
        "Seconds until the earliest expiry of the certificates of the cluster's setting (negative: expired)",
        ["cluster", "setting"],
    )
    for c in r.clusters:
        for cert in c.certificates:
            if cert.seconds_left is not None:
                expiry.add_metric([c.alias, cert.setting], cert.seconds_left)
    yield expiry


def _revision_and_slo(r: DriftReport) -> Iterator[GaugeMetricFamily]:
    if r.revision:
        rev = _gauge("revision_info", "The git revision the topology was checked at", ["commit", "short"])
        rev.add_metric([str(r.revision.get("commit") or ""), str(r.revision.get("short") or "")], 1.0)
        yield rev
    thresholds = _gauge("slo_threshold", "The topology's slo: thresholds that are set", ["slo"])
    for slo_key in SLO_CATEGORIES:
        value = r.slo.get(slo_key) if r.slo else None
        if value is not None:
            thresholds.add_metric([slo_key], float(value))
    yield thresholds


class _FlowFamilies:
    """The per-flow families, filled flow by flow."""

    def __init__(self) -> None:
        self.breach = _gauge("slo_breach", "1 if the flow breaches the SLO", [*FLOW_LABELS, "slo"])
        self.items = _gauge("flow_items", "Drift items of the flow", FLOW_LABELS)
        self.up = _gauge("job_up", "1 if the verdict on the flow's job is running (here or elsewhere)", FLOW_LABELS)
        self.verdict = _gauge("job_verdict", "1 for the verdict on the flow's job", [*FLOW_LABELS, "verdict"])
        self.state = _gauge("job_state", "1 for the state the flow's job last reported", [*FLOW_LABELS, "state"])
        self.current = _gauge("job_spec_current", "1 if the job runs the spec the topology wants", FLOW_LABELS)
        self.age = _gauge("job_status_age_seconds", "Age of the job's last status record", FLOW_LABELS)
        self.lag = _gauge("job_lag_records", "The job's reported lag (records)", FLOW_LABELS)
        self.p99 = _gauge("job_latency_p99_ms", "The job's reported p99 replication latency", FLOW_LABELS)
        self.hb = _gauge("heartbeat_age_seconds", "Age of the newest heartbeat of the flow on its target", FLOW_LABELS)

    def add(self, f: FlowReport, slo: Mapping[str, Any]) -> None:
        labels = _flow_labels(f)
        drift_cats = {i.category for i in f.items if i.level is Level.DRIFT}
        self.items.add_metric(labels, sum(1 for i in f.items if i.level is Level.DRIFT))
        if not f.enabled:
            return
        for slo_key, cat in SLO_CATEGORIES.items():
            if slo and slo.get(slo_key) is not None:
                self.breach.add_metric([*labels, slo_key], 1.0 if cat in drift_cats else 0.0)
        if f.heartbeat_age_seconds is not None:
            self.hb.add_metric(labels, f.heartbeat_age_seconds)
        if f.job is not None:
            self._job(labels, f.job)

    def _job(self, labels: list[str], job: JobHealth) -> None:
        self.up.add_metric(labels, 1.0 if job.running else 0.0)
        self.verdict.add_metric([*labels, job.verdict.value], 1.0)
        if job.last.state_name:
            self.state.add_metric([*labels, job.last.state_name], 1.0)
        if job.spec_current is not None:
            self.current.add_metric(labels, 1.0 if job.spec_current else 0.0)
        reported = (
            (self.age, job.status_age_seconds),
            (self.lag, job.last.lag_total),
            (self.p99, job.last.latency_ms.p99),
        )
        for family, value in reported:
            if value is not None:
                family.add_metric(labels, float(value))

    def families(self) -> tuple[GaugeMetricFamily, ...]:
        return (
            self.breach,
            self.items,
            self.up,
            self.verdict,
            self.state,
            self.current,
            self.age,
            self.lag,
            self.p99,
            self.hb,
        )


def _flows(r: DriftReport) -> Iterator[GaugeMetricFamily]:
    families = _FlowFamilies()
    for f in r.flows:
        families.add(f, r.slo)
    yield from families.families()


class DriftCollector(Collector):
    def __init__(self, report: DriftReport):
        self.report = report

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for part in (_status, _clusters, _revision_and_slo, _flows):
            yield from part(self.report)


def render(report: DriftReport) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DriftCollector(report))
    return generate_latest(registry).decode("utf-8")
