"""The verdict on a job: one state, computed once from its status record and its deployment (pure).

Every command that says whether a job runs says it with `classify`: plan, apply and status
(`reconciler.jobplan.state`, which reads the records and asks the deployers) and drift (its items, its
flows table, its JSON and Prometheus output, and so the alert rules on that output), which is handed
the `LiveJobs` its plan computed. A job's own report (`StatusState`, what the job says of itself) maps
to a verdict by `REPORTED_VERDICT`; the deployment then overrides it where it knows better (a dead
process is down at once, two copies are duplicated, a job stopped on purpose is stopped):

    running            a fresh status saying starting/running/degraded (the one rule of job health:
                       `reconciler.contract.status.health`, stale after three status
                       intervals, at least 15 s)
    starting           deployed less than START_GRACE_SECONDS ago, process alive, no fresh status yet
    pending sync       rendered for a cluster to sync (the deployer cannot see the process: kubernetes with
                       `kubectl_apply: false`, for Argo CD / Flux) and no status record since the render (none,
                       or only records older than it / of another spec): not down, never restarted (a flow that
                       never started is not restarted); how long it waited is in `why`
    restart-required   the job said so (its spec changed in a field it cannot take) and exits
    down               deployed, not stopped on purpose, but the process is gone or the status is stale
    stopped            stopped on purpose (by the reconciler)
    not deployed       no deployment, no fresh status
    running elsewhere  a fresh status, but no deployment known here (started from another state dir)
    duplicated         more than one instance of the flow's job has processes (an orphan whose supervisor
                       was killed, a leftover of an earlier start): each copies, so records arrive twice
    unknown            the statuses on the flow's target could not be read

Without a deployer's view (drift with jobs off, `build_report` of a record alone) the verdict is the
report's alone: `reported_verdict`.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler import settings
from reconciler.contract.spec import JobSpec
from reconciler.contract.status import StatusRecord, StatusState, health

#: A job just (re)started has no status until Spark is up: not "down" for this long.
START_GRACE_SECONDS = settings.job_start_grace()


class JobState(str, enum.Enum):
    """The verdict on a job (one enum for plan, apply, status and drift)."""

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


#: What a job's fresh report says of it, as a verdict (a stale report, or a state this version does not know,
#: is DOWN). `stopped` and `stopping` are down: a job stopped on purpose is STOPPED only by its deployment's word.
REPORTED_VERDICT: Mapping[StatusState, JobState] = {
    StatusState.STARTING: JobState.RUNNING,
    StatusState.RUNNING: JobState.RUNNING,
    StatusState.DEGRADED: JobState.RUNNING,
    StatusState.STOPPING: JobState.DOWN,
    StatusState.STOPPED: JobState.DOWN,
    StatusState.RESTART_REQUIRED: JobState.RESTART_REQUIRED,
    StatusState.FAILED: JobState.DOWN,
}
#: Verdicts of a job that replicates (the lag and latency it reports mean something; drift's `job_up`).
REPLICATING: frozenset[JobState] = frozenset({JobState.RUNNING, JobState.ELSEWHERE})


@dataclass(frozen=True)
class Deployment:
    """What a deployer knows about one job it deployed."""

    flow: str
    deployer: str  # local | spark-standalone | kubernetes
    where: str  # for people: "pid 1234, local[1]", "k8s default/mirror-a-to-b"
    spec: JobSpec | None  # the spec last handed to the job (None: unreadable)
    alive: bool | None  # the process runs; None: the deployer cannot tell (the status decides)
    started_at: float | None = None  # epoch seconds it was (re)started or rendered
    stopped: bool = False  # stopped on purpose (by `stop`): not "down"
    exit_code: int | None = None  # when it ended and the code is known
    detail: str = ""  # e.g. "exited with code 3 (restart required)"
    options: Mapping[str, Any] = field(default_factory=dict)  # deployment_options it was deployed with
    instance_id: str | None = None  # the instance the deployer started last (one per start)
    #: Processes of this flow's job that are not the recorded running instance (an orphan whose supervisor was
    #: killed, a leftover of an earlier start), one description per instance: each still copies unseen.
    strays: tuple[str, ...] = ()

    @property
    def spec_hash(self) -> str | None:
        return self.spec.spec_hash() if self.spec is not None else None


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
        if self.status is None or self.state not in REPLICATING:
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


def _last(status: StatusRecord | None) -> str:
    if status is None:
        return "no status published"
    text = f"last status '{status.state_name}' at {iso(status.heartbeat_at)}"
    if status.state in (StatusState.FAILED, StatusState.RESTART_REQUIRED) and status.last_error:
        text += f": {status.last_error}"
    return text


def reported_verdict(
    status: StatusRecord | None,
    now_ms: float,
    status_interval_seconds: float | None,
    stale_after: float | None = None,
) -> JobState:
    """The verdict of a job's report alone: NOT_DEPLOYED without one, DOWN when it is stale (the one rule,
    `contract/status.py` `health`; `stale_after` overrides the threshold) or in a state this version does not
    know, else `REPORTED_VERDICT` of its state."""
    if status is None:
        return JobState.NOT_DEPLOYED
    if health(status, now_ms, status_interval_seconds, stale_after).stale or status.state is None:
        return JobState.DOWN
    return REPORTED_VERDICT[status.state]


def classify(
    flow: str,
    record: StatusRecord | Mapping[str, Any] | None,
    dep: Deployment | None,
    now_ms: int,
    spec: JobSpec | None = None,
    start_grace: float = START_GRACE_SECONDS,
    stale_after: float | None = None,
) -> tuple[JobState, str]:
    """The state of one job from its status record and its deployment (pure). `stale_after`: an explicit
    threshold for the status record (drift's --job-stale-seconds); None: the one rule."""
    status = StatusRecord.of(record, flow)
    known = spec or (dep.spec if dep else None)
    interval = known.engine.status_interval_seconds if known else None
    reported = reported_verdict(status, now_ms, interval, stale_after)
    fresh = reported is JobState.RUNNING
    stale_limit = health(status, now_ms, interval, stale_after).stale_after
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
    restart_required = (
        status_of_this_run is not None
        and status_of_this_run.state is not None
        and REPORTED_VERDICT[status_of_this_run.state] is JobState.RESTART_REQUIRED
    )
    if dep.alive is False:
        if restart_required:
            return JobState.RESTART_REQUIRED, f"{dep.detail}; {_last(status)}"
        return JobState.DOWN, f"{dep.detail}; {_last(status)}"
    if restart_required:
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
            f"{dep.where} runs but publishes no status (stale after {stale_limit:.0f}s): {_last(status)}",
        )
    return JobState.DOWN, f"no fresh status (stale after {stale_limit:.0f}s): {_last(status)}"
