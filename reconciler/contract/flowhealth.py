"""A flow's job as drift judges it (pure): what it last reported, the one verdict on it, and what is wrong with it.

`job_health` joins a flow's status record and the one verdict on its job (`reconciler.contract.jobstate.classify`)
into a `JobHealth`; `job_problems` and `lag_problems` say what is wrong with it, each a `Problem` with a message and
a hint. Drift (`reconciler.drift.report`) turns every problem into an item of its report (job, lag, lag-age,
latency); an engine on Kubernetes turns the same problems of its flows into the Ready / Progressing / Degraded
conditions of its `ReplicationEngine` status (`reconciler.contract.engine_status`): one judgement, two readers.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.contract.jobstate import REPLICATING, JobState, LiveJob, reported_verdict
from reconciler.contract.status import (
    DOWN_STATES,
    FaultKind,
    PartitionCount,
    PartitionFault,
    StatusRecord,
    StatusState,
    health,
)
from reconciler.mirror.group_sync import GroupSync
from reconciler.textutil import RECORD_AGE
from reconciler.topology.model import Slo


def _round(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(float(x), digits)


@dataclass(frozen=True)
class JobHealth:
    """The verdict on the flow's job (`reconciler.contract.jobstate`: the plan's own, when drift is handed the
    plan's live jobs) and what it last reported on its target cluster (None fields: not reported)."""

    reported: bool  # a status record exists
    state: str | None = None  # the state the job last reported (what it says of itself)
    running: bool = False  # the verdict is one of REPLICATING (running, running elsewhere)
    stale: bool = False  # the record is older than `stale_after`
    status_age_seconds: float | None = None
    spec_hash: str | None = None
    desired_spec_hash: str | None = None
    git_revision: str | None = None
    records: int | None = None
    records_per_second: float | None = None
    lag_total: int | None = None
    lag_seconds: float | None = None  # age of the oldest record not replicated yet
    latency_p99_ms: float | None = None
    errors: int | None = None
    last_error: str | None = None
    halted: tuple[str, ...] = ()  # "topic:partition" the job stopped copying (state "degraded")
    faults: tuple[PartitionFault, ...] = ()  # the partitions that do not progress, and why (state "degraded")
    dead_lettered: int = 0  # records the job wrote to the dead-letter topic (on_refused_record: skip)
    data_loss: tuple[PartitionCount, ...] = ()  # losses the job saw at the source since it started, by kind
    groups: tuple[GroupSync, ...] = ()  # each group the flow's filter matches: synced, or why not (issue 38)
    unknown: str | None = None  # why the status could not be read
    stale_after: float | None = None  # the threshold applied (contract/status.py `health`); not in to_dict
    verdict: JobState | None = None  # the one verdict (None: not checked)
    why: str = ""  # the verdict in words (the plan's reason)

    @property
    def spec_current(self) -> bool | None:
        if self.spec_hash is None or self.desired_spec_hash is None:
            return None
        return self.spec_hash == self.desired_spec_hash

    def to_dict(self) -> dict:
        return {
            "reported": self.reported,
            "verdict": self.verdict.value if self.verdict is not None else None,
            "why": self.why,
            "state": self.state,
            "running": self.running,
            "stale": self.stale,
            "status_age_seconds": _round(self.status_age_seconds),
            "spec_hash": self.spec_hash,
            "desired_spec_hash": self.desired_spec_hash,
            "spec_current": self.spec_current,
            "git_revision": self.git_revision,
            "records": self.records,
            "records_per_second": _round(self.records_per_second),
            "lag_total": self.lag_total,
            "lag_seconds": _round(self.lag_seconds),
            "latency_p99_ms": _round(self.latency_p99_ms),
            "errors": self.errors,
            "last_error": self.last_error,
            "halted": list(self.halted),
            "faults": [f.to_dict() for f in self.faults],
            "dead_lettered": self.dead_lettered,
            "data_loss": [c.to_dict() for c in self.data_loss],
            "unknown": self.unknown,
        }


def job_health(
    record: StatusRecord | Mapping[str, Any] | None,
    desired_hash: str | None,
    now_ms: int,
    stale_seconds: float | None = None,
    unknown: str | None = None,
    status_interval_seconds: float | None = None,
    live: LiveJob | None = None,
) -> JobHealth:
    """The report's view of a job. `live`: the plan's verdict on it (`reconciler.contract.jobstate.classify`,
    status record and deployment), shown as it is; without it (no deployer view) the verdict is the record's
    alone (`reported_verdict`). Stale after `stale_after_seconds(status_interval_seconds)`, or after
    `stale_seconds` when given (an override the plan's verdict was computed with too)."""
    if unknown is not None:
        return JobHealth(False, desired_spec_hash=desired_hash, unknown=unknown, verdict=JobState.UNKNOWN, why=unknown)
    status = StatusRecord.of(live.status if live is not None else record)
    verdict = (
        live.state if live is not None else reported_verdict(status, now_ms, status_interval_seconds, stale_seconds)
    )
    why = live.why if live is not None else ""
    if status is None:
        return JobHealth(False, desired_spec_hash=desired_hash, verdict=verdict, why=why)
    rule = health(status, now_ms, status_interval_seconds, stale_seconds)
    return JobHealth(
        True,
        state=status.state_name,
        running=verdict in REPLICATING,
        stale=rule.stale,
        stale_after=rule.stale_after,
        status_age_seconds=status.age_seconds(now_ms),
        spec_hash=status.spec_hash,
        desired_spec_hash=desired_hash,
        git_revision=status.git_revision,
        records=status.records,
        records_per_second=status.records_per_second,
        lag_total=status.lag_total,
        lag_seconds=status.lag_seconds,
        latency_p99_ms=status.latency_ms.p99,
        errors=status.errors,
        last_error=status.last_error,
        halted=status.halted,
        faults=status.faults,
        dead_lettered=sum(c.count for c in status.dead_letters),
        verdict=verdict,
        why=why,
        data_loss=status.data_loss,
        groups=status.groups,
    )


