"""The copy function that runs inside a Spark Python worker: consumer -> producer, no JVM in between.

The driver plans one task per slot each micro-batch: a list of source partitions with the offset
to start from. The worker reads each partition from its start offset until it is caught up (the
consumer reports end-of-partition), or until the per-partition record budget or the batch time
budget is spent. It does not trust a high watermark as an end bound (on Tansu it is below the true end, which
would strand the tail of an idle partition: engine/ends.py).

Every record is written to the same partition of the remote topic with its key, value, headers
and timestamp. Then:

What happens after the copy is the delivery mode's (delivery.py, one object per mode):

* at-least-once: the producer is flushed and every delivery checked at the end of each round;
  the task commits the acknowledged next offsets to the job's group on the source cluster as it
  goes (at most every second, `Copier.commit`), and the result tells the driver the next offset
  per partition, which the driver commits there once the task has ended;
* exactly-once (KIP-656): the records and the next source offsets (in the job's group on the
  TARGET cluster) are written in one transaction by the slot's transactional producer
  (`transactional.id` stable per slot, which the driver keeps stable per partition), so a zombie
  task with the same id is fenced and its open transaction aborted.

The function never raises: errors come back in the `TaskResult` (tasks.py) so that the driver can
report them, re-read committed positions and retry. A result carries per partition: next offset, counts,
bytes, the end offset seen, offset-sync decisions (MM2 rules, see sync_plan), and whether the
partition looked out of range, and its sampled records' age when read and at acknowledgement (the metrics).
"""

from __future__ import annotations

import dataclasses
import json
import time
import traceback
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from confluent_kafka import Consumer, Producer

from reconciler.contract.spec import JobSpec, dead_letters_topic_name, job_group
from reconciler.engine import clients
from reconciler.engine.sync_plan import plan_run, state_from_list, state_to_list
from reconciler.engine.tails import RING_SIZE, Fingerprint, fingerprint_of, spread
from reconciler.engine.tasks import (
    TP,
    CopyTask,
    PartitionResult,
    PartitionTask,
    RefusedRecord,
    TaskBudget,
    TaskResult,
)
from reconciler.engine.throttle import Throttle, consumer_prefetch
from reconciler.topology.choices import OnRefusedRecord

OFFSET_BEGINNING = -2
LATENCY_SAMPLE_EVERY = 64  # one record in 64 (plus the last of each partition) is timed
CONSUME_BATCH = 10_000  # messages taken from the consumer's local queue per call
ROUND_S = 0.1  # a round (acknowledgement wait; a transaction in exactly-once) ends once caught up after this
MAX_ROUND_S = 5.0  # ... and after this in any case (bounds what an aborted transaction throws away)
# A task ends early once every partition is caught up and nothing arrived for this long. The tasks
# of one micro-batch end together (one Spark job), so a task that ends early on a hiccup leaves its
# partitions unread until the slowest task ends: long enough not to fire under steady traffic.
IDLE_END_S = 0.25
# ... and not before the task has run this long: right after a (cached) consumer is assigned, every
# partition may report its end before the first fetch brings records (seen on Tansu: a task ended
# with nothing copied while 5,000 records/s flowed, and its partitions then waited 10 s for the
# other slot's task).
IDLE_MIN_TASK_S = 1.0
# ... and, once the task has copied records for STREAM_S or more (a stream, not a small backlog), only after
# IDLE_END_STREAM_S: under steady traffic a broker's hiccup (noida-db at 10,000 records/s: 0.3-0.6 s, which a plain
# reader of the source topic sees too) ended a slot's task while the other slot's ran on, and its partitions waited
# for it: ~9-s episodes in bench/deployed.py's latency scenario, one repetition in three. A stream that stops ends
# its task that much later; a small backlog still ends it after IDLE_END_S.
STREAM_S = 1.0
IDLE_END_STREAM_S = 2.0
PRODUCE_RETRY_S = 60.0  # how long a full producer queue may block one record before the task fails
NO_LIMIT = 1 << 62  # PartitionCopy.limit when the remote topic's limit is not known
#: The errors by which a target refuses a record for what it is (no retry makes it pass): librdkafka's local size
#: check (`message.max.bytes`) and the broker's answers (RecordTooLarge, InvalidRecord, CorruptRecord).
REFUSED_ERRORS = frozenset({"MSG_SIZE_TOO_LARGE", "INVALID_RECORD", "INVALID_MSG", "RECORD_LIST_TOO_LARGE"})
#: `on_refused_record: skip`: the headers of a dead-letter record, Kafka Connect's (`errors.deadletterqueue.*`).
DLQ_TOPIC, DLQ_PARTITION, DLQ_OFFSET = "__connect.errors.topic", "__connect.errors.partition", "__connect.errors.offset"
DLQ_MESSAGE, DLQ_CLASS = "__connect.errors.exception.message", "__connect.errors.exception.class.name"

Run = tuple[int, int]  # (first upstream offset of a run of consecutive offsets, the task's count at its start)
#: How often in a row one exactly-once task redoes a round aborted for records the broker refused (each redo knows one
#: more; a committed round starts the count again). A round with more fails its task, until the driver's next refresh
#: reads the remote topic's new limit and the refusals are predicted.
MAX_REFUSAL_REDOS = 20


class Acks:
    """The delivery reports of one partition's round, in the order its records were produced (librdkafka reports
    a partition's records in that order): the first record's message if it was acknowledged, the last acknowledged
    message, and each failed record by its index in the round, with its error and message. The index makes a record
    the broker refuses known by its source offset (`PartitionCopy.offset_at`), so that the records acknowledged
    around it are not copied again. `report` is the producer's `on_delivery` for every record: one Python call per
    record (about 50 ns more than a dict's C-level `__setitem__`)."""

    __slots__ = ("n", "first", "last", "failed")

    def __init__(self) -> None:
        self.n = 0
        self.first: Any = None
        self.last: Any = None
        self.failed: list[tuple[int, Any, Any]] = []

    def report(self, err: Any, msg: Any) -> None:
        n = self.n
        self.n = n + 1
        if err is None:
            self.last = msg
            if n == 0:
                self.first = msg
        else:
            self.failed.append((n, err, msg))


