"""A fake of the broker requests behind engine/ends.py's `PartitionEnds` (its `EndRequests` protocol), for unit
tests: each answer from a dict, each request recorded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.engine.tasks import TP


@dataclass
class FakeEndRequests:
    """ListOffsets answers (`latest`, `earliest`: an offset, or an Exception the partition's future raised),
    watermarks per partition, and the end a read to end-of-partition reaches (None: not in time)."""

    latest: Mapping[TP, int | Exception] = field(default_factory=dict)
    earliest: Mapping[TP, int | Exception] = field(default_factory=dict)
    marks: Mapping[TP, tuple[int, int]] = field(default_factory=dict)
    reached: Mapping[TP, int | None] = field(default_factory=dict)
    asked: list[tuple[str, object, float]] = field(default_factory=list)  # (request, what, timeout)

    def list_offsets(self, partitions: Sequence[TP], earliest: bool, timeout: float) -> dict[TP, int | Exception]:
        self.asked.append(("earliest" if earliest else "latest", list(partitions), timeout))
        answers = self.earliest if earliest else self.latest
        return {tp: answers[tp] for tp in partitions if tp in answers}

    def watermarks(self, tp: TP, timeout: float) -> tuple[int, int]:
        self.asked.append(("watermarks", tp, timeout))
        return self.marks[tp]

    def read_end(self, tp: TP, start: int, timeout: float) -> int | None:
        self.asked.append(("read_end", (tp, start), timeout))
        return self.reached.get(tp)

    def read_ends(self, starts: Mapping[TP, int], timeout: float) -> dict[TP, int]:
        self.asked.append(("read_ends", dict(starts), timeout))
        return {tp: end for tp in starts if (end := self.reached.get(tp)) is not None}
