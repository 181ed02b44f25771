"""The partitions whose leader does not answer the job (issue 47): held out of the batches until it answers again.

A source partition is led by one broker. When that broker hangs (its host stopped, a network partition) while the
cluster's other brokers answer, every request for the partition waits out its timeout: the idle gate's read of the
source's ends before each batch (3 s), a task that reads it (it neither ends nor reaches its end: the batch, whose
tasks end together, waits for its deadline), the check of a silent partition's position (10 s). Each of those held up
every partition of the flow, batch after batch, and the source's ends (the lag, the state) could not be read at all.
So a partition whose leader did not answer while the others did is held out (`hold`): no batch copies it, no read
before a batch asks for it, and a probe asks its leader again now and then (engine/leaders.py `LeaderProbe`), which
lets it go (`answered`) once it answers. Meanwhile it is a fault of its own in the status record, the metrics and
drift: `leader-unreachable`, since when and why (`faults`).

`Partitions` (driver_parts.py) owns one, as it owns `tails`: the driver's loop holds and lets go; the status thread
reads (`held`, `faults`: copies, under a lock).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping

from reconciler.contract.status import FaultKind, PartitionFault
from reconciler.engine.tasks import TP


class Unanswered:
    """The partitions held out because their leader does not answer: each one's fault (why, since when, at which
    position)."""

    def __init__(self) -> None:
        self._held: dict[TP, PartitionFault] = {}
        self._lock = threading.Lock()

    @property
    def held(self) -> frozenset[TP]:
        with self._lock:
            return frozenset(self._held)

    def __contains__(self, tp: object) -> bool:
        with self._lock:
            return tp in self._held

    def hold(self, why: Mapping[TP, str], positions: Mapping[TP, int], at_ms: int | None = None) -> list[TP]:
        """Hold out the partitions of `why` (each with the error its leader's silence gave), at their `positions`;
        one held already keeps its first fault (since when). Which ones are new."""
        at_ms = int(time.time() * 1000) if at_ms is None else at_ms
        new = []
        with self._lock:
            for tp, error in sorted(why.items()):
                if tp in self._held:
                    continue
                position = positions.get(tp)
                reason = (
                    f"the leader of {tp[0]}[{tp[1]}] does not answer the job while the source's other partitions do "
                    f"({error}): held out of the batches, asked again until it answers"
                )
                offset = position if position is not None and position >= 0 else None
                self._held[tp] = PartitionFault(tp[0], tp[1], FaultKind.LEADER_UNREACHABLE, reason, offset, at_ms)
                new.append(tp)
        return new

    def answered(self, tps: Iterable[TP]) -> list[TP]:
        """The leader of `tps` answered: copied again. Which of them were held."""
        with self._lock:
            return [tp for tp in sorted(set(tps)) if self._held.pop(tp, None) is not None]

    def forget(self, tp: TP) -> None:
        """A partition no longer copied."""
        with self._lock:
            self._held.pop(tp, None)

    def faults(self) -> dict[TP, PartitionFault]:
        with self._lock:
            return dict(self._held)