@dataclass(frozen=True)
class Refusal:
    """A record of the round the broker refused (its delivery report): which one, and the message produced."""

    record: RefusedRecord
    index: int  # in the round (Acks)
    message: Any


@dataclass
class PartitionCopy:
    """One partition's copy state inside a task.

    A task copies in rounds; a round ends when its records are durable (acknowledged, or committed
    in a transaction). `base_*`, `syncs`, `new_sync_state` and `last_pair` describe what is durable;
    `next`, `count`, `bytes` run ahead; `runs`, the acknowledgement maps and `round_*` belong to
    the round in flight. `roll_back` returns to the last durable round, `reset` to the task start.
    """

    topic: str
    partition: int
    remote: str
    start: int
    sync_state: list[int] | None
    next: int = -2  # next upstream offset to copy (< 0: from the beginning, nothing read yet)
    count: int = 0
    bytes: int = 0
    eof: bool = False  # reached the end of the partition at least once in this task
    end: int | None = None  # PartitionTask.end: reaching it counts as reaching the end
    at_end: bool = False  # reached its end in the current round (caught up at least once)
    hw: int | None = None
    paused: bool = False
    out_of_range: str | None = None
    error: str | None = None
    limit: int = NO_LIMIT  # PartitionTask.max_record_bytes: a larger record is refused before it is produced
    dead_letters: str | None = None  # `on_refused_record: skip`: the dead-letter topic (None: `fail`)
    refused: RefusedRecord | None = None  # `fail`: the record the partition stopped at (in the round in flight)
    #: Records the broker refused in a round that was aborted (exactly-once), by source offset: the redo refuses
    #: them before producing them, as it does a record larger than `limit`. Kept for the task.
    known_refused: dict[int, RefusedRecord] = field(default_factory=dict)
    settled: frozenset[int] = frozenset()  # indices (Acks) of the round's refused records settled by the policy
    dead_lettered: int = 0
    base_dead_lettered: int = 0
    dlq_acks: dict[Any, Any] = field(default_factory=dict)  # delivery reports of dead-letter records (None: ok)
    base_next: int = -2
    base_count: int = 0
    base_bytes: int = 0
    runs: list[Run] = field(default_factory=list)
    acks: Acks = field(default_factory=Acks)  # the round's delivery reports, in order
    ts_samples: list[int] = field(default_factory=list)  # the round's sampled record timestamps
    age_ms: list[int] = field(default_factory=list)  # per sample: read time - record timestamp
    latency_ms: list[int] = field(default_factory=list)  # per sample: acknowledgement - record timestamp
    round_syncs: list[tuple[int, int]] = field(default_factory=list)
    round_state: list[int] | None = None
    round_last: tuple[int, int] | None = None
    syncs: list[tuple[int, int]] = field(default_factory=list)  # offset syncs of the durable rounds
    new_sync_state: list[int] | None = None
    last_pair: tuple[int, int] | None = None  # last replicated (upstream, downstream)
    #: The round's last copied record of each run of the copy loop (Messages), fingerprinted when the round is
    #: durable into `copied` (engine/tails.py: what the job copied, to tell a tail the source lost and refilled).
    #: Thinned as it grows, its first kept: a round of thousands of records (a catch-up) is fingerprinted back to
    #: its start, not only its last records (`keep_sample`).
    round_msgs: list[Any] = field(default_factory=list)
    #: The target offset of the round's first record, where the round's copies are consecutive on the target (no
    #: record refused): with `runs`, the copy's offset of every record of the round (`down_of`).
    round_first_down: int | None = None
    copied: list[Fingerprint] = field(default_factory=list)  # of the durable rounds, oldest first
    source_committed: int = -1  # at-least-once: the position the task's last commit on the source recorded
    source_reconnected: bool = False  # the task's consumer lost its source broker (the copy stopped there)

    @classmethod
    def of(cls, t: PartitionTask) -> PartitionCopy:
        return cls(
            t.topic,
            t.partition,
            t.remote,
            t.start,
            t.sync_state,
            next=t.start,
            base_next=t.start,
            new_sync_state=t.sync_state,
            end=t.end,
            limit=t.max_record_bytes if t.max_record_bytes is not None else NO_LIMIT,
        )

    @property
    def passed_end(self) -> bool:
        """Copied up to the end read before the batch (PartitionTask.end), where the task has one."""
        return self.end is not None and self.next >= max(self.end, 0)

    @property
    def round_count(self) -> int:
        return self.count - self.base_count

    def _clear_round(self) -> None:
        self.runs = []
        self.acks = Acks()
        self.settled = frozenset()
        self.dlq_acks = {}
        self.round_syncs = []
        self.round_state = None
        self.round_last = None
        self.round_msgs = []
        self.round_first_down = None

    def down_of(self, offset: int) -> int | None:
        """The offset on the target of the copy of the round's record at source `offset` (None: not known, or not
        a record of the round)."""
        first_down, runs = self.round_first_down, self.runs
        if first_down is None or not runs:
            return None
        for i, (up0, c0) in enumerate(runs):
            c1 = runs[i + 1][1] if i + 1 < len(runs) else self.count
            if up0 <= offset < up0 + (c1 - c0):
                return first_down + (c0 - runs[0][1]) + (offset - up0)
        return None

    def durable(self) -> None:
        """The round's records are durable: fold the round into the base."""
        self.base_next, self.base_count, self.base_bytes = self.next, self.count, self.bytes
        self.base_dead_lettered = self.dead_lettered
        if self.round_state is not None:
            self.syncs = self.syncs + self.round_syncs
            self.new_sync_state = self.round_state
            self.last_pair = self.round_last
        if self.round_msgs:
            fps = [fingerprint_of(m, self.down_of(m.offset())) for m in spread(self.round_msgs)]
            last = self.last_pair
            if last is not None and fps[-1].offset == last[0]:  # its copy's offset on the target is known
                fps[-1] = dataclasses.replace(fps[-1], down=last[1])
            self.copied = spread(self.copied + fps)  # the task's first stays
        self._clear_round()

    def roll_back(self) -> None:
        """Nothing of the round in flight counts (unacknowledged, or an aborted transaction)."""
        self.next, self.count, self.bytes = self.base_next, self.base_count, self.base_bytes
        self.dead_lettered, self.refused = self.base_dead_lettered, None
        self._clear_round()

    def reset(self) -> None:
        """Nothing of this task counts: positions stay where the task started."""
        self.base_next, self.base_count, self.base_bytes, self.base_dead_lettered = self.start, 0, 0, 0
        self.syncs, self.new_sync_state, self.last_pair = [], self.sync_state, None
        self.copied = []
        self.roll_back()

    def ack_errors(self) -> list[str]:
        failed = [str(err) for i, err, _ in self.acks.failed if i not in self.settled]
        return failed + [str(k) for k in self.dlq_acks if k is not None]

    def offset_at(self, index: int) -> int:
        """The source offset of the round's `index`-th produced record (Acks), from the round's runs."""
        count = self.base_count + index
        run = bisect_right([c for _, c in self.runs], count) - 1
        up0, c0 = self.runs[run]
        return up0 + (count - c0)

    def round_refusals(self, first_only: bool = False) -> list[Refusal]:
        """The round's records the broker refused for what they are (REFUSED_ERRORS), by source offset, in order.

        `first_only` (a transaction): only the first, placed by the count of acknowledged records. Once a
        transaction failed, librdkafka reports the records it purges from its queue before the refused one (seen on
        noida-db), so a failure's place among the reports says nothing; the acknowledged records are the ones
        produced before the first refused one (the transaction stops at it), and the redo checks the size."""
        refusals = []
        for i, err, msg in self.acks.failed:
            name = _error_name(err)
            if name in REFUSED_ERRORS and i not in self.settled:
                index = self.acks.n - len(self.acks.failed) if first_only else i
                size = len(msg.value() or b"") + len(msg.key() or b"")
                record = RefusedRecord(self.offset_at(index), size, f"{name} from the target broker: {err.str()}")
                refusals.append(Refusal(record, index, msg))
                if first_only:
                    break
        return refusals

    def result(self) -> PartitionResult:
        return PartitionResult(
            self.topic,
            self.partition,
            self.remote,
            self.start,
            self.next,
            self.count,
            self.bytes,
            self.eof,
            self.hw,
            self.out_of_range,
            self.error,
            self.refused,
            self.dead_lettered,
            self.syncs,
            self.new_sync_state,
            self.last_pair,
            age_ms=self.age_ms,
            latency_ms=self.latency_ms,
            source_committed=self.source_committed,
            copied=self.copied,
            source_reconnected=self.source_reconnected,
        )


