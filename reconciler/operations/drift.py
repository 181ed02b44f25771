"""Drift: a view of the plan and the observation (never applies, never takes the lease).

One observation (clusters, job statuses, heartbeats, applied records) feeds both the plan (the same
`plan_of` as `reconciler plan`, so whatever the plan learns to compare shows up in drift too) and
the pure `reconciler.drift.report.build_report`, which is handed the live jobs the plan computed: the one
verdict on each job (`reconciler.contract.jobstate`), not a second one from the status records alone.
`--job-stale-seconds` (`job_stale_seconds`) is the status threshold of that one verdict for the whole drift
run, its plan included, so the items, the flows table and the metrics never contradict the plan drift shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.adapters.live_read import Connections
from reconciler.contract.status import StatusRecord
from reconciler.drift.report import DriftReport, build_report
from reconciler.gitops.revision import revision_label
from reconciler.operations.backend import Backend
from reconciler.operations.observe import Observation, heartbeat_targets, message, observe
from reconciler.operations.plan import plan_and_jobs
from reconciler.topology.model import Topology


def drift_view(
    obs: Observation,
    backend: Backend,
    *,
    revision: Mapping[str, Any] | None = None,
    check_jobs: bool = True,
    job_stale_seconds: float | None = None,  # None: the one rule (contract/status.py health)
) -> DriftReport:
    """Pure over the observation (plus the deployers' listing the job plan asks for)."""
    topology, live = obs.topology, obs.live
    plan, live_jobs = plan_and_jobs(obs, backend, revision_label(revision), stale_after=job_stale_seconds)
    statuses: dict[str, StatusRecord] = {}
    status_errors: dict[str, str] = {}
    if check_jobs and obs.statuses is not None:
        targets = set(heartbeat_targets(topology, live))  # the reachable targets of active flows
        status_errors = {a: message(e) for a, e in obs.statuses.errors.items() if a in targets}
        statuses = {
            flow: s
            for flow, s in obs.statuses.records.items()
            if any(f.name == flow and f.target in targets for f in topology.flows)
        }
    return build_report(
        topology,
        live,
        plan,
        desired=obs.desired,
        job_statuses=statuses,
        job_status_errors=status_errors,
        heartbeats=obs.heartbeats,
        heartbeat_errors=obs.heartbeat_errors,
        applied=obs.applied,
        revision=revision,
        now_ms=obs.now_ms,
        job_stale_seconds=job_stale_seconds,
        check_jobs=check_jobs,
        live_jobs=live_jobs if check_jobs else None,
        certificates=obs.certificates,
    )


def drift(
    topology: Topology,
    backend: Backend,
    *,
    revision: Mapping[str, Any] | None = None,
    check_jobs: bool = True,
    job_stale_seconds: float | None = None,  # None: the one rule (contract/status.py health)
) -> DriftReport:
    with Connections(dict(topology.clusters), backend.admin_factory) as conns:
        obs = observe(
            topology,
            conns,
            backend,
            statuses=check_jobs or backend.jobs is not None,
            heartbeats=True,
            applied=True,
            certificates=True,
            backlogs=True,
        )
        return drift_view(obs, backend, revision=revision, check_jobs=check_jobs, job_stale_seconds=job_stale_seconds)
