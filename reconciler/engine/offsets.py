"""Where the job keeps its source positions.

* at-least-once: the job's group on the SOURCE cluster; the workers commit acknowledged next
  offsets there as a task goes (`AtLeastOnce.copy`, at most every second), and the driver commits
  the next offsets after the workers report every record acknowledged (so a crash re-copies at
  most about a round, never skips).
* exactly-once (KIP-656): the job's group on the TARGET cluster, written only by the workers'
  transactional producers together with the records (`send_offsets_to_transaction`). The group is
  the source of truth on restart. Offsets are stored under the REMOTE topic name and partition
  (remote partition i mirrors source partition i): brokers may drop offsets of topics they do not
  have (Tansu does), and the remote topic always exists on the target. Commit metadata records
  the slot (transactional id) that wrote the partition, so its id stays stable across restarts.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from reconciler.contract.spec import JobSpec, transactional_id
from reconciler.engine import clients
from reconciler.engine.tasks import TP

log = logging.getLogger(__name__)


def _retry(what: str, fn, attempts: int = 5, delay: float = 0.5):
    last: Exception | None = None
    for i in range(attempts):
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - transient broker errors are retried
            last = exc
            log.warning("%s failed (attempt %d/%d): %s", what, i + 1, attempts, exc)
            if i + 1 < attempts:
                time.sleep(delay * (2**i))
    assert last is not None
    raise last


@dataclass(frozen=True)
class Patience:
    """How a read of the job's positions waits for the broker: `timeout` seconds, `attempts` times."""

    attempts: int = 5
    timeout: float = 15.0


#: The driver's start and recovery: retried, a position is needed.
PATIENT = Patience()


def once(timeout: float) -> Patience:
    """One short read (the lag side channel's): a broker away must not hold its read of the source's ends (five
    attempts of 15 s did: the ends went unread, so a partition behind a stopped target was not seen stuck)."""
    return Patience(1, timeout)


class PositionsTruth(Protocol):
    """Which of the job's groups holds its positions, and how they are read and written there (delivery.py
    `DeliveryMode`: delivery.py imports this module, so the store names only what it calls)."""

    def load(
        self, store: OffsetStore, partitions: Mapping[TP, str], patience: Patience = ...
    ) -> dict[TP, tuple[int | None, int | None]]: ...

    def commit(self, store: OffsetStore, positions: Mapping[TP, int]) -> None: ...


class OffsetStore:
    """Reads (and, at-least-once, commits) the job's positions: {(topic, partition): next offset}.
    Which group is the truth is the delivery mode's call (delivery.py); how long a read waits is the caller's
    (`Patience`). Its reads of committed offsets are safe from several threads (the driver's and the lag's)."""

    def __init__(self, spec: JobSpec, mode: PositionsTruth, environ: Mapping[str, str] | None = None):
        from confluent_kafka import Consumer

        self.spec = spec
        self.environ = environ
        self.mode = mode
        self._source = Consumer(clients.consumer_config(spec.source, spec, environ=environ))
        self._target: Any = None  # made on first use (exactly-once only)

    @property
    def source_consumer(self) -> Any:
        """The job's consumer on the source (its group's committed offsets; `PartitionEnds.watermarks` asks the
        source's watermarks through it too, engine/ends.py)."""
        return self._source

    def close(self) -> None:
        for c in (self._source, self._target):
            if c is not None:
                try:
                    c.close()
                except Exception:  # noqa: BLE001
                    pass

    def load(
        self, partitions: Mapping[TP, str], patience: Patience = PATIENT
    ) -> dict[TP, tuple[int | None, int | None]]:
        """(next offset or None, slot or None) per partition; `partitions` maps (topic, p) -> remote topic."""
        return self.mode.load(self, partitions, patience) if partitions else {}

    def commit(self, positions: Mapping[TP, int]) -> None:
        if positions:
            self.mode.commit(self, positions)

    def target_positions(
        self, partitions: Mapping[TP, str], patience: Patience = PATIENT
    ) -> dict[TP, tuple[int | None, int | None]]:
        """The job's group on the target (exactly-once), stored under the remote topic, with the
        slot from the commit metadata."""
        from confluent_kafka import Consumer, TopicPartition

        if self._target is None:
            self._target = Consumer(clients.consumer_config(self.spec.target, self.spec, environ=self.environ))
        keys = list(partitions)
        out: dict[TP, tuple[int | None, int | None]] = {k: (None, None) for k in keys}
        tps = [TopicPartition(partitions[k], k[1]) for k in keys]
        got = _retry(
            "read exactly-once offsets",
            lambda: self._target.committed(tps, timeout=patience.timeout),
            patience.attempts,
        )
        for k, tp in zip(keys, got):
            if tp.offset >= 0:
                slot = None
                try:
                    slot = int(json.loads(tp.metadata or "{}").get("slot"))
                except (ValueError, TypeError, AttributeError):
                    slot = None
                out[k] = (tp.offset, slot)
        return out

    def source_positions(
        self,
        partitions: Mapping[TP, str],
        known: dict[TP, tuple[int | None, int | None]],
        patience: Patience = PATIENT,
    ) -> dict[TP, tuple[int | None, int | None]]:
        """The job's group on the source, for the partitions `known` has no offset for."""
        from confluent_kafka import TopicPartition

        keys = list(partitions)
        out = {k: known.get(k, (None, None)) for k in keys}
        tps = [TopicPartition(k[0], k[1]) for k in keys]
        got = _retry(
            "read source offsets", lambda: self._source.committed(tps, timeout=patience.timeout), patience.attempts
        )
        for k, tp in zip(keys, got):
            if out[k][0] is None and tp.offset >= 0:
                out[k] = (tp.offset, None)
        return out

    def commit_target(self, positions: Mapping[TP, int], remotes: Mapping[TP, str], slots: Mapping[TP, int]) -> None:
        """exactly-once: commit positions to the job's group on the target outside a transaction (a position moved
        back, delivery.py `ExactlyOnce.move_back`), under the remote topic, with the slot in the metadata as the
        transactions write it."""
        from confluent_kafka import Consumer, TopicPartition

        if self._target is None:
            self._target = Consumer(clients.consumer_config(self.spec.target, self.spec, environ=self.environ))
        tps = [
            TopicPartition(remotes[tp], tp[1], o, metadata=json.dumps({"slot": slots.get(tp), "topic": tp[0]}))
            for tp, o in positions.items()
            if o >= 0 and tp in remotes
        ]
        if tps:
            _retry("commit exactly-once offsets", lambda: self._target.commit(offsets=tps, asynchronous=False))

    def commit_source(self, positions: Mapping[TP, int]) -> None:
        """at-least-once: commit next offsets on the source cluster (after acknowledgement)."""
        from confluent_kafka import TopicPartition

        tps = [TopicPartition(t, p, o) for (t, p), o in positions.items() if o >= 0]
        if tps:
            _retry("commit source offsets", lambda: self._source.commit(offsets=tps, asynchronous=False))


def fence(spec: JobSpec, slots: Iterable[int], environ: Mapping[str, str] | None = None) -> None:
    """Initialise each slot's transactional id once: aborts a zombie's open transaction and fences it,
    before the job reads its positions (exactly-once start-up)."""
    from confluent_kafka import Producer

    for slot in sorted(set(slots)):
        producer = Producer(
            clients.producer_config(spec.target, spec, transactional_id=transactional_id(spec, slot), environ=environ)
        )
        _retry(f"fence {transactional_id(spec, slot)}", lambda p=producer: p.init_transactions(30))
        producer.flush(5)
        del producer