def _consumer_key(spec: JobSpec, epoch: int) -> tuple:
    return (
        "consumer",
        spec.flow,  # the flows of one engine share the Python workers: each flow keeps its own consumer
        spec.source.bootstrap_servers,
        json.dumps(dict(spec.source.config), sort_keys=True),
        epoch,
        clients.FINGERPRINTS.of(spec.source),  # a rotated credential: a new consumer (the old one dropped)
        spec.settings.rate_limit,  # a changed cap: a new consumer, its prefetch to the new cap (throttle.py)
    )


def release_consumer(spec: JobSpec, epoch: int) -> None:
    """Between tasks the flow's cached consumer fetches nothing (issue 39): left assigned, it fetched its last
    task's partitions every fetch wait (50 ms, END_READER) and buffered what arrived, until the next task assigned
    it again (which starts from the task's positions, dropping that buffer): in the driver (the heartbeat copies)
    and in every Python worker that ran a task of the flow, idle flows included."""
    for key in clients.CACHE.keys():  # whatever its settings' fingerprint (it may have changed during the task)
        if key[0] != "consumer" or key[1] != spec.flow or key[4] != epoch:
            continue
        consumer = clients.CACHE.peek(key)
        if consumer is None:
            continue
        try:
            consumer.unassign()
        except Exception:  # noqa: BLE001 - a broken consumer is the next task's to find (and replace)
            pass


def _consumer(spec: JobSpec, epoch: int = 0):
    """The cached source consumer. The driver bumps `epoch` when source topics disappear or an
    offset is out of range: librdkafka can crash on a cached consumer whose topic was deleted and
    recreated, so a fresh one is made."""
    key = _consumer_key(spec, epoch)
    if clients.CACHE.peek(key) is None:  # the flow's consumers of earlier epochs or settings are dropped
        for old in [k for k in clients.CACHE.keys() if k[0] == "consumer" and k[1] == spec.flow and k != key]:
            clients.CACHE.drop(old)
    return clients.CACHE.get(
        key,
        lambda: SourceConsumer.of(
            {**clients.consumer_config(spec.source, spec), **consumer_prefetch(spec.settings.rate_limit)}
        ),
    )


class SourceLinks:
    """The `error_cb` of the source consumer: how many times it lost its source broker (librdkafka's
    `_ALL_BROKERS_DOWN`, `_TRANSPORT`) since it was made (`lost`). Served by its consume calls, in order with its
    records: a record handed back after the count moved may come from a broker that restarted, and lost its tail
    (issue 46), so the copy stops there and the driver reads the tail back (engine/tails.py) before it goes on."""

    CODES = ("_ALL_BROKERS_DOWN", "_TRANSPORT")

    def __init__(self) -> None:
        self.lost = 0

    def __call__(self, error: Any) -> None:
        if error.name() in self.CODES:
            self.lost += 1


