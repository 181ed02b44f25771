"""Jobs as state.

Desired (pure): one job per enabled flow, `JobSpec.from_flow`, run by the flow's `job.deployer`
with its deployer settings.

Live (I/O, once per run): per flow, the latest status record the job published on its target
cluster (`reconciler.status.internal`, read once per target, in parallel) and what the deployers
know (the spec they handed to the job, whether its process runs, where). `classify`
(`reconciler.contract.jobstate`, the one verdict, which drift uses too) turns the two into a `JobState`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciler.contract.deployers import KUBERNETES, SLO_OPTION
from reconciler.contract.engine_status import slo_spec
from reconciler.contract.jobstate import (
    START_GRACE_SECONDS,
    Deployment,
    JobState,
    LiveJob,
    LiveJobs,
    classify,
    iso,
    waited,
)
from reconciler.contract.spec import JobSpec
from reconciler.contract.status import StatusRecord
from reconciler.deployers import Deployers
from reconciler.deployers.base import deployment_options
from reconciler.jobplan.backend import JobBackend
from reconciler.topology.flow_id import flow_ends
from reconciler.topology.model import Cluster, Topology

#: A rendered flow that no cluster has started for this long (an unmerged pull request, a GitOps controller that
#: does not sync, an image that cannot be pulled, an engine that dies before its first status) is worth a warning;
#: it stays "pending sync" (never restarted) however long it waits.
PENDING_SYNC_WARN_SECONDS = 900.0


@dataclass(frozen=True)
class DesiredJob:
    flow: str
    cluster: str  # the flow's target: where it reports, whose lease covers it
    deployer: str
    options: Mapping[str, Any]
    spec: JobSpec


def desired_jobs(topology: Topology, git_revision: str | None = None) -> dict[str, DesiredJob]:
    slots: dict[str, int] = {}
    for f in topology.flows:
        if f.enabled:
            slots[f.engine] = slots.get(f.engine, 0) + f.job.parallelism
    slo = {SLO_OPTION: wanted} if (wanted := slo_spec(topology.slo)) else {}  # an engine on Kubernetes judges by it
    return {
        f.name: DesiredJob(
            f.name,
            f.target,
            f.job.deployer,
            {**deployment_options(f.job, f.engine, slots[f.engine]), **(slo if f.job.deployer == KUBERNETES else {})},
            JobSpec.from_flow(topology, f, git_revision),
        )
        for f in topology.flows
        if f.enabled
    }


def pending_seconds(lj: LiveJob, now_ms: int) -> float | None:
    """How long a pending-sync job has waited since its render (None: not pending sync, or no render time)."""
    dep = lj.deployment
    if lj.state is not JobState.PENDING_SYNC or dep is None or dep.started_at is None:
        return None
    return max(0.0, now_ms / 1000 - dep.started_at)


class StatusSource(Protocol):
    """What reads the status records of a (target) cluster: the operations' Backend or a JobBackend."""

    def read_status(self, cluster: Cluster) -> Mapping[str, StatusRecord | Mapping[str, Any]]: ...


@dataclass(frozen=True)
class JobStatuses:
    """The status records read from target clusters: flow -> latest record (a status on the flow's own
    target only), and the clusters whose records could not be read (alias -> the exception)."""

    records: Mapping[str, StatusRecord] = field(default_factory=dict)
    errors: Mapping[str, BaseException] = field(default_factory=dict)
    skipped: Mapping[str, str] = field(default_factory=dict)  # unreachable clusters: not tried

    def unreadable(self) -> dict[str, str]:
        """alias -> why, as the job planner words it."""
        return {**self.skipped, **{a: f"{type(e).__name__}: {e}" for a, e in self.errors.items()}}


