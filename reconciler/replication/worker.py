"""The copy function that runs inside a Spark Python worker: consumer -> producer, no JVM in between.

The driver plans one task per slot each micro-batch: a list of source partitions with the offset
to start from. The worker reads each partition from its start offset until it is caught up (the
consumer reports end-of-partition), or until the per-partition record budget or the batch time
budget is spent. It does not trust a high watermark as an end bound (Tansu's ListOffsets answers
the base offset of the last batch + 1, which would strand the tail of an idle partition).

Every record is written to the same partition of the remote topic with its key, value, headers
and timestamp. Then:

What happens after the copy is the delivery mode's (delivery.py, one object per mode):

* at-least-once: the producer is flushed and every delivery checked; the result tells the
  driver the next offset per partition, and the driver commits them on the source cluster;
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

import json
import time
import traceback
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciler.contract.spec import JobSpec, job_group
from reconciler.replication import clients
from reconciler.replication.sync_plan import plan_run, state_from_list, state_to_list
from reconciler.replication.tasks import CopyTask, PartitionResult, PartitionTask, TaskResult

OFFSET_BEGINNING = -2
LATENCY_SAMPLE_EVERY = 64  # one record in 64 (plus the last of each partition) is timed


@dataclass
class PartitionCopy:
    topic: str
    partition: int
    remote: str
    start: int
    sync_state: list[int] | None
    next: int = -1  # next upstream offset to copy
    count: int = 0
    bytes: int = 0
    eof: bool = False
    hw: int | None = None
    paused: bool = False
    out_of_range: str | None = None
    error: str | None = None
    runs: list[list[int]] = field(default_factory=list)  # [upstream start, length] of consecutive offsets
    first_dr: Any = None
    last_dr: Any = None
    dr_errors: list[str] = field(default_factory=list)
    ts_samples: list[int] = field(default_factory=list)
    age_ms: list[int] = field(default_factory=list)  # per sample: read time - record timestamp
    latency_ms: list[int] = field(default_factory=list)  # per sample: acknowledgement - record timestamp
    syncs: list[tuple[int, int]] = field(default_factory=list)  # offset syncs planned after acknowledgement
    new_sync_state: list[int] | None = None
    last_pair: tuple[int, int] | None = None  # last replicated (upstream, downstream)

    @classmethod
    def of(cls, t: PartitionTask) -> PartitionCopy:
        return cls(t.topic, t.partition, t.remote, t.start, t.sync_state, new_sync_state=t.sync_state)

    def roll_back(self) -> None:
        """Nothing of this batch counts (unacknowledged, or an aborted transaction): positions stay."""
        self.next = self.start
        self.count = 0
        self.syncs = []
        self.new_sync_state = self.sync_state
        self.last_pair = None

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
            self.syncs,
            self.new_sync_state,
            self.last_pair,
            age_ms=self.age_ms,
            latency_ms=self.latency_ms,
        )

    def dr_first(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.dr_errors.append(str(err))
        else:
            self.first_dr = msg
            self.last_dr = msg if self.last_dr is None else self.last_dr

    def dr(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.dr_errors.append(str(err))
        else:
            self.last_dr = msg


def _consumer(spec: JobSpec, epoch: int = 0):
    """The cached source consumer. The driver bumps `epoch` when source topics disappear or an
    offset is out of range: librdkafka can crash on a cached consumer whose topic was deleted and
    recreated, so a fresh one is made."""
    from confluent_kafka import Consumer

    key = (
        "consumer",
        spec.source.alias,
        spec.source.bootstrap_servers,
        json.dumps(dict(spec.source.config), sort_keys=True),
        epoch,
    )
    if clients.CACHE.peek(key) is None:
        for old in [k for k in clients.CACHE.keys() if k[0] == "consumer" and k != key]:
            clients.CACHE.drop(old)
    return clients.CACHE.get(key, lambda: Consumer(clients.consumer_config(spec.source, spec)))


def plain_producer(spec: JobSpec):
    from confluent_kafka import Producer

    key = (
        "producer",
        spec.target.alias,
        spec.target.bootstrap_servers,
        json.dumps(dict(spec.target.config), sort_keys=True),
    )
    return clients.CACHE.get(key, lambda: Producer(clients.producer_config(spec.target, spec)))


def txn_producer(spec: JobSpec, txn_id: str, last_owner: str | None):
    """The slot's transactional producer, reused only if this process was the last to use the id.

    Another process that took the id since has fenced ours; re-initialising costs one
    InitProducerId round trip, so the driver tells us who used it last.
    """
    from confluent_kafka import Producer

    key = ("txn", spec.target.bootstrap_servers, txn_id)
    cached = clients.CACHE.peek(key)
    if cached is not None and last_owner == clients.process_identity():
        return cached
    if cached is not None:
        clients.CACHE.drop(key)
    producer = Producer(clients.producer_config(spec.target, spec, transactional_id=txn_id))
    producer.init_transactions(30)
    clients.CACHE.put(key, producer)
    return producer


def group_metadata(spec: JobSpec):
    """Consumer-group metadata of the job's offsets group on the target (send_offsets_to_transaction)."""
    from confluent_kafka import Consumer

    key = ("group-meta", spec.target.bootstrap_servers, job_group(spec))
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
    result.partitions = [p.result() for p in parts]
    result.duration_ms = int((time.time() - started) * 1000)
    return result


