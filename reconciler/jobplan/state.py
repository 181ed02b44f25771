"""Jobs as state.

Desired (pure): one job per enabled flow, `JobSpec.from_flow`, run by the flow's `job.deployer`
with its deployer settings.

Live (I/O, once per run): per flow, the latest status record the job published on its target
cluster (`reconciler.status.internal`, read once per target, in parallel) and what the deployers
know (the spec they handed to the job, whether its process runs, where). `classify` turns the
two into a state:

    running            a fresh status saying starting/running/degraded (the one rule of job health:
                       `reconciler.contract.status.health`, stale after three status
                       intervals, at least 15 s)
    starting           deployed less than START_GRACE_SECONDS ago, process alive, no fresh status yet
    pending sync       rendered for a cluster to sync (the deployer cannot see the process: kubernetes with
                       `kubectl_apply: false`, for Argo CD / Flux) and no status record since the render (none,
                       or only records older than it / of another spec): not down, never restarted (a flow that
                       never started is not restarted); how long it waited is in `why`, and past
                       PENDING_SYNC_WARN_SECONDS the plan's finding about it is a warning
    restart-required   the job said so (its spec changed in a field it cannot take) and exits
    down               deployed, not stopped on purpose, but the process is gone or the status is stale
    stopped            stopped on purpose (by the reconciler)
    not deployed       no deployment, no fresh status
    running elsewhere  a fresh status, but no deployment known here (started from another state dir)
    duplicated         more than one instance of the flow's job has processes (an orphan whose supervisor
                       was killed, a leftover of an earlier start): each copies, so records arrive twice
"""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciler import settings
from reconciler.contract import status as status_contract
from reconciler.contract.deployers import KUBERNETES
from reconciler.contract.spec import JobSpec
from reconciler.contract.status import StatusRecord, StatusState
from reconciler.deployers import Deployers, Deployment
from reconciler.deployers.base import deployment_options
from reconciler.jobplan.backend import JobBackend
from reconciler.topology.flow_id import flow_ends
from reconciler.topology.model import Cluster, Topology

#: A job just (re)started has no status until Spark is up: not "down" for this long.
START_GRACE_SECONDS = settings.job_start_grace()
#: A rendered flow that no cluster has started for this long (an unmerged pull request, a GitOps controller that
#: does not sync, an image that cannot be pulled, an engine that dies before its first status) is worth a warning;
#: it stays "pending sync" (never restarted) however long it waits.
PENDING_SYNC_WARN_SECONDS = 900.0


class JobState(str, enum.Enum):
    RUNNING = "running"
    STARTING = "starting"
    PENDING_SYNC = "pending sync"
    RESTART_REQUIRED = "restart-required"
    DOWN = "down"
    STOPPED = "stopped"
    NOT_DEPLOYED = "not deployed"
    ELSEWHERE = "running elsewhere"
    DUPLICATED = "duplicated"
    UNKNOWN = "unknown"


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
    return {
        f.name: DesiredJob(
            f.name,
            f.target,
            f.job.deployer,
            deployment_options(f.job, f.engine, slots[f.engine]),
            JobSpec.from_flow(topology, f, git_revision),
        )
        for f in topology.flows
        if f.enabled
    }


@dataclass(frozen=True)
class LiveJob:
    flow: str
    state: JobState
    why: str = ""  # in words, for reasons and `status`
    status: StatusRecord | None = None  # the job's latest status record
    deployment: Deployment | None = None  # the deployment of the desired deployer family (or the only one)
    others: tuple[Deployment, ...] = ()  # deployments of this flow by other deployer families

    @property
    def running_hash(self) -> str | None:
        if self.status is None or self.state not in (JobState.RUNNING, JobState.ELSEWHERE):
            return None
        return self.status.spec_hash

    @property
    def last_seen_ms(self) -> int | None:
        return self.status.heartbeat_at if self.status is not None else None


@dataclass
class LiveJobs:
    jobs: dict[str, LiveJob] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)  # target cluster -> why its statuses are unknown
    now_ms: int = 0


def iso(epoch_ms: int | float | None) -> str:
    if epoch_ms is None:
        return "never"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_ms / 1000.0))


