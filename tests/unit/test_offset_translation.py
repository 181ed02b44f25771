"""Checkpoint offset translation (MM2's OffsetSyncStore.translateDownstream and its sync history)."""

from __future__ import annotations

import random

import pytest

from reconciler.mirror.offset_syncs import OffsetSyncPolicy
from reconciler.mirror.offset_translation import (
    SYNCS_PER_PARTITION,
    OffsetSyncStore,
    _invariant_b,
    _invariant_c,
)
from reconciler.mirror.records import OffsetSync

TOPIC, PARTITION = "topic1", 2


def sync(upstream: int, downstream: int, topic: str = TOPIC, partition: int = PARTITION) -> OffsetSync:
    return OffsetSync(topic, partition, upstream, downstream)


def translate(store: OffsetSyncStore, upstream: int) -> int | None:
    return store.translate_downstream(TOPIC, PARTITION, upstream)


def slots(store: OffsetSyncStore) -> list[OffsetSync]:
    """The raw 64-slot array (Kafka's syncFor(tp, i)), to check the store's invariants."""
    return store._syncs[(TOPIC, PARTITION)]  # noqa: SLF001 - white-box invariant checks


def assert_invariants(store: OffsetSyncStore) -> None:
    """OffsetSyncStoreTest.assertSparseSyncInvariant: invariants B and C for every pair i <= j."""
    array = slots(store)
    assert len(array) == SYNCS_PER_PARTITION
    for j in range(SYNCS_PER_PARTITION):
        for i in range(j + 1):
            i_up, j_up = array[i].upstream_offset, array[j].upstream_offset
            if i_up == j_up:
                continue
            lower = j_up + (1 << max(i - 2, 0))
            assert lower <= i_up, f"invariant C({i},{j}): {i_up} < {lower}"
            upper = j_up + (1 << j) - (1 << i)
            assert i_up <= upper, f"invariant B({i},{j}): {i_up} > {upper}"


# --- the translation rule -----------------------------------------------------------------


def test_no_syncs_means_no_translation():
    store = OffsetSyncStore()
    assert translate(store, 0) is None
    store.add(sync(0, 0, topic="other"))
    assert translate(store, 0) is None  # syncs of another topic do not help
    store.add(sync(0, 0, partition=PARTITION + 1))
    assert translate(store, 0) is None  # nor of another partition


def test_exact_match_returns_the_syncs_downstream_offset():
    store = OffsetSyncStore()
    store.add(sync(100, 200))
    assert translate(store, 100) == 200


def test_past_a_sync_translates_only_one_beyond_it():
    store = OffsetSyncStore()
    store.add(sync(100, 200))
    # Not 200 + (150 - 100): records 101..149 may have been compacted or filtered, so dead
    # reckoning could skip unread records. One past the sync can only cause re-reads.
    assert [translate(store, g) for g in (101, 150, 10_000)] == [201, 201, 201]


def test_before_the_first_sync_is_untranslatable():
    store = OffsetSyncStore()
    store.add(sync(100, 200))
    assert translate(store, 99) is None
    assert translate(store, 0) is None


def test_between_syncs_uses_the_closest_preceding_one():
    store = OffsetSyncStore()
    store.add_all([sync(0, 0), sync(100, 90), sync(200, 170)])
    assert translate(store, 0) == 0
    assert translate(store, 99) == 1
    assert translate(store, 100) == 90
    assert translate(store, 199) == 91
    assert translate(store, 200) == 170
    assert translate(store, 250) == 171


def test_matches_kafka_offset_sync_store_test_offset_translation():
    """OffsetSyncStoreTest.testOffsetTranslation, step by step."""
    store = OffsetSyncStore()
    store.add(sync(100, 200))
    assert translate(store, 150) == 201  # emit synced downstream offset without dead-reckoning
    store.add(sync(150, 251))
    assert translate(store, 150) == 251  # translate exact offsets
    assert translate(store, 5) is None  # prior to any sync (Kafka: -1, dropped by the task)
    store.add(sync(200, 10))
    assert translate(store, 200) == 10  # downstream offsets reset
    store.add(sync(20, 20))
    assert translate(store, 20) == 20  # upstream offsets reset


