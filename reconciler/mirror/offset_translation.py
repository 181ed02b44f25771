"""Conservative offset translation for checkpoints (MM2's OffsetSyncStore).

Between two offset syncs MM2 cannot know how many upstream records were replicated, compacted
away or filtered, so a consumer group past a sync is placed just one offset beyond the sync's
downstream offset: it may re-read records on the target but can never skip one.

Each partition keeps a fixed array of 64 syncs spaced roughly exponentially back from the latest
(one slot per bit of the offset), so old group offsets stay translatable, coarsely, without
unbounded memory. This is a port of `connect/mirror/.../OffsetSyncStore.java` from recent Kafka
(the version documenting invariants A-D), including its identity comparisons: two distinct
syncs with equal offsets are different entries, exactly as in Java.
"""

from __future__ import annotations

from collections.abc import Iterable

from reconciler.mirror.records import OffsetSync

#: OffsetSyncStore.SYNCS_PER_PARTITION: one sync per bit of a 64-bit offset.
SYNCS_PER_PARTITION = 64


# Java computes the bounds below in wrapping 64-bit arithmetic. Its result differs from the exact
# one only when the exact bound exceeds Long.MAX_VALUE, and then it is negative: B holds in both
# (Java: bound < 0; exact: no offset is above it) and C fails in both (Java: bound < 0; exact: no
# offset reaches it). So Python's unbounded ints reach the same verdicts without emulation.


def _invariant_b(i_sync: OffsetSync, j_sync: OffsetSync, i: int, j: int) -> bool:
    """syncs[i] is recent enough relative to syncs[j]: i.upstream <= j.upstream + 2^j - 2^i."""
    bound = j_sync.upstream_offset + (1 << j) - (1 << i)
    return i_sync is j_sync or bound < 0 or i_sync.upstream_offset <= bound


def _invariant_c(i_sync: OffsetSync, j_sync: OffsetSync, i: int) -> bool:
    """syncs[i] is far enough past syncs[j]: i.upstream >= j.upstream + 2^max(i-2, 0)."""
    bound = j_sync.upstream_offset + (1 << max(i - 2, 0))
    return i_sync is j_sync or (bound >= 0 and i_sync.upstream_offset >= bound)


def _updated(original: list[OffsetSync], sync: OffsetSync) -> list[OffsetSync]:
    """OffsetSyncStore.updateSyncArray on a copy: keep A-C true while keeping distinct syncs."""
    syncs = list(original)
    replacement = sync
    replacement_index = 0  # next candidate in `original` to carry forward
    syncs[0] = replacement  # invariant A: slot 0 is always the latest sync
    for current in range(1, SYNCS_PER_PARTITION):
        previous = current - 1
        while True:
            # Prefer promoting an old sync over repeating the new one: more distinct syncs survive.
            old = original[replacement_index]
            is_recent = _invariant_b(syncs[previous], old, previous, current)
            separated_from_previous = _invariant_c(syncs[previous], old, previous)
            following = current + 1
            separated_from_next = following >= SYNCS_PER_PARTITION or _invariant_c(old, syncs[following], current)
            successor = replacement_index + 1
            duplicate = successor < SYNCS_PER_PARTITION and old is original[successor]
            promote = is_recent and separated_from_previous and separated_from_next
            if promote:
                replacement = old
            skip = duplicate or not separated_from_previous
            if promote or skip:
                replacement_index += 1
            if not (replacement_index < current and skip):
                break
        if _invariant_b(syncs[previous], syncs[current], previous, current):
            break  # the rest of the array already satisfies the invariants
        syncs[current] = replacement
    return syncs


class OffsetSyncStore:
    """Offset syncs per source partition, and translation of upstream group offsets.

    `read_to_end=False` mimics MM2 while it replays the offset-syncs topic at startup: each sync
    replaces the partition's whole history and nothing is translated until `mark_read_to_end()`,
    so checkpoints never go backwards relative to ones emitted from an earlier, fuller history.
    """

    def __init__(self, *, read_to_end: bool = True) -> None:
        self._read_to_end = read_to_end
        self._initialization_must_read_to_end = True
        self._syncs: dict[tuple[str, int], list[OffsetSync]] = {}
        #: Bumped by every change that can change a translation (a sync added, the replay's end): what was
        #: translated at one generation translates the same while it holds (the checkpoint round reuses it).
        self.generation = 0

    def keep_history_during_replay(self) -> None:
        """OffsetSyncStore.start(initializationMustReadToEnd=false), which MirrorCheckpointTask uses when
        its CheckpointStore was read: the replayed syncs keep their history, so offsets older than the
        last replayed sync still translate after a restart (the checkpoint store keeps checkpoints
        monotonic instead)."""
        self._initialization_must_read_to_end = False

    @property
    def read_to_end(self) -> bool:
        return self._read_to_end

    def mark_read_to_end(self) -> None:
        """The initial replay of the syncs topic is complete (OffsetSyncStore.start())."""
        self._read_to_end = True
        self.generation += 1

    def add(self, sync: OffsetSync) -> None:
        """Ingest one record from the offset-syncs topic, in topic order."""
        key = (sync.topic, sync.partition)
        self.generation += 1
        current = self._syncs.get(key)
        # An upstream rewind (topic recreated or truncated) invalidates every older sync.
        only_last = not self._read_to_end and self._initialization_must_read_to_end
        if current is None or only_last or sync.upstream_offset < current[0].upstream_offset:
            self._syncs[key] = [sync] * SYNCS_PER_PARTITION
        else:
            self._syncs[key] = _updated(current, sync)

    def add_all(self, syncs: Iterable[OffsetSync]) -> None:
        for sync in syncs:
            self.add(sync)

    def syncs(self, topic: str, partition: int) -> tuple[OffsetSync, ...]:
        """The distinct syncs held for a partition, latest first (empty if none)."""
        held: list[OffsetSync] = []
        for sync in self._syncs.get((topic, partition), ()):
            if not held or held[-1] is not sync:
                held.append(sync)
        return tuple(held)

    def translate_downstream(self, topic: str, partition: int, upstream_offset: int) -> int | None:
        """Where a group committed at `upstream_offset` upstream may safely resume downstream.

        None when MM2 would emit no checkpoint: before the initial replay finished, with no sync
        for the partition, or when every held sync is past `upstream_offset` (Kafka returns -1
        there and MirrorCheckpointTask drops it as "cannot translate accurately").
        """
        syncs = self._syncs.get((topic, partition))
        if not self._read_to_end or syncs is None:
            return None
        # Latest first, so the closest preceding sync (best precision) wins.
        sync = next((s for s in syncs if s.upstream_offset <= upstream_offset), None)
        if sync is None:
            return None
        step = 0 if upstream_offset == sync.upstream_offset else 1
        return sync.downstream_offset + step
