"""A replication job's lag: how far its positions are behind the source's current end.

The rule (pure, `job_lag`): per source partition the job copies, lag = max(0, end - next), where `next`
is the driver's position (the next offset it will copy; it advances when a batch's results are
absorbed) and `end` is the larger of the end the partition's last task saw (`LagPosition.end`) and
the end the driver read from the source itself (`SourceEnds`, read beside the batches). Without
that read, a job whose tasks do not end (Python workers stalled, paused or slow) would keep
reporting the end its last task saw, i.e. lag 0 however far behind it falls.

The read (I/O, `SourceEndReader`), run by the driver in a side channel of its own every half status interval
(driver.py): the ends as the source lists them (`PartitionEnds.listed_latest`, engine/ends.py: one ListOffsets request
for every partition copied; what that end is on each broker is said there); then, for the partitions that lag most (`PROBE_LIMIT`), the
timestamp of the record at the job's position, the oldest record not replicated yet, read with a
consumer of its own (one assign, one record each; once per position, which moves only when a batch
ends). That is the one definition of lag in seconds (what `slo.max_lag_seconds` promises): the age, by its
timestamp, of the oldest record not replicated yet; per partition (`JobLag.partition_seconds`, the metric
`mirror_partition_lag_seconds`) and for the job, the oldest of them (`JobLag.seconds`: the status record's
`lag_seconds`, the metric `mirror_lag_seconds`, drift's `lag-age` check and the `MirrorLagAgeHigh` alert).

The status record (`Reporter.status_record`, engine/reporting.py) and the metrics (`JobMetrics.observe_lag`) both
take one `JobLag`, so they say the same.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.contract.spec import JobSpec, job_group
from reconciler.contract.status import PartitionLag
from reconciler.engine import clients
from reconciler.engine.delivery import mode_of
from reconciler.engine.ends import PartitionEnds
from reconciler.engine.offsets import OffsetStore, once
from reconciler.engine.tasks import TP

log = logging.getLogger(__name__)

#: A position not resolved yet: the partition's earliest offset (Kafka's OFFSET_BEGINNING).
EARLIEST = -2

#: At most this many partitions (those with the largest lag) have their oldest record's timestamp read per round.
PROBE_LIMIT = 20


@dataclass
class LagPosition:
    """Where the job is in one source partition, as its last task reported: next offset and the end it saw."""

    remote: str
    next: int
    end: int | None


@dataclass(frozen=True)
class OldestRecord:
    """The timestamp (epoch ms) of the first record at or after offset `at` (the job's position when read)."""

    at: int
    timestamp_ms: int


@dataclass(frozen=True)
class SourceEnds:
    """One read of the source: the end offset of each partition, when it was read (epoch ms), and the
    oldest not-yet-replicated record's timestamp of the partitions that lagged most."""

    ends: Mapping[TP, int]
    read_at: int
    oldest: Mapping[TP, OldestRecord] = field(default_factory=dict)
    #: the positions the job's workers committed (durable on the target) by the time of the read: ahead of
    #: the driver's positions while a task runs (a worker commits every round, a task ends every max_batch_ms)
    committed: Mapping[TP, int] = field(default_factory=dict)
    #: the earliest offsets of partitions the job starts at the earliest (position EARLIEST, not resolved yet)
    starts: Mapping[TP, int] = field(default_factory=dict)

    @classmethod
    def at_positions(cls, positions: Mapping[TP, int]) -> SourceEnds:
        """The ends while the arrival watch hears nothing (idle_gate.py's `watch_hears_all`): each partition ends at
        the flow's position, read now. A heartbeats partition, not watched but copied every heartbeat interval,
        counts as caught up between two copies: its lag of at most one interval's heartbeats is not shown."""
        return cls(dict(positions), int(time.time() * 1000), committed=dict(positions))


@dataclass(frozen=True)
class JobLag:
    """The job's lag: per partition, the total in records (None: unknown, the source's ends cannot be read now),
    the oldest unreplicated record's age in seconds (None: unknown; 0.0: nothing lags) and when the source's ends
    behind it were read (epoch ms, None: never); `partition_seconds`: the same age per partition where it is known
    (0.0: caught up; absent: lags and its oldest record's timestamp was not read, e.g. not among the `PROBE_LIMIT`
    that lag most). `seconds` is the largest of them."""

    partitions: tuple[PartitionLag, ...] = ()
    total: int | None = 0
    seconds: float | None = None
    read_at: int | None = None
    partition_seconds: Mapping[TP, float] = field(default_factory=dict)


def partition_lag(next_offset: int | None, end: int | None) -> int | None:
    """Records between the job's next offset and the end (None: either unknown, or no position yet)."""
    if next_offset is None or end is None or next_offset < 0:
        return None
    return max(0, end - next_offset)


def latest_end(*ends: int | None) -> int | None:
    """The larger of the ends known (a task's and the side channel's reads of the same partition)."""
    known = [e for e in ends if e is not None]
    return max(known) if known else None


def latest_positions(positions: Mapping[TP, int], committed: Mapping[TP, int]) -> dict[TP, int]:
    """The job's next offset per partition: the larger of the driver's and what a running task committed."""
    return {tp: max(pos, committed.get(tp, pos)) for tp, pos in positions.items()}


def resolved_positions(positions: Mapping[TP, int], starts: Mapping[TP, int]) -> dict[TP, int]:
    """The positions with EARLIEST (none copied yet) resolved to the partition's earliest offset where it was read:
    a partition never copied lags by every record it holds, not by an unknown that sums to nothing."""
    return {tp: starts.get(tp, pos) if pos == EARLIEST else pos for tp, pos in positions.items()}


def committed_ahead(positions: Mapping[TP, int], source: SourceEnds | None) -> int:
    """Records a running task has committed (durable on the target) that the driver has not counted yet: its
    count arrives when the task ends, and never if the job is killed first."""
    if source is None:
        return 0
    total = 0
    for tp, pos in positions.items():
        start = pos if pos >= 0 else source.starts.get(tp) if pos == EARLIEST else None
        if start is not None and tp in source.committed:
            total += max(0, source.committed[tp] - start)
    return total


def job_lag(
    copy: Mapping[TP, str],
    positions: Mapping[TP, int],
    seen: Mapping[TP, LagPosition],
    source: SourceEnds | None,
    now_ms: int,
    ends_known: bool = True,
) -> JobLag:
    """The lag of every partition a task has reported on (`seen`) or that has a position and is copied.

    `copy`: source partition -> remote topic; `positions`: the driver's next offsets; `seen`: what the tasks
    reported; `source`: the side channel's last read (None: none yet), whose committed positions count
    where they are ahead of the driver's. `ends_known` False: the source does not answer its end-offset reads now
    (`ReachWatch`), so the ends read before are no longer its ends: every end and lag is unknown (None, the total
    and the seconds too), not the lag against the last ends read (unknown is not zero)."""
    ends = source.ends if source is not None else {}
    positions = resolved_positions(
        latest_positions(positions, source.committed if source is not None else {}),
        source.starts if source is not None else {},
    )
    parts = []
    total = 0
    for tp in sorted(set(seen) | {tp for tp in copy if tp in positions}):
        last = seen.get(tp)
        remote = last.remote if last is not None else copy[tp]
        next_offset = positions.get(tp, last.next if last is not None else None)
        end = latest_end(last.end if last is not None else None, ends.get(tp)) if ends_known else None
        lag = partition_lag(next_offset, end)
        total += lag or 0
        parts.append(PartitionLag(tp[0], tp[1], remote, next_offset, end, lag))
    read_at = source.read_at if source is not None else None
    if not ends_known:
        return JobLag(tuple(parts), None, None, read_at, {})
    oldest = source.oldest if source is not None else {}
    return JobLag(
        tuple(parts),
        total,
        lag_seconds(parts, oldest, now_ms),
        read_at,
        partition_lag_seconds(parts, oldest, now_ms),
    )


def partition_lag_seconds(
    parts: Iterable[PartitionLag], oldest: Mapping[TP, OldestRecord], now_ms: int
) -> dict[TP, float]:
    """Per partition, the age of its oldest record not replicated yet: 0.0 when it does not lag, now - the
    timestamp read at its current position when it does. A timestamp read at an earlier position is of a record
    copied since: not used; such a partition, and one not read (not among the `PROBE_LIMIT` that lag most), is
    left out (unknown)."""
    out: dict[TP, float] = {}
    for p in parts:
        tp = (p.topic, p.partition)
        if p.lag == 0:
            out[tp] = 0.0
        elif p.lag and (o := oldest.get(tp)) is not None and o.at == p.next:
            out[tp] = max(0.0, (now_ms - o.timestamp_ms) / 1000.0)
    return out


def lag_seconds(parts: Iterable[PartitionLag], oldest: Mapping[TP, OldestRecord], now_ms: int) -> float | None:
    """Age of the oldest record not replicated yet: the largest `partition_lag_seconds` of a lagging partition.
    0.0 when no partition lags; None when some do and none of them has a timestamp at its position (not read
    yet, or not among the `PROBE_LIMIT` that lag most)."""
    parts = list(parts)
    lagging = [(p.topic, p.partition) for p in parts if p.lag]
    if not lagging:
        return 0.0
    ages = partition_lag_seconds(parts, oldest, now_ms)
    known = [ages[tp] for tp in lagging if tp in ages]
    return max(known) if known else None


def probe_targets(positions: Mapping[TP, int], ends: Mapping[TP, int], limit: int = PROBE_LIMIT) -> dict[TP, int]:
    """The partitions whose oldest record's timestamp to read: the `limit` that lag most -> their position."""
    lagging = [
        (lag, tp) for tp, pos in positions.items() if (lag := partition_lag(pos, ends.get(tp))) is not None and lag > 0
    ]
    return {tp: positions[tp] for _, tp in sorted(lagging, key=lambda x: (-x[0], x[1]))[:limit]}


# --- I/O: the side channel's clients ----------------------------------------------------------------
class SourceEndReader:
    """The lag side channel's read: the source's listed ends (`ends`, the flow's `PartitionEnds`: ListOffsets
    through the engine's shared source admin, safe from any thread), the job's committed positions and
    oldest-record timestamps with a consumer of its own (it runs in its own thread; the OffsetStore's consumer
    belongs to the driver's loop)."""

    def __init__(
        self,
        spec: JobSpec,
        ends: PartitionEnds,
        environ: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        store: OffsetStore | None = None,
    ):
        self.spec = spec
        self.environ = environ
        self.timeout = timeout
        self.ends = ends
        self._consumer: Any = None  # made on first use (only when something lags)
        # The job's committed positions: the driver's OffsetStore (its reads of committed offsets are safe from
        # this thread too), or one of its own made on first use.
        self._store: OffsetStore | None = store
        self._own_store = store is None

    def close(self) -> None:
        if self._store is not None and self._own_store:
            self._store.close()
        self._store = None
        if self._consumer is not None:
            try:
                self._consumer.close()
            except Exception:  # noqa: BLE001
                pass
            self._consumer = None

    def read(
        self,
        copy: Mapping[TP, str],
        positions: Mapping[TP, int],
        seen_ends: Mapping[TP, int],
        known: Mapping[TP, OldestRecord] | None = None,
    ) -> SourceEnds:
        """The ends of the partitions copied (`copy`: source partition -> remote topic) now, the positions the
        job committed, and the oldest record's timestamp of those that lag most by them (`seen_ends`: the ends
        tasks saw, in case they are past the ones read here). `known`: the timestamps of the last read; one read
        at a partition's position is kept, not read again (the record there does not change)."""
        read_at = int(time.time() * 1000)
        committed = self.committed(copy) if copy else {}
        ends = self.ends.listed_latest(copy, timeout=self.timeout)
        # Every partition the job starts at its earliest offset (none copied yet): its lag counts from there; an
        # unresolved position must not read as no lag (a partition never copied would say caught up).
        fresh = [tp for tp, pos in positions.items() if pos == EARLIEST]
        starts = self.starts(fresh) if fresh else {}
        merged = {tp: max(e, seen_ends.get(tp, e)) for tp, e in ends.items()}
        targets = probe_targets(
            resolved_positions(latest_positions(positions, committed), starts), {**seen_ends, **merged}
        )
        kept = {tp: o for tp, o in (known or {}).items() if targets.get(tp) == o.at}
        missing = {tp: pos for tp, pos in targets.items() if tp not in kept}
        return SourceEnds(
            ends, read_at, {**kept, **(self.oldest_records(missing) if missing else {})}, committed, starts
        )

    def starts(self, fresh: list[TP]) -> dict[TP, int]:
        """The earliest offsets of `fresh` (partitions at EARLIEST); a failed read is logged and left out (their lag
        is unknown this round, the ends read stand)."""
        try:
            return self.ends.listed_earliest(fresh, timeout=self.timeout)
        except Exception as exc:  # noqa: BLE001 - the ends and the other partitions' lag still count
            log.info("cannot read the earliest offsets of the partitions not copied yet: %s", exc)
            return {}

    def committed(self, copy: Mapping[TP, str]) -> dict[TP, int]:
        """The positions the job's workers have committed, read where the delivery mode keeps them (the source
        group at-least-once, the target group exactly-once): what is durable on the target, a second or so
        behind a running task. A failed read is logged and left out (the driver's positions still count)."""
        if self._store is None:
            self._store, self._own_store = OffsetStore(self.spec, mode_of(self.spec), self.environ), True
        try:
            loaded = self._store.load(copy, once(self.timeout))
        except Exception as exc:  # noqa: BLE001 - the lag then uses the driver's positions alone
            log.info("cannot read the job's committed positions: %s", exc)
            return {}
        return {tp: pos for tp, (pos, _slot) in loaded.items() if pos is not None and pos >= 0}

    def oldest_records(self, positions: Mapping[TP, int], timeout: float = 2.0) -> dict[TP, OldestRecord]:
        """The timestamp of the first record at or after each position (one record each, `timeout` in all).
        A partition with no record there in time, or whose record carries no timestamp, is left out."""
        from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, TopicPartition

        if self._consumer is None:
            self._consumer = Consumer(
                clients.probe_consumer_config(self.spec.source, self.spec, job_group(self.spec) + ".lag", self.environ)
            )
        consumer = self._consumer
        consumer.assign([TopicPartition(t, p, offset) for (t, p), offset in positions.items()])
        out: dict[TP, OldestRecord] = {}
        pending = set(positions)
        deadline = time.monotonic() + timeout
        try:
            while pending and time.monotonic() < deadline:
                for m in consumer.consume(len(pending), min(0.2, max(0.0, deadline - time.monotonic()))):
                    tp = (m.topic(), m.partition())
                    if tp not in pending:
                        continue
                    if m.error() is not None:  # the end of the partition (nothing there), or an error: unknown
                        pending.discard(tp)
                        continue
                    kind, stamp = m.timestamp()
                    if m.offset() >= positions[tp]:
                        pending.discard(tp)
                        if kind != TIMESTAMP_NOT_AVAILABLE and stamp >= 0:
                            out[tp] = OldestRecord(positions[tp], stamp)
        finally:
            consumer.unassign()
        return out
