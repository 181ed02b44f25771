"""Job status: published by the running job, read back by the reconciler.

Every few seconds the driver writes one JSON record to the compacted topic
`reconciler.status.internal` on the TARGET cluster, keyed by the flow name ("west->east"), so the
latest value per flow is the job's current status whatever runs the job (local process, Spark
standalone, Kubernetes). Reading it back is I/O, not the contract's: `reconciler.jobplan.backend`
(`read_all_job_status`, `read_job_status`) over `reconciler.adapters.status_read`.

Value (JSON object):
    flow, spec_hash, git_revision, delivery, state ("starting" | "running" | "degraded" |
    "stopping" | "stopped" | "restart-required" | "failed"), started_at and heartbeat_at (epoch ms),
    records, bytes (copied since start), records_per_second (over RATE_WINDOW_SECONDS), batches,
    lag_total, lag: [{topic, partition, remote, next, end, lag}], latency_ms: {p50, p95, p99, samples}
    (record age at acknowledgement, recent window), errors (count), last_error,
    findings: [str] (remote topic problems), out_of_range: [{topic, partition, position, low, high,
    action, at, kind}], halted: ["topic:partition"], faults: [{topic, partition, kind, reason, offset, since}]
    (partitions that do not progress: halted, stuck while their source advances, behind a cluster that does not
    answer: source-unreachable, target-unreachable, or led by a broker that does not answer: leader-unreachable),
    dead_letters:
    [{topic, partition, count}] (records skipped to the dead-letter topic, `on_refused_record: skip`), data_loss:
    [{topic, partition, kind, count}] (losses seen at the source: truncated, lost-tail, recreated), instance_id (one per start), pid (the driver),
    metrics_port (bound by the job), lag_seconds, lag_read_at (epoch ms the source ends were read).
Secrets never appear: cluster addresses and configs are not included and error texts pass through
the redactor of the job's resolved secret values.

The one rule of job health lives here too: the one verdict on a job (`reconciler.contract.jobstate.classify`,
which plan, apply, status and drift use) decides "is this job's report fresh?" with `health`: a record in a live state (`LIVE_STATES`) not older than `stale_after_seconds`
of the job's status interval (three intervals, at least 15 s). Drift's `--job-stale-seconds` overrides
the threshold only when given.
"""

from __future__ import annotations

import builtins
import enum
import json
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

from reconciler.contract.spec import DEFAULT_STATUS_INTERVAL_SECONDS, STATUS_TOPIC
from reconciler.mirror.group_sync import GroupSync, GroupTally


class StatusState(str, enum.Enum):
    """The `state` a job reports in its status record."""

    STARTING = "starting"
    RUNNING = "running"
    DEGRADED = "degraded"  # running, but some partitions do not progress (`faults`: halted, stuck, unreachable)
    STOPPING = "stopping"
    STOPPED = "stopped"
    RESTART_REQUIRED = "restart-required"  # its spec changed in a field it cannot take: it exits
    FAILED = "failed"

    @classmethod
    def parse(cls, value: Any) -> StatusState | None:
        """The state of a record's `state` value (None: absent or not a state this version knows)."""
        try:
            return cls(value)
        except ValueError:
            return None


#: A job in one of these states is copying records (or about to).
LIVE_STATES: frozenset[StatusState] = frozenset({StatusState.STARTING, StatusState.RUNNING, StatusState.DEGRADED})
#: A job in one of these states is not replicating.
DOWN_STATES: frozenset[StatusState] = frozenset(set(StatusState) - LIVE_STATES)

STALE_INTERVALS = 3
STALE_MIN_SECONDS = 15.0


def stale_after_seconds(status_interval_seconds: float | None) -> float:
    """How old a status record may be before its job counts as not reporting (plan, status and drift):
    three status intervals, at least 15 s (None: the default interval)."""
    interval = DEFAULT_STATUS_INTERVAL_SECONDS if status_interval_seconds is None else status_interval_seconds
    return max(STALE_MIN_SECONDS, STALE_INTERVALS * interval)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    n = _number(value)
    return None if n is None else int(n)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


