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