def run_tasks(spec: JobSpec, tasks: Iterable[CopyTask], mode: CopyMode) -> Iterator[TaskResult]:
    """mapPartitions body: one result per task."""
    for task in tasks:
        yield copy_task(spec, task, mode)


def read_and_produce(spec: JobSpec, parts: list[PartitionCopy], producer: Any, deadline: float, epoch: int = 0) -> None:
    """The hot loop: consume from the assigned partitions and produce each record as it comes."""
    from confluent_kafka import KafkaError, TopicPartition

    consumer = _consumer(spec, epoch)
    by_tp = {(p.topic, p.partition): p for p in parts}
    consumer.assign([TopicPartition(p.topic, p.partition, p.start) for p in parts])
    budget = spec.engine.max_records_per_partition
    active = len(parts)
    EOF = KafkaError._PARTITION_EOF
    produce = producer.produce
    poll = producer.poll
    sample_every = LATENCY_SAMPLE_EVERY - 1
    try:
        while active > 0:
            remaining = deadline - time.time()
            if remaining <= 0:
                break
            # Drain what is there without waiting; only when nothing is, wait for the next event
            # (consume(n, t) waits for n messages or t, which would idle at the end of a batch).
            msgs = consumer.consume(10_000, 0)
            if not msgs:
                msgs = consumer.consume(1, min(remaining, 0.1))
            read_ms = int(time.time() * 1000)  # for the sampled records' age when read
            i, n = 0, len(msgs)
            while i < n:
                m = msgs[i]
                err = m.error()
                p = by_tp.get((m.topic(), m.partition()))
                if p is None or err is not None or p.paused:
                    i += 1
                    if p is not None and err is not None:
                        active -= _on_event(p, m, err, EOF)
                    continue  # p None: stale, from an earlier assignment of this cached consumer
                sampled = len(p.ts_samples)
                i = _copy_run(p, msgs, i, n, produce, poll, budget, sample_every)
                if len(p.ts_samples) > sampled:  # record age when read (MM2's record-age-ms), per sample
                    p.age_ms.extend(read_ms - ts for ts in p.ts_samples[sampled:])
                if p.paused:  # record budget spent
                    consumer.pause([TopicPartition(p.topic, p.partition)])
                    active -= 1
            poll(0)
    finally:
        try:
            consumer.unassign()
        except Exception:  # noqa: BLE001
            pass
    for p in parts:
        if p.next < 0:
            p.next = p.start  # nothing read (may be -2: still "from the beginning")
        if p.hw is None:
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(p.topic, p.partition), cached=True)
                p.hw = high if high >= 0 else None
            except Exception:  # noqa: BLE001
                p.hw = None