def test_upstream_rewind_clears_all_older_history():
    store = OffsetSyncStore()
    store.add_all([sync(o, o + 5) for o in range(0, 5000, 100)])
    assert translate(store, 4000) == 4005
    assert translate(store, 1200) == 6  # coarse old history: only sync(0, 5) precedes it
    store.add(sync(1500, 11_000))  # topic recreated upstream: offsets went backwards
    assert store.syncs(TOPIC, PARTITION) == (sync(1500, 11_000),)
    assert translate(store, 1499) is None  # older syncs no longer apply
    assert translate(store, 1500) == 11_000
    assert translate(store, 2000) == 11_001
    assert_invariants(store)


def test_repeated_upstream_offset_is_not_a_rewind():
    store = OffsetSyncStore()
    store.add_all([sync(0, 0), sync(100, 100), sync(100, 103)])
    assert translate(store, 100) == 103  # the newest sync for the same upstream offset wins
    assert translate(store, 50) == 1  # and older history is kept


# --- initial replay of the syncs topic ----------------------------------------------------


def test_nothing_is_translated_before_the_initial_read_to_end():
    """OffsetSyncStoreTest.testNoTranslationIfStoreNotStarted."""
    store = OffsetSyncStore(read_to_end=False)
    assert not store.read_to_end
    assert translate(store, 100) is None
    store.add(sync(100, 200))
    assert [translate(store, g) for g in (0, 100, 200)] == [None, None, None]
    store.mark_read_to_end()
    assert store.read_to_end
    assert [translate(store, g) for g in (0, 100, 200)] == [None, 200, 201]


def test_replay_keeps_only_the_latest_sync_per_partition():
    store = OffsetSyncStore(read_to_end=False)
    store.add_all([sync(o, o) for o in range(0, 1001, 10)])
    store.mark_read_to_end()
    assert store.syncs(TOPIC, PARTITION) == (sync(1000, 1000),)
    assert translate(store, 999) is None


# --- bounded history after many syncs -----------------------------------------------------


def test_matches_kafka_past_offset_translation():
    """OffsetSyncStoreTest.testPastOffsetTranslation: exact sync positions kept by the store.

    Syncs every 10 offsets; 0..1000 replayed before start, 1010..10000 afterwards.
    """
    store = OffsetSyncStore(read_to_end=False)
    offset = 0
    while offset <= 1000:
        store.add(sync(offset, offset))
        assert_invariants(store)
        offset += 10
    store.mark_read_to_end()
    while offset <= 10_000:
        store.add(sync(offset, offset))
        assert_invariants(store)
        offset += 10

    kept = [1000, 4840, 6760, 8680, 9160, 9640, 9880, 9940, 9970, 9990, 10_000]
    assert [s.upstream_offset for s in store.syncs(TOPIC, PARTITION)] == kept[::-1]
    # Invariant D: the last sync of the initial replay is still the oldest usable one.
    assert translate(store, 999) is None
    for previous, kept_offset in zip([None, *kept], kept):
        assert translate(store, kept_offset - 1) == (None if previous is None else previous + 1)
        assert translate(store, kept_offset) == kept_offset
        assert translate(store, kept_offset + 1) == kept_offset + 1
        assert translate(store, kept_offset + 2) == kept_offset + 1


def test_history_is_bounded_but_reaches_back_to_the_first_sync():
    store = OffsetSyncStore()
    store.add_all([sync(o, 2 * o) for o in range(20_000)])
    held = store.syncs(TOPIC, PARTITION)
    assert len(held) <= SYNCS_PER_PARTITION
    assert held[0] == sync(19_999, 39_998)  # invariant A: the latest sync is always held
    assert held[-1] == sync(0, 0)  # invariant D: and so is the earliest usable one
    assert translate(store, 0) == 0
    assert translate(store, 19_999) == 39_998
    assert_invariants(store)


