"""`build_report`: the plan, the jobs' verdicts, the heartbeats, the certificates and the applied revisions, as one
`DriftReport` (pure)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.contract.jobstate import JobState, LiveJob, LiveJobs
from reconciler.contract.spec import JobSpec, RuntimeSettings
from reconciler.contract.status import StatusRecord
from reconciler.drift.certificates import CertificateCheck, CertificateSource
from reconciler.drift.certificates import check as check_certificate
from reconciler.drift.report.clusters import applied_view, certificate_item, revision_items
from reconciler.drift.report.health import JobHealth, job_health
from reconciler.drift.report.items import Category, DriftItem, Level
from reconciler.drift.report.job_items import group_sync_items, job_items
from reconciler.drift.report.model import ClusterReport, DriftReport, FlowReport
from reconciler.drift.report.plan_items import action_item, finding_item, unmanaged_internal
from reconciler.drift.report.slo import Measured, heartbeat_topic, slo_items
from reconciler.drift.report.values import iso_ms
from reconciler.mirror.records import Heartbeat
from reconciler.plan.actions import Plan
from reconciler.plan.desired import DesiredState, desired_state
from reconciler.plan.reasons import ReasonKind
from reconciler.state.live import LiveState
from reconciler.topology.model import Flow, Topology


def build_report(
    topology: Topology,
    live: LiveState,
    plan: Plan,
    *,
    desired: DesiredState | None = None,
    job_statuses: Mapping[str, StatusRecord | Mapping[str, Any]] | None = None,
    job_status_errors: Mapping[str, str] | None = None,
    desired_spec_hashes: Mapping[str, str] | None = None,
    heartbeats: Mapping[str, Mapping[str, Heartbeat | None]] | None = None,
    heartbeat_errors: Mapping[str, str] | None = None,
    applied: Mapping[str, Mapping[str, Any] | None] | None = None,
    revision: Mapping[str, Any] | None = None,
    now_ms: int = 0,
    job_stale_seconds: float | None = None,
    check_jobs: bool = True,
    live_jobs: LiveJobs | None = None,
    certificates: Sequence[CertificateSource] = (),
) -> DriftReport:
    """Everything in one pure function.

    `job_statuses`: flow name -> the latest status its job published (flows absent: no record);
    `job_status_errors`: target cluster -> why its statuses could not be read.
    `desired_spec_hashes`: flow name -> hash of the spec the topology wants (default:
    `JobSpec.from_flow(topology, flow).spec_hash()`).
    `heartbeats`: target cluster -> heartbeat topic -> newest Heartbeat (absent cluster: not read;
    `heartbeat_errors` says why). `applied`: cluster -> its last `applied/<cluster>` record or None.
    `revision`: RevisionInfo.to_dict() of the topology checked. `check_jobs=False` skips job, lag and
    latency checks (for topologies whose flows are replicated by something that reports no status).
    `live_jobs`: the plan's verdict on every job (`reconciler.contract.jobstate`), shown as it is in the items,
    the flows table and the metrics; None (no deployer view): each job's verdict is its status record's alone.
    `certificates`: what the edge read of each cluster's certificate settings (`drift/certificates.py`), checked
    against `now_ms` and the topology's `slo.certificate_expiry_days`.
    """
    desired = desired if desired is not None else desired_state(topology, live)
    items = _plan_items(topology, live, plan, desired)
    seen = _Seen(
        topology=topology,
        live=live,
        now_ms=now_ms,
        job_statuses=job_statuses or {},
        job_status_errors=job_status_errors or {},
        desired_spec_hashes=desired_spec_hashes,
        heartbeats=heartbeats or {},
        heartbeat_errors=heartbeat_errors or {},
        job_stale_seconds=job_stale_seconds,
        check_jobs=check_jobs,
        live_jobs=live_jobs,
        job_actions=_flows_with_job_actions(items, plan),
    )
    flows = []
    for flow in topology.flows:
        flow_report, flow_items = _flow_report(flow, seen)
        flows.append(flow_report)
        items += flow_items
    checks = [check_certificate(c, now_ms, topology.slo.certificate_expiry_days) for c in certificates]
    items += [i for c in checks if (i := certificate_item(c)) is not None]
    clusters, cluster_items = _clusters(live, applied or {}, revision)
    items += cluster_items
    return _report(topology, plan, revision, now_ms, items, flows, clusters, checks)


def _plan_items(topology: Topology, live: LiveState, plan: Plan, desired: DesiredState) -> list[DriftItem]:
    """The plan's actions and findings, and the MirrorMaker 2 internal topics no enabled flow uses."""
    items = [action_item(a, desired, topology) for a in plan.actions]
    items += [finding_item(f, desired, topology) for f in plan.findings]
    mentioned = {(i.cluster, i.subject) for i in items}
    return items + unmanaged_internal(topology, live, desired, mentioned)


def _flows_with_job_actions(items: list[DriftItem], plan: Plan) -> frozenset[str]:
    """Flows whose job the plan already speaks of: a job action, or a job pending sync (rendered, not started yet:
    its finding says so, not "no status record")."""
    acted = {fl for i in items if i.category is Category.JOB and i.verb for fl in i.flows}
    return frozenset(acted | {f.subject for f in plan.findings if f.reason_kind is ReasonKind.JOB_PENDING_SYNC})