class SourceConsumer(Consumer):
    """The task's source consumer with its `SourceLinks` watch (`links`)."""

    links: SourceLinks

    @classmethod
    def of(cls, conf: dict[str, Any]) -> SourceConsumer:
        links = SourceLinks()
        consumer = cls({**conf, "error_cb": links})
        consumer.links = links
        return consumer


#: librdkafka errors of a producer whose metadata predates a change of the target (a remote topic grown in place,
#: or recreated): it keeps refusing the new partitions until its next metadata refresh.
STALE_METADATA = ("_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC", "UNKNOWN_TOPIC_OR_PART")
#: librdkafka errors of a producer that is unusable from then on (an idempotent producer whose broker lost its
#: sequence state at a restart: OUT_OF_ORDER_SEQUENCE_NUMBER, then `_FATAL` for every record): a new one is made.
FATAL_PRODUCER = ("_FATAL", "Fatal error", "OUT_OF_ORDER_SEQUENCE_NUMBER")


def forget_producers(spec: JobSpec) -> None:
    """Drop this process's cached producers of the job's target cluster (plain and transactional)."""
    for key in clients.CACHE.keys():
        if key[0] == "producer" and key[2] == spec.target.bootstrap_servers:
            clients.CACHE.drop(key)
        elif key[0] == "txn" and key[1] == spec.target.bootstrap_servers:
            clients.CACHE.drop(key)


def plain_producer(spec: JobSpec):
    key = (
        "producer",
        spec.flow,
        spec.target.bootstrap_servers,
        json.dumps(dict(spec.target.config), sort_keys=True),
        clients.FINGERPRINTS.of(spec.target),  # a rotated credential: a new producer (the old one dropped)
    )
    if clients.CACHE.peek(key) is None:  # the flow's producers of earlier credentials (flushed at their task's end)
        for old in [k for k in clients.CACHE.keys() if k[0] == "producer" and k[1] == spec.flow and k != key]:
            clients.CACHE.drop(old)
    return clients.CACHE.get(key, lambda: Producer(clients.producer_config(spec.target, spec)))


class BrokersLost:
    """The `error_cb` of a transactional producer: the first error by which it lost its target brokers (librdkafka's
    `_ALL_BROKERS_DOWN`, `_TRANSPORT`) since it was made, else None (`lost`). Served by the producer's flush and poll.

    A transaction that lived through such a loss is never committed (delivery.py `ExactlyOnce`): it is aborted and
    its round redone by a new producer, from the positions the target committed. Two reasons, both seen with the
    target broker stopped gracefully and started again under a stream (issue 34):
    * librdkafka 2.9 and later (confluentinc/librdkafka#5511, open in 2.16.1): once every broker was down, the client
      re-bootstraps and decommissions the brokers it knew while the group coordinator it cached stays one of them;
      `send_offsets_to_transaction` then waits for that dead coordinator forever, past its own timeout.
    * noida-db 0.2.3 aborts a transaction open at its restart on the partitions (an abort marker: its records are
      never visible) while its transaction coordinator keeps it open: the offsets sent afterwards and the commit are
      accepted, so committing it would record positions past records that are not on the target. Apache Kafka keeps
      the transaction open across a restart; aborting it there is as correct.

    At the loss the producer's records still queued or in flight are purged (`purge`, given the producer's): sent
    after noida-db's restart they would sit in a transaction its coordinator no longer ends (no marker: the
    partition's last stable offset stays there, and read_committed readers see nothing after it); the transaction is
    aborted anyway."""

    CODES = ("_ALL_BROKERS_DOWN", "_TRANSPORT")

    def __init__(self, purge: Callable[[], None] = lambda: None) -> None:
        self.lost: str | None = None
        self.purge = purge

    def __call__(self, error: Any) -> None:
        if self.lost is None and error.name() in self.CODES:
            self.lost = f"{error.name()}: {error.str()}"
            self.purge()


class TxnProducer(Producer):
    """A transactional producer with its `BrokersLost` watch (`brokers_lost`)."""

    brokers_lost: BrokersLost
    fingerprint: str  # of the target's resolved settings it was made with (clients.Fingerprints)

    @classmethod
    def of(cls, conf: dict[str, Any]) -> TxnProducer:
        watch = BrokersLost()
        producer = cls({**conf, "error_cb": watch})
        producer.brokers_lost = watch
        watch.purge = lambda: producer.purge(in_queue=True, in_flight=True, blocking=False)
        return producer


def txn_producer(spec: JobSpec, txn_id: str, last_owner: str | None):
    """The slot's transactional producer, reused only if this process was the last to use the id.

    Another process that took the id since has fenced ours; re-initialising costs one
    InitProducerId round trip, so the driver tells us who used it last.

    A producer made with other credentials (the target's settings resolve to another fingerprint: a rotated
    secret) is replaced the same way: the new producer's init_transactions fences the old one's epoch and aborts
    any transaction of the id still open, so nothing it sent becomes visible twice (between tasks there is none:
    each round's transaction is committed or aborted within its task).
    """
    key = ("txn", spec.target.bootstrap_servers, txn_id)
    fp = clients.FINGERPRINTS.of(spec.target)
    cached = clients.CACHE.peek(key)
    if cached is not None and last_owner == clients.process_identity() and getattr(cached, "fingerprint", fp) == fp:
        return cached
    if cached is not None:
        clients.CACHE.drop(key)
    producer = TxnProducer.of(clients.producer_config(spec.target, spec, transactional_id=txn_id))
    producer.fingerprint = fp
    producer.init_transactions(30)
    clients.CACHE.put(key, producer)
    return producer


