"""Which checkpoints to emit: MirrorCheckpointTask's rules, pure.

* `checkpoint_is_more_recent` — MirrorCheckpointTask.checkpointIsMoreRecent: a checkpoint is
  emitted for a group/partition the first time, when the upstream group itself rewinds
  (upstream offset below the last checkpoint's), or when the downstream offset moves forward.
  A translation that would move the downstream offset backwards (the offset-sync store lost
  precision) or repeats the last one is skipped, so checkpoints never go backwards.
* `CheckpointStore` — Kafka's CheckpointStore: the last checkpoint per group and partition,
  updated with each emitted batch and seeded from the checkpoints topic at start, so the
  monotonic rule holds across a restart.
* `OffsetAndMetadata` — an upstream committed offset with its commit metadata, which Kafka copies
  into the checkpoint (MirrorCheckpointTask.checkpoint).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from reconciler.mirror.records import Checkpoint


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    metadata: str = ""


def checkpoint_is_more_recent(last: Checkpoint | None, checkpoint: Checkpoint) -> bool:
    """MirrorCheckpointTask.checkpointIsMoreRecent."""
    if last is None:
        return True
    if checkpoint.upstream_offset < last.upstream_offset:  # the upstream group rewound
        return True
    return checkpoint.downstream_offset > last.downstream_offset


@dataclass
class CheckpointStore:
    """The last checkpoint emitted per (group, topic on the target, partition)."""

    _last: dict[tuple[str, str, int], Checkpoint] = field(default_factory=dict)

    @staticmethod
    def _key(cp: Checkpoint) -> tuple[str, str, int]:
        return (cp.consumer_group_id, cp.topic, cp.partition)

    def get(self, group: str, topic: str, partition: int) -> Checkpoint | None:
        return self._last.get((group, topic, partition))

    def update(self, checkpoints: Iterable[Checkpoint]) -> None:
        for cp in checkpoints:
            self._last[self._key(cp)] = cp

    def load(self, checkpoints: Iterable[Checkpoint]) -> None:
        """Seed from the checkpoints topic read from the start (later records win, as in Kafka)."""
        self.update(checkpoints)

    def __len__(self) -> int:
        return len(self._last)

    def select(self, candidates: Iterable[Checkpoint]) -> list[Checkpoint]:
        """The candidates to emit (MirrorCheckpointTask.checkpointsForGroup's last filter)."""
        return [cp for cp in candidates if checkpoint_is_more_recent(self.get(*self._key(cp)), cp)]