def read_statuses(topology: Topology, backend: StatusSource, skip: Mapping[str, str]) -> JobStatuses:
    """Every status record on every target cluster of the topology's flows (in parallel): the one reader of
    plan, apply, status and drift (reconciler.operations.observe calls it with the operations' Backend).
    Clusters in `skip` (could not be read at all) are reported without trying."""
    targets = sorted({f.target for f in topology.flows if f.target in topology.clusters})
    todo = [t for t in targets if t not in skip]

    def one(alias: str):
        try:
            return alias, backend.read_status(topology.clusters[alias]), None
        except Exception as exc:  # noqa: BLE001 - a cluster whose statuses cannot be read is reported, not fatal
            return alias, {}, exc

    records: dict[str, StatusRecord] = {}
    errors: dict[str, BaseException] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(todo)))) as pool:
        for alias, found, error in pool.map(one, todo):
            if error is not None:
                errors[alias] = error
                continue
            for flow, record in found.items():
                if flow_ends(flow)[1] == alias:  # a status on the flow's own target only
                    records[flow] = StatusRecord.of(record, flow)
    return JobStatuses(records, errors, {t: skip[t] for t in targets if t in skip})


def read_jobs(
    topology: Topology,
    backend: JobBackend,
    desired: Mapping[str, DesiredJob],
    skip: Mapping[str, str] | None = None,
    now_ms: int | None = None,
    statuses: JobStatuses | None = None,
    stale_after: float | None = None,
) -> LiveJobs:
    """The live state of every job the topology wants, the deployers know, or that reports.
    `statuses`: already read (reconciler.operations.observe), else read here; `stale_after`: an explicit
    threshold for status records (drift's --job-stale-seconds), None: the one rule."""
    statuses = statuses if statuses is not None else read_statuses(topology, backend, skip or {})
    records, unreadable = statuses.records, statuses.unreadable()
    jobs = [f.job for f in topology.flows] + ([topology.default_job] if topology.default_job else [])
    k8s_options: list[Mapping[str, Any]] = [deployment_options(j) for j in jobs if j.deployer == KUBERNETES]
    deployments = backend.deployers.deployments(k8s_options)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    return assemble(desired, records, deployments, unreadable, now_ms, stale_after=stale_after)


def assemble(
    desired: Mapping[str, DesiredJob],
    statuses: Mapping[str, StatusRecord | Mapping[str, Any]],
    deployments: list[Deployment],
    unreadable: Mapping[str, str],
    now_ms: int,
    start_grace: float = START_GRACE_SECONDS,
    stale_after: float | None = None,
) -> LiveJobs:
    """Pure: statuses + deployments -> LiveJobs."""
    records = {flow: StatusRecord.of(s, flow) for flow, s in statuses.items()}
    by_flow: dict[str, list[Deployment]] = {}
    for d in deployments:
        by_flow.setdefault(d.flow, []).append(d)
    flows = set(desired) | set(by_flow) | set(records)
    jobs: dict[str, LiveJob] = {}
    for flow in sorted(flows):
        deps = by_flow.get(flow, [])
        want = desired.get(flow)
        family = Deployers.family(want.deployer) if want else None
        mine = [d for d in deps if family is None or Deployers.family(d.deployer) == family]
        # Prefer a running deployment, then any: a flow rarely has more than one.
        mine.sort(key=lambda d: (d.alive is not True, d.stopped))
        dep = mine[0] if mine else None
        others = tuple(d for d in deps if d is not dep)
        target = flow_ends(flow)[1]
        if target in unreadable and (dep is None or dep.alive is not False):
            state, why = JobState.UNKNOWN, f"statuses on {target} cannot be read: {unreadable[target]}"
        else:
            state, why = classify(
                flow, records.get(flow), dep, now_ms, want.spec if want else None, start_grace, stale_after
            )
        jobs[flow] = LiveJob(flow, state, why, records.get(flow), dep, others)
    return LiveJobs(jobs, dict(unreadable), now_ms)


__all__ = [
    "START_GRACE_SECONDS",
    "PENDING_SYNC_WARN_SECONDS",
    "Deployment",
    "DesiredJob",
    "JobState",
    "JobStatuses",
    "LiveJob",
    "LiveJobs",
    "assemble",
    "classify",
    "desired_jobs",
    "iso",
    "pending_seconds",
    "read_jobs",
    "read_statuses",
    "waited",
]