#: What to do about a partition that does not progress, by why (FaultKind).
FAULT_HINTS: dict[FaultKind, str] = {
    FaultKind.REFUSED_RECORD: "raise the remote topic's max.message.bytes (and the target cluster's message.max.bytes "
    "for the job's producer), or set on_refused_record: skip; then restart the job",
    FaultKind.OUT_OF_RANGE: "the source lost the records at its position (offset_reset: pause); see the job's "
    "out_of_range events, then restart it or set offset_reset: resume-at-start or resume-at-end",
    FaultKind.TRUNCATED: "the source's retention passed the job's position (offset_reset: pause); restart the job or "
    "set offset_reset: resume-at-start (copies what is left) or resume-at-end",
    FaultKind.LOST_TAIL: "the source lost records it had acknowledged and will reuse their offsets (offset_reset: "
    "pause); set offset_reset: resume-at-end (copies the reused offsets) or resume-at-start",
    FaultKind.RECREATED: "the source topic was deleted and created again (offset_reset: pause); set offset_reset: "
    "resume-at-start to copy the new topic from its beginning",
    FaultKind.STUCK: "the partition's source advances but the job does not copy it: see the job's last error (a broker "
    "not answering, authorization)",
    FaultKind.SOURCE_UNREACHABLE: "the job cannot reach the source cluster (its lag is unknown meanwhile): check its "
    "brokers, the network path and the job's credentials there; the job copies on once the cluster answers",
    FaultKind.TARGET_UNREACHABLE: "the job cannot reach the target cluster: check its brokers, the network path and the "
    "job's credentials there; the job copies on once the cluster answers",
}


class ProblemKind(str, enum.Enum):
    """What a problem of a flow's job is about; drift files JOB problems under its `job` category, the others under
    their own (`lag`, `lag-age`, `latency`)."""

    UNREADABLE = "unreadable"  # its status could not be read (drift: an error, not drift)
    DUPLICATED = "duplicated"
    STOPPED = "stopped"
    NOT_RUNNING = "not running"  # no status record
    DOWN = "down"
    DEGRADED = "degraded"  # partitions it does not copy (`faults`)
    DATA_LOSS = "data loss"  # the source lost records the job had reached
    OLD_SPEC = "old spec"  # it runs a spec other than the one wanted (an update on its way, or not applied)
    LAG = "lag"
    LAG_AGE = "lag-age"
    LATENCY = "latency"


@dataclass(frozen=True)
class Problem:
    kind: ProblemKind
    message: str
    hint: str | None = None


def _degraded_problem(flow: str, job: JobHealth) -> Problem:
    """A degraded job: the partitions it does not copy, why and since when (its status record's `faults`; an older
    job's record has only `halted`)."""
    if job.faults:
        shown = [
            f"{f.name} ({f.kind.value if f.kind else 'fault'} since "
            f"{dt.datetime.fromtimestamp((f.since or 0) / 1000, dt.UTC):%Y-%m-%dT%H:%M:%SZ}: {f.reason})"
            for f in job.faults[:5]
        ]
        hints = dict.fromkeys(FAULT_HINTS[f.kind] for f in job.faults if f.kind in FAULT_HINTS)
        count = len(job.faults)
    else:
        shown = list(job.halted[:5])
        hints = dict.fromkeys([FAULT_HINTS[FaultKind.OUT_OF_RANGE]])
        count = len(job.halted)
    more = f" and {count - 5} more" if count > 5 else ""
    return Problem(
        ProblemKind.DEGRADED,
        f"job of flow {flow} is degraded: {count} partition(s) not copied"
        + (f": {'; '.join(shown)}{more}" if shown else ""),
        "; ".join(hints) or None,
    )


