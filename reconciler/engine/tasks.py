"""What the driver hands a Spark task and what the task hands back: typed, picklable values.

One `CopyTask` per slot and micro-batch (the slot's partitions with their start positions); one
`TaskResult` back, with a `PartitionResult` per partition. The job spec travels beside them as the
`JobSpec` itself (frozen, picklable), never as a dict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from reconciler.engine.tails import Fingerprint
from reconciler.topology.model import RateLimit

TP = tuple[str, int]


@dataclass(frozen=True)
class TaskBudget:
    """A task's part of its flow's rate limit (throttle.py `budgets`): its share of the rate (records and bytes a
    second; None: no cap of that kind) and the tokens it starts with (what the flow's earlier batches left, refilled
    since: `FlowAllowance`; below zero, what they overspent)."""

    rate: RateLimit
    records: float = 0.0
    bytes: float = 0.0
    #: when (wall clock, epoch seconds) the flow's tokens were counted for the batch (`FlowAllowance.take`): the task's
    #: buckets refill from then, so the time its Spark job took to start counts; None: from the task's start (the
    #: tasks run one after another in the driver's process)
    since: float | None = None


@dataclass(frozen=True)
class PartitionTask:
    topic: str
    partition: int
    remote: str
    start: int  # next upstream offset to copy; < 0: from the beginning
    sync_state: list[int] | None = None  # the offset-sync state of this partition (see offset_syncs)
    #: The source's end read before the batch, on the tasks of a split backlog (batches.py `BatchShaper.split_tasks`):
    #: reaching it counts as reaching the partition's end (an end-of-partition event need not come while a stream
    #: flows: a fetch that finds a record is not empty).
    end: int | None = None
    #: The largest record (key + value bytes) the remote topic takes (its `max.message.bytes` as the driver read it,
    #: less a record batch's overhead); a larger one is refused before it is produced (`on_refused_record`).
    max_record_bytes: int | None = None

    @property
    def tp(self) -> TP:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class RefusedRecord:
    """A source record the target refuses (or would: larger than the remote topic takes), and why."""

    offset: int
    size: int  # key + value bytes
    reason: str


@dataclass(frozen=True)
class CopyTask:
    slot: int
    batch: int
    partitions: tuple[PartitionTask, ...]
    last_owner: str | None = None  # process that used this slot's transactional id last
    consumer_epoch: int = 0  # bumped by the driver to make workers drop cached consumers
    #: end as soon as every partition reached its end (its end-of-partition event, or its `end`), without lingering
    #: for more (IDLE_END_S, IDLE_MIN_TASK_S): the driver's own copies of heartbeats alone, where a record missed now
    #: is copied the next time, and the tasks of an at-least-once backlog split over the slots
    #: (batches.py `BatchShaper.split_tasks`)
    at_end_only: bool = False
    #: the task's time budget when shorter than the flow's `max_batch_ms`: its share of an engine whose other flows run
    #: batches too (engine/fair_share.py), or a capped flow's task that left partitions at rest out (batches.py
    #: `LEFT_OUT_BATCH_MS`); None: `max_batch_ms`
    max_ms: int | None = None
    #: the task's part of the flow's `rate_limit` (throttle.py `budgets`): it paces its reads to it; None: not paced
    budget: TaskBudget | None = None

    def time_budget_s(self, max_batch_ms: int) -> float:
        """How long the task copies (seconds): the flow's `max_batch_ms`, or its share of the engine if shorter."""
        return min(max_batch_ms, self.max_ms if self.max_ms is not None else max_batch_ms) / 1000.0


def merged(tasks: Sequence[CopyTask], n: int) -> list[CopyTask]:
    """`tasks` as at most `n` tasks (`n` >= 1), where a task's slot is not its partitions' identity (at-least-once):
    the tasks of the lowest slots are kept, and the partitions of the others go to them in turn, with their parts of
    the flow's rate limit (`joined`: the flow's rate and tokens stay whole)."""
    if len(tasks) <= n:
        return list(tasks)
    ordered = sorted(tasks, key=lambda t: t.slot)
    groups = [[t] for t in ordered[:n]]
    for i, t in enumerate(ordered[n:]):
        groups[i % n].append(t)
    return [
        dataclasses.replace(
            g[0], partitions=tuple(p for t in g for p in t.partitions), budget=joined([t.budget for t in g])
        )
        for g in groups
    ]


def joined(budgets: Sequence[TaskBudget | None]) -> TaskBudget | None:
    """The budget of one task that copies what tasks of these `budgets` would have: their rates and tokens added (a
    kind of rate that one of them does not cap is not capped); None: none of them is paced."""
    known = [b for b in budgets if b is not None]
    if not known:
        return None

    def total(values: list[float | None]) -> float | None:
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)

    rate = RateLimit(total([b.rate.records_per_second for b in known]), total([b.rate.bytes_per_second for b in known]))
    return TaskBudget(rate, sum(b.records for b in known), sum(b.bytes for b in known))


@dataclass
class PartitionResult:
    topic: str
    partition: int
    remote: str
    start: int
    next: int
    count: int = 0
    bytes: int = 0
    eof: bool = False
    hw: int | None = None
    out_of_range: str | None = None
    error: str | None = None
    #: `on_refused_record: fail`: the record the partition stopped at (`next` is its offset); None: none refused
    refused: RefusedRecord | None = None
    dead_lettered: int = 0  # `on_refused_record: skip`: records written to the dead-letter topic instead
    syncs: list[tuple[int, int]] = field(default_factory=list)  # (upstream, downstream) offset syncs to write
    sync_state: list[int] | None = None
    last: tuple[int, int] | None = None  # last replicated (upstream, downstream) pair
    # Sampled records of the partition (one in LATENCY_SAMPLE_EVERY), for the per-partition metrics:
    age_ms: list[int] = field(default_factory=list)  # read time - record timestamp (MM2's record-age-ms)
    latency_ms: list[int] = field(default_factory=list)  # acknowledgement - record timestamp (replication-latency-ms)
    #: at-least-once: the position the task's last commit on the source recorded, answered without error (-1: none);
    #: the driver commits `next` only where it differs (the task's synchronous commit at its end made it already)
    source_committed: int = -1
    #: fingerprints of records the task copied durably, oldest first (engine/tails.py: the driver's `CopiedTails`)
    copied: list[Fingerprint] = field(default_factory=list)
    #: the task's consumer lost its source broker (a restart may have cost the source its tail): read it back
    source_reconnected: bool = False

    @property
    def tp(self) -> TP:
        return (self.topic, self.partition)


@dataclass
class TaskResult:
    slot: int
    process: str
    error: str | None = None
    fatal: bool = False  # the slot's producer is unusable (fenced): the next task makes a new one
    committed: bool = False
    partitions: list[PartitionResult] = field(default_factory=list)
    latency_ms: list[int] = field(default_factory=list)
    duration_ms: int = 0
    transactional_id: str | None = None
    traceback: str | None = None
    #: a paced task's tokens at its end (records, bytes; below zero: overspent), for the flow's next batch
    budget_left: tuple[float, float] | None = None
    budget_left_at: float | None = None  # when (wall clock, epoch seconds) `budget_left` was counted