def waited(seconds: float) -> str:
    """A duration in words for people: 45s, 10m, 2h05m, 3d04h."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def pending_seconds(lj: LiveJob, now_ms: int) -> float | None:
    """How long a pending-sync job has waited since its render (None: not pending sync, or no render time)."""
    dep = lj.deployment
    if lj.state is not JobState.PENDING_SYNC or dep is None or dep.started_at is None:
        return None
    return max(0.0, now_ms / 1000 - dep.started_at)


def _last(status: StatusRecord | None) -> str:
    if status is None:
        return "no status published"
    text = f"last status '{status.state_name}' at {iso(status.heartbeat_at)}"
    if status.state in (StatusState.FAILED, StatusState.RESTART_REQUIRED) and status.last_error:
        text += f": {status.last_error}"
    return text


def classify(
    flow: str,
    record: StatusRecord | Mapping[str, Any] | None,
    dep: Deployment | None,
    now_ms: int,
    spec: JobSpec | None = None,
    start_grace: float = START_GRACE_SECONDS,
) -> tuple[JobState, str]:
    """The state of one job from its status record and its deployment (pure)."""
    status = StatusRecord.of(record, flow)
    known = spec or (dep.spec if dep else None)
    verdict = status_contract.health(status, now_ms, known.engine.status_interval_seconds if known else None)
    stale_after, fresh = verdict.stale_after, verdict.replicating
    if dep is not None and dep.strays:
        count = len(dep.strays) + (1 if dep.alive else 0)
        running = f"instance {dep.instance_id} ({dep.where}) and " if dep.alive else ""
        return JobState.DUPLICATED, (
            f"{count} instance{'s' if count != 1 else ''} of flow {flow} run: {running}"
            f"{'; '.join(dep.strays)} that the reconciler did not account for"
        )
    if dep is None or (dep.stopped and not dep.alive):
        if fresh:
            return JobState.ELSEWHERE, (
                f"reports from somewhere this state directory did not start it ({_last(status)})"
            )
        if dep is not None:
            return JobState.STOPPED, dep.detail
        return JobState.NOT_DEPLOYED, ""
    status_of_this_run = (
        status
        if (status and dep.started_at is not None and (status.started_at or 0) >= dep.started_at * 1000 - 5000)
        else None
    )
    if dep.alive is False:
        if status_of_this_run and status_of_this_run.state is StatusState.RESTART_REQUIRED:
            return JobState.RESTART_REQUIRED, f"{dep.detail}; {_last(status)}"
        return JobState.DOWN, f"{dep.detail}; {_last(status)}"
    if status_of_this_run and status_of_this_run.state is StatusState.RESTART_REQUIRED:
        return JobState.RESTART_REQUIRED, _last(status)
    if fresh:
        return JobState.RUNNING, ""
    if dep.alive is None and not (
        status_of_this_run is not None and (dep.spec is None or status_of_this_run.spec_hash == dep.spec_hash)
    ):
        # Rendered for a cluster to sync (the deployer cannot see the process): nothing has started it yet.
        since = (
            f"rendered at {iso(dep.started_at * 1000)} ({waited(now_ms / 1000 - dep.started_at)} ago)"
            if dep.started_at is not None
            else "rendered"
        )
        before = f"; before it: {_last(status)}" if status is not None else ""
        return JobState.PENDING_SYNC, (
            f"{since}, no status since: the cluster has not started it yet ({dep.where}){before}"
        )
    if (
        status_of_this_run is None
        and dep.started_at is not None
        and now_ms - dep.started_at * 1000 < start_grace * 1000
    ):
        return JobState.STARTING, f"started at {iso(dep.started_at * 1000)}, no status yet"
    if dep.alive is True:
        return (
            JobState.DOWN,
            f"{dep.where} runs but publishes no status (stale after {stale_after:.0f}s): {_last(status)}",
        )
    return JobState.DOWN, f"no fresh status (stale after {stale_after:.0f}s): {_last(status)}"


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
) -> LiveJobs:
    """The live state of every job the topology wants, the deployers know, or that reports.
    `statuses`: already read (reconciler.operations.observe), else read here."""
    statuses = statuses if statuses is not None else read_statuses(topology, backend, skip or {})
    records, unreadable = statuses.records, statuses.unreadable()
    jobs = [f.job for f in topology.flows] + ([topology.default_job] if topology.default_job else [])
    k8s_options: list[Mapping[str, Any]] = [deployment_options(j) for j in jobs if j.deployer == KUBERNETES]
    deployments = backend.deployers.deployments(k8s_options)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    return assemble(desired, records, deployments, unreadable, now_ms)


def assemble(
    desired: Mapping[str, DesiredJob],
    statuses: Mapping[str, StatusRecord | Mapping[str, Any]],
    deployments: list[Deployment],
    unreadable: Mapping[str, str],
    now_ms: int,
    start_grace: float = START_GRACE_SECONDS,
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
            state, why = classify(flow, records.get(flow), dep, now_ms, want.spec if want else None, start_grace)
        jobs[flow] = LiveJob(flow, state, why, records.get(flow), dep, others)
    return LiveJobs(jobs, dict(unreadable), now_ms)
