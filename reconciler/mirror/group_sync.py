"""Why a consumer group's offsets are (not) synced to the target: one verdict per group a flow's filter matches.

MirrorMaker 2 drops a group silently when it cannot translate it (MirrorCheckpointTask: "cannot translate
accurately"); operators then find half their groups missing on the target. The job judges every group its
checkpoint round reads, with the same rules it checkpoints with, and publishes the verdicts in its status
record (`contract/status.StatusRecord.groups`), which `status` shows.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class GroupSyncReason(str, enum.Enum):
    """Why a group has no checkpoint on the target (or why its offsets are not committed there)."""

    ACTIVE_ON_TARGET = "active on the target"  # sync.group_offsets leaves a group with consumers there alone
    NO_OFFSET_SYNC = "no offset sync at or before its commit"  # committed before the flow's first copied record
    TOPIC_FILTERED = "topic filtered out"  # it committed only on topics the flow does not replicate
    PARTITION_EMPTY = "partition empty"  # the flow has copied nothing from the partition yet (no offset sync)
    NOT_YET_DISCOVERED = "not yet discovered"  # the job has not read the offset syncs to their end yet


@dataclass(frozen=True)
class GroupSync:
    group: str
    last_checkpoint_ms: int | None  # when its newest checkpoint was written on the target (None: never)
    reason: GroupSyncReason | None  # None: every partition it committed on is checkpointed
    partition: str | None = None  # `topic-partition` the reason is about

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "last_checkpoint_ms": self.last_checkpoint_ms,
            "reason": None if self.reason is None else self.reason.name.lower(),
            "partition": self.partition,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GroupSync:
        reason = d.get("reason")
        known = GroupSyncReason.__members__.get(str(reason).upper()) if reason else None
        ts = d.get("last_checkpoint_ms")
        return cls(
            str(d.get("group")),
            ts if isinstance(ts, int) else None,
            known,
            d.get("partition") if isinstance(d.get("partition"), str) else None,
        )


@dataclass(frozen=True)
class GroupTally:
    """Every group a flow's last checkpoint round judged, counted: exact however many of them a status record lists
    (`most_telling`). `not_synced`: (reason, groups) for each reason that has any, in the reasons' order."""

    total: int
    synced: int
    not_synced: tuple[tuple[GroupSyncReason, int], ...] = ()
    oldest_checkpoint_ms: int | None = None  # the synced group whose last checkpoint is oldest

    def count(self, reason: GroupSyncReason) -> int:
        return dict(self.not_synced).get(reason, 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "synced": self.synced,
            "not_synced": {r.name.lower(): n for r, n in self.not_synced},
            "oldest_checkpoint_ms": self.oldest_checkpoint_ms,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GroupTally:
        raw = d.get("not_synced")
        counts = raw if isinstance(raw, Mapping) else {}
        not_synced = tuple(
            (r, n)
            for r in GroupSyncReason
            if isinstance(n := counts.get(r.name.lower()), int) and not isinstance(n, bool) and n > 0
        )
        oldest = d.get("oldest_checkpoint_ms")

        def whole(key: str) -> int:
            v = d.get(key)
            return v if isinstance(v, int) and not isinstance(v, bool) else 0

        return cls(whole("total"), whole("synced"), not_synced, oldest if isinstance(oldest, int) else None)


def tally(syncs: tuple[GroupSync, ...]) -> GroupTally:
    synced = [g for g in syncs if g.reason is None]
    stamps = [g.last_checkpoint_ms for g in synced if g.last_checkpoint_ms is not None]
    return GroupTally(
        total=len(syncs),
        synced=len(synced),
        not_synced=tuple((r, n) for r in GroupSyncReason if (n := sum(1 for g in syncs if g.reason is r))),
        oldest_checkpoint_ms=min(stamps) if stamps else None,
    )


def most_telling(syncs: tuple[GroupSync, ...], limit: int) -> tuple[GroupSync, ...]:
    """At most `limit` verdicts, the ones an operator needs first: groups not synced (by reason, in the reasons'
    order; a group that reads only topics the flow does not copy last of all), then synced groups whose last
    checkpoint is oldest. A flow of 20,000 groups cannot list each in its status record (the record must fit the
    target's message size); `tally` counts them all."""
    order = {r: i for i, r in enumerate(GroupSyncReason)}
    last = len(order)

    def rank(g: GroupSync) -> tuple[int, int, str]:
        if g.reason is GroupSyncReason.TOPIC_FILTERED:
            return (last + 1, 0, g.group)
        if g.reason is not None:
            return (order[g.reason], 0, g.group)
        return (last, g.last_checkpoint_ms or 0, g.group)

    return tuple(sorted(syncs, key=rank)[:limit])


def judge_group(
    group: str,
    committed: Mapping[tuple[str, int], int],
    checkpoint_route: Callable[[str], str | None],
    translate: Callable[[str, int, int], int | None],
    has_syncs: Callable[[str, int], bool],
    syncs_read: bool,
    active_on_target: bool,
    last_checkpoint_ms: int | None,
) -> GroupSync:
    """The verdict on one group from its committed offsets on the source (topic, partition -> offset)."""
    if active_on_target:
        return GroupSync(group, last_checkpoint_ms, GroupSyncReason.ACTIVE_ON_TARGET)
    routed = [(tp, o) for tp, o in sorted(committed.items()) if checkpoint_route(tp[0]) is not None]
    if committed and not routed:
        return GroupSync(group, last_checkpoint_ms, GroupSyncReason.TOPIC_FILTERED)
    if not syncs_read:
        return GroupSync(group, last_checkpoint_ms, GroupSyncReason.NOT_YET_DISCOVERED)
    for (topic, partition), offset in routed:
        if translate(topic, partition, offset) is None:
            reason = GroupSyncReason.NO_OFFSET_SYNC if has_syncs(topic, partition) else GroupSyncReason.PARTITION_EMPTY
            return GroupSync(group, last_checkpoint_ms, reason, f"{topic}-{partition}")
    return GroupSync(group, last_checkpoint_ms, None)