def _on_event(p: PartitionCopy, m: Any, err: Any, eof_code: int) -> int:
    """A consumer event for a partition; returns 1 when the partition is done for this batch."""
    from confluent_kafka import KafkaError

    code = err.code()
    if code == eof_code:
        if not p.paused and not p.eof and m.offset() >= max(p.start, 0):
            p.eof = True
            p.hw = m.offset()
            if p.next < m.offset():
                p.next = m.offset()  # read to the end: what lies between is not data (txn markers)
            return 1
    elif code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
        if p.out_of_range is None and not p.paused:
            p.out_of_range = err.str()
            p.paused = True
            return 1
    else:
        p.error = err.str()  # transient (librdkafka retries); reported
    return 0


def _copy_run(
    p: PartitionCopy, msgs: list, i: int, n: int, produce: Any, poll: Any, budget: int, sample_every: int
) -> int:
    """Copy the records of partition `p` from msgs[i] on, while they are its records; returns the
    index of the first message not handled. State lives in locals (the hot path)."""
    topic, part, remote = p.topic, p.partition, p.remote
    nxt, count, nbytes = p.next, p.count, p.bytes
    runs, samples, dr, dr_first = p.runs, p.ts_samples, p.dr, p.dr_first
    run = runs[-1] if runs else None
    while i < n:
        m = msgs[i]
        if m.error() is not None or m.partition() != part or m.topic() != topic:
            break
        i += 1
        off = m.offset()
        if off < nxt:
            continue  # a prefetched record before our start (cached consumer)
        if nxt < 0:
            nxt = off if p.start < 0 else p.start
        if off != nxt or run is None:
            run = [off, 0]
            runs.append(run)
        run[1] += 1
        value = m.value()
        key = m.key()
        ts = m.timestamp()[1]
        cb = dr if count else dr_first
        try:
            produce(remote, value, key, part, on_delivery=cb, timestamp=ts, headers=m.headers())
        except BufferError:
            poll(0.05)
            produce(remote, value, key, part, on_delivery=cb, timestamp=ts, headers=m.headers())
        count += 1
        if value:
            nbytes += len(value)
        if key:
            nbytes += len(key)
        nxt = off + 1
        if not (count & sample_every):
            samples.append(ts)
        if count >= budget:
            samples.append(ts)
            p.paused = True
            break
    p.next, p.count, p.bytes = nxt, count, nbytes
    return i


def finish_deliveries(
    spec: JobSpec, parts: list[PartitionCopy], producer: Any, result: TaskResult, flush_timeout: float
) -> bool:
    """Wait for every acknowledgement; compute latency samples and offset syncs. False on any failure."""
    left = producer.flush(flush_timeout)
    now_ms = int(time.time() * 1000)
    ok = left == 0
    if not ok:
        result.error = f"{left} records not acknowledged within {flush_timeout:.0f}s"
    for p in parts:
        if p.dr_errors:
            ok = False
            p.error = f"delivery failed: {p.dr_errors[0]}" + (
                f" (+{len(p.dr_errors) - 1} more)" if len(p.dr_errors) > 1 else ""
            )
        p.latency_ms = [now_ms - ts for ts in p.ts_samples]
        result.latency_ms.extend(p.latency_ms)
        if p.count and p.last_dr is not None and ok:
            _plan_syncs(spec, p)
    if not ok and not result.error:
        result.error = next(p.error for p in parts if p.error)
    return ok


def _plan_syncs(spec: JobSpec, p: PartitionCopy) -> None:
    state = state_from_list(p.sync_state, spec.settings.offset_lag_max)
    first_down = p.first_dr.offset() if p.first_dr is not None else None
    last_down = p.last_dr.offset()
    syncs: list[tuple[int, int]] = []
    if first_down is None or last_down - first_down != p.count - 1:
        # Downstream offsets not consecutive (should not happen with one idempotent producer):
        # publish the one mapping we know for sure, the last record.
        last_up = p.runs[-1][0] + p.runs[-1][1] - 1
        state.update(last_up, last_down)
        syncs.append((last_up, last_down))
        state.last_sync_downstream_offset = last_down
    else:
        down = first_down
        for up0, n in p.runs:
            syncs += plan_run(state, up0, down, n)
            down += n
    p.syncs = syncs
    p.new_sync_state = state_to_list(state)
    p.last_pair = (p.runs[-1][0] + p.runs[-1][1] - 1, last_down)
