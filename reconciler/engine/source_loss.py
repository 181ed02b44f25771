"""Data lost at the source (issue 34): which loss a partition's next offset shows, and where the job resumes.

Pure rules; the driver's loss handler reads the offsets and acts (engine/source_faults.py `SourceFaults`). A loss is
seen three ways, each within one batch:
- the position is below the partition's log start (retention or a deletion passed it): `truncated`;
- the position is above its log end (the broker lost records it had acknowledged, as noida-db 0.2.3 does at a
  restart under load and Apache Kafka at an unclean leader election; the offsets will be given to new records):
  `lost-tail`; or the end read before a batch moved back from the last read (`ends_moved_back`): records at and
  after it are gone, whether or not the job had copied them;
- the topic's id changed between two refreshes (deleted and created again; brokers that give topic ids):
  `recreated`.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.contract.spec import OffsetReset
from reconciler.contract.status import FaultKind

TP = tuple[str, int]


def position_loss(position: int, low: int, end: int, recreated: bool = False) -> FaultKind | None:
    """The loss a position shows against the partition's log start `low` and log end `end` (None: it is valid)."""
    if position < 0:
        return None  # no position yet: from the beginning
    if recreated:
        return FaultKind.RECREATED
    if position < low:
        return FaultKind.TRUNCATED
    if position > end:
        return FaultKind.LOST_TAIL
    return None


def ends_moved_back(previous: Mapping[TP, int], ends: Mapping[TP, int]) -> dict[TP, int]:
    """The partitions whose end offset, read now, is below the last read: a log end never moves back but when the
    broker lost records (their offsets are given to new ones). Each with its end now."""
    return {tp: end for tp, end in ends.items() if tp in previous and 0 <= end < previous[tp]}


def recreated_topics(before: Mapping[str, str | None], now: Mapping[str, str | None]) -> list[str]:
    """Topics whose id changed between two descriptions (deleted and created again), where the broker gives ids."""
    return sorted(t for t, tid in now.items() if tid is not None and before.get(t) not in (None, tid))


def resume_at(
    policy: OffsetReset, low: int | None, end: int | None, kind: FaultKind | None = None, tail_seen_lost: bool = False
) -> int | None:
    """Where a partition that lost records (`kind`) resumes under `policy` (None: it does not; halted or failed).
    `resume` (the default): at the log end after a lost tail the job saw happen (`tail_seen_lost`: the end moved
    back between two reads; the records below it were copied, the offsets the broker gives new records from there
    on are copied, nothing twice); else at the log start: retention passed the position, the topic was recreated,
    or a position past the end at first sight (after a restart a lost tail and a recreated topic look alike by
    offsets): copied again rather than skipped."""
    if policy is OffsetReset.RESUME:
        return end if kind is FaultKind.LOST_TAIL and tail_seen_lost else low
    if policy is OffsetReset.RESUME_AT_START:
        return low
    if policy is OffsetReset.RESUME_AT_END:
        return end
    return None
