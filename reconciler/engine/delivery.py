"""The delivery mode as one object per mode: everything at-least-once and exactly-once do
differently, on the driver (start, commit, recovery), in the offset store (where positions live)
and in the worker (how a batch is made durable), in one place each.

* `AtLeastOnce`: the worker flushes the plain idempotent producer and checks every delivery at the
  end of each round, and commits the acknowledged next offsets to the job's group on the SOURCE
  cluster as it goes (`SourceProgress`: at most every PROGRESS_COMMIT_S, and rounds last at most
  that long); the driver commits the task's final positions there after the task (after
  acknowledgement, so a crash replays at most about a round, never loses).
* `ExactlyOnce` (KIP-656): every transactional id is fenced at start; the worker writes the records
  and the next source offsets (the job's group on the TARGET cluster) in one transaction; after a
  failed batch the driver re-reads the committed positions from the target (the truth).

`mode_of(spec)` picks the object; the objects hold no state (they travel to Spark workers).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from reconciler import settings
from reconciler.contract.spec import JobSpec, transactional_id
from reconciler.engine import clients
from reconciler.engine.offsets import PATIENT, Patience, fence
from reconciler.engine.tasks import TP, CopyTask, TaskResult
from reconciler.engine.worker import (
    MAX_REFUSAL_REDOS,
    Copier,
    PartitionCopy,
    finish_round,
    group_metadata,
    plain_producer,
    txn_producer,
)
from reconciler.topology.model import Delivery

if TYPE_CHECKING:
    from reconciler.engine.offsets import OffsetStore

# Tests only: seconds an exactly-once task waits, records written, before committing.
_TEST_TXN_DELAY_S = settings.txn_delay_for_tests()
FLUSH_TIMEOUT_S = 60.0
# At-least-once: a task commits its acknowledged positions on the source at most this often, and its
# rounds end after this long even under a backlog (MAX_ROUND_S is for exactly-once): a kill repeats
# at most about this much copying per partition. Commits are asynchronous (measured on Tansu over
# loopback: a synchronous commit answers in 0.19 ms for 4 partitions, 0.63 ms for 64; the call alone
# takes 1-10 us; against a remote source a synchronous commit costs the task a round trip, every
# time) and at most one a second, as the source writes an offset record per partition per commit.
PROGRESS_COMMIT_S = 1.0


class BrokersLostInTransaction(RuntimeError):
    """The transactional producer lost its target brokers during the transaction (worker.py `BrokersLost`): the
    transaction is aborted, not committed, and the producer replaced."""


class DeliveryMode(Protocol):
    name: str
    #: Is a task's slot part of what it writes? Exactly-once: yes, the slot names the transactional id
    #: (`transactional_id(spec, slot)`), so a partition stays in its slot's task. At-least-once: no, so a flow
    #: with little to copy may be copied by one task for all its partitions (`BatchShaper.one_task`, batches.py).
    slot_is_identity: bool

    def prepare(self, spec: JobSpec, environ: Mapping[str, str] | None) -> None:
        """Driver start, before positions are read."""

    def load(
        self, store: OffsetStore, partitions: Mapping[TP, str], patience: Patience = PATIENT
    ) -> dict[TP, tuple[int | None, int | None]]:
        """(next offset or None, slot or None) per partition."""

    def copy(self, spec: JobSpec, task: CopyTask, parts: list[PartitionCopy], result: TaskResult) -> None:
        """Worker: copy the task's partitions and make the batch durable (or roll it back)."""

    def commit(self, store: OffsetStore, positions: Mapping[TP, int]) -> None:
        """Driver: record positions the batch (or an out-of-range reset) moved to."""

    def move_back(
        self, store: OffsetStore, positions: Mapping[TP, int], remotes: Mapping[TP, str], slots: Mapping[TP, int]
    ) -> None:
        """Driver: record positions moved back (a tail the source lost and gave to new records, issue 46) where the
        job's positions are the truth, before the next batch: a restart or a failed batch must not reload the
        positions past the records to copy again."""

    def recover(self, reload: Callable[[list[TP], bool], None], tps: list[TP]) -> None:
        """Driver: after a failed batch, bring the positions of `tps` to what is durable: `reload(tps, forward_only)`
        re-reads the job's committed group (forward_only: never behind the driver's own position)."""