#: The most entries a status record lists of a flow's groups and of its partitions' lag. The record must fit the
#: status topic's message size (1 MB by default) however large the flow: 20,000 groups or 5,000 partitions listed
#: whole do not, and a record that is refused leaves the flow without status. What is listed is what an operator
#: needs first (the groups not synced, the partitions furthest behind); the totals stay exact (`group_tally`,
#: `lag_total`). At most ~250 + 2 x 249 bytes an entry: ~0.3 MB for the groups, ~0.6 MB for the lag at worst.
GROUPS_SHOWN = 500
LAG_PARTITIONS_SHOWN = 1000


def furthest_behind(lag: tuple[PartitionLag, ...], limit: int = LAG_PARTITIONS_SHOWN) -> tuple[PartitionLag, ...]:
    """The `limit` partitions furthest behind (unknown lag first: it may be the worst), in topic-partition order."""
    if len(lag) <= limit:
        return lag
    worst = sorted(lag, key=lambda p: (p.lag is not None, -(p.lag or 0), p.topic, p.partition))[:limit]
    return tuple(sorted(worst, key=lambda p: (p.topic, p.partition)))


@dataclass(frozen=True)
class PartitionLag:
    """How far the job is behind on one source partition (`end` - `next`; None: not known yet)."""

    topic: str
    partition: int
    remote: str | None
    next: int | None
    end: int | None
    lag: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "remote": self.remote,
            "next": self.next,
            "end": self.end,
            "lag": self.lag,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PartitionLag:
        return cls(
            str(d.get("topic")),
            _int(d.get("partition")) or 0,
            _text(d.get("remote")),
            _int(d.get("next")),
            _int(d.get("end")),
            _int(d.get("lag")),
        )


@dataclass(frozen=True)
class Latency:
    """Record age at acknowledgement over the recent window (None: no samples)."""

    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    samples: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"p50": self.p50, "p95": self.p95, "p99": self.p99, "samples": self.samples}

    @classmethod
    def from_dict(cls, d: Any) -> Latency:
        if not isinstance(d, Mapping):
            return cls()
        return cls(_number(d.get("p50")), _number(d.get("p95")), _number(d.get("p99")), _int(d.get("samples")) or 0)


