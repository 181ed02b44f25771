"""When MM2 emits offset syncs: OffsetSyncWriter.PartitionState and the pending/delayed queues."""

from __future__ import annotations

import pytest

from reconciler.mirror.offset_syncs import (
    OFFSET_LAG_MAX_DEFAULT,
    OffsetSyncPolicy,
    PartitionOffsetSyncState,
)
from reconciler.mirror.records import OffsetSync


def decisions(state: PartitionOffsetSyncState, pairs: list[tuple[int, int]]) -> list[bool]:
    return [state.update(upstream, downstream) for upstream, downstream in pairs]


def test_default_lag_is_mm2s_offset_lag_max():
    assert OFFSET_LAG_MAX_DEFAULT == 100
    assert PartitionOffsetSyncState().max_offset_lag == 100
    assert OffsetSyncPolicy().max_offset_lag == 100


# --- rule 1: first record of the task's lifetime ------------------------------------------


@pytest.mark.parametrize(("upstream", "downstream"), [(0, 0), (500, 0), (0, 500), (7, 7)])
def test_first_record_always_syncs(upstream, downstream):
    state = PartitionOffsetSyncState()
    assert state.update(upstream, downstream) is True
    assert state.last_sync_downstream_offset == downstream


# --- rule 2: the last sync became too stale -----------------------------------------------


def test_contiguous_records_sync_once_downstream_is_lag_past_last_sync_plus_one():
    state = PartitionOffsetSyncState()
    assert state.update(0, 0)
    # Translation of any group past the sync lands on downstream 0 + 1, so the re-read window for a
    # record at downstream d is d - 1; a sync is due once that reaches offset.lag.max (100).
    assert decisions(state, [(k, k) for k in range(1, 101)]) == [False] * 100
    assert state.update(101, 101) is True
    assert state.last_sync_downstream_offset == 101
    # ... and the window restarts from the new sync.
    assert decisions(state, [(k, k) for k in range(102, 202)]) == [False] * 100
    assert state.update(202, 202) is True


def test_zero_lag_syncs_every_record():
    state = PartitionOffsetSyncState(max_offset_lag=0)
    assert decisions(state, [(k, 1000 + k) for k in range(50)]) == [True] * 50


def test_lag_is_measured_on_downstream_offsets_only():
    # Target-side transaction markers make downstream advance by 2 per upstream record: no gap
    # upstream, so only the lag rule fires, after ~50 upstream records instead of 100.
    state = PartitionOffsetSyncState()
    assert state.update(0, 0)
    fired = [k for k in range(1, 200) if state.update(k, 2 * k)]
    assert fired == [51, 102, 153]  # downstream 102 - (0 + 1) >= 100, then every 51 records


# --- rule 3: upstream did not advance by exactly one --------------------------------------


def test_upstream_gap_from_compaction_or_markers_syncs():
    state = PartitionOffsetSyncState()
    assert decisions(state, [(0, 0), (1, 1), (5, 2), (6, 3)]) == [True, False, True, False]
    assert state.last_sync_downstream_offset == 2


def test_upstream_rewind_syncs():
    state = PartitionOffsetSyncState()
    assert decisions(state, [(10, 0), (11, 1), (3, 2), (4, 3)]) == [True, False, True, False]


def test_redelivered_upstream_offset_syncs():
    state = PartitionOffsetSyncState()
    assert decisions(state, [(10, 0), (10, 1)]) == [True, True]


def test_downstream_gap_alone_does_not_sync():
    # Only upstream skips count: downstream jumping ahead cannot make translation unsafe, since
    # translation never goes further than one past the last sync.
    state = PartitionOffsetSyncState()
    assert decisions(state, [(0, 0), (1, 10), (2, 20)]) == [True, False, False]


# --- rule 4: downstream went backwards ----------------------------------------------------


def test_downstream_truncation_syncs_even_when_upstream_is_contiguous():
    state = PartitionOffsetSyncState()
    assert decisions(state, [(10, 50), (11, 51), (12, 3), (13, 4)]) == [True, False, True, False]
    assert state.last_sync_downstream_offset == 3


# --- Kafka's own test vectors -------------------------------------------------------------