def group_metadata(spec: JobSpec):
    """Consumer-group metadata of the job's offsets group on the target (send_offsets_to_transaction)."""
    from confluent_kafka import Consumer

    key = ("group-meta", spec.target.bootstrap_servers, job_group(spec), clients.FINGERPRINTS.of(spec.target))
    if clients.CACHE.peek(key) is None:  # the one of earlier credentials
        for old in [k for k in clients.CACHE.keys() if k[:3] == key[:3] and k != key]:
            clients.CACHE.drop(old)
    consumer = clients.CACHE.get(key, lambda: Consumer(clients.consumer_config(spec.target, spec)))
    return consumer.consumer_group_metadata()


class CopyMode(Protocol):
    """The worker side of a delivery mode (see delivery.py): copy one task's partitions."""

    def copy(self, spec: JobSpec, task: CopyTask, parts: list[PartitionCopy], result: TaskResult) -> None: ...


def copy_task(spec: JobSpec, task: CopyTask, mode: CopyMode) -> TaskResult:
    """Copy one slot's partitions for one micro-batch; never raises."""
    started = time.time()
    result = TaskResult(task.slot, clients.process_identity())
    parts = [PartitionCopy.of(t) for t in task.partitions]
    try:
        mode.copy(spec, task, parts, result)
    except Exception as exc:  # noqa: BLE001 - reported to the driver
        result.error = f"{type(exc).__name__}: {exc}"
        result.traceback = traceback.format_exc(limit=8)
    release_consumer(spec, task.consumer_epoch)
    if result.error and any(code in result.error for code in STALE_METADATA + FATAL_PRODUCER):
        forget_producers(spec)  # the next task's producer reads the target's partitions afresh, or is a new one
    result.partitions = [p.result() for p in parts]
    result.duration_ms = int((time.time() - started) * 1000)
    return result


def run_tasks(spec: JobSpec, tasks: Iterable[CopyTask], mode: CopyMode) -> Iterator[TaskResult]:
    """mapPartitions body: one result per task."""
    for task in tasks:
        yield copy_task(spec, task, mode)


