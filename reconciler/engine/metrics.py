"""Prometheus metrics of a replication job, with MirrorMaker 2's names (docs/monitoring.md).

MM2's own metrics, as Strimzi's JMX exporter publishes them, keep their `kafka_connect_mirror_*`
names (counters get Prometheus' `_total` suffix; MM2's `-min/-max/-avg` attributes become `_min/_max/_avg`
gauges); what MM2 lacks is under `mirror_*`. Every series has the labels `flow`, `family` ('' for a pair's
only flow), `source` and `target`; per-partition ones add `topic` (the remote topic on the target, as MM2
labels it) and `partition`; checkpoint ones also `group`.

`JobMetrics.observe(flow, results)` is the one hook: once per micro-batch the flow's reporter (reporting.py) hands
it a `FlowSnapshot`, the flow's figures taken at once (the ones its status record shows), and the typed task results
the driver has just absorbed, so the status record and the metrics come from the same numbers. The metrics read
nothing else of the flow (and import nothing of reporting.py). Lag also moves between batches (a batch's tasks may
be held up while records arrive): the reporter hands `observe_lag` the same `JobLag` (lag.py) each status record
is built from. Checkpoint latencies come from the checkpoint emitter's last acknowledged round
(`CheckpointEmitter.last_round`, emitters.py), in the snapshot. `serve(port)` exposes them over HTTP
(prometheus-client).

Windows: MM2's min/max/avg and rates are Kafka `Metrics` sampled stats (2 samples of 30 s); ours are over
the batches of the last `WINDOW_SECONDS` (60 s). A per-partition min/max/avg series disappears when its
window holds no sample (an idle partition), as MM2's turn NaN.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.metrics_core import Metric

from reconciler.contract.metrics import CHECKPOINT, OWN, SOURCE
from reconciler.contract.spec import JobSpec
from reconciler.contract.status import (
    RATE_WINDOW_SECONDS,
    FaultKind,
    OutOfRange,
    PartitionFault,
    RateWindow,
    StatusState,
)
from reconciler.engine.tasks import TP, TaskResult
from reconciler.mirror.group_sync import GroupSync
from reconciler.settings import KUBERNETES_PORT, LOOPBACK, PORT_ENV  # noqa: F401 (re-exported)
from reconciler.topology.model import flow_ends

if TYPE_CHECKING:  # types only: this catalog stays light to import (no Kafka client); neither module imports it
    from reconciler.engine.emitters import CheckpointAck
    from reconciler.engine.lag import JobLag


FLOW_LABELS = ("flow", "family", "source", "target")
TOPIC_LABELS = (*FLOW_LABELS, "topic")
PARTITION_LABELS = (*TOPIC_LABELS, "partition")
GROUP_LABELS = (*PARTITION_LABELS, "group")
#: Milliseconds buckets for record age, replication and checkpoint latency (MM2 alerts start around seconds).
LATENCY_BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000)
#: The span of the min/max/avg and rate gauges (MM2: 2 samples x 30 s): the job's one rate window
#: (contract/status.py RateWindow), which the status record's `records_per_second` uses too.
WINDOW_SECONDS = RATE_WINDOW_SECONDS
STATS = ("min", "max", "avg")


@dataclass(frozen=True)
class MetricDef:
    name: str  # the family name (counters without `_total`, as prometheus_client takes them)
    kind: str  # counter, gauge, histogram, info
    labels: tuple[str, ...]
    doc: str
    mm2: str | None = None  # MirrorMaker 2's JMX attribute it follows

    @property
    def family(self) -> str:
        """The family name a scrape parses to (an Info is exposed as the gauge `<name>_info`)."""
        return f"{self.name}_info" if self.kind == "info" else self.name

    @property
    def series(self) -> tuple[str, ...]:
        """The sample names a scrape shows (what PromQL names)."""
        return {
            "counter": (f"{self.name}_total",),
            "histogram": (f"{self.name}_bucket", f"{self.name}_count", f"{self.name}_sum"),
            "info": (f"{self.name}_info",),
        }.get(self.kind, (self.name,))


def _stats(name: str, labels: tuple[str, ...], doc: str, mm2: str) -> tuple[MetricDef, ...]:
    """MM2's `<attribute>-min/-max/-avg` as three gauges `<name>_min/_max/_avg` (Strimzi's JMX exporter names)."""
    return tuple(
        MetricDef(
            f"{name}_{stat}", "gauge", labels, f"{doc}: {stat} over the last {WINDOW_SECONDS:g} s", f"{mm2}-{stat}"
        )
        for stat in STATS
    )


_MM2_SOURCE = "kafka.connect.mirror:type=MirrorSourceConnector"
_MM2_CHECKPOINT = "kafka.connect.mirror:type=MirrorCheckpointConnector"

METRICS: tuple[MetricDef, ...] = (
    MetricDef(
        f"{SOURCE}_record_count",
        "counter",
        PARTITION_LABELS,
        "Records replicated to the target partition",
        f"{_MM2_SOURCE} record-count",
    ),
    MetricDef(
        f"{SOURCE}_byte_count",
        "counter",
        PARTITION_LABELS,
        "Bytes (key + value) replicated to the target partition",
        f"{_MM2_SOURCE} byte-count",
    ),
    MetricDef(
        f"{SOURCE}_record_rate",
        "gauge",
        PARTITION_LABELS,
        f"Records per second replicated to the target partition over the last {WINDOW_SECONDS:g} s",
        f"{_MM2_SOURCE} record-rate",
    ),
    MetricDef(
        f"{SOURCE}_byte_rate",
        "gauge",
        PARTITION_LABELS,
        f"Bytes per second replicated to the target partition over the last {WINDOW_SECONDS:g} s",
        f"{_MM2_SOURCE} byte-rate",
    ),
    *_stats(
        f"{SOURCE}_record_age_ms",
        PARTITION_LABELS,
        "Age of the partition's records when read from the source (read time - record timestamp, ms)",
        f"{_MM2_SOURCE} record-age-ms",
    ),
    MetricDef(
        f"{SOURCE}_record_age_ms",
        "histogram",
        TOPIC_LABELS,
        "Age of the records when read from the source (read time - record timestamp, ms)",
        f"{_MM2_SOURCE} record-age-ms",
    ),
    *_stats(
        f"{SOURCE}_replication_latency_ms",
        PARTITION_LABELS,
        "Time from a record's timestamp to its acknowledgement by the target partition (ms)",
        f"{_MM2_SOURCE} replication-latency-ms",
    ),
    MetricDef(
        f"{SOURCE}_replication_latency_ms",
        "histogram",
        TOPIC_LABELS,
        "Time from a record's timestamp to its acknowledgement by the target (ms)",
        f"{_MM2_SOURCE} replication-latency-ms",
    ),
    *_stats(
        f"{CHECKPOINT}_checkpoint_latency_ms",
        GROUP_LABELS,
        "Time from reading the group's committed offsets on the source to the checkpoint's acknowledgement (ms)",
        f"{_MM2_CHECKPOINT} checkpoint-latency-ms",
    ),
    MetricDef(
        f"{CHECKPOINT}_checkpoint_latency_ms",
        "histogram",
        FLOW_LABELS,
        "Time from reading a group's committed offsets on the source to the checkpoint's acknowledgement (ms)",
        f"{_MM2_CHECKPOINT} checkpoint-latency-ms",
    ),
    MetricDef(
        f"{CHECKPOINT}_checkpoints",
        "counter",
        FLOW_LABELS,
        "Checkpoints emitted to the target",
        f"{_MM2_CHECKPOINT} (checkpoint records)",
    ),
    MetricDef(
        f"{OWN}_partition_lag_records",
        "gauge",
        PARTITION_LABELS,
        "Records in the source partition not replicated yet (source end offset - next offset)",
    ),
    MetricDef(
        f"{OWN}_partition_lag_seconds",
        "gauge",
        PARTITION_LABELS,
        "Age of the partition's oldest source record not replicated yet (now - its timestamp; 0: caught up; "
        "absent: unknown)",
    ),
    MetricDef(
        f"{OWN}_lag_seconds",
        "gauge",
        FLOW_LABELS,
        "Age of the oldest source record not replicated yet (now - its timestamp; 0: caught up; absent: unknown)",
    ),
    MetricDef(f"{OWN}_offset_syncs", "counter", PARTITION_LABELS, "Offset syncs written for the partition"),
    MetricDef(
        f"{OWN}_out_of_range",
        "counter",
        (*PARTITION_LABELS, "kind"),
        "Records lost at the source, seen at the partition (kind: truncated, lost-tail, recreated, out-of-range; the "
        "status record's `data_loss`)",
    ),
    MetricDef(
        f"{OWN}_reused_offsets",
        "counter",
        PARTITION_LABELS,
        "Offsets the job had copied whose records the source lost and gave to new records, copied again (a lost "
        "tail, the status record's `data_loss` `reused`)",
    ),
    MetricDef(
        f"{OWN}_group_not_synced",
        "gauge",
        (*FLOW_LABELS, "group", "reason"),
        "1 while the consumer group's offsets are not synced to the target, for this reason (active_on_target, "
        "no_offset_sync, topic_filtered, partition_empty, not_yet_discovered); absent once synced (the status "
        "record's `groups`)",
    ),
    MetricDef(
        f"{OWN}_group_last_checkpoint_seconds",
        "gauge",
        (*FLOW_LABELS, "group"),
        "When the job last wrote a checkpoint of the consumer group to the target (epoch seconds); absent: never",
    ),
    MetricDef(
        f"{OWN}_partition_fault_since_seconds",
        "gauge",
        (*PARTITION_LABELS, "kind"),
        "When the partition stopped progressing (epoch seconds; kind: refused-record, out-of-range, truncated, "
        "lost-tail, recreated, stuck, source-unreachable, target-unreachable, leader-unreachable); absent while it "
        "progresses (the status record's `faults`)",
    ),
    MetricDef(
        f"{OWN}_dead_letters",
        "counter",
        PARTITION_LABELS,
        "Records of the partition the target refused, written to the dead-letter topic (on_refused_record: skip)",
    ),
    MetricDef(
        f"{OWN}_transaction_aborts", "counter", FLOW_LABELS, "Exactly-once batches whose transaction was aborted"
    ),
    MetricDef(f"{OWN}_errors", "counter", FLOW_LABELS, "Errors the job reported (its status record's `errors`)"),
    MetricDef(f"{OWN}_batches", "counter", FLOW_LABELS, "Micro-batches run"),
    MetricDef(
        f"{OWN}_batch_failures",
        "counter",
        FLOW_LABELS,
        "Micro-batches whose tasks failed and were retried (task restarts)",
    ),
    MetricDef(f"{OWN}_job_state", "gauge", (*FLOW_LABELS, "state"), "1 for the job's current state"),
    MetricDef(
        f"{OWN}_job_start_time_seconds",
        "gauge",
        FLOW_LABELS,
        "When this job process started; changes() of it counts restarts",
    ),
    MetricDef(f"{OWN}_job_last_batch_timestamp_seconds", "gauge", FLOW_LABELS, "When the last micro-batch ended"),
    MetricDef(f"{OWN}_job", "info", FLOW_LABELS, "The spec the job runs: spec_hash, git_revision, delivery"),
)
BY_NAME = {m.name: m for m in METRICS}
#: The `state` label values of `mirror_job_state`: every state a status record can carry (one home: StatusState).
JOB_STATES: tuple[str, ...] = tuple(s.value for s in StatusState)


def exported_series() -> frozenset[str]:
    """Every sample name a job's scrape can show (dashboards and alert rules may only name these)."""
    return frozenset(s for m in METRICS for s in m.series)


