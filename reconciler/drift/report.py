"""Drift report (pure): what differs between the live clusters and jobs and the topology.

`build_report(topology, live, plan, ...)` turns a plan (computed exactly as `reconciler plan`
computes it) plus what the jobs and heartbeats say into a `DriftReport`: a flat list of
`DriftItem`s, each tied to a cluster and to the flows it concerns, plus per-flow health (job,
lag, latency, heartbeat age) and per-cluster provenance (the revision last applied there).

Where each kind of drift comes from:

| category | from |
|---|---|
| missing-topic | CreateTopic actions (remote or MM2 internal topic absent) |
| extra-topic | DeleteTopic actions; `retained` findings (notes) |
| partitions | AddPartitions actions; `impossible` and `unsupported` findings about a topic's partitions |
| config | SetConfig / DeleteConfig actions; `unsupported` findings about a topic's config; `prune-disabled` findings (a key the source does not set, kept because `prune.configs` is off) |
| acl | CreateAcl / DeleteAcl actions; `security` findings; `prune-disabled` ACL findings |
| unmanaged | `unmanaged` findings; MM2 checkpoint / offset-sync topics no enabled flow uses |
| job | any other action kind whose name mentions a job (the job issue's deploy/update/restart/stop, subject = flow); else the job status record: none, stopped/failed, not updated for `job_stale_seconds`, degraded (halted partitions), or a spec hash other than `JobSpec.from_flow(...).spec_hash()` |
| lag, latency, heartbeat | the job status's `lag_total` and `latency_ms.p99`, and the age of the newest heartbeat in the flow's remote heartbeats topic on the target, against the topology's `slo` |
| cluster | a cluster that could not be read (an error: exit 1) |
| certificate | a cluster's client or CA certificate (`ssl.certificate.location`, `ssl.ca.location`, `ssl.certificate.pem`, `ssl.ca.pem`: `drift/certificates.py`) expired or expiring within `slo.certificate_expiry_days`; one that cannot be read is a note |

Levels: `error` (something could not be checked), `drift` (counts: exit 2), `note` (shown, not
counted: capability limits, topics kept for safety, revisions).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.contract.jobstate import REPLICATING, JobState, LiveJob, LiveJobs, reported_verdict
from reconciler.contract.status import (
    DOWN_STATES,
    FaultKind,
    PartitionCount,
    PartitionFault,
    StatusRecord,
    StatusState,
    health,
)
from reconciler.drift.certificates import CertificateCheck, CertificateSource, Expiry
from reconciler.drift.certificates import check as check_certificate
from reconciler.mirror.group_sync import GroupSync, GroupSyncReason
from reconciler.mirror.policy import HEARTBEATS_TOPIC, known_policies, parse_mm2_internal_topic
from reconciler.mirror.records import Heartbeat
from reconciler.plan.actions import Action, Plan
from reconciler.plan.attribution import action_flows, finding_flows, flows_of_topic
from reconciler.plan.desired import DesiredState, desired_state
from reconciler.plan.findings import Finding, FindingKind, Severity
from reconciler.plan.reasons import ReasonKind
from reconciler.state.live import LiveState
from reconciler.textutil import RECORD_AGE, plural
from reconciler.topology.model import Flow, Topology

FORMAT_VERSION = 1


class Category(str, enum.Enum):
    MISSING_TOPIC = "missing-topic"
    EXTRA_TOPIC = "extra-topic"
    PARTITIONS = "partitions"
    CONFIG = "config"
    ACL = "acl"
    UNMANAGED = "unmanaged"
    JOB = "job"
    LAG = "lag"
    LAG_AGE = "lag-age"
    LATENCY = "latency"
    HEARTBEAT = "heartbeat"
    CLUSTER = "cluster"
    CERTIFICATE = "certificate"
    REVISION = "revision"
    OTHER = "other"


class Level(str, enum.Enum):
    ERROR = "error"
    DRIFT = "drift"
    NOTE = "note"


CATEGORY_TITLES = {
    Category.MISSING_TOPIC: "missing topics",
    Category.EXTRA_TOPIC: "extra topics",
    Category.PARTITIONS: "partition drift",
    Category.CONFIG: "config drift",
    Category.ACL: "ACL drift",
    Category.UNMANAGED: "unmanaged topics",
    Category.JOB: "job drift",
    Category.LAG: "lag over SLO",
    Category.LAG_AGE: "lag age over SLO",
    Category.LATENCY: "latency over SLO",
    Category.HEARTBEAT: "heartbeat age over SLO",
    Category.CLUSTER: "unreadable clusters",
    Category.CERTIFICATE: "certificates expired or expiring",
    Category.REVISION: "revisions",
    Category.OTHER: "other",
}

#: The drift category of what an action is about (every job reason is Category.JOB).
_REASON_CATEGORIES = {
    ReasonKind.TOPIC_MISSING: Category.MISSING_TOPIC,
    ReasonKind.TOPIC_EXTRA: Category.EXTRA_TOPIC,
    ReasonKind.PARTITIONS: Category.PARTITIONS,
    ReasonKind.CONFIG: Category.CONFIG,
    ReasonKind.ACL: Category.ACL,
}


@dataclass(frozen=True)
class DriftItem:
    category: Category
    level: Level
    cluster: str
    flows: tuple[str, ...]
    subject: str  # topic or flow name ('' for the cluster itself)
    message: str
    hint: str | None = None
    verb: str | None = None  # '+', '~', '-' when the item is a plan action
    action: Mapping[str, Any] | None = None  # the action's JSON (plan-json.md) when it is one
    reason: str | None = None  # the action's reason (why the topology wants it)

    def sort_key(self) -> tuple:
        order = {Level.ERROR: 0, Level.DRIFT: 1, Level.NOTE: 2}
        return (self.cluster, order[self.level], self.flows, self.category.value, self.subject, self.message)

    def to_dict(self) -> dict:
        return {
            "category": self.category.value,
            "level": self.level.value,
            "cluster": self.cluster,
            "flows": list(self.flows),
            "subject": self.subject,
            "message": self.message,
            "hint": self.hint,
            "verb": self.verb,
            "reason": self.reason,
            "action": dict(self.action) if self.action is not None else None,
        }


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


@dataclass(frozen=True)
class FlowReport:
    name: str
    source: str
    target: str
    enabled: bool
    job: JobHealth | None  # None for a disabled flow
    heartbeat_topic: str | None
    heartbeat_age_seconds: float | None
    items: tuple[DriftItem, ...] = ()

    @property
    def status(self) -> str:
        """`error`, `drift`, `ok` or `disabled`."""
        if any(i.level is Level.ERROR for i in self.items):
            return "error"
        if any(i.level is Level.DRIFT for i in self.items):
            return "drift"
        return "ok" if self.enabled else "disabled"

    def to_dict(self) -> dict:
        return {
            "flow": self.name,
            "source": self.source,
            "target": self.target,
            "enabled": self.enabled,
            "status": self.status,
            "job": self.job.to_dict() if self.job else None,
            "heartbeat": {"topic": self.heartbeat_topic, "age_seconds": _round(self.heartbeat_age_seconds)},
            "drift": sum(1 for i in self.items if i.level is Level.DRIFT),
        }


@dataclass(frozen=True)
class ClusterReport:
    alias: str
    reachable: bool
    error: str | None
    applied: Mapping[str, Any] | None  # the last `applied/<cluster>` record, normalized (see `applied_view`)
    items: tuple[DriftItem, ...] = ()
    certificates: tuple[CertificateCheck, ...] = ()  # its client and CA certificates (drift/certificates.py)

    @property
    def status(self) -> str:
        if not self.reachable:
            return "error"
        return "drift" if any(i.level is Level.DRIFT for i in self.items) else "ok"

    def to_dict(self) -> dict:
        return {
            "cluster": self.alias,
            "reachable": self.reachable,
            "error": self.error,
            "status": self.status,
            "applied": dict(self.applied) if self.applied else None,
            "drift": sum(1 for i in self.items if i.level is Level.DRIFT),
            "certificates": [c.to_dict() for c in self.certificates],
        }


@dataclass(frozen=True)
class DriftReport:
    topology: str | None
    generated_at: str  # ISO 8601, UTC
    revision: Mapping[str, Any] | None  # RevisionInfo.to_dict() of the topology compared against
    slo: Mapping[str, Any]
    clusters: tuple[ClusterReport, ...]
    flows: tuple[FlowReport, ...]
    items: tuple[DriftItem, ...]
    plan: Mapping[str, Any] = field(default_factory=dict)  # the plan's summary
    environment: str | None = None  # the topology's environment (`--env`), or None

    @property
    def title(self) -> str:
        """What the report is of: `topology NAME, environment ENV` (either part only when known)."""
        parts = (
            f"topology {self.topology}" if self.topology else "",
            f"environment {self.environment}" if self.environment else "",
        )
        return ", ".join(p for p in parts if p)

    @property
    def drift(self) -> list[DriftItem]:
        return [i for i in self.items if i.level is Level.DRIFT]

    @property
    def errors(self) -> list[DriftItem]:
        return [i for i in self.items if i.level is Level.ERROR]

    @property
    def notes(self) -> list[DriftItem]:
        return [i for i in self.items if i.level is Level.NOTE]

    @property
    def has_drift(self) -> bool:
        return bool(self.drift)

    def counts(self) -> dict[str, int]:
        """Drift items per category (only categories with drift)."""
        out: dict[str, int] = {}
        for i in self.drift:
            out[i.category.value] = out.get(i.category.value, 0) + 1
        return dict(sorted(out.items()))

    def status(self) -> str:
        return "error" if self.errors else "drift" if self.drift else "in-sync"

    def headline(self) -> str:
        if self.errors:
            head = f"ERROR: {plural(len(self.errors), 'thing')} could not be checked"
            if self.drift:
                head += f"; {len(self.drift)} drift item(s) in what could"
            return head + "."
        if not self.drift:
            return "No drift: the clusters and jobs match the topology."
        words = ", ".join(f"{n} {CATEGORY_TITLES[Category(c)]}" for c, n in self.counts().items())
        flows = sum(1 for f in self.flows if f.status == "drift")
        clusters = sum(1 for c in self.clusters if c.status == "drift")
        return (
            f"DRIFT: {len(self.drift)} item{'s' if len(self.drift) != 1 else ''} ({words}) "
            f"on {clusters} cluster{'s' if clusters != 1 else ''}, {flows} flow{'s' if flows != 1 else ''}."
        )

    def by_cluster(self) -> dict[str, dict[str, list[DriftItem]]]:
        """cluster -> flow name ('' for none) -> items, items in sort order."""
        out: dict[str, dict[str, list[DriftItem]]] = {c.alias: {} for c in self.clusters}
        for i in self.items:
            out.setdefault(i.cluster, {}).setdefault(i.flows[0] if i.flows else "", []).append(i)
        return out

    def to_dict(self) -> dict:
        return {
            "format_version": FORMAT_VERSION,
            "kind": "reconciler-drift-report",
            "topology": self.topology,
            "environment": self.environment,
            "generated_at": self.generated_at,
            "revision": dict(self.revision) if self.revision else None,
            "status": self.status(),
            "summary": {
                "drift": len(self.drift),
                "errors": len(self.errors),
                "notes": len(self.notes),
                "by_category": self.counts(),
                "headline": self.headline(),
            },
            "slo": dict(self.slo),
            "plan": dict(self.plan),
            "clusters": [c.to_dict() for c in self.clusters],
            "flows": [f.to_dict() for f in self.flows],
            "items": [i.to_dict() for i in self.items],
        }


def _round(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(float(x), digits)


def iso_ms(ms: float | None) -> str | None:
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# --- plan -> items -------------------------------------------------------------------------------


def _action_item(a: Action, desired: DesiredState | None, topology: Topology) -> DriftItem:
    rk = a.reason_kind
    category = _REASON_CATEGORIES.get(rk) or (Category.JOB if rk.is_job else Category.OTHER)
    return DriftItem(
        category,
        Level.DRIFT,
        a.cluster,
        action_flows(a, desired, topology),
        a.subject,
        a.describe(),
        "`reconciler apply` makes this change",
        a.VERB.value,
        a.to_dict(),
        a.reason,
    )


def _finding_category(f: Finding) -> tuple[Category, Level]:
    subject = bool(f.subject)
    k = f.kind
    if f.severity is Severity.ERROR:
        return (Category.CLUSTER if k is FindingKind.UNREACHABLE else Category.OTHER), Level.ERROR
    if k is FindingKind.UNMANAGED:
        return Category.UNMANAGED, Level.DRIFT
    if k is FindingKind.RETAINED:
        return Category.EXTRA_TOPIC, Level.NOTE
    if k is FindingKind.IMPOSSIBLE:
        return Category.PARTITIONS, Level.DRIFT  # partition count or replication factor of a topic
    if k is FindingKind.SECURITY:
        return Category.ACL, Level.DRIFT
    if k is FindingKind.UNSUPPORTED:
        if not subject:
            return Category.OTHER, Level.NOTE  # the cluster lacks an API: nothing differs yet
        return (Category.PARTITIONS if f.reason_kind is ReasonKind.PARTITIONS else Category.CONFIG), Level.DRIFT
    if k is FindingKind.PRUNE_DISABLED:  # differs from the source; kept only because pruning is off
        return (Category.ACL if f.reason_kind is ReasonKind.ACL else Category.CONFIG), Level.DRIFT
    if k is FindingKind.PENDING:  # a rendered job no cluster has started yet: a note, drift once it waits long
        return Category.JOB, (Level.DRIFT if f.severity is Severity.WARNING else Level.NOTE)
    if k in (FindingKind.ACLS_UNKNOWN, FindingKind.CONFLICT):
        return (Category.ACL if k is FindingKind.ACLS_UNKNOWN else Category.OTHER), Level.NOTE
    category = Category.OTHER
    return category, (Level.DRIFT if f.severity is Severity.WARNING else Level.NOTE)


def _finding_item(f: Finding, desired: DesiredState | None, topology: Topology) -> DriftItem:
    category, level = _finding_category(f)
    return DriftItem(category, level, f.cluster, finding_flows(f, desired, topology), f.subject, f.message, f.hint)


# --- topics nobody manages, beyond what the plan says ---------------------------------------------


def _unmanaged_internal(
    topology: Topology, live: LiveState, desired: DesiredState, mentioned: set[tuple[str, str]]
) -> list[DriftItem]:
    """MM2 checkpoint and offset-sync topics that no enabled flow of the topology uses (the plan never
    touches internal topics, so it does not list them): left behind by a removed or renamed flow."""
    out = []
    policies = known_policies(topology.flows)
    for alias, c in sorted(live.clusters.items()):
        if not c.reachable:
            continue
        for name in sorted(c.topics):
            if (
                parse_mm2_internal_topic(name, policies) is None
                or desired.get(alias, name) is not None
                or (alias, name) in mentioned
            ):
                continue
            flows = flows_of_topic(alias, name, None, topology)
            owner = f" (flow {flows[0]} is not an enabled flow of the topology)" if flows else ""
            out.append(
                DriftItem(
                    Category.UNMANAGED,
                    Level.DRIFT,
                    alias,
                    flows,
                    name,
                    f"{alias}:{name} is a MirrorMaker 2 internal topic no enabled flow uses{owner}",
                    "delete it by hand once no MirrorMaker 2 or job uses it (the reconciler never "
                    "deletes internal topics)",
                )
            )
    return out


# --- jobs, lag, latency, heartbeats ------------------------------------------------------------------


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


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


def _group_sync_items(flow: Flow, job: JobHealth) -> list[DriftItem]:
    """One item per group of the flow whose offsets are not synced, with its reason (the job's last status)."""
    return [
        DriftItem(
            Category.JOB,
            Level.DRIFT if g.reason in GROUP_SYNC_AT_RISK else Level.NOTE,
            flow.target,
            (flow.name,),
            g.group,
            f"group {g.group} of flow {flow.name} is not synced: {g.reason.value}"
            + (f" ({g.partition})" if g.partition else ""),
            GROUP_SYNC_HINTS.get(g.reason),
        )
        for g in job.groups
        if g.reason is not None
    ]


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


def _degraded_item(flow: Flow, job: JobHealth) -> DriftItem:
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
    return DriftItem(
        Category.JOB,
        Level.DRIFT,
        flow.target,
        (flow.name,),
        flow.name,
        f"job of flow {flow.name} is degraded: {count} partition(s) not copied"
        + (f": {'; '.join(shown)}{more}" if shown else ""),
        "; ".join(hints) or None,
    )


def _job_items(flow: Flow, job: JobHealth) -> list[DriftItem]:
    def item(message: str, hint: str | None, level: Level = Level.DRIFT) -> DriftItem:
        return DriftItem(Category.JOB, level, flow.target, (flow.name,), flow.name, message, hint)

    verdict = job.verdict
    if job.unknown is not None or verdict is JobState.UNKNOWN:
        why = job.unknown or job.why
        return [item(f"job status of flow {flow.name} could not be read on {flow.target}: {why}", None, Level.ERROR)]
    if verdict in (JobState.STARTING, JobState.PENDING_SYNC):
        return []  # not down: just started, or waiting for a cluster to sync it (the plan's finding says so)
    if verdict is JobState.DUPLICATED:
        return [
            item(
                f"job of flow {flow.name} is duplicated: {job.why}",
                "apply restarts it (every instance ends, one starts): reconciler apply",
            )
        ]
    if verdict is JobState.STOPPED:
        return [item(f"job of flow {flow.name} is stopped: {job.why or 'stopped on purpose'}", "reconciler apply")]
    if not job.reported and verdict is not JobState.DOWN:
        return [
            item(
                f"job of flow {flow.name} is not running: no status record on {flow.target}",
                "deploy the flow's job (reconciler apply), or check its deployer's logs",
            )
        ]
    if verdict not in REPLICATING:
        if job.reported and StatusState.parse(job.state) in DOWN_STATES:
            why = f"; last error: {job.last_error}" if job.last_error else ""
            return [
                item(
                    f"job of flow {flow.name} is down: state {job.state}{why}",
                    "restart the job (reconciler apply), and check its logs",
                )
            ]
        if job.reported and job.stale:
            age = "never" if job.status_age_seconds is None else f"{job.status_age_seconds:.0f}s ago"
            return [
                item(
                    f"job of flow {flow.name} is not reporting: last status {age} (state {job.state}; "
                    f"a running job reports every few seconds, limit {job.stale_after or 0:.0f}s)",
                    "the job process probably died: check its deployer and restart it (reconciler apply)",
                )
            ]
        return [
            item(
                f"job of flow {flow.name} is {(verdict or JobState.DOWN).value}: {job.why or 'no fresh status'}",
                "restart the job (reconciler apply), and check its logs",
            )
        ]
    out = []
    if job.state == "degraded" or job.halted or job.faults:
        out.append(_degraded_item(flow, job))
    if job.data_loss:
        shown = [
            f"{c.topic}:{c.partition} {c.kind.value if c.kind else 'out-of-range'} x{c.count}"
            + (f" ({c.reused} offsets reused)" if c.reused else "")
            for c in job.data_loss
        ]
        out.append(
            item(
                f"the source of flow {flow.name} lost records the job had reached since it started: "
                + ", ".join(shown[:5])
                + (f" and {len(shown) - 5} more" if len(shown) > 5 else ""),
                "see the job's out_of_range events (reconciler status) for what it did (engine offset_reset); the "
                "source lost acknowledged records (retention shorter than the lag, a broker that lost its tail, a "
                "topic recreated): check it. Shown until the job restarts",
            )
        )
    if job.spec_current is False:
        out.append(
            item(
                f"job of flow {flow.name} runs an old spec ({(job.spec_hash or '?')[:12]}, topology wants "
                f"{(job.desired_spec_hash or '?')[:12]})"
                + (f", from revision {job.git_revision[:12]}" if job.git_revision else ""),
                "apply the topology to update the job",
            )
        )
    return out


def _slo_items(
    flow: Flow, job: JobHealth, hb_topic: str | None, hb_age: float | None, hb_known: bool, topology: Topology
) -> list[DriftItem]:
    slo = topology.slo
    out = []

    def item(category: Category, message: str, hint: str) -> None:
        out.append(DriftItem(category, Level.DRIFT, flow.target, (flow.name,), flow.name, message, hint))

    if (
        job.running
        and slo.max_lag_records is not None
        and job.lag_total is not None
        and job.lag_total > slo.max_lag_records
    ):
        item(
            Category.LAG,
            f"flow {flow.name} is {job.lag_total:,} records behind (SLO {slo.max_lag_records:,})",
            "raise the job's parallelism or max_records_per_partition, or check the target cluster",
        )
    if (
        job.running
        and slo.max_lag_seconds is not None
        and job.lag_seconds is not None
        and job.lag_seconds > slo.max_lag_seconds
    ):
        item(
            Category.LAG_AGE,
            f"flow {flow.name}: its oldest record not replicated yet is {job.lag_seconds:,.1f}s old "
            f"(SLO max_lag_seconds {slo.max_lag_seconds:g}s)",
            "raise the job's parallelism or max_records_per_partition, or check the target cluster",
        )
    if (
        job.running
        and slo.max_latency_p99_ms is not None
        and job.latency_p99_ms is not None
        and job.latency_p99_ms > slo.max_latency_p99_ms
    ):
        item(
            Category.LATENCY,
            f"flow {flow.name}: records reach the target with p99 {RECORD_AGE} "
            f"{job.latency_p99_ms:,.0f} ms (SLO max_latency_p99_ms {slo.max_latency_p99_ms:,.0f} ms)",
            "lower the job's trigger_interval_ms or raise its parallelism",
        )
    if flow.heartbeats.enabled and slo.max_heartbeat_age_seconds is not None and hb_known and hb_topic:
        if hb_age is None:
            item(
                Category.HEARTBEAT,
                f"no heartbeat from {flow.source} in {flow.target}:{hb_topic}",
                "heartbeats are emitted by the flow's job; check that it runs",
            )
        elif hb_age > slo.max_heartbeat_age_seconds:
            item(
                Category.HEARTBEAT,
                f"newest heartbeat from {flow.source} in {flow.target}:{hb_topic} is "
                f"{hb_age:,.1f}s old (SLO {slo.max_heartbeat_age_seconds:g}s)",
                "the flow's job is stalled or down, or the path from the source is broken",
            )
    return out


def heartbeat_topic(flow: Flow) -> str:
    """The flow's heartbeats as they arrive on its target (`<source>.heartbeats` with the default policy)."""
    return flow.policy.format_remote_topic(flow.source, HEARTBEATS_TOPIC)


# --- certificates ----------------------------------------------------------------------------------------


def _certificate_named(c: CertificateCheck) -> str:
    return f"{c.setting} of cluster {c.cluster}" + (f" ({c.shown})" if c.shown else "")


def certificate_item(c: CertificateCheck) -> DriftItem | None:
    """Expired or expiring within the window: drift; unreadable: a note naming the setting, never its content."""
    named = _certificate_named(c)
    if c.state is Expiry.UNREADABLE:
        return DriftItem(
            Category.CERTIFICATE,
            Level.NOTE,
            c.cluster,
            (),
            c.setting,
            f"{named} could not be read as a certificate, so its expiry is not checked: {c.problem}",
            "point it at a readable PEM file (or PEM text) of the certificate",
        )
    if c.state is Expiry.OK:
        return None
    which = f"certificate {c.subject or '(no common name)'}"
    if c.certificates > 1:
        which += f", the first to expire of its {c.certificates}"
    days = c.days_left or 0
    if c.state is Expiry.EXPIRED:
        ago = "today" if days == 0 else f"{plural(-days, 'day')} ago"
        message = f"{named}: {which}, expired at {c.not_after_iso} ({ago})"
    else:
        message = (
            f"{named}: {which}, expires at {c.not_after_iso}, in {plural(days, 'day')} "
            f"(slo.certificate_expiry_days {c.window_days})"
        )
    return DriftItem(
        Category.CERTIFICATE,
        Level.DRIFT,
        c.cluster,
        (),
        c.setting,
        message,
        "renew the certificate and deploy it where the reconciler and the jobs read it"
        + (": connections to the cluster fail until then" if c.state is Expiry.EXPIRED else ""),
    )


# --- applied revisions ----------------------------------------------------------------------------------


def applied_view(record: Mapping[str, Any] | None) -> dict | None:
    """The `applied/<cluster>` record as reported: the git revision (new records carry `git`, older ones
    only a `<sha>[-dirty]` string), when, by whom, with which clusters."""
    if not record:
        return None
    git = record.get("git") if isinstance(record.get("git"), Mapping) else None
    label = record.get("revision") if isinstance(record.get("revision"), str) else None
    commit = git.get("commit") if git else (label.removesuffix("-dirty") if label else None)
    at = _num(record.get("at"))
    return {
        "commit": commit,
        "short": (git.get("short") if git else None) or (commit[:7] if commit else None),
        "author": git.get("author") if git else None,
        "time_iso": git.get("time_iso") if git else None,
        "message_subject": git.get("message_subject") if git else None,
        "dirty": bool(git.get("dirty")) if git else bool(label and label.endswith("-dirty")),
        "applied_at": iso_ms(at * 1000) if at is not None else None,
        "who": record.get("who"),
        "clusters": list(record.get("clusters") or []),
        "actions": record.get("actions"),
        "fingerprint": record.get("fingerprint"),
    }


def _revision_items(alias: str, applied: dict | None, revision: Mapping[str, Any] | None) -> list[DriftItem]:
    if applied is None:
        return [
            DriftItem(
                Category.REVISION, Level.NOTE, alias, (), "", f"no apply by the reconciler is recorded on {alias}"
            )
        ]
    where = f"{applied['short'] or 'an unknown revision'}" + (" (dirty work tree)" if applied["dirty"] else "")
    msg = (
        f"{alias} was last reconciled to {where}"
        + (f" by {applied['who']}" if applied.get("who") else "")
        + (f" at {applied['applied_at']}" if applied.get("applied_at") else "")
    )
    if revision and applied.get("commit") and applied["commit"] != revision.get("commit"):
        msg += f"; the topology checked is at {revision.get('short')}"
    return [DriftItem(Category.REVISION, Level.NOTE, alias, (), "", msg)]


# --- the report ------------------------------------------------------------------------------------


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
    job_statuses, job_status_errors = job_statuses or {}, job_status_errors or {}
    heartbeats, heartbeat_errors = heartbeats or {}, heartbeat_errors or {}
    applied = applied or {}

    items: list[DriftItem] = [_action_item(a, desired, topology) for a in plan.actions]
    items += [_finding_item(f, desired, topology) for f in plan.findings]
    mentioned = {(i.cluster, i.subject) for i in items}
    items += _unmanaged_internal(topology, live, desired, mentioned)

    job_action_flows = {fl for i in items if i.category is Category.JOB and i.verb for fl in i.flows}
    # a job the plan says is pending sync (rendered, not started yet): its finding says so, not "no status record"
    job_action_flows |= {f.subject for f in plan.findings if f.reason_kind is ReasonKind.JOB_PENDING_SYNC}
    flows: list[FlowReport] = []
    for flow in topology.flows:
        flow_items: list[DriftItem] = []
        job = None
        hb_topic = heartbeat_topic(flow) if flow.heartbeats.enabled else None
        hb_age = None
        if flow.enabled:
            target = live.cluster(flow.target)
            if check_jobs:
                from reconciler.contract.spec import EngineSettings, JobSpec

                if desired_spec_hashes is not None:
                    want = desired_spec_hashes.get(flow.name)
                else:
                    want = JobSpec.from_flow(topology, flow).spec_hash()
                unknown = job_status_errors.get(flow.target) or (None if target.reachable else "cluster unreachable")
                interval = EngineSettings.of(flow.job).status_interval_seconds  # the spec's (JobSpec.from_flow)
                lj = None
                if live_jobs is not None:
                    lj = live_jobs.jobs.get(flow.name) or LiveJob(flow.name, JobState.NOT_DEPLOYED)
                job = job_health(
                    job_statuses.get(flow.name), want, now_ms, job_stale_seconds, unknown, interval, live=lj
                )
                if flow.name not in job_action_flows and target.reachable:  # a job action already says it
                    flow_items += _job_items(flow, job)
                if target.reachable and job.running:
                    flow_items += _group_sync_items(flow, job)
            hb_known = flow.target in heartbeats
            if hb_known and hb_topic:
                hb = heartbeats[flow.target].get(hb_topic)
                hb_age = None if hb is None else max(0.0, (now_ms - hb.timestamp) / 1000)
            elif flow.target in heartbeat_errors and target.reachable:
                flow_items.append(
                    DriftItem(
                        Category.HEARTBEAT,
                        Level.NOTE,
                        flow.target,
                        (flow.name,),
                        flow.name,
                        f"heartbeats on {flow.target} could not be read: {heartbeat_errors[flow.target]}",
                    )
                )
            flow_items += _slo_items(flow, job or JobHealth(False), hb_topic, hb_age, hb_known, topology)
        items += flow_items
        flows.append(FlowReport(flow.name, flow.source, flow.target, flow.enabled, job, hb_topic, hb_age))

    checks = [check_certificate(c, now_ms, topology.slo.certificate_expiry_days) for c in certificates]
    items += [i for c in checks if (i := certificate_item(c)) is not None]
    clusters = []
    for alias in sorted(live.clusters):
        c = live.cluster(alias)
        view = applied_view(applied.get(alias)) if c.reachable else None
        if c.reachable:
            items += _revision_items(alias, view, revision)
        clusters.append(ClusterReport(alias, c.reachable, c.error, view))

    items = sorted(items, key=lambda i: i.sort_key())
    flows = [
        FlowReport(
            f.name,
            f.source,
            f.target,
            f.enabled,
            f.job,
            f.heartbeat_topic,
            f.heartbeat_age_seconds,
            tuple(i for i in items if f.name in i.flows),
        )
        for f in flows
    ]
    clusters = [
        ClusterReport(
            c.alias,
            c.reachable,
            c.error,
            c.applied,
            tuple(i for i in items if i.cluster == c.alias),
            tuple(k for k in checks if k.cluster == c.alias),
        )
        for c in clusters
    ]
    slo = topology.slo
    return DriftReport(
        topology=topology.name,
        generated_at=iso_ms(now_ms) or "",
        revision=dict(revision) if revision else None,
        slo={f.name: getattr(slo, f.name) for f in dataclasses.fields(slo)},
        clusters=tuple(clusters),
        flows=tuple(flows),
        items=tuple(items),
        plan=plan.to_dict()["summary"],
        environment=topology.environment,
    )
