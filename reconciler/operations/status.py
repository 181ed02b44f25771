"""Status: every replication job of a topology, as the jobs report themselves (`reconciler status`).

Desired jobs (the topology) x live jobs (the deployers' view and the status records, read through the
Backend) -> one `JobRow` per flow, in a `StatusReport`. The job health is the one classifier
(`jobplan/state.classify`) at the Backend's clock. The git revision is not read: a spec's hash leaves it out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from reconciler.contract.status import PartitionCount, PartitionFault
from reconciler.jobplan.state import JobState, LiveJob, desired_jobs, iso, read_jobs
from reconciler.mirror.group_sync import GroupSync, GroupTally
from reconciler.operations.backend import Backend
from reconciler.topology.flow_id import flow_ends
from reconciler.topology.model import Topology


@dataclass(frozen=True)
class JobRow:
    """One job as `status` shows it; `to_dict()` is a job of `status --format json` (same keys, same order)."""

    flow: str
    wanted: bool  # an enabled flow of the topology wants it
    deployer: str | None
    where: str
    state: str  # JobState's value
    job_state: str | None  # the state the job reports, while it reports
    why: str
    desired_hash: str | None
    deployed_hash: str | None
    running_hash: str | None
    in_sync: bool
    lag_total: int | None
    lag_seconds: float | None
    latency_ms: Mapping[str, float | None] | None  # p50, p95, p99
    records_per_second: float | None
    records: int | None
    records_stale: bool  # the last count a job that no longer reports gave
    errors: int | None
    last_error: str | None
    faults: tuple[PartitionFault, ...]  # the partitions the job does not copy, why and since when (degraded)
    dead_lettered: int | None  # records written to the dead-letter topic (on_refused_record: skip)
    data_loss: tuple[PartitionCount, ...]  # losses seen at the source since the job started, per partition and kind
    heartbeat_at: int | None
    last_seen: str | None
    unreadable: str | None  # why the statuses on the flow's target could not be read
    #: every group the flow's filter matches: its last checkpoint on the target or why it is not synced (issue 38)
    groups: tuple[GroupSync, ...] = ()
    group_tally: GroupTally | None = None  # all the groups counted (`groups` lists the most telling of them)
    #: the job's last topic refresh's findings: topics it routes but does not copy now and why (a remote topic with
    #: fewer partitions, a topic listed without its partitions, ...)
    findings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "groups": [g.to_dict() for g in self.groups],
            "group_tally": None if self.group_tally is None else self.group_tally.to_dict(),
        }


@dataclass(frozen=True)
class StatusReport:
    topology: str | None  # its name
    rows: tuple[JobRow, ...]
    now_ms: int
    #: target cluster -> why its job statuses could not be read
    unreadable: Mapping[str, str] = field(default_factory=dict)

    @property
    def out_of_sync(self) -> bool:
        """A job of an enabled flow does not run the desired spec."""
        return any(r.wanted and not r.in_sync for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": 1, "topology": self.topology, "jobs": [r.to_dict() for r in self.rows]}


def _row(flow: str, lj: LiveJob, d, unreadable: str | None) -> JobRow:
    dep = lj.deployment
    st = lj.status
    fresh = st is not None and lj.state in (JobState.RUNNING, JobState.ELSEWHERE)
    lat = st.latency_ms if st is not None and fresh else None
    desired_hash = d.spec.spec_hash() if d else None
    running = lj.running_hash
    return JobRow(
        flow=flow,
        wanted=d is not None,
        deployer=(dep.deployer if dep else d.deployer if d else None),
        where=dep.where if dep else ("-" if lj.state is not JobState.ELSEWHERE else "elsewhere"),
        state=lj.state.value,
        job_state=st.state_name if st is not None and fresh else None,
        why=lj.why,
        desired_hash=desired_hash,
        deployed_hash=dep.spec_hash if dep else None,
        running_hash=running,
        in_sync=bool(d) and running == desired_hash,
        lag_total=st.lag_total if st is not None and fresh else None,
        lag_seconds=st.lag_seconds if st is not None and fresh else None,
        latency_ms={"p50": lat.p50, "p95": lat.p95, "p99": lat.p99} if lat is not None else None,
        records_per_second=st.records_per_second if st is not None and fresh else None,
        records=st.records if st is not None else None,
        records_stale=st is not None and not fresh,
        errors=st.errors if st is not None else None,
        last_error=st.last_error if st is not None else None,
        faults=st.faults if st is not None and fresh else (),
        dead_lettered=sum(c.count for c in st.dead_letters) if st is not None else None,
        data_loss=st.data_loss if st is not None else (),
        heartbeat_at=st.heartbeat_at if st is not None else None,
        last_seen=iso(st.heartbeat_at) if st is not None else None,
        unreadable=unreadable,
        groups=st.groups if st is not None and fresh else (),
        group_tally=st.group_tally if st is not None and fresh else None,
        findings=st.findings if st is not None and fresh else (),
    )


def status(topology: Topology, backend: Backend) -> StatusReport:
    """Every job the topology wants, and every job deployed for it that it no longer wants."""
    now_ms = int(backend.clock() * 1000)
    desired = desired_jobs(topology)
    live = read_jobs(topology, backend.jobs_or_default(), desired, now_ms=now_ms)
    rows = tuple(
        _row(
            flow,
            live.jobs.get(flow) or LiveJob(flow, JobState.NOT_DEPLOYED),
            desired.get(flow),
            live.unreadable.get(flow_ends(flow)[1]),
        )
        for flow in sorted(set(desired) | set(live.jobs))
    )
    unreadable = {flow_ends(r.flow)[1]: r.unreadable for r in rows if r.unreadable}
    return StatusReport(topology.name, rows, now_ms, unreadable)