@dataclass(frozen=True)
class OutOfRange:
    """A partition whose next offset fell outside the source's range, and what the job did about it."""

    topic: str
    partition: int
    position: int | None
    low: int | None
    high: int | None
    reason: str | None
    action: str | None
    at: int | None
    kind: FaultKind | None = None  # which loss: truncated, lost-tail, recreated (out-of-range: side unknown)
    #: lost-tail: offsets the job had copied whose records the source lost (their offsets go to new records, copied
    #: again from the first of them; issue 46); None: not known
    reused: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "position": self.position,
            "low": self.low,
            "high": self.high,
            "reason": self.reason,
            "action": self.action,
            "at": self.at,
            **({"kind": self.kind.value} if self.kind is not None else {}),
            **({"reused": self.reused} if self.reused is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OutOfRange:
        return cls(
            str(d.get("topic")),
            _int(d.get("partition")) or 0,
            _int(d.get("position")),
            _int(d.get("low")),
            _int(d.get("high")),
            _text(d.get("reason")),
            _text(d.get("action")),
            _int(d.get("at")),
            FaultKind.parse(d.get("kind")),
            _int(d.get("reused")),
        )


class FaultKind(str, enum.Enum):
    """Why a partition does not progress (a `PartitionFault`)."""

    REFUSED_RECORD = "refused-record"  # the target refused a record (on_refused_record: fail): halted
    OUT_OF_RANGE = "out-of-range"  # the position fell outside the source's range, which side unknown
    TRUNCATED = "truncated"  # the position is below the source's log start (retention or a deletion passed it)
    LOST_TAIL = "lost-tail"  # the position is above the source's log end: the broker lost records it had acknowledged
    RECREATED = "recreated"  # the source topic was deleted and created again (its topic id changed)
    STUCK = "stuck"  # the source advances, the position does not (a broker not answering, authorization, ...)
    #: the job's calls to the source cluster (its end offsets, its topics) have failed for the stuck bound: whether
    #: the partition's source advances is not known, nor its lag
    SOURCE_UNREACHABLE = "source-unreachable"
    #: the job's calls to the target cluster (its status record, its topics) have failed for the stuck bound
    TARGET_UNREACHABLE = "target-unreachable"
    #: the partition's leader does not answer the job while the source's other partitions do (engine/unanswered.py):
    #: held out of the batches, asked again until it answers
    LEADER_UNREACHABLE = "leader-unreachable"

    @classmethod
    def parse(cls, value: Any) -> FaultKind | None:
        try:
            return cls(value)
        except ValueError:
            return None


@dataclass(frozen=True)
class PartitionFault:
    """A source partition the job does not copy now: the partition, why (`kind`, `reason`), at which offset, and
    since when (epoch ms). Halted faults (refused record, out of range) stay until the job restarts or the
    partition is let go; a stuck one clears once the partition progresses again."""

    topic: str
    partition: int
    kind: FaultKind | None
    reason: str | None
    offset: int | None
    since: int | None

    @property
    def name(self) -> str:
        return f"{self.topic}:{self.partition}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "kind": self.kind.value if self.kind is not None else None,
            "reason": self.reason,
            "offset": self.offset,
            "since": self.since,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PartitionFault:
        return cls(
            str(d.get("topic")),
            _int(d.get("partition")) or 0,
            FaultKind.parse(d.get("kind")),
            _text(d.get("reason")),
            _int(d.get("offset")),
            _int(d.get("since")),
        )


@dataclass(frozen=True)
class PartitionCount:
    """A count of one source partition (records skipped to the dead-letter topic; losses at the source, by `kind`)."""

    topic: str
    partition: int
    count: int
    kind: FaultKind | None = None
    #: lost-tail: the offsets the job had copied that the source lost and gave to new records, over those losses
    #: (OutOfRange.reused); None: none known
    reused: int | None = None

    def to_dict(self) -> dict[str, Any]:
        kind = {"kind": self.kind.value} if self.kind is not None else {}
        reused = {"reused": self.reused} if self.reused is not None else {}
        return {"topic": self.topic, "partition": self.partition, "count": self.count, **kind, **reused}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PartitionCount:
        return cls(
            str(d.get("topic")),
            _int(d.get("partition")) or 0,
            _int(d.get("count")) or 0,
            FaultKind.parse(d.get("kind")),
            _int(d.get("reused")),
        )


@dataclass(frozen=True)
class StatusRecord:
    """One status record, as the job builds it (`Reporter.status_record`, engine/reporting.py) and every reader reads it.

    Counters are None when a record does not carry them (older jobs); `to_dict` writes every field, so
    the JSON a job publishes is the same as before this type existed; keys this version does not know
    are kept in `extra` and written back as they were.
    """

    flow: str
    state: StatusState | None  # None: absent, or a state this version does not know (`state_text` has it)
    heartbeat_at: int | None = None  # epoch ms
    started_at: int | None = None  # epoch ms
    spec_hash: str | None = None
    git_revision: str | None = None
    delivery: str | None = None
    records: int | None = None
    bytes: int | None = None
    records_per_second: float | None = None
    batches: int | None = None
    partitions: int | None = None
    lag_total: int | None = None
    lag: tuple[PartitionLag, ...] = ()
    latency_ms: Latency = field(default_factory=Latency)
    errors: int | None = None
    last_error: str | None = None
    findings: tuple[str, ...] = ()
    out_of_range: tuple[OutOfRange, ...] = ()
    halted: tuple[str, ...] = ()  # "topic:partition"
    faults: tuple[PartitionFault, ...] = ()  # the partitions that do not progress, halted ones among them
    dead_letters: tuple[PartitionCount, ...] = ()  # records skipped to the dead-letter topic, per partition
    data_loss: tuple[PartitionCount, ...] = ()  # losses seen at the source, per partition and kind (out_of_range)
    checkpoints_emitted: int | None = None
    # Runtime identity and truth (issue 21): which instance wrote the record, where it serves metrics,
    # and lag read from the source's current end (not from the end a task last saw).
    instance_id: str | None = None  # one per start of a job; a record from another instance id is another copy
    pid: int | None = None  # the job's driver process (where it runs)
    metrics_port: int | None = None  # the port the job bound for /metrics (None: not serving)
    lag_seconds: float | None = None  # age of the oldest record not yet replicated (None: unknown)
    lag_read_at: int | None = None  # epoch ms the source's end offsets behind `lag` were read
    # every group the flow's filter matches, with its last checkpoint or why it is not synced (issue 38); written
    # only when there are some, so a record without groups has the same bytes as before
    groups: tuple[GroupSync, ...] = ()
    group_tally: GroupTally | None = None  # all of them counted (`groups` lists at most GROUPS_SHOWN)
    state_text: str | None = None  # the raw `state` value
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def state_name(self) -> str | None:
        """The state as written (a state this version does not know too)."""
        return self.state.value if self.state is not None else self.state_text

    # --- health (the one rule) -------------------------------------------------------------
    def age_seconds(self, now_ms: float) -> float | None:
        """Seconds since `heartbeat_at` (None: the record has none)."""
        return None if self.heartbeat_at is None else max(0.0, (now_ms - self.heartbeat_at) / 1000)

    def is_stale(self, now_ms: float, stale_after: float) -> bool:
        age = self.age_seconds(now_ms)
        return age is None or age > stale_after

    def is_replicating(self, now_ms: float, stale_after: float) -> bool:
        """The one rule of job health: a record in a live state, not older than `stale_after` seconds."""
        return self.state in LIVE_STATES and not self.is_stale(now_ms, stale_after)

    # --- JSON --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            **self.extra,
            "flow": self.flow,
            "spec_hash": self.spec_hash,
            "git_revision": self.git_revision,
            "delivery": self.delivery,
            "state": self.state_name,
            "started_at": self.started_at,
            "heartbeat_at": self.heartbeat_at,
            "records": self.records,
            "bytes": self.bytes,
            "records_per_second": self.records_per_second,
            "batches": self.batches,
            "partitions": self.partitions,
            "lag_total": self.lag_total,
            "lag": [p.to_dict() for p in self.lag],
            "latency_ms": self.latency_ms.to_dict(),
            "errors": self.errors,
            "last_error": self.last_error,
            "findings": list(self.findings),
            "out_of_range": [o.to_dict() for o in self.out_of_range],
            "halted": list(self.halted),
            "checkpoints_emitted": self.checkpoints_emitted,
            "instance_id": self.instance_id,
            "pid": self.pid,
            "metrics_port": self.metrics_port,
            "lag_seconds": self.lag_seconds,
            "lag_read_at": self.lag_read_at,
            # written when there are any (a record without them reads and writes back as it was)
            **({"faults": [f.to_dict() for f in self.faults]} if self.faults else {}),
            **({"dead_letters": [c.to_dict() for c in self.dead_letters]} if self.dead_letters else {}),
            **({"groups": [g.to_dict() for g in self.groups]} if self.groups else {}),
            **({"group_tally": self.group_tally.to_dict()} if self.group_tally is not None else {}),
            **({"data_loss": [c.to_dict() for c in self.data_loss]} if self.data_loss else {}),
        }

    def to_json(self) -> str:
        """The bytes on the status topic (sorted keys)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], flow: str | None = None) -> StatusRecord:
        """Tolerant: a field of the wrong type reads as absent (records come from other processes and versions)."""
        known = {f for f in cls.__dataclass_fields__ if f not in ("state_text", "extra")}
        return cls(
            flow=_text(d.get("flow")) or flow or "",
            state=StatusState.parse(d.get("state")),
            heartbeat_at=_int(d.get("heartbeat_at")),
            started_at=_int(d.get("started_at")),
            spec_hash=_text(d.get("spec_hash")),
            git_revision=_text(d.get("git_revision")),
            delivery=_text(d.get("delivery")),
            records=_int(d.get("records")),
            bytes=_int(d.get("bytes")),
            records_per_second=_number(d.get("records_per_second")),
            batches=_int(d.get("batches")),
            partitions=_int(d.get("partitions")),
            lag_total=_int(d.get("lag_total")),
            lag=tuple(PartitionLag.from_dict(x) for x in _list(d.get("lag")) if isinstance(x, Mapping)),
            latency_ms=Latency.from_dict(d.get("latency_ms")),
            errors=_int(d.get("errors")),
            last_error=_text(d.get("last_error")),
            findings=tuple(str(x) for x in _list(d.get("findings"))),
            out_of_range=tuple(OutOfRange.from_dict(x) for x in _list(d.get("out_of_range")) if isinstance(x, Mapping)),
            halted=tuple(str(x) for x in _list(d.get("halted"))),
            faults=tuple(PartitionFault.from_dict(x) for x in _list(d.get("faults")) if isinstance(x, Mapping)),
            dead_letters=tuple(
                PartitionCount.from_dict(x) for x in _list(d.get("dead_letters")) if isinstance(x, Mapping)
            ),
            data_loss=tuple(PartitionCount.from_dict(x) for x in _list(d.get("data_loss")) if isinstance(x, Mapping)),
            checkpoints_emitted=_int(d.get("checkpoints_emitted")),
            instance_id=_text(d.get("instance_id")),
            pid=_int(d.get("pid")),
            metrics_port=_int(d.get("metrics_port")),
            lag_seconds=_number(d.get("lag_seconds")),
            lag_read_at=_int(d.get("lag_read_at")),
            groups=tuple(GroupSync.from_dict(x) for x in _list(d.get("groups")) if isinstance(x, Mapping)),
            group_tally=GroupTally.from_dict(t) if isinstance(t := d.get("group_tally"), Mapping) else None,
            state_text=_text(d.get("state")),
            extra={k: v for k, v in d.items() if k not in known},
        )

    @classmethod
    def from_json(cls, data: str | builtins.bytes, flow: str | None = None) -> StatusRecord:
        value = json.loads(data)
        if not isinstance(value, Mapping):
            raise ValueError("a status record is a JSON object")
        return cls.from_dict(value, flow)

    @overload
    @classmethod
    def of(cls, value: StatusRecord | Mapping[str, Any], flow: str | None = None) -> StatusRecord: ...

    @overload
    @classmethod
    def of(cls, value: None, flow: str | None = None) -> None: ...

    @overload
    @classmethod
    def of(cls, value: StatusRecord | Mapping[str, Any] | None, flow: str | None = None) -> StatusRecord | None: ...

    @classmethod
    def of(cls, value: StatusRecord | Mapping[str, Any] | None, flow: str | None = None) -> StatusRecord | None:
        """A record as it comes from a status reader (typed, or its JSON object), or None."""
        if value is None or isinstance(value, StatusRecord):
            return value
        return cls.from_dict(value, flow)


def status_age_seconds(status: StatusRecord | None, now_ms: float) -> float | None:
    """Seconds since the record's `heartbeat_at` (None: no record, or no heartbeat in it)."""
    return None if status is None else status.age_seconds(now_ms)