class Copier:
    """One task's reading: the cached source consumer assigned to the task's partitions, copied
    into `producer` in rounds (`run`), until the task's deadline or until it is idle."""

    def __init__(
        self,
        spec: JobSpec,
        parts: list[PartitionCopy],
        producer: Any,
        epoch: int = 0,
        max_round_s: float = MAX_ROUND_S,
        at_end_only: bool = False,
        budget: TaskBudget | None = None,
    ):
        from confluent_kafka import KafkaError, TopicPartition

        self.consumer = _consumer(spec, epoch)
        links = getattr(self.consumer, "links", None)
        self.links = links if isinstance(links, SourceLinks) else SourceLinks()
        self.links_lost = self.links.lost  # the source broker losses seen before this task (the driver knows them)
        self.parts = parts
        self.producer = producer
        self.max_round_s = max_round_s
        # How long the task lingers once caught up (CopyTask.at_end_only: not at all).
        self.idle_end_s, self.min_task_s = (0.0, 0.0) if at_end_only else (IDLE_END_S, IDLE_MIN_TASK_S)
        self.idle_end_stream_s = 0.0 if at_end_only else IDLE_END_STREAM_S
        self.at_end_only = at_end_only
        self.first_copy = self.last_copy = 0.0  # when the task first and last copied a record (0.0: not yet)
        self.budget = spec.engine.max_records_per_partition
        self.throttle = Throttle.of(budget)  # the task's share of the flow's rate_limit (None: not paced)
        self.by_tp = {(p.topic, p.partition): p for p in parts}
        dead_letters = (
            dead_letters_topic_name(spec) if spec.settings.on_refused_record == OnRefusedRecord.SKIP else None
        )
        for p in parts:
            p.dead_letters = dead_letters
        self.active = len(parts)  # partitions neither paused (budget spent, refused) nor out of range
        self.retired: set[TP] = set()  # ... and the others
        # A partition spent its record budget: it has more to copy, in the next task, so the task ends as soon as
        # its other partitions are caught up instead of lingering for them (a trickle such as the heartbeats
        # partition would otherwise keep it alive to its deadline: a one-partition backlog then copied a budget
        # per `max_batch_ms`, 125k records/s instead of 300k).
        self.spent = False
        self.behind = len(parts)  # active partitions that have not reached their end in this round
        self.last_record = self.started = time.time()
        self._eof = KafkaError._PARTITION_EOF
        self._tp = TopicPartition
        self.consumer.assign([TopicPartition(p.topic, p.partition, p.start) for p in parts])
        # A partition an earlier task paused (its record budget spent) stays paused in librdkafka across
        # unassign and assign: this cached consumer would never read it again.
        self.consumer.resume([TopicPartition(p.topic, p.partition) for p in parts])

    def run(self, deadline: float) -> bool:
        """Copy one round. The round ends (False) once every partition is caught up after ROUND_S,
        or after `max_round_s` (MAX_ROUND_S unless the mode says otherwise); the task ends (True)
        at `deadline`, when every partition is paused, or when every partition is caught up and
        nothing arrived for `idle_end()` (IDLE_END_S; IDLE_END_STREAM_S while a stream flows), or at
        once when every partition is caught up and the task is `at_end_only` or a partition spent its budget.

        "Caught up" is per round: every active partition reached its end at least once since the
        round began: an end-of-partition event (a fetch found nothing more), or its `end` (the end read
        before a split backlog's batch). At a slow rate a partition reaches its end many times a second,
        so a round lasts about ROUND_S; under a backlog none does, nor under a stream whose records come
        faster than a fetch waits for them (every fetch finds one), so a round (and an exactly-once
        transaction) lasts `max_round_s` or until the task's deadline."""
        self.behind = 0
        for part in self.parts:  # still at its end: nothing copied since its last end-of-partition event
            part.at_end = (part.eof and part.next == part.hw) or part.passed_end
            if not part.paused and not part.at_end:
                self.behind += 1
        self.last_record = began = time.time()  # time between rounds (a commit, a flush) is not idleness
        soft_deadline, round_deadline = began + ROUND_S, began + self.max_round_s
        consume = self.consumer.consume
        produce, poll = self.producer.produce, self.producer.poll
        throttle, most = self.throttle, CONSUME_BATCH
        while True:
            now = time.time()
            if now >= deadline or self.active == 0 or (self.behind == 0 and (self.at_end_only or self.spent)):
                return True
            if now >= round_deadline:
                return False
            if throttle is not None:  # the flow's rate_limit: read no more than the task's share allows now
                most, wait = throttle.allowance(CONSUME_BATCH)
                if not most:
                    poll(min(wait, deadline - now, round_deadline - now))  # delivery reports served meanwhile
                    continue
            # Drain what is there without waiting; only when nothing is, wait for the next event
            # (consume(n, t) waits for n messages or t, which would idle at the end of a batch).
            msgs = consume(most, 0)
            if self.links.lost != self.links_lost:
                self.source_lost()
                return True
            if not msgs:
                if (
                    self.behind == 0
                    and now - self.last_record >= self.idle_end()
                    and now - self.started >= self.min_task_s
                ):
                    return True
                poll(0)
                msgs = consume(1, min(deadline - now, 0.05))
                if self.links.lost != self.links_lost:
                    self.source_lost()
                    return True
                if not msgs:
                    continue
            copied = self._copy(msgs, produce, poll)
            if throttle is not None:
                throttle.spent(*copied)
            if self.behind == 0 and time.time() >= soft_deadline:
                return False

    def _copy(self, msgs: list, produce: Any, poll: Any) -> tuple[int, int]:
        """Copy what one `consume` handed back: each partition's run of records (`_copy_run`, the hot path), its
        events (`_on_event`: its end, out of range); a partition whose record budget is spent is paused. Returns the
        records copied and their bytes (keys and values)."""
        by_tp, budget, eof_code = self.by_tp, self.budget, self._eof
        sample_every = LATENCY_SAMPLE_EVERY - 1
        records = nbytes = 0
        read_ms = int(time.time() * 1000)  # for the sampled records' age when read
        i, n = 0, len(msgs)
        while i < n:
            m = msgs[i]
            err = m.error()
            p = by_tp.get((m.topic(), m.partition()))
            if p is None or err is not None or p.paused:
                i += 1
                if p is not None and err is not None:
                    self._on_event(p, m, err, eof_code)
                continue  # p None: stale, from an earlier assignment of this cached consumer
            before, before_bytes, sampled = p.count, p.bytes, len(p.ts_samples)
            i = _copy_run(p, msgs, i, n, produce, poll, budget, sample_every)
            if p.count != before:
                records += p.count - before
                nbytes += p.bytes - before_bytes
                if not p.at_end and p.passed_end:
                    p.at_end = True
                    self.behind -= 1
                if len(p.ts_samples) > sampled:  # record age when read (MM2's record-age-ms), per sample
                    p.age_ms.extend(read_ms - ts for ts in p.ts_samples[sampled:])
            if p.paused:  # record budget spent
                self.consumer.pause([self._tp(p.topic, p.partition)])
                self._retire(p)
                self.spent = True
        poll(0)
        if records:
            self.last_record = self.last_copy = time.time()
            self.first_copy = self.first_copy or self.last_copy
        return records, nbytes

    def source_lost(self) -> None:
        """The consumer lost its source broker: the task ends here, the records handed back with the news not
        copied (they may come from a broker that restarted without its tail). Every partition says so
        (`PartitionResult.source_reconnected`): the driver reads their tails back before copying on."""
        self.links_lost = self.links.lost
        for p in self.parts:
            p.source_reconnected = True

    def idle_end(self) -> float:
        """How long nothing may arrive, every partition caught up, before the task ends early: IDLE_END_S, or
        IDLE_END_STREAM_S once the task has been copying a stream (records over STREAM_S or more)."""
        return self.idle_end_stream_s if self.last_copy - self.first_copy >= STREAM_S else self.idle_end_s

    def _retire(self, p: PartitionCopy) -> None:
        if (p.topic, p.partition) in self.retired:
            return
        self.retired.add((p.topic, p.partition))
        self.active -= 1
        if not p.at_end:
            self.behind -= 1

    def stop(self, p: PartitionCopy) -> None:
        """Read no more of `p` in this task (a record the broker refused settled by `fail`: it stopped there)."""
        p.paused = True
        self.consumer.pause([self._tp(p.topic, p.partition)])
        self._retire(p)

    def rewind(self) -> None:
        """Read every partition again from its position (`next`, after a roll back): an exactly-once round aborted
        for records the broker refused is redone, those records known (`PartitionCopy.known_refused`). Partitions
        paused in the aborted round (record budget, a refused record) are read again: what paused them was rolled
        back and happens again."""
        resumed = []
        for p in self.parts:
            if p.out_of_range is not None:
                continue
            tp = (p.topic, p.partition)
            if tp in self.retired:
                self.retired.discard(tp)
                self.active += 1
                p.paused = False
                resumed.append(self._tp(p.topic, p.partition))
        if resumed:
            self.consumer.resume(resumed)
        for p in self.parts:
            if p.out_of_range is None:
                self.consumer.seek(self._tp(p.topic, p.partition, p.next if p.next >= 0 else OFFSET_BEGINNING))
        self.spent = False

    def _on_event(self, p: PartitionCopy, m: Any, err: Any, eof_code: int) -> None:
        """A consumer event for a partition: its end (caught up), out of range, or a transient error."""
        from confluent_kafka import KafkaError

        code = err.code()
        if code == eof_code:
            off = m.offset()
            if p.paused or off < max(p.start, 0) or off < p.next:
                return  # stale (before this task's start or before records already copied)
            p.eof = True
            p.hw = off
            p.next = off  # read to the end: what lies between is not data (transaction markers)
            if not p.at_end:
                p.at_end = True
                self.behind -= 1
        elif code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            if p.out_of_range is None and not p.paused:
                p.out_of_range = err.str()
                p.paused = True
                self._retire(p)
        else:
            p.error = err.str()  # transient (librdkafka retries); reported

    def commit(self, positions: Mapping[TP, int], *, asynchronous: bool) -> dict[TP, str]:
        """Commit next offsets to the job's group on the source with the task's own consumer (its
        `group.id` is the job's group); errors per partition come back, never raised. A synchronous
        commit returns once the broker answered it, and so every asynchronous commit made before
        it on this consumer (one coordinator connection, requests answered in order)."""
        if not positions:
            return {}
        offsets = [self._tp(t, p, o) for (t, p), o in positions.items()]
        try:
            answered = self.consumer.commit(offsets=offsets, asynchronous=asynchronous)
        except Exception as exc:  # noqa: BLE001 - reported; the driver commits at the task's end
            return {tp: f"{type(exc).__name__}: {exc}" for tp in positions}
        return {(tp.topic, tp.partition): str(tp.error) for tp in answered or () if tp.error is not None}

    def budget_left(self) -> tuple[tuple[float, float] | None, float | None]:
        """A paced task's tokens now (`Throttle.left`), for the flow's next batch, and when (wall clock: the flow
        refills them from then); (None, None): not paced."""
        if self.throttle is None:
            return None, None
        return self.throttle.left(), time.time()

    def close(self) -> None:
        consumer = self.consumer
        try:
            consumer.unassign()
        except Exception:  # noqa: BLE001
            pass
        for p in self.parts:
            if p.hw is None:
                try:
                    low, high = consumer.get_watermark_offsets(self._tp(p.topic, p.partition), cached=True)
                    p.hw = high if high >= 0 else None
                except Exception:  # noqa: BLE001
                    p.hw = None