@dataclass(frozen=True)
class _Seen:
    """What the jobs, their statuses and the heartbeats said, which each flow is checked against."""

    topology: Topology
    live: LiveState
    now_ms: int
    job_statuses: Mapping[str, StatusRecord | Mapping[str, Any]]
    job_status_errors: Mapping[str, str]
    desired_spec_hashes: Mapping[str, str] | None
    heartbeats: Mapping[str, Mapping[str, Heartbeat | None]]
    heartbeat_errors: Mapping[str, str]
    job_stale_seconds: float | None
    check_jobs: bool
    live_jobs: LiveJobs | None
    job_actions: frozenset[str]  # flows whose job a plan item already speaks of


def _flow_report(flow: Flow, seen: _Seen) -> tuple[FlowReport, list[DriftItem]]:
    """A flow's row (items attached later, in sort order) and its items: its job, its heartbeats, its SLOs."""
    hb_topic = heartbeat_topic(flow) if flow.heartbeats.enabled else None
    if not flow.enabled:
        return FlowReport(flow.name, flow.source, flow.target, False, None, hb_topic, None), []
    reachable = seen.live.cluster(flow.target).reachable
    items: list[DriftItem] = []
    job = _job_health(flow, seen) if seen.check_jobs else None
    if job is not None and reachable:
        if flow.name not in seen.job_actions:  # a job action already says it
            items += job_items(flow, job)
        if job.running:
            items += group_sync_items(flow, job)
    hb_age, hb_items = _heartbeat(flow, hb_topic, seen)
    items += hb_items
    hb_read = flow.target in seen.heartbeats
    items += slo_items(Measured(flow, job, hb_topic, hb_age, hb_read), seen.topology.slo)
    return FlowReport(flow.name, flow.source, flow.target, True, job, hb_topic, hb_age), items


def _job_health(flow: Flow, seen: _Seen) -> JobHealth:
    """The verdict on the flow's job: the plan's (`live_jobs`), or its status record's alone."""
    if seen.desired_spec_hashes is not None:
        want = seen.desired_spec_hashes.get(flow.name)
    else:
        want = JobSpec.from_flow(seen.topology, flow).spec_hash()
    reachable = seen.live.cluster(flow.target).reachable
    unknown = seen.job_status_errors.get(flow.target) or (None if reachable else "cluster unreachable")
    interval = RuntimeSettings.of(flow.job).status_interval_seconds  # the spec's (JobSpec.from_flow)
    verdict = None
    if seen.live_jobs is not None:
        verdict = seen.live_jobs.jobs.get(flow.name) or LiveJob(flow.name, JobState.NOT_DEPLOYED)
    record = seen.job_statuses.get(flow.name)
    return job_health(record, want, seen.now_ms, seen.job_stale_seconds, unknown, interval, live=verdict)


def _heartbeat(flow: Flow, topic: str | None, seen: _Seen) -> tuple[float | None, list[DriftItem]]:
    """Seconds since the newest heartbeat in the flow's heartbeats topic on its target (None: none there, or not
    read), and a note when its target's heartbeats could not be read."""
    if flow.target in seen.heartbeats and topic:
        hb = seen.heartbeats[flow.target].get(topic)
        return (None if hb is None else max(0.0, (seen.now_ms - hb.timestamp) / 1000)), []
    if flow.target not in seen.heartbeat_errors or not seen.live.cluster(flow.target).reachable:
        return None, []
    message = f"heartbeats on {flow.target} could not be read: {seen.heartbeat_errors[flow.target]}"
    return None, [DriftItem.of_flow(flow, Category.HEARTBEAT, message, level=Level.NOTE)]


def _clusters(
    live: LiveState, applied: Mapping[str, Mapping[str, Any] | None], revision: Mapping[str, Any] | None
) -> tuple[list[ClusterReport], list[DriftItem]]:
    """Each cluster's row (items and certificates attached later) with the revision last applied there, when it
    could be read, and a note saying which."""
    clusters, items = [], []
    for alias in sorted(live.clusters):
        c = live.cluster(alias)
        view = applied_view(applied.get(alias)) if c.reachable else None
        if c.reachable:
            items += revision_items(alias, view, revision)
        clusters.append(ClusterReport(alias, c.reachable, c.error, view))
    return clusters, items


def _report(
    topology: Topology,
    plan: Plan,
    revision: Mapping[str, Any] | None,
    now_ms: int,
    items: list[DriftItem],
    flows: list[FlowReport],
    clusters: list[ClusterReport],
    checks: list[CertificateCheck],
) -> DriftReport:
    """The report, its items in sort order, each flow and cluster with its own."""
    ordered = tuple(sorted(items, key=lambda i: i.sort_key()))
    slo = topology.slo
    return DriftReport(
        topology=topology.name,
        generated_at=iso_ms(now_ms) or "",
        revision=dict(revision) if revision else None,
        slo={f.name: getattr(slo, f.name) for f in dataclasses.fields(slo)},
        clusters=tuple(
            dataclasses.replace(
                c,
                items=tuple(i for i in ordered if i.cluster == c.alias),
                certificates=tuple(k for k in checks if k.cluster == c.alias),
            )
            for c in clusters
        ),
        flows=tuple(dataclasses.replace(f, items=tuple(i for i in ordered if f.name in i.flows)) for f in flows),
        items=ordered,
        plan=plan.to_dict()["summary"],
        environment=topology.environment,
    )