def flow_labels(flow: str) -> dict[str, str]:
    source, target, family = flow_ends(flow)
    return {"flow": flow, "family": family or "", "source": source, "target": target}


# --- windows (pure) -----------------------------------------------------------------------------
class StatWindow:
    """min/max/avg of the values added over the last `seconds` (one entry per add, not per value)."""

    def __init__(self, seconds: float = WINDOW_SECONDS):
        self.seconds = seconds
        self._entries: deque[tuple[float, float, float, float, int]] = deque()  # (t, min, max, sum, n)

    def add(self, values: Sequence[float], now: float) -> None:
        if values:
            self._entries.append((now, min(values), max(values), float(sum(values)), len(values)))

    def stats(self, now: float) -> tuple[float, float, float] | None:
        """(min, max, avg) of the window, or None when it holds nothing."""
        while self._entries and self._entries[0][0] < now - self.seconds:
            self._entries.popleft()
        if not self._entries:
            return None
        n = sum(e[4] for e in self._entries)
        return (
            min(e[1] for e in self._entries),
            max(e[2] for e in self._entries),
            sum(e[3] for e in self._entries) / n,
        )


def _series_key(name: str, labels: dict[str, Any]) -> tuple[Any, ...]:
    """(name, *sorted (label, value as text) pairs): one labelled series of the registry."""
    return (name, *sorted((k, str(v)) for k, v in labels.items()))