def _copy_run(
    p: PartitionCopy, msgs: list, i: int, n: int, produce: Any, poll: Any, budget: int, sample_every: int
) -> int:
    """Copy the records of partition `p` from msgs[i] on, while they are its records; returns the
    index of the first message not handled. The hot path: state in locals, each Message accessor
    called once, no allocation per record beyond what the client makes, headers passed only when
    there are some (an explicit `headers=None` costs a third of a produce call), delivery reports
    into a dict through its C-level method."""
    topic, part, remote, limit = p.topic, p.partition, p.remote, p.limit
    nxt, count, nbytes = p.next, p.count, p.bytes
    samples, runs, known = p.ts_samples, p.runs, p.known_refused
    cb = p.acks.report
    new_run = not runs
    last_m = None
    while i < n:
        m = msgs[i]
        if m.error() is not None or m.partition() != part or m.topic() != topic:
            break
        i += 1
        off = m.offset()
        if off != nxt or new_run:
            if off < nxt:
                continue  # a prefetched record before our position (cached consumer)
            runs.append((off, count))
            new_run = False
        value = m.value()
        key = m.key()
        ts = m.timestamp()[1]
        headers = m.headers()
        size = (len(value) if value else 0) + (len(key) if key else 0)
        refused = f"larger than the remote topic {remote} takes ({size} bytes)" if size > limit else None
        if known and refused is None and off in known and known[off].size == size:
            refused = known[off].reason  # refused by the broker in an aborted round of this task
        if refused is None:
            try:
                if headers:
                    produce(remote, value, key, part, on_delivery=cb, timestamp=ts, headers=headers)
                else:
                    produce(remote, value, key, part, on_delivery=cb, timestamp=ts)
            except BufferError:
                _produce_when_room(produce, poll, remote, value, key, part, cb, ts, headers)
            except Exception as exc:  # the producer's own check (message.max.bytes): refused before it is sent
                refused = _refusal(exc)
                if refused is None:
                    raise
        if refused is not None:
            if runs and runs[-1][1] == count:
                runs.pop()  # the run this record began holds no record
            if not _refuse(p, m, off, size, refused, produce, poll):
                break  # `fail`: the partition stops at this record (`p.refused`; `next` stays its offset)
            nxt = off + 1  # `skip`: written to the dead-letter topic; the next record begins a new run
            new_run = True
            continue
        count += 1
        nbytes += size
        nxt = off + 1
        last_m = m
        if not (count & sample_every):
            samples.append(ts)
        if count >= budget:  # per partition and task
            samples.append(ts)
            p.paused = True
            break
    p.next, p.count, p.bytes = nxt, count, nbytes
    if last_m is not None:
        keep_sample(p.round_msgs, last_m)
    return i


def keep_sample(kept: list[Any], m: Any) -> None:
    """Keep `m` (the last record of a run of the copy loop) among the round's samples: at most 2 x RING_SIZE, the
    older half thinned by every other one as it fills, the round's first always kept, so the samples reach back
    over the whole round with gaps growing with age."""
    kept.append(m)
    if len(kept) > 2 * RING_SIZE:
        del kept[1:RING_SIZE:2]


def _error_name(err: Any) -> str | None:
    name = getattr(err, "name", None)
    return name() if callable(name) else None


def _refusal(exc: Exception) -> str | None:
    """The text of a refusal (REFUSED_ERRORS) a produce call raised; None for any other error."""
    err: Any = exc.args[0] if exc.args else None
    name = _error_name(err)
    if name in REFUSED_ERRORS:
        return f"{name}: {err.str()}"
    return None


