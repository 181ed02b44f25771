"""A flow's job as the report shows it: the one verdict on it, not a copy of its status record.

The verdict is `reconciler.contract.jobstate`'s `LiveJob`: its state and why, computed once from the job's status
record and its deployment (`classify`, the plan's, when drift is handed the plan's live jobs), or from the record
alone (`reported_verdict`) without a deployer's view. The record it was computed from travels with it, read where
it is shown (`JobHealth.last`), with its freshness by the one rule (`Health`, contract/status.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.contract.jobstate import REPLICATING, JobState, LiveJob, reported_verdict
from reconciler.contract.status import Health, StatusRecord, health
from reconciler.drift.report.values import rounded


@dataclass(frozen=True)
class JobHealth:
    """The verdict on a flow's job and what drift compares it with."""

    live: LiveJob  # the verdict (`state`, `why`) and the status record it was computed from (`status`)
    now_ms: int  # the report's "now", which the record's age is counted to
    freshness: Health | None = None  # the one rule applied to the record (None: no record)
    desired_spec_hash: str | None = None  # the spec the topology wants
    unknown: str | None = None  # why the statuses on the flow's target could not be read (the verdict: unknown)

    @property
    def verdict(self) -> JobState:
        return self.live.state

    @property
    def why(self) -> str:
        """The verdict in words (the plan's reason; '' where the record alone decided it)."""
        return self.live.why

    @property
    def status(self) -> StatusRecord | None:
        """The status record the verdict was computed from (None: the job published none)."""
        return self.live.status

    @property
    def last(self) -> StatusRecord:
        """What the job last reported of itself: its status record, or, when it published none, an empty one (every
        field not reported), so a field reads the same either way."""
        return self.live.status or StatusRecord(self.live.flow, None)

    @property
    def reported(self) -> bool:
        return self.live.status is not None

    @property
    def running(self) -> bool:
        """The verdict is one of REPLICATING (running, running elsewhere)."""
        return self.verdict in REPLICATING

    @property
    def stale(self) -> bool:
        """The record is older than the one rule's threshold (`freshness.stale_after`)."""
        return self.freshness is not None and self.freshness.stale

    @property
    def status_age_seconds(self) -> float | None:
        return self.last.age_seconds(self.now_ms)

    @property
    def spec_current(self) -> bool | None:
        running = self.last.spec_hash
        if running is None or self.desired_spec_hash is None:
            return None
        return running == self.desired_spec_hash

    @property
    def dead_lettered(self) -> int:
        """Records the job wrote to the dead-letter topic (on_refused_record: skip)."""
        return sum(c.count for c in self.last.dead_letters)

    def to_dict(self) -> dict:
        s = self.last
        return {
            "reported": self.reported,
            "verdict": self.verdict.value,
            "why": self.why,
            "state": s.state_name,
            "running": self.running,
            "stale": self.stale,
            "status_age_seconds": rounded(self.status_age_seconds),
            "spec_hash": s.spec_hash,
            "desired_spec_hash": self.desired_spec_hash,
            "spec_current": self.spec_current,
            "git_revision": s.git_revision,
            "records": s.records,
            "records_per_second": rounded(s.records_per_second),
            "lag_total": s.lag_total,
            "lag_seconds": rounded(s.lag_seconds),
            "latency_p99_ms": rounded(s.latency_ms.p99),
            "errors": s.errors,
            "last_error": s.last_error,
            "halted": list(s.halted),
            "faults": [f.to_dict() for f in s.faults],
            "dead_lettered": self.dead_lettered,
            "data_loss": [c.to_dict() for c in s.data_loss],
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
    status record and deployment), shown as it is; without it (no deployer view) the verdict is `record`'s alone
    (`reported_verdict`). Stale after `stale_after_seconds(status_interval_seconds)`, or after `stale_seconds` when
    given (an override the plan's verdict was computed with too). `unknown`: the statuses could not be read."""
    if unknown is not None:
        flow = live.flow if live is not None else ""
        return JobHealth(LiveJob(flow, JobState.UNKNOWN, unknown), now_ms, None, desired_hash, unknown)
    if live is None:
        status = StatusRecord.of(record)
        verdict = reported_verdict(status, now_ms, status_interval_seconds, stale_seconds)
        live = LiveJob(status.flow if status is not None else "", verdict, "", status)
    freshness = None
    if live.status is not None:
        freshness = health(live.status, now_ms, status_interval_seconds, stale_seconds)
    return JobHealth(live, now_ms, freshness, desired_hash)