@dataclass
class SourceProgress:
    """At-least-once, in the worker: which acknowledged positions a task commits to the job's group
    on the source as it goes, and when. Pure; `Copier.commit` sends them.

    `committed` starts at each partition's start (what the driver committed or loaded) and only
    moves forward, to a durable round's next offset (`PartitionCopy.base_next`: every record before
    it acknowledged; back at the start after `reset`). Rounds commit asynchronously at most every
    `every_s` (`due`); the task's end commits everything it moved synchronously (`final`), after
    every asynchronous commit of the task on the same consumer: none is still in flight when the
    driver commits the task's result, so none can land after it and move the group back."""

    start: dict[TP, int]
    every_s: float = PROGRESS_COMMIT_S
    committed: dict[TP, int] = field(default_factory=dict)
    last_at: float = float("-inf")  # the first durable round commits at once

    @classmethod
    def of(cls, parts: Iterable[PartitionCopy], every_s: float = PROGRESS_COMMIT_S) -> SourceProgress:
        start = {(p.topic, p.partition): p.start for p in parts}
        return cls(start, every_s, dict(start))

    def _moved(self, parts: Iterable[PartitionCopy]) -> dict[TP, int]:
        moved = {}
        for p in parts:
            tp = (p.topic, p.partition)
            if p.base_next >= 0 and p.base_next > self.committed.get(tp, p.start):
                moved[tp] = p.base_next
        self.committed.update(moved)
        return moved

    def due(self, parts: Iterable[PartitionCopy], now: float) -> dict[TP, int]:
        """After a durable round: the positions that moved since the last commit, once `every_s`
        has passed since it (else nothing)."""
        if now - self.last_at < self.every_s:
            return {}
        moved = self._moved(parts)
        if moved:
            self.last_at = now
        return moved

    def final(self, parts: Iterable[PartitionCopy]) -> dict[TP, int]:
        """At the task's end (whatever happened): every partition the task moved, at its last
        acknowledged position."""
        self._moved(parts)
        return {tp: o for tp, o in self.committed.items() if o > self.start.get(tp, -1)}


def _report(parts: list[PartitionCopy], errors: Mapping[TP, str]) -> None:
    """A failed progress commit is a transient, reported per partition (the driver commits after the task)."""
    for p in parts:
        err = errors.get((p.topic, p.partition))
        if err is not None and p.error is None:
            p.error = f"progress commit on the source failed: {err}"


