"""The delivery mode as one object per mode: everything at-least-once and exactly-once do
differently, on the driver (start, commit, recovery), in the offset store (where positions live)
and in the worker (how a batch is made durable), in one place each.

* `AtLeastOnce`: the worker flushes the plain idempotent producer and checks every delivery; the
  driver then commits the next offsets in the job's group on the SOURCE cluster (after
  acknowledgement, so a crash replays, never loses).
* `ExactlyOnce` (KIP-656): every transactional id is fenced at start; the worker writes the records
  and the next source offsets (the job's group on the TARGET cluster) in one transaction; after a
  failed batch the driver re-reads the committed positions from the target (the truth).

`mode_of(spec)` picks the object; the objects hold no state (they travel to Spark workers).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from reconciler.contract.spec import JobSpec, transactional_id
from reconciler.replication import clients
from reconciler.replication.offsets import fence
from reconciler.replication.tasks import TP, CopyTask, TaskResult
from reconciler.replication.worker import (
    Copier,
    PartitionCopy,
    finish_round,
    group_metadata,
    plain_producer,
    txn_producer,
)
from reconciler.topology.model import Delivery

if TYPE_CHECKING:
    from reconciler.replication.offsets import OffsetStore

# Tests only: seconds an exactly-once task waits, records written, before committing.
_TEST_TXN_DELAY_S = float(os.environ.get("RECONCILER_TEST_TXN_DELAY_MS", "0")) / 1000.0
FLUSH_TIMEOUT_S = 60.0


class DeliveryMode(Protocol):
    name: str

    def prepare(self, spec: JobSpec, environ: Mapping[str, str] | None) -> None:
        """Driver start, before positions are read."""

    def load(self, store: OffsetStore, partitions: Mapping[TP, str]) -> dict[TP, tuple[int | None, int | None]]:
        """(next offset or None, slot or None) per partition."""

    def copy(self, spec: JobSpec, task: CopyTask, parts: list[PartitionCopy], result: TaskResult) -> None:
        """Worker: copy the task's partitions and make the batch durable (or roll it back)."""

    def commit(self, store: OffsetStore, positions: Mapping[TP, int]) -> None:
        """Driver: record positions the batch (or an out-of-range reset) moved to."""

    def recover(self, reload: Callable[[list[TP]], None], tps: list[TP]) -> None:
        """Driver: after a failed batch, bring the positions of `tps` back to what is durable."""


class AtLeastOnce:
    name = Delivery.AT_LEAST_ONCE.value

    def prepare(self, spec: JobSpec, environ: Mapping[str, str] | None) -> None:
        return None

    def load(self, store: OffsetStore, partitions: Mapping[TP, str]) -> dict[TP, tuple[int | None, int | None]]:
        return store.source_positions(partitions, {tp: (None, None) for tp in partitions})

    def copy(self, spec: JobSpec, task: CopyTask, parts: list[PartitionCopy], result: TaskResult) -> None:
        # Rounds end when caught up (acknowledgements awaited, latency sampled); the task copies
        # until its time budget while records flow. The driver commits after the task.
        producer = plain_producer(spec)
        deadline = time.time() + spec.engine.max_batch_ms / 1000.0
        copier = Copier(spec, parts, producer, task.consumer_epoch)
        try:
            done = False
            while not done:
                done = copier.run(deadline)
                if not finish_round(spec, parts, producer, result, FLUSH_TIMEOUT_S):
                    for p in parts:  # positions must not advance past records that were not acknowledged
                        p.reset()
                    return
                for p in parts:
                    p.durable()
        finally:
            copier.close()

    def commit(self, store: OffsetStore, positions: Mapping[TP, int]) -> None:
        store.commit_source(positions)

    def recover(self, reload: Callable[[list[TP]], None], tps: list[TP]) -> None:
        return None  # the driver's positions only moved after acknowledgement


class ExactlyOnce:
    name = Delivery.EXACTLY_ONCE.value

    def prepare(self, spec: JobSpec, environ: Mapping[str, str] | None) -> None:
        # Fence every transactional id the job may use before reading positions, so a zombie
        # cannot commit after we read (its open transaction is aborted).
        fence(spec, range(spec.engine.parallelism), environ)

    def load(self, store: OffsetStore, partitions: Mapping[TP, str]) -> dict[TP, tuple[int | None, int | None]]:
        # The target group first; the source group seeds partitions it lacks (e.g. a flow switched
        # from at-least-once), instead of copying everything again.
        return store.source_positions(partitions, store.target_positions(partitions))

    def copy(self, spec: JobSpec, task: CopyTask, parts: list[PartitionCopy], result: TaskResult) -> None:
        from confluent_kafka import KafkaException

        txn_id = transactional_id(spec, task.slot)
        result.transactional_id = txn_id
        producer = txn_producer(spec, txn_id, task.last_owner)
        deadline = time.time() + spec.engine.max_batch_ms / 1000.0
        copier = Copier(spec, parts, producer, task.consumer_epoch)
        try:
            done = False
            while not done:  # one transaction per round: records visible a round after they are read
                producer.begin_transaction()
                try:
                    done = copier.run(deadline)
                    self._commit_round(spec, task, parts, producer, result)
                except Exception as exc:  # noqa: BLE001
                    result.error = result.error or f"{type(exc).__name__}: {exc}"
                    fatal = isinstance(exc, KafkaException) and (exc.args[0].fatal() or "FENCED" in exc.args[0].name())
                    try:
                        if not fatal:
                            producer.abort_transaction(30)
                    except Exception:  # noqa: BLE001
                        fatal = True
                    if fatal:
                        result.fatal = True
                        clients.CACHE.drop(("txn", spec.target.bootstrap_servers, txn_id))
                    for p in parts:  # nothing of this transaction is visible: back to the last committed round
                        p.roll_back()
                    return
        finally:
            copier.close()

    @staticmethod
    def _commit_round(
        spec: JobSpec, task: CopyTask, parts: list[PartitionCopy], producer: Any, result: TaskResult
    ) -> None:
        from confluent_kafka import TopicPartition

        if not finish_round(spec, parts, producer, result, FLUSH_TIMEOUT_S):
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

    def recover(self, reload: Callable[[list[TP]], None], tps: list[TP]) -> None:
        reload(tps)  # the target group is the truth (the transaction may have committed)


MODES: dict[str, DeliveryMode] = {m.name: m for m in (AtLeastOnce(), ExactlyOnce())}


def mode_of(spec: JobSpec) -> DeliveryMode:
    return MODES[spec.delivery]