@dataclass(frozen=True)
class FlowSnapshot:
    """What the metrics read of a flow after a batch, taken at once by its reporter (reporting.py
    `Reporter.snapshot`), from the figures its status record shows: the spec it runs, the state it reports, its lag,
    each partition's remote topic (`remotes`), the partitions that do not progress (`faults`), the dead letters per
    partition, the last out-of-range events (the same objects while listed: each is counted once), the error and
    consecutive failed batch counts, and the checkpoint emitter's figures (0 and empty before start): checkpoints
    emitted, rounds acknowledged, the last round's acknowledgements and each group's verdict."""

    spec: JobSpec
    state: StatusState
    lag: JobLag
    remotes: Mapping[TP, str]
    faults: tuple[PartitionFault, ...] = ()
    dead_letters: Mapping[TP, int] = dataclasses.field(default_factory=dict)
    out_of_range: tuple[OutOfRange, ...] = ()
    errors: int = 0
    batch_failures: int = 0
    checkpoints_emitted: int = 0
    checkpoint_rounds: int = 0
    checkpoint_acks: tuple[CheckpointAck, ...] = ()
    group_syncs: tuple[GroupSync, ...] = ()


class JobMetrics:
    """The job's metric families in their own registry (tests make several)."""

    def __init__(self, flow: str, registry: CollectorRegistry | None = None, clock: Any = time.monotonic):
        self.registry = registry or CollectorRegistry()
        self.port: int | None = None  # the port /metrics is served on (serve), None: not served
        self.flow = flow_labels(flow)
        self.clock = clock  # monotonic seconds for the windows (tests inject one)
        self.families: dict[str, Any] = {}
        for m in METRICS:
            if m.kind == "counter":
                fam: Any = Counter(m.name, m.doc, m.labels, registry=self.registry)
            elif m.kind == "gauge":
                fam = Gauge(m.name, m.doc, m.labels, registry=self.registry)
            elif m.kind == "histogram":
                fam = Histogram(m.name, m.doc, m.labels, buckets=LATENCY_BUCKETS_MS, registry=self.registry)
            else:
                fam = Info(m.name, m.doc, m.labels, registry=self.registry)
            self.families[m.name] = fam
        self._children: dict[tuple, Any] = {}  # (name, *sorted label items) -> series (get)
        self._seen_out_of_range: list[OutOfRange] = []  # the events counted (held: identity compare)
        self._errors = 0
        self._faults: dict[tuple[str, int, str], float] = {}  # the fault series set: (topic, partition, kind)
        self._dead_letters: dict[TP, int] = {}  # the dead letters counted
        self._checkpoints = 0
        self._group_reasons: dict[str, str] = {}  # the group-sync series set (group -> reason)
        self._group_times: dict[str, float] = {}
        self._group_syncs_set: tuple[GroupSync, ...] = ()  # the verdicts those series show
        self._checkpoint_round = 0
        self._remote: dict[TP, str] = {}
        self._rates: dict[TP, RateWindow] = {}
        self._ages: dict[TP, StatWindow] = {}
        self._latencies: dict[TP, StatWindow] = {}
        self._lag_remote: dict[TP, str] = {}
        # What each partition's series show now (issue 47): a figure that did not change is not set again, so a
        # caught-up flow's thousands of partitions cost a comparison each, not a labelled series' set.
        self._rates_shown: dict[TP, tuple[str, float, float]] = {}
        self._lag_shown: dict[TP, tuple[str, int, float | None]] = {}
        self._checkpoint_latencies: dict[tuple[str, str, int], StatWindow] = {}  # (group, topic, partition)
        self.get(f"{OWN}_job_start_time_seconds").set(time.time())

    def get(self, name: str, **extra: Any) -> Any:
        """The series `name` with these labels. Children are cached: prometheus_client validates the
        label names on every `labels()` call, which cost the driver 0.2 s per batch at 512 partitions."""
        key = _series_key(name, extra)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self.families[name].labels(**self.flow, **dict(key[1:]))
        return child

    # --- the hook -------------------------------------------------------------------------
    def observe(self, flow: FlowSnapshot, results: Iterable[TaskResult]) -> None:
        """One micro-batch: the task results the driver absorbed and the flow as its reporter saw it after absorbing
        them (`flow`)."""
        now = self.clock()
        for r in results:
            aborted = bool(flow.spec.exactly_once and r.error)
            if aborted and r.partitions:
                self.get(f"{OWN}_transaction_aborts").inc()
            for p in r.partitions:
                if p.out_of_range or aborted:
                    continue  # the driver counts none of these records either (absorb)
                self._remote[p.tp] = p.remote
                tp = {"topic": p.remote, "partition": p.partition}
                self._rates.setdefault(p.tp, RateWindow()).add(p.count, p.bytes, now)
                if p.count:
                    self.get(f"{SOURCE}_record_count", **tp).inc(p.count)
                    self.get(f"{SOURCE}_byte_count", **tp).inc(p.bytes)
                if p.syncs:
                    self.get(f"{OWN}_offset_syncs", **tp).inc(len(p.syncs))
                self._samples(p.tp, p.remote, "record_age_ms", self._ages, p.age_ms, now)
                self._samples(p.tp, p.remote, "replication_latency_ms", self._latencies, p.latency_ms, now)
        self._publish_windows(now)
        self.observe_lag(flow.lag)
        self._observe_checkpoints(flow, now)
        self._observe_group_syncs(flow.group_syncs)
        for event in flow.out_of_range:
            if not any(event is seen for seen in self._seen_out_of_range):
                remote = flow.remotes.get((event.topic, event.partition), event.topic)
                kind = (event.kind or FaultKind.OUT_OF_RANGE).value
                self.get(f"{OWN}_out_of_range", topic=remote, partition=event.partition, kind=kind).inc()
                if event.reused:
                    self.get(f"{OWN}_reused_offsets", topic=remote, partition=event.partition).inc(event.reused)
        self._seen_out_of_range = list(flow.out_of_range)
        self._advance(f"{OWN}_errors", "_errors", flow.errors)
        self._advance(f"{CHECKPOINT}_checkpoints", "_checkpoints", flow.checkpoints_emitted)
        if flow.batch_failures:  # this batch's tasks failed (reset by the next good batch)
            self.get(f"{OWN}_batch_failures").inc()
        self.get(f"{OWN}_batches").inc()
        self.get(f"{OWN}_job_last_batch_timestamp_seconds").set(time.time())
        self.set_state(flow)

    def _samples(
        self, tp: TP, remote: str, what: str, windows: dict[TP, StatWindow], values: list[int], now: float
    ) -> None:
        if not values:
            return
        windows.setdefault(tp, StatWindow()).add(values, now)
        hist = self.get(f"{SOURCE}_{what}", topic=remote)
        for ms in values:
            hist.observe(ms)

    def _publish_windows(self, now: float) -> None:
        for tp, rate in self._rates.items():
            records, nbytes = rate.rates(now)
            shown = (self._remote[tp], records, nbytes)
            if self._rates_shown.get(tp) == shown:
                continue
            self._rates_shown[tp] = shown
            labels = {"topic": self._remote[tp], "partition": tp[1]}
            self.get(f"{SOURCE}_record_rate", **labels).set(records)
            self.get(f"{SOURCE}_byte_rate", **labels).set(nbytes)
        for what, windows in (("record_age_ms", self._ages), ("replication_latency_ms", self._latencies)):
            for tp, window in list(windows.items()):
                stats = window.stats(now)
                self._set_stats(f"{SOURCE}_{what}", stats, topic=self._remote[tp], partition=tp[1])
                if stats is None:
                    del windows[tp]  # series removed; a new sample starts a new window

    def _set_stats(self, name: str, stats: tuple[float, float, float] | None, **labels: Any) -> None:
        """The `_min/_max/_avg` gauges of one series; removed while the window is empty (MM2: NaN)."""
        for stat, value in zip(STATS, stats or (math.nan,) * 3, strict=True):
            if stats is None:
                self.remove(f"{name}_{stat}", **labels)
            else:
                self.get(f"{name}_{stat}", **labels).set(value)

    def remove(self, name: str, **extra: Any) -> None:
        """Drop one series (no longer meaningful: an empty window, a partition no longer copied)."""
        self._children.pop(_series_key(name, extra), None)
        values = {**self.flow, **{k: str(v) for k, v in extra.items()}}
        try:
            self.families[name].remove(*(values[label] for label in BY_NAME[name].labels))
        except KeyError:
            pass

    def observe_lag(self, lag: JobLag) -> None:
        """The job's lag as the status record has it (the reporter calls this with each record it publishes, and
        `observe` after each batch)."""
        # A partition without a known lag (no position or no end yet) has no series.
        current = {
            (p.topic, p.partition): (p.remote or p.topic, p.lag, p.next, p.end)
            for p in lag.partitions
            if p.lag is not None and p.next is not None and p.end is not None
        }
        for tp in [tp for tp in self._lag_remote if tp not in current]:  # topic deleted or no longer copied
            remote = self._lag_remote.pop(tp)
            self._lag_shown.pop(tp, None)
            for name in (f"{OWN}_partition_lag_records", f"{OWN}_partition_lag_seconds"):
                self.remove(name, topic=remote, partition=tp[1])
        for tp, (remote, records, _next_offset, _end) in current.items():
            seconds = lag.partition_seconds.get(tp)  # the one definition (lag.py): the oldest record's age
            if self._lag_shown.get(tp) == (remote, records, seconds):
                continue  # the series show this already
            self._lag_shown[tp] = (remote, records, seconds)
            labels = {"topic": remote, "partition": tp[1]}
            self.get(f"{OWN}_partition_lag_records", **labels).set(records)
            self._lag_remote[tp] = remote
            if seconds is None:
                self.remove(f"{OWN}_partition_lag_seconds", **labels)  # unknown: no series, not a stale figure
            else:
                self.get(f"{OWN}_partition_lag_seconds", **labels).set(seconds)
        if lag.seconds is None:
            self.remove(f"{OWN}_lag_seconds")  # unknown: no series, rather than a stale figure
        else:
            self.get(f"{OWN}_lag_seconds").set(lag.seconds)

    def _observe_checkpoints(self, flow: FlowSnapshot, now: float) -> None:
        """The checkpoint rounds acknowledged since the last batch (CheckpointEmitter.last_round, once each)."""
        if flow.checkpoint_rounds > self._checkpoint_round:
            self._checkpoint_round = flow.checkpoint_rounds
            hist = self.get(f"{CHECKPOINT}_checkpoint_latency_ms")
            # A checkpoint is emitted once per round at most: keep it visible until the round after next.
            window = max(WINDOW_SECONDS, 2.0 * float(flow.spec.settings.checkpoints.interval_seconds))
            for ack in flow.checkpoint_acks:
                cp = ack.checkpoint
                key = (cp.consumer_group_id, cp.topic, cp.partition)
                self._checkpoint_latencies.setdefault(key, StatWindow(window)).add([ack.latency_ms], now)
                hist.observe(ack.latency_ms)
        for key, stats_window in list(self._checkpoint_latencies.items()):
            group, topic, partition = key
            stats = stats_window.stats(now)
            self._set_stats(f"{CHECKPOINT}_checkpoint_latency_ms", stats, topic=topic, partition=partition, group=group)
            if stats is None:
                del self._checkpoint_latencies[key]

    def _observe_group_syncs(self, syncs: tuple[GroupSync, ...]) -> None:
        """Each group's verdict of the last checkpoint round (mirror/group_sync.py): a series per group not synced
        and its reason, and its last checkpoint time. The verdicts the series already show are not set again (the
        checkpoint round keeps an unchanged group's verdict: comparing them is an identity check each)."""
        if syncs == self._group_syncs_set:
            return
        self._group_syncs_set = syncs
        reasons = {g.group: g.reason.name.lower() for g in syncs if g.reason is not None}
        times = {g.group: g.last_checkpoint_ms / 1000 for g in syncs if g.last_checkpoint_ms is not None}
        for group, reason in self._group_reasons.items() - reasons.items():
            self.remove(f"{OWN}_group_not_synced", group=group, reason=reason)
        for group in self._group_times.keys() - times.keys():
            self.remove(f"{OWN}_group_last_checkpoint_seconds", group=group)
        for group, reason in reasons.items():
            self.get(f"{OWN}_group_not_synced", group=group, reason=reason).set(1.0)
        for group, at in times.items():
            self.get(f"{OWN}_group_last_checkpoint_seconds", group=group).set(at)
        self._group_reasons, self._group_times = reasons, times

    def set_state(self, flow: FlowSnapshot) -> None:
        self._observe_faults(flow)
        state = flow.state.value
        for s in JOB_STATES:
            self.get(f"{OWN}_job_state", state=s).set(1.0 if s == state else 0.0)
        spec = flow.spec
        self.get(f"{OWN}_job").info(
            {"spec_hash": spec.spec_hash(), "git_revision": spec.git_revision or "", "delivery": str(spec.delivery)}
        )

    def _observe_faults(self, flow: FlowSnapshot) -> None:
        """The partitions that do not progress (one series each while they do not) and the dead letters."""
        name = f"{OWN}_partition_fault_since_seconds"
        now: dict[tuple[str, int, str], float] = {}
        for f in flow.faults:
            remote = flow.remotes.get((f.topic, f.partition), f.topic)
            now[(remote, f.partition, f.kind.value if f.kind else "")] = (f.since or 0) / 1000
        for topic, partition, kind in set(self._faults) - set(now):
            self.remove(name, topic=topic, partition=partition, kind=kind)
        for (topic, partition, kind), since in now.items():
            self.get(name, topic=topic, partition=partition, kind=kind).set(since)
        self._faults = now
        for tp, count in flow.dead_letters.items():
            seen = self._dead_letters.get(tp, 0)
            if count > seen:
                remote = flow.remotes.get(tp, tp[0])
                self.get(f"{OWN}_dead_letters", topic=remote, partition=tp[1]).inc(count - seen)
                self._dead_letters[tp] = count

    def _advance(self, name: str, attr: str, total: int) -> None:
        before = getattr(self, attr)
        if total > before:
            self.get(name).inc(total - before)
        setattr(self, attr, max(before, total))

    # --- HTTP -----------------------------------------------------------------------------
    def serve(self, port: int, addr: str = LOOPBACK) -> Any:
        """Serve /metrics on `port` of `addr` (default: this machine only, issue 45) in a daemon thread; returns the
        server (shutdown() to stop)."""
        from prometheus_client import start_http_server

        server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        self.port = int(server.server_port)  # the port bound (port 0: the one the system chose)
        return server


class MergedMetrics:
    """One /metrics for the flows of an engine: each flow's JobMetrics keeps its registry (its series carry the
    flow's labels); a scrape merges their families by name, so each family is described once. A flow that
    has left the engine is no longer among `registries()`, and its series are gone from the next scrape."""

    def __init__(self, registries: Callable[[], Iterable[CollectorRegistry]]):
        self.registries = registries

    def collect(self) -> Iterator[Metric]:
        merged: dict[str, Metric] = {}
        for registry in self.registries():
            for family in registry.collect():
                into = merged.get(family.name)
                if into is None:
                    into = merged[family.name] = Metric(family.name, family.documentation, family.type, family.unit)
                into.samples.extend(family.samples)
        yield from merged.values()


def serve_merged(registries: Callable[[], Iterable[CollectorRegistry]], port: int, addr: str = LOOPBACK) -> int:
    """Serve the merged /metrics of several registries on `port` (0: a free one) in a daemon thread; the port bound."""
    from prometheus_client import start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(MergedMetrics(registries))
    server, _thread = start_http_server(port, addr=addr, registry=registry)
    return int(server.server_port)