class AtLeastOnce:
    name = Delivery.AT_LEAST_ONCE.value
    slot_is_identity = False

    def prepare(self, spec: JobSpec, environ: Mapping[str, str] | None) -> None:
        return None

    def load(
        self, store: OffsetStore, partitions: Mapping[TP, str], patience: Patience = PATIENT
    ) -> dict[TP, tuple[int | None, int | None]]:
        return store.source_positions(partitions, {tp: (None, None) for tp in partitions}, patience)

    def copy(self, spec: JobSpec, task: CopyTask, parts: list[PartitionCopy], result: TaskResult) -> None:
        # Rounds end when caught up (acknowledgements awaited, latency sampled), and after
        # PROGRESS_COMMIT_S under a backlog; the task copies until its time budget while records
        # flow. Acknowledged positions are committed on the source as the task goes, so a kill
        # repeats about a round, not the whole task. The task's end commits synchronously; the driver commits the
        # task's result after it only where that commit did not record it (`source_committed`: an idle flow's
        # heartbeat copy made two synchronous commits of the same positions a second, issue 39).
        producer = plain_producer(spec)
        deadline = time.time() + task.time_budget_s(spec.engine.max_batch_ms)
        copier = Copier(
            spec,
            parts,
            producer,
            task.consumer_epoch,
            max_round_s=PROGRESS_COMMIT_S,
            at_end_only=task.at_end_only,
            budget=task.budget,
        )
        progress = SourceProgress.of(parts)
        try:
            done = False
            while not done:
                done = copier.run(deadline)
                # Records the broker refused are settled by the policy (the records acknowledged around them kept).
                if not finish_round(spec, parts, producer, result, FLUSH_TIMEOUT_S, settle=True):
                    for p in parts:  # positions must not advance past records that were not acknowledged
                        p.reset()
                    return
                for p in parts:
                    if p.refused is not None:  # `fail`: the partition stopped at a refused record
                        copier.stop(p)
                    p.durable()
                if not done:
                    _report(parts, copier.commit(progress.due(parts, time.time()), asynchronous=True))
        finally:
            # Synchronous, failed task or not: it waits out the task's asynchronous commits too.
            final = progress.final(parts)
            errors = copier.commit(final, asynchronous=False)
            _report(parts, errors)
            for p in parts:  # the driver need not commit these positions again
                tp = (p.topic, p.partition)
                if tp in final and tp not in errors:
                    p.source_committed = final[tp]
            result.budget_left, result.budget_left_at = copier.budget_left()
            copier.close()

    def commit(self, store: OffsetStore, positions: Mapping[TP, int]) -> None:
        store.commit_source(positions)

    def move_back(
        self, store: OffsetStore, positions: Mapping[TP, int], remotes: Mapping[TP, str], slots: Mapping[TP, int]
    ) -> None:
        store.commit_source(positions)

    def recover(self, reload: Callable[[list[TP], bool], None], tps: list[TP]) -> None:
        # The driver's positions only moved after acknowledgement; the failed tasks committed what they had
        # acknowledged before failing (every round, SourceProgress), so resume there, not at the tasks' start:
        # a killed Python worker repeats about a round, not the whole task.
        reload(tps, True)


