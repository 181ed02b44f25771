"""Job items: what the verdict on a flow's job (`JobHealth`, the one verdict of `reconciler.contract.jobstate`)
says is wrong with it, in the verdict's own words where it has them.

| verdict | item |
|---|---|
| unknown | an error: the statuses on the flow's target could not be read |
| starting, pending sync | none (just started, or waiting for a cluster to sync it: the plan's finding says so) |
| duplicated, stopped | drift, with the verdict's why |
| down, not deployed, restart-required | drift: no status record, down in a state the record says (with its last error), not reporting (the record is stale by the one rule), else the verdict's why |
| running, running elsewhere | drift when degraded (partitions not copied, why and since when), when the source lost records the job had reached, or when it runs a spec other than the topology's; per group of the flow whose offsets are not synced, drift or a note |
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from reconciler.contract.jobstate import JobState
from reconciler.contract.status import DOWN_STATES, FaultKind
from reconciler.drift.report.health import JobHealth
from reconciler.drift.report.items import Category, DriftItem, Level
from reconciler.mirror.group_sync import GroupSyncReason
from reconciler.topology.model import Flow

#: What to do about a group whose offsets are not synced, by why; the reasons in GROUP_SYNC_AT_RISK are drift
#: (a failover would lose the group's place), the others notes.
GROUP_SYNC_HINTS: dict[GroupSyncReason, str] = {
    GroupSyncReason.ACTIVE_ON_TARGET: "its consumers run on the target: stop them there, or leave the group to them",
    GroupSyncReason.NO_OFFSET_SYNC: "it committed before the first record the flow copied of the partition: the "
    "records before are not on the target, and a failover cannot place it (it would start from auto.offset.reset); "
    "let it consume past that record on the source",
    GroupSyncReason.TOPIC_FILTERED: "it reads only topics the flow does not copy: widen the flow's topics, or narrow "
    "its groups filter",
    GroupSyncReason.PARTITION_EMPTY: "the flow has copied nothing from the partition yet: it is synced once a record is",
    GroupSyncReason.NOT_YET_DISCOVERED: "the job has not read its offset syncs to the end yet: wait a checkpoint "
    "interval",
}
GROUP_SYNC_AT_RISK: frozenset[GroupSyncReason] = frozenset({GroupSyncReason.NO_OFFSET_SYNC})
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
    FaultKind.LEADER_UNREACHABLE: "the broker that leads the partition does not answer while the source's others do: "
    "check that broker (a hung host, a network partition) or move the partition's leadership; the job copies its other "
    "partitions meanwhile and this one once its leader answers",
}


def group_sync_items(flow: Flow, job: JobHealth) -> list[DriftItem]:
    """One item per group of the flow whose offsets are not synced, with its reason (the job's last status)."""
    return [
        DriftItem.of_flow(
            flow,
            Category.JOB,
            f"group {g.group} of flow {flow.name} is not synced: {g.reason.value}"
            + (f" ({g.partition})" if g.partition else ""),
            GROUP_SYNC_HINTS.get(g.reason),
            Level.DRIFT if g.reason in GROUP_SYNC_AT_RISK else Level.NOTE,
            subject=g.group,
        )
        for g in job.last.groups
        if g.reason is not None
    ]


def job_items(flow: Flow, job: JobHealth) -> list[DriftItem]:
    """The items of the verdict on the flow's job (the module doc's table)."""
    return _BY_VERDICT[job.verdict](flow, job)


def _item(flow: Flow, message: str, hint: str | None, level: Level = Level.DRIFT) -> DriftItem:
    return DriftItem.of_flow(flow, Category.JOB, message, hint, level)


def _unknown(flow: Flow, job: JobHealth) -> list[DriftItem]:
    message = f"job status of flow {flow.name} could not be read on {flow.target}: {job.unknown or job.why}"
    return [_item(flow, message, None, Level.ERROR)]


def _waiting(flow: Flow, job: JobHealth) -> list[DriftItem]:
    return []


def _duplicated(flow: Flow, job: JobHealth) -> list[DriftItem]:
    hint = "apply restarts it (every instance ends, one starts): reconciler apply"
    return [_item(flow, f"job of flow {flow.name} is duplicated: {job.why}", hint)]


def _stopped(flow: Flow, job: JobHealth) -> list[DriftItem]:
    return [_item(flow, f"job of flow {flow.name} is stopped: {job.why or 'stopped on purpose'}", "reconciler apply")]


_RESTART = "restart the job (reconciler apply), and check its logs"


def _not_replicating(flow: Flow, job: JobHealth) -> list[DriftItem]:
    """Down, not deployed or restart-required: said with the record the verdict read, where it tells more."""
    status = job.status
    if status is None:
        if job.verdict is JobState.DOWN:  # a process that died before its first record: the deployment says why
            return [_item(flow, f"job of flow {flow.name} is down: {job.why or 'no fresh status'}", _RESTART)]
        return [
            _item(
                flow,
                f"job of flow {flow.name} is not running: no status record on {flow.target}",
                "deploy the flow's job (reconciler apply), or check its deployer's logs",
            )
        ]
    if status.state in DOWN_STATES:
        error = f"; last error: {status.last_error}" if status.last_error else ""
        return [_item(flow, f"job of flow {flow.name} is down: state {status.state_name}{error}", _RESTART)]
    if job.stale:
        age = "never" if job.status_age_seconds is None else f"{job.status_age_seconds:.0f}s ago"
        limit = job.freshness.stale_after if job.freshness is not None else 0
        return [
            _item(
                flow,
                f"job of flow {flow.name} is not reporting: last status {age} (state {status.state_name}; "
                f"a running job reports every few seconds, limit {limit:.0f}s)",
                "the job process probably died: check its deployer and restart it (reconciler apply)",
            )
        ]
    return [_item(flow, f"job of flow {flow.name} is {job.verdict.value}: {job.why or 'no fresh status'}", _RESTART)]


def _replicating(flow: Flow, job: JobHealth) -> list[DriftItem]:
    """Running (here or elsewhere): what it reports that is still drift."""
    last = job.last
    out = []
    if last.state_name == "degraded" or last.halted or last.faults:
        out.append(_degraded_item(flow, job))
    if last.data_loss:
        out.append(_data_loss_item(flow, job))
    if job.spec_current is False:
        out.append(
            _item(
                flow,
                f"job of flow {flow.name} runs an old spec ({(last.spec_hash or '?')[:12]}, topology wants "
                f"{(job.desired_spec_hash or '?')[:12]})"
                + (f", from revision {last.git_revision[:12]}" if last.git_revision else ""),
                "apply the topology to update the job",
            )
        )
    return out


def _degraded_item(flow: Flow, job: JobHealth) -> DriftItem:
    """A degraded job: the partitions it does not copy, why and since when (its status record's `faults`; an older
    job's record has only `halted`)."""
    faults, halted = job.last.faults, job.last.halted
    if faults:
        shown = [
            f"{f.name} ({f.kind.value if f.kind else 'fault'} since "
            f"{dt.datetime.fromtimestamp((f.since or 0) / 1000, dt.UTC):%Y-%m-%dT%H:%M:%SZ}: {f.reason})"
            for f in faults[:5]
        ]
        hints = dict.fromkeys(FAULT_HINTS[f.kind] for f in faults if f.kind in FAULT_HINTS)
        count = len(faults)
    else:
        shown = list(halted[:5])
        hints = dict.fromkeys([FAULT_HINTS[FaultKind.OUT_OF_RANGE]])
        count = len(halted)
    more = f" and {count - 5} more" if count > 5 else ""
    return _item(
        flow,
        f"job of flow {flow.name} is degraded: {count} partition(s) not copied"
        + (f": {'; '.join(shown)}{more}" if shown else ""),
        "; ".join(hints) or None,
    )


def _data_loss_item(flow: Flow, job: JobHealth) -> DriftItem:
    """The losses the job saw at its source since it started (its status record's `data_loss`)."""
    shown = [
        f"{c.topic}:{c.partition} {c.kind.value if c.kind else 'out-of-range'} x{c.count}"
        + (f" ({c.reused} offsets reused)" if c.reused else "")
        for c in job.last.data_loss
    ]
    return _item(
        flow,
        f"the source of flow {flow.name} lost records the job had reached since it started: "
        + ", ".join(shown[:5])
        + (f" and {len(shown) - 5} more" if len(shown) > 5 else ""),
        "see the job's out_of_range events (reconciler status) for what it did (engine offset_reset); the "
        "source lost acknowledged records (retention shorter than the lag, a broker that lost its tail, a "
        "topic recreated): check it. Shown until the job restarts",
    )


#: The items of each verdict (every JobState has an entry).
_BY_VERDICT: dict[JobState, Callable[[Flow, JobHealth], list[DriftItem]]] = {
    JobState.UNKNOWN: _unknown,
    JobState.STARTING: _waiting,
    JobState.PENDING_SYNC: _waiting,
    JobState.DUPLICATED: _duplicated,
    JobState.STOPPED: _stopped,
    JobState.DOWN: _not_replicating,
    JobState.NOT_DEPLOYED: _not_replicating,
    JobState.RESTART_REQUIRED: _not_replicating,
    JobState.RUNNING: _replicating,
    JobState.ELSEWHERE: _replicating,
}