def _refuse(p: PartitionCopy, m: Any, off: int, size: int, reason: str, produce: Any, poll: Any) -> bool:
    """A record the target refuses (`on_refused_record`): `skip` writes a reference to it to the dead-letter topic
    (its key and headers, Kafka Connect's error headers, no value: the value is what the target refused) and the
    partition copies on (True); `fail` stops the partition at it (False, `p.refused`, paused). `m` is the source
    record, or the delivery report of a record the broker refused (at-least-once, `settle_refusals`), which has lost
    the record's headers and timestamp: that reference has the key only, and the time it is written."""
    if p.dead_letters is None:
        p.refused = RefusedRecord(off, size, reason)
        p.paused = True
        return False
    ts = max(m.timestamp()[1], 0)  # 0: the producer's clock
    headers = list(m.headers() or []) + [
        (DLQ_TOPIC, p.topic.encode()),
        (DLQ_PARTITION, str(p.partition).encode()),
        (DLQ_OFFSET, str(off).encode()),
        (DLQ_MESSAGE, reason.encode()),
        (DLQ_CLASS, b"RecordRefused"),
    ]
    args = (p.dead_letters, None, m.key(), 0)
    try:
        produce(*args, on_delivery=p.dlq_acks.__setitem__, timestamp=ts, headers=headers)
    except BufferError:
        _produce_when_room(produce, poll, *args, p.dlq_acks.__setitem__, ts, headers)
    p.dead_lettered += 1
    return True


def _produce_when_room(
    produce: Any, poll: Any, remote: str, value: Any, key: Any, part: int, cb: Any, ts: int, headers: Any
) -> None:
    """The producer's queue is full: serve delivery reports until the record fits (order is kept:
    nothing else is produced meanwhile)."""
    give_up = time.time() + PRODUCE_RETRY_S
    while True:
        poll(0.05)
        try:
            if headers:
                produce(remote, value, key, part, on_delivery=cb, timestamp=ts, headers=headers)
            else:
                produce(remote, value, key, part, on_delivery=cb, timestamp=ts)
            return
        except BufferError:
            if time.time() > give_up:
                raise


def settle_refusals(p: PartitionCopy, produce: Any, poll: Any) -> bool:
    """At-least-once, after the round's acknowledgements: records the broker refused (their delivery reports, a
    refusal the limit read at the last refresh did not predict) are settled by the policy, as a predicted refusal
    is, while the records acknowledged around them are kept (they are on the target: copying the round again would
    copy them twice). `skip`: each refused record's reference goes to the dead-letter topic (acknowledged before the
    round is durable) and the partition's position stays past the round. `fail`: the partition stops at the first
    refused record (`p.refused`; its position is that record's offset); the records after it the broker took are on
    the target, and are copied again if the partition is resumed there. False when a delivery failed otherwise (the
    round fails as any failed round: nothing settled)."""
    refusals = p.round_refusals()
    if not refusals or len(refusals) != len(p.acks.failed):
        return False
    p.settled = frozenset(r.index for r in refusals)
    p.count -= len(refusals)
    p.bytes -= sum(r.record.size for r in refusals)
    for r in refusals:
        if not _refuse(p, r.message, r.record.offset, r.record.size, r.record.reason, produce, poll):
            p.next = r.record.offset  # `fail`: stopped there
            break
    return True


def finish_round(
    spec: JobSpec,
    parts: list[PartitionCopy],
    producer: Any,
    result: TaskResult,
    flush_timeout: float,
    settle: bool = False,
) -> bool:
    """Wait for every acknowledgement of the round; with `settle` (at-least-once), settle the records the broker
    refused by the policy (`settle_refusals`); take latency samples (record age at acknowledgement) and plan the
    round's offset syncs. False on any failure."""
    left = producer.flush(flush_timeout)
    if left == 0 and settle:
        settled = [p for p in parts if p.acks.failed and settle_refusals(p, producer.produce, producer.poll)]
        if settled:
            left = producer.flush(flush_timeout)  # the dead-letter records
    now_ms = int(time.time() * 1000)
    ok = left == 0
    if not ok:
        result.error = f"{left} records not acknowledged within {flush_timeout:.0f}s"
    for p in parts:
        errors = p.ack_errors()
        if errors:
            ok = False
            p.error = f"delivery failed: {errors[0]}" + (f" (+{len(errors) - 1} more)" if len(errors) > 1 else "")
        if p.ts_samples:
            latency = [now_ms - ts for ts in p.ts_samples]
            p.latency_ms.extend(latency)
            result.latency_ms.extend(latency)
            p.ts_samples = []
    if ok:
        for p in parts:
            if p.round_count:
                _plan_syncs(spec, p)
    elif not result.error:
        result.error = next(p.error for p in parts if p.error)
    return ok


def _plan_syncs(spec: JobSpec, p: PartitionCopy) -> None:
    """The round's offset syncs (MM2 rules, from the durable sync state on), its new sync state
    and its last (upstream, downstream) pair."""
    state = state_from_list(p.new_sync_state, spec.settings.offset_lag_max)
    n = p.round_count
    first: Any = p.acks.first
    last: Any = p.acks.last
    if last is None:
        return  # every record of the round refused (settled), or not reached
    first_down = first.offset() if first is not None else None
    last_down = last.offset()
    runs = p.runs
    if p.settled:  # records refused in the round: the last acknowledged one is the one mapping known for sure
        last_up = p.offset_at(max(i for i in range(p.acks.n) if i not in p.settled))
        first_down = None
    else:
        last_up = runs[-1][0] + (p.count - runs[-1][1]) - 1
    syncs: list[tuple[int, int]] = []
    if first_down is None or last_down - first_down != n - 1:
        # Downstream offsets not consecutive (should not happen with one idempotent producer):
        # publish the one mapping we know for sure, the last record.
        state.update(last_up, last_down)
        syncs.append((last_up, last_down))
        state.last_sync_downstream_offset = last_down
    else:
        down = first_down
        ends = [c for _, c in runs[1:]] + [p.count]
        for (up0, c0), c1 in zip(runs, ends, strict=True):
            syncs += plan_run(state, up0, down, c1 - c0)
            down += c1 - c0
    p.round_syncs = syncs
    p.round_state = state_to_list(state)
    p.round_last = (last_up, last_down)
    p.round_first_down = None if first_down is None or last_down - first_down != n - 1 else first_down