def _down_problem(flow: str, job: JobHealth) -> Problem:
    """A job that does not replicate: why, from its last report and the verdict."""
    if job.reported and StatusState.parse(job.state) in DOWN_STATES:
        why = f"; last error: {job.last_error}" if job.last_error else ""
        return Problem(
            ProblemKind.DOWN,
            f"job of flow {flow} is down: state {job.state}{why}",
            "restart the job (reconciler apply), and check its logs",
        )
    if job.reported and job.stale:
        age = "never" if job.status_age_seconds is None else f"{job.status_age_seconds:.0f}s ago"
        return Problem(
            ProblemKind.DOWN,
            f"job of flow {flow} is not reporting: last status {age} (state {job.state}; "
            f"a running job reports every few seconds, limit {job.stale_after or 0:.0f}s)",
            "the job process probably died: check its deployer and restart it (reconciler apply)",
        )
    return Problem(
        ProblemKind.DOWN,
        f"job of flow {flow} is {(job.verdict or JobState.DOWN).value}: {job.why or 'no fresh status'}",
        "restart the job (reconciler apply), and check its logs",
    )


def job_problems(flow: str, target: str, job: JobHealth) -> list[Problem]:
    """What is wrong with a flow's job (into `target`), from its health and the one verdict on it: nothing for a job
    that replicates its wanted spec without fault, or that just started / waits for a cluster to sync it."""
    verdict = job.verdict
    if job.unknown is not None or verdict is JobState.UNKNOWN:
        why = job.unknown or job.why
        return [Problem(ProblemKind.UNREADABLE, f"job status of flow {flow} could not be read on {target}: {why}")]
    if verdict in (JobState.STARTING, JobState.PENDING_SYNC):
        return []  # not down: just started, or waiting for a cluster to sync it (the plan's finding says so)
    if verdict is JobState.DUPLICATED:
        return [
            Problem(
                ProblemKind.DUPLICATED,
                f"job of flow {flow} is duplicated: {job.why}",
                "apply restarts it (every instance ends, one starts): reconciler apply",
            )
        ]
    if verdict is JobState.STOPPED:
        return [
            Problem(
                ProblemKind.STOPPED,
                f"job of flow {flow} is stopped: {job.why or 'stopped on purpose'}",
                "reconciler apply",
            )
        ]
    if not job.reported and verdict is not JobState.DOWN:
        return [
            Problem(
                ProblemKind.NOT_RUNNING,
                f"job of flow {flow} is not running: no status record on {target}",
                "deploy the flow's job (reconciler apply), or check its deployer's logs",
            )
        ]
    if verdict not in REPLICATING:
        return [_down_problem(flow, job)]
    out = []
    if job.state == "degraded" or job.halted or job.faults:
        out.append(_degraded_problem(flow, job))
    if job.data_loss:
        shown = [
            f"{c.topic}:{c.partition} {c.kind.value if c.kind else 'out-of-range'} x{c.count}"
            + (f" ({c.reused} offsets reused)" if c.reused else "")
            for c in job.data_loss
        ]
        out.append(
            Problem(
                ProblemKind.DATA_LOSS,
                f"the source of flow {flow} lost records the job had reached since it started: "
                + ", ".join(shown[:5])
                + (f" and {len(shown) - 5} more" if len(shown) > 5 else ""),
                "see the job's out_of_range events (reconciler status) for what it did (engine offset_reset); the "
                "source lost acknowledged records (retention shorter than the lag, a broker that lost its tail, a "
                "topic recreated): check it. Shown until the job restarts",
            )
        )
    if job.spec_current is False:
        out.append(
            Problem(
                ProblemKind.OLD_SPEC,
                f"job of flow {flow} runs an old spec ({(job.spec_hash or '?')[:12]}, topology wants "
                f"{(job.desired_spec_hash or '?')[:12]})"
                + (f", from revision {job.git_revision[:12]}" if job.git_revision else ""),
                "apply the topology to update the job",
            )
        )
    return out


def lag_problems(flow: str, job: JobHealth, slo: Slo) -> list[Problem]:
    """A running job's lag, lag age and p99 record age against the topology's SLOs (the heartbeat age is drift's:
    it reads the heartbeats topic)."""
    out: list[Problem] = []
    if not job.running:
        return out
    if slo.max_lag_records is not None and job.lag_total is not None and job.lag_total > slo.max_lag_records:
        out.append(
            Problem(
                ProblemKind.LAG,
                f"flow {flow} is {job.lag_total:,} records behind (SLO {slo.max_lag_records:,})",
                "raise the job's parallelism or max_records_per_partition, or check the target cluster",
            )
        )
    if slo.max_lag_seconds is not None and job.lag_seconds is not None and job.lag_seconds > slo.max_lag_seconds:
        out.append(
            Problem(
                ProblemKind.LAG_AGE,
                f"flow {flow}: its oldest record not replicated yet is {job.lag_seconds:,.1f}s old "
                f"(SLO max_lag_seconds {slo.max_lag_seconds:g}s)",
                "raise the job's parallelism or max_records_per_partition, or check the target cluster",
            )
        )
    if (
        slo.max_latency_p99_ms is not None
        and job.latency_p99_ms is not None
        and job.latency_p99_ms > slo.max_latency_p99_ms
    ):
        out.append(
            Problem(
                ProblemKind.LATENCY,
                f"flow {flow}: records reach the target with p99 {RECORD_AGE} "
                f"{job.latency_p99_ms:,.0f} ms (SLO max_latency_p99_ms {slo.max_latency_p99_ms:,.0f} ms)",
                "lower the job's trigger_interval_ms or raise its parallelism",
            )
        )
    return out