def is_stale(status: StatusRecord | None, now_ms: float, stale_after: float) -> bool:
    return status is None or status.is_stale(now_ms, stale_after)


def is_replicating(status: StatusRecord | None, now_ms: float, stale_after: float) -> bool:
    """The one rule of job health: a record in a live state, not older than `stale_after` seconds."""
    return status is not None and status.is_replicating(now_ms, stale_after)


@dataclass(frozen=True)
class Health:
    """What the one job-health classifier says of a job's latest status record."""

    stale_after: float  # the threshold applied (seconds)
    stale: bool  # no record, no heartbeat in it, or older than `stale_after`
    replicating: bool  # a live state, not stale


def health(
    status: StatusRecord | None,
    now_ms: float,
    status_interval_seconds: float | None,
    stale_after: float | None = None,
) -> Health:
    """The one job-health classifier, with one set of thresholds: plan, apply, status
    and drift (`reconciler.contract.jobstate.classify` and `reported_verdict`) call it.
    The threshold is `stale_after_seconds` of the job's status interval; `stale_after` is an explicit
    override (drift's --job-stale-seconds), never a second default."""
    limit = stale_after_seconds(status_interval_seconds) if stale_after is None else stale_after
    return Health(limit, is_stale(status, now_ms, limit), is_replicating(status, now_ms, limit))