class ExactlyOnce:
    name = Delivery.EXACTLY_ONCE.value
    slot_is_identity = True

    def prepare(self, spec: JobSpec, environ: Mapping[str, str] | None) -> None:
        # Fence every transactional id the job may use before reading positions, so a zombie
        # cannot commit after we read (its open transaction is aborted).
        fence(spec, range(spec.engine.parallelism), environ)

    def load(
        self, store: OffsetStore, partitions: Mapping[TP, str], patience: Patience = PATIENT
    ) -> dict[TP, tuple[int | None, int | None]]:
        # The target group first; the source group seeds partitions it lacks (e.g. a flow switched
        # from at-least-once), instead of copying everything again.
        return store.source_positions(partitions, store.target_positions(partitions, patience), patience)

    def copy(self, spec: JobSpec, task: CopyTask, parts: list[PartitionCopy], result: TaskResult) -> None:
        from confluent_kafka import KafkaException

        txn_id = transactional_id(spec, task.slot)
        result.transactional_id = txn_id
        producer = txn_producer(spec, txn_id, task.last_owner)
        deadline = time.time() + task.time_budget_s(spec.engine.max_batch_ms)
        copier = Copier(spec, parts, producer, task.consumer_epoch, at_end_only=task.at_end_only, budget=task.budget)
        redos = 0
        try:
            done = False
            while not done:  # one transaction per round: records visible a round after they are read
                producer.begin_transaction()
                try:
                    done = copier.run(deadline)
                    self._commit_round(spec, task, parts, producer, result)
                    redos = 0
                except Exception as exc:  # noqa: BLE001
                    error = result.error or f"{type(exc).__name__}: {exc}"
                    fatal = isinstance(exc, KafkaException) and (exc.args[0].fatal() or "FENCED" in exc.args[0].name())
                    try:
                        if not fatal:
                            producer.abort_transaction(30)
                            producer.poll(0)  # the delivery reports of the purged records
                    except Exception:  # noqa: BLE001
                        fatal = True
                    # A producer that lost its brokers is not used again (worker.py BrokersLost): the next task's
                    # producer fences its epoch (init_transactions), the driver reloads the positions the target holds.
                    fatal = fatal or producer.brokers_lost.lost is not None
                    if fatal:
                        result.fatal = True
                        clients.CACHE.drop(("txn", spec.target.bootstrap_servers, txn_id))
                    refusals = {id(p): p.round_refusals(first_only=True) for p in parts}
                    for p in parts:  # nothing of this transaction is visible: back to the last committed round
                        p.roll_back()
                    if fatal or not any(refusals.values()) or redos >= MAX_REFUSAL_REDOS:
                        result.error = error
                        return
                    # Records the broker refused (a refusal the limit read at the last refresh did not predict):
                    # the round is redone with them known, so it commits the records before each, settles each by
                    # the policy (as a predicted refusal) and copies the records after it.
                    # A fresh producer: the aborted one takes its epoch bump (records after the refused one were
                    # out of sequence) lazily, in the next transaction, and purges that transaction's records.
                    redos += 1
                    result.error = None
                    for p in parts:
                        p.known_refused.update({r.record.offset: r.record for r in refusals[id(p)]})
                        if p.error is not None and p.error.startswith("delivery failed"):
                            p.error = None
                    producer = copier.producer = txn_producer(spec, txn_id, None)
                    copier.rewind()
                    done = False
        finally:
            result.budget_left, result.budget_left_at = copier.budget_left()
            copier.close()

    @staticmethod
    def _commit_round(
        spec: JobSpec, task: CopyTask, parts: list[PartitionCopy], producer: Any, result: TaskResult
    ) -> None:
        from confluent_kafka import TopicPartition

        delivered = finish_round(spec, parts, producer, result, FLUSH_TIMEOUT_S)
        lost = producer.brokers_lost.lost
        if lost is not None:  # before a failed delivery: the records were purged at the loss
            result.error = f"the target's brokers went away during the transaction ({lost}): aborted, to be redone"
            raise BrokersLostInTransaction(result.error)
        if not delivered:
            raise RuntimeError(result.error or "delivery failed")
        if _TEST_TXN_DELAY_S and any(p.round_count for p in parts):
            time.sleep(_TEST_TXN_DELAY_S)  # fault-injection hook: widen the window a kill lands in
        moved = [p for p in parts if p.round_count > 0 or (p.next > p.base_next >= 0)]
        if not moved:
            producer.abort_transaction(30)  # empty transaction: nothing to commit
            return
        offsets = []
        for p in moved:
            last = p.round_last or p.last_pair
            meta = {"slot": task.slot, "topic": p.topic, "down": last[1] + 1 if last is not None else None}
            offsets.append(
                TopicPartition(p.remote, p.partition, p.next, metadata=json.dumps(meta, separators=(",", ":")))
            )
        producer.send_offsets_to_transaction(offsets, group_metadata(spec), 30)
        producer.commit_transaction(60)
        result.committed = True
        for p in parts:
            p.durable()

    def commit(self, store: OffsetStore, positions: Mapping[TP, int]) -> None:
        return None  # committed inside each transaction by the worker

    def move_back(
        self, store: OffsetStore, positions: Mapping[TP, int], remotes: Mapping[TP, str], slots: Mapping[TP, int]
    ) -> None:
        # The target group is the truth (a failed batch and a restart reload it): moved back there now, outside a
        # transaction (no task runs between two batches; the next transaction commits from this position on).
        store.commit_target(positions, remotes, slots)

    def recover(self, reload: Callable[[list[TP], bool], None], tps: list[TP]) -> None:
        reload(tps, False)  # the target group is the truth (the transaction may have committed)


MODES: dict[str, DeliveryMode] = {m.name: m for m in (AtLeastOnce(), ExactlyOnce())}


def mode_of(spec: JobSpec) -> DeliveryMode:
    return MODES[spec.delivery]