@pytest.mark.parametrize("step", [1, 3, 7, 100, 1023, 65_537])
def test_keeps_most_distinct_syncs(step):
    """OffsetSyncStoreTest.testKeepMostDistinctSyncs: each new sync evicts at most two old ones."""
    store = OffsetSyncStore()
    last_count = 1
    for offset in range(0, 3000 * step + 1, step):
        store.add(sync(offset, offset))
        array = slots(store)
        assert array[0].upstream_offset == offset
        assert array[-1].upstream_offset == 0
        count = len(store.syncs(TOPIC, PARTITION))
        assert count - last_count >= -1, f"expired too many syncs at {offset}"
        last_count = count
    assert_invariants(store)


def test_invariants_hold_for_irregular_sync_streams():
    rng = random.Random(14666)
    for _ in range(8):
        store = OffsetSyncStore()
        upstream = rng.randrange(1000)
        for _ in range(150):
            upstream += rng.choice([1, 2, 5, 100, 1000, 2**20, 2**40])
            store.add(sync(upstream, upstream))
            assert_invariants(store)


def test_offsets_near_long_max_do_not_break_the_invariants():
    store = OffsetSyncStore()
    top = 2**63 - 1
    store.add_all([sync(top - 2**62, 0), sync(top - 1000, 1), sync(top - 1, 2), sync(top, 3)])
    assert_invariants(store)
    assert translate(store, top) == 3
    assert translate(store, top - 500) == 2


# --- safety: translation never skips a record ---------------------------------------------


def test_translation_never_skips_a_replicated_record():
    """End to end with OffsetSyncPolicy: compaction gaps upstream, markers downstream.

    For any committed upstream offset g, the translated downstream offset must not be past the
    downstream copy of the first record at or after g; otherwise the group would miss it.
    """
    rng = random.Random(382)
    policy = OffsetSyncPolicy(max_offset_lag=10)
    store = OffsetSyncStore()
    replicated: list[tuple[int, int]] = []
    upstream, downstream = 0, 0
    for _ in range(3000):
        upstream += rng.choice([1, 1, 1, 2, 7])  # compacted-away records leave gaps
        downstream += rng.choice([1, 1, 2])  # transaction markers on the target
        replicated.append((upstream, downstream))
        immediate = policy.record_replicated(TOPIC, PARTITION, upstream, downstream)
        if immediate is not None:
            store.add(immediate)
        if rng.random() < 0.01:  # periodic offset commit flushes the delayed syncs
            store.add_all(policy.take_delayed())

    first_upstream = replicated[0][0]
    for g in range(first_upstream, upstream + 2):
        translated = translate(store, g)
        assert translated is not None
        next_copy = next((d for u, d in replicated if u >= g), downstream + 1)
        assert translated <= next_copy, f"group at {g} would skip downstream {next_copy}"


def test_translation_is_monotonic_for_a_fixed_store():
    store = OffsetSyncStore()
    store.add_all([sync(o, o // 2) for o in range(0, 50_000, 37)])
    results = [translate(store, g) for g in range(0, 50_000, 11)]
    assert all(r is not None for r in results)
    assert results == sorted(results)


def _java_long(value: int) -> int:
    return (value + 2**63) % 2**64 - 2**63


@pytest.mark.parametrize("i_up", [-1, 0, 1, 2**40, 2**62, 2**63 - 2, 2**63 - 1])
@pytest.mark.parametrize("j_up", [-1, 0, 1, 2**40, 2**62, 2**63 - 2, 2**63 - 1])
def test_unbounded_bounds_agree_with_javas_wrapping_arithmetic(i_up, j_up):
    """The store skips emulating Java's long overflow; check that gives Java's verdicts."""
    i_sync, j_sync = sync(i_up, 0), sync(j_up, 0)
    for j in range(SYNCS_PER_PARTITION):
        for i in range(j):
            java_b = _java_long(j_up + _java_long(1 << j) - (1 << i))
            assert _invariant_b(i_sync, j_sync, i, j) == (java_b < 0 or i_up <= java_b)
        if j < SYNCS_PER_PARTITION - 1:
            java_c = _java_long(j_up + (1 << max(j - 2, 0)))
            assert _invariant_c(i_sync, j_sync, j) == (java_c >= 0 and i_up >= java_c)