def test_matches_kafka_mirror_source_task_test_offset_sync():
    """MirrorSourceTaskTest.testOffsetSync (maxOffsetLag 50), with reset() after each True.

    Kafka's test skips reset() between a few calls to show the flag is sticky; OffsetSyncWriter
    always resets right after queueing, which is what `update` models, so (8, 7) is False here.
    """
    state = PartitionOffsetSyncState(max_offset_lag=50)
    steps = [
        ((0, 100), True),  # always emit offset sync on first update
        ((2, 102), True),  # upstream offset skipped -> resync
        ((3, 152), False),
        ((4, 153), True),  # one past target offset: 153 - (102 + 1) = 50
        ((5, 154), False),
        ((6, 203), False),
        ((7, 204), True),  # 204 - (153 + 1) = 50
        ((2, 206), True),  # upstream reset
        ((3, 207), False),
        ((4, 3), True),  # downstream reset
        ((5, 4), False),
        ((7, 6), True),  # skipped upstream 6
        ((7, 6), True),  # repeated upstream offset
        ((8, 7), False),  # Java: True only via the sticky flag (no reset in that test)
        ((10, 57), True),
        ((11, 58), False),
    ]
    assert decisions(state, [pair for pair, _ in steps]) == [expected for _, expected in steps]


def test_matches_kafka_zero_offset_sync():
    """MirrorSourceTaskTest.testZeroOffsetSync: with offset.lag.max=0 every record syncs."""
    state = PartitionOffsetSyncState(max_offset_lag=0)
    pairs = [(0, 100), (2, 102), (3, 153), (4, 154), (5, 155), (6, 207), (2, 208), (3, 209),
             (4, 3), (5, 4), (7, 6), (7, 6), (8, 7), (10, 57), (11, 58)]  # fmt: skip
    assert all(decisions(state, pairs))


def test_negative_lag_is_rejected():
    with pytest.raises(ValueError, match="max_offset_lag"):
        PartitionOffsetSyncState(max_offset_lag=-1)
    with pytest.raises(ValueError, match="max_offset_lag"):
        OffsetSyncPolicy(max_offset_lag=-1)


# --- OffsetSyncPolicy: immediate vs delayed syncs across partitions ----------------------


def test_policy_returns_immediate_syncs_and_delays_the_rest():
    """OffsetSyncWriterTest.testMaybeQueueOffsetSyncs (maxOffsetLag 2)."""
    policy = OffsetSyncPolicy(max_offset_lag=2)
    assert policy.record_replicated("topic", 0, 0, 1) == OffsetSync("topic", 0, 0, 1)
    assert policy.record_replicated("topic", 0, 1, 2) is None
    assert policy.take_delayed() == [OffsetSync("topic", 0, 1, 2)]


def test_promoting_delayed_syncs_keeps_only_the_latest_per_partition():
    """OffsetSyncWriterTest.testPromoteDelayedOffsetSyncs (maxOffsetLag 50)."""
    policy = OffsetSyncPolicy(max_offset_lag=50)
    assert policy.record_replicated("topic", 0, 0, 100) is not None
    assert policy.record_replicated("topic", 0, 1, 101) is None
    assert policy.take_delayed() == [OffsetSync("topic", 0, 1, 101)]
    assert policy.take_delayed() == []  # promoted once, then gone


def test_an_immediate_sync_supersedes_the_delayed_one():
    policy = OffsetSyncPolicy()
    policy.record_replicated("t", 0, 0, 0)
    assert policy.record_replicated("t", 0, 1, 1) is None
    assert policy.record_replicated("t", 0, 9, 2) == OffsetSync("t", 0, 9, 2)  # upstream gap
    assert policy.take_delayed() == []


def test_partitions_are_tracked_independently():
    policy = OffsetSyncPolicy()
    emitted = [
        policy.record_replicated("a", 0, 0, 0),
        policy.record_replicated("a", 1, 0, 0),  # first record of another partition
        policy.record_replicated("b", 0, 5, 0),  # and of another topic
        policy.record_replicated("a", 0, 1, 1),
        policy.record_replicated("a", 1, 1, 1),
    ]
    assert emitted == [OffsetSync("a", 0, 0, 0), OffsetSync("a", 1, 0, 0), OffsetSync("b", 0, 5, 0), None, None]
    assert policy.take_delayed() == [OffsetSync("a", 0, 1, 1), OffsetSync("a", 1, 1, 1)]


def test_steady_stream_emits_about_one_sync_per_lag_window():
    policy = OffsetSyncPolicy()
    immediate = [s for k in range(1000) if (s := policy.record_replicated("t", 0, k, k)) is not None]
    assert [s.upstream_offset for s in immediate] == [0, 101, 202, 303, 404, 505, 606, 707, 808, 909]
    assert policy.take_delayed() == [OffsetSync("t", 0, 999, 999)]
