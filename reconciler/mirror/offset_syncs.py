"""When a replication task emits an offset sync (MM2's OffsetSyncWriter / PartitionState).

Checkpoint translation (see offset_translation) can only place a consumer group at most one
offset past the latest sync preceding it, so syncs must be frequent enough to keep that
re-read window small, and must be emitted wherever the upstream->downstream mapping may have
shifted. MirrorMaker 2 decides this per replicated record, after the downstream write is acked.

Ported from Kafka's `connect/mirror/.../OffsetSyncWriter.java` (PartitionState lived in
MirrorSourceTask.java before it moved there); the producer, semaphore and threading are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.mirror.records import OffsetSync

#: MirrorSourceConfig.OFFSET_LAG_MAX_DEFAULT (`offset.lag.max`).
OFFSET_LAG_MAX_DEFAULT = 100

_UNSET = -1


@dataclass(slots=True)
class PartitionOffsetSyncState:
    """Per source partition memory of the last record replicated and the last sync emitted.

    `update` returns True when a sync must be sent right away. Kafka keeps a sticky
    `shouldSyncOffsets` flag that OffsetSyncWriter clears (`reset()`) immediately after queueing
    the sync; folding that reset into `update` gives identical decisions.
    """

    max_offset_lag: int = OFFSET_LAG_MAX_DEFAULT
    previous_upstream_offset: int = _UNSET
    previous_downstream_offset: int = _UNSET
    last_sync_downstream_offset: int = _UNSET

    def __post_init__(self) -> None:
        if self.max_offset_lag < 0:
            raise ValueError(f"max_offset_lag must be >= 0, got {self.max_offset_lag}")

    def update(self, upstream_offset: int, downstream_offset: int) -> bool:
        """Record that `upstream_offset` was written at `downstream_offset`; True = sync now."""
        # Translation lands one past the last sync, hence the +1 (as in Kafka).
        too_stale = downstream_offset - (self.last_sync_downstream_offset + 1) >= self.max_offset_lag
        should_sync = (
            self.last_sync_downstream_offset == _UNSET  # first record this task lifetime
            or too_stale  # consumers translated via the last sync would re-read too much
            # Compaction, transaction markers, filtered records or a rewind: the offset
            # mapping may have shifted, so pin it down again.
            or upstream_offset - self.previous_upstream_offset != 1
            or downstream_offset < self.previous_downstream_offset  # target topic truncated/recreated
        )
        if should_sync:
            self.last_sync_downstream_offset = downstream_offset
        self.previous_upstream_offset = upstream_offset
        self.previous_downstream_offset = downstream_offset
        return should_sync


@dataclass
class OffsetSyncPolicy:
    """A source task's sync decisions across partitions, mirroring OffsetSyncWriter's two queues.

    A record that needs no immediate sync still leaves a *delayed* sync for its partition (the
    latest one wins); MM2 publishes those at the next offset commit (`promoteDelayedOffsetSyncs`),
    so the syncs topic always catches up with the last replicated record eventually.
    """

    max_offset_lag: int = OFFSET_LAG_MAX_DEFAULT
    _states: dict[tuple[str, int], PartitionOffsetSyncState] = field(default_factory=dict, init=False, repr=False)
    _delayed: dict[tuple[str, int], OffsetSync] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_offset_lag < 0:
            raise ValueError(f"max_offset_lag must be >= 0, got {self.max_offset_lag}")

    def record_replicated(
        self, topic: str, partition: int, upstream_offset: int, downstream_offset: int
    ) -> OffsetSync | None:
        """The sync to send now for this replicated record, or None if it was delayed instead."""
        key = (topic, partition)
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = PartitionOffsetSyncState(self.max_offset_lag)
        sync = OffsetSync(topic, partition, upstream_offset, downstream_offset)
        if state.update(upstream_offset, downstream_offset):
            self._delayed.pop(key, None)
            return sync
        self._delayed[key] = sync
        return None

    def take_delayed(self) -> list[OffsetSync]:
        """Syncs to publish at an offset commit: the latest unsent one per partition, then forgotten."""
        delayed = list(self._delayed.values())
        self._delayed.clear()
        return delayed