def percentiles(samples: Iterable[float], points: Iterable[float] = (50, 95, 99)) -> dict[str, float | None]:
    """Nearest-rank percentiles (None when there are no samples)."""
    data = sorted(samples)
    out: dict[str, float | None] = {}
    for pt in points:
        if not data:
            out[f"p{pt:g}"] = None
            continue
        rank = max(1, -(-len(data) * pt // 100))  # ceil(n * p / 100)
        out[f"p{pt:g}"] = float(data[int(rank) - 1])
    return out


class LatencyWindow:
    """Latency samples of the last `seconds` (bounded count). The driver's thread adds while the status thread reads
    (`snapshot`): a lock keeps a read from iterating while an add extends ("deque mutated during iteration" lost
    that status record)."""

    def __init__(self, seconds: float = 60.0, max_samples: int = 50_000):
        self.seconds = seconds
        self._samples: deque[tuple[float, float]] = deque(maxlen=max_samples)
        self._lock = threading.Lock()

    def add(self, values: Iterable[float], now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        added = [(now, v) for v in values]
        with self._lock:
            self._samples.extend(added)

    def snapshot(self, now: float | None = None) -> dict[str, Any]:
        now = time.monotonic() if now is None else now
        with self._lock:
            while self._samples and self._samples[0][0] < now - self.seconds:
                self._samples.popleft()
            values = [v for _, v in self._samples]
        return {**percentiles(values), "samples": len(values)}


#: The span of every rate a job reports: its status record's `records_per_second` and the Prometheus
#: `record_rate`/`byte_rate` gauges (reconciler.engine.metrics), so the two agree.
RATE_WINDOW_SECONDS = 60.0


class RateWindow:
    """Records and bytes per second over the last `seconds` (the one rate window of a job).

    Used by the driver for the status record's `records_per_second` (per flow) and by the job's metrics
    for `record_rate`/`byte_rate` (per partition), with one length, `RATE_WINDOW_SECONDS` = 60 s: the
    metrics follow MirrorMaker 2's Meter (Kafka `Metrics`, 2 samples of 30 s), and the status record
    says the same figure as the dashboard rather than a jumpier 10 s one. The rate divides the window's
    counts by the window, or by the time since the first `add` if that is shorter (at least 1 s), so an
    idle stretch lowers the rate instead of being skipped. Added to and read from different threads (the driver's,
    the status thread's), under a lock, as `LatencyWindow`.
    """

    def __init__(self, seconds: float = RATE_WINDOW_SECONDS):
        self.seconds = seconds
        self.started: float | None = None
        self._points: deque[tuple[float, int, int]] = deque()
        self._lock = threading.Lock()

    def add(self, records: int, nbytes: int = 0, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            if self.started is None:
                self.started = now
            if records or nbytes:
                self._points.append((now, records, nbytes))

    def rates(self, now: float | None = None) -> tuple[float, float]:
        """(records per second, bytes per second) over the window."""
        now = time.monotonic() if now is None else now
        with self._lock:
            while self._points and self._points[0][0] < now - self.seconds:
                self._points.popleft()
            # the span the points cover: the window, or since the first add
            span = max(1.0, min(self.seconds, now - (self.started if self.started is not None else now)))
            return sum(p[1] for p in self._points) / span, sum(p[2] for p in self._points) / span

    def rate(self, now: float | None = None) -> float:
        """Records per second over the window."""
        return self.rates(now)[0]


class StatusPublisher:
    """Writes status records for one flow to the target cluster."""

    def __init__(self, producer: Any, flow_name: str, topic: str = STATUS_TOPIC):
        self.producer = producer
        self.flow_name = flow_name
        self.topic = topic

    def publish(self, status: StatusRecord | Mapping[str, Any], flush_timeout: float = 5.0) -> int:
        """`status`: the record (a JSON object too, for tests that publish what an older job wrote). Returns how
        many of the producer's messages the target had not acknowledged after `flush_timeout` (0: delivered)."""
        text = status.to_json() if isinstance(status, StatusRecord) else json.dumps(status, sort_keys=True)
        self.producer.produce(self.topic, text.encode(), self.flow_name.encode(), partition=0)
        return int(self.producer.flush(flush_timeout))
