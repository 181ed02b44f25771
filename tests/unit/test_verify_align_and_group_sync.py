"""mirror/verify.py's align, mirror/group_sync.py's judge_group and failback's pure parts (issue 38)."""

from __future__ import annotations

from reconciler.mirror.group_sync import GroupSyncReason, judge_group
from reconciler.mirror.verify import LOOKAHEAD, DiffKind, PartitionDigests, align
from reconciler.operations.failback import divergent_runs, locate_copies


def side(digests, first: int = 0) -> PartitionDigests:
    out = PartitionDigests()
    for i, d in enumerate(digests):
        out.add(first + i, d)
    return out


def runs(alignment):
    return [(d.kind, d.source_first, d.source_last, d.target_first, d.target_last, d.count) for d in alignment]


def test_equal_sides_match_every_record():
    a = align(side(range(1, 11)), side(range(1, 11), 100), replicated_through=9)
    assert (a.matched, a.differences, a.duplicates, a.pending, a.clean) == (10, (), (), 0, True)


def test_a_run_of_source_records_absent_from_the_target_is_missing():
    a = align(side([1, 2, 3, 4, 5, 6]), side([1, 2, 5, 6], 50), replicated_through=5)
    assert runs(a.differences) == [(DiffKind.MISSING, 2, 3, None, None, 2)]
    assert a.matched == 4 and not a.clean


def test_a_target_record_from_no_source_record_is_extra():
    a = align(side([1, 2, 3]), side([1, 99, 2, 3], 10), replicated_through=2)
    assert runs(a.differences) == [(DiffKind.EXTRA, None, None, 11, 11, 1)]


def test_a_different_record_at_the_same_place_is_changed():
    a = align(side([1, 2, 3]), side([1, 77, 3], 10), replicated_through=2)
    assert runs(a.differences) == [(DiffKind.CHANGED, 1, 1, 11, 11, 1)]


def test_a_batch_written_again_is_a_duplicate_not_a_difference():
    a = align(side([1, 2, 3, 4]), side([1, 2, 3, 2, 3, 4], 10), replicated_through=3)
    assert a.clean and a.matched == 4
    assert runs(a.duplicates) == [(DiffKind.DUPLICATE, 1, 2, 13, 14, 2)]


def test_source_records_past_the_newest_sync_and_the_last_match_are_pending_not_missing():
    a = align(side([1, 2, 3, 4, 5]), side([1, 2], 10), replicated_through=1)
    assert (a.pending, a.differences) == (3, ())
    # at or before the newest sync they were copied: missing
    b = align(side([1, 2, 3, 4, 5]), side([1, 2], 10), replicated_through=3)
    assert runs(b.differences) == [(DiffKind.MISSING, 2, 3, None, None, 2)] and b.pending == 1


def test_the_window_start_walks_earlier_records_without_counting_them():
    a = align(side([1, 2, 3, 4]), side([1, 9, 3, 4], 10), replicated_through=3, window_start=2)
    assert a.matched == 2 and a.clean  # the change at source offset 1 is before the window


def test_search_ahead_is_bounded_by_lookahead():
    gap = list(range(1000, 1000 + LOOKAHEAD))  # a source run as long as the search window
    src = side([1, *gap, 2, 3])
    # the target resumes at 2, LOOKAHEAD records further on in the source: past the bound, so not "missing"
    far = align(src, side([1, 2, 3], 10), replicated_through=LOOKAHEAD + 2)
    assert DiffKind.MISSING not in {d.kind for d in far.differences[:1]}
    assert far.differences[0].kind is DiffKind.CHANGED
    # one record shorter: found within the bound, one missing run
    near = align(side([1, *gap[:-1], 2, 3]), side([1, 2, 3], 10), replicated_through=LOOKAHEAD + 1)
    assert runs(near.differences) == [(DiffKind.MISSING, 1, LOOKAHEAD - 1, None, None, LOOKAHEAD - 1)]


def judge(
    committed,
    *,
    route=lambda t: f"west.{t}" if t != "private" else None,
    translate=None,
    syncs=True,
    read=True,
    active=False,
    last=123,
):
    return judge_group(
        "g",
        committed,
        route,
        translate or (lambda t, p, o: o),
        lambda t, p: syncs,
        read,
        active,
        last,
    )


def test_judge_group_names_each_reason():
    assert judge({("orders", 0): 5}).reason is None and judge({("orders", 0): 5}).last_checkpoint_ms == 123
    assert judge({("orders", 0): 5}, active=True).reason is GroupSyncReason.ACTIVE_ON_TARGET
    assert judge({("private", 0): 1}).reason is GroupSyncReason.TOPIC_FILTERED
    assert judge({("orders", 0): 5}, read=False).reason is GroupSyncReason.NOT_YET_DISCOVERED
    none = judge({("orders", 0): 5, ("orders", 1): 2}, translate=lambda t, p, o: None if p == 1 else o)
    assert (none.reason, none.partition) == (GroupSyncReason.NO_OFFSET_SYNC, "orders-1")
    empty = judge({("orders", 1): 0}, translate=lambda t, p, o: None, syncs=False, last=None)
    assert (empty.reason, empty.partition, empty.last_checkpoint_ms) == (
        GroupSyncReason.PARTITION_EMPTY,
        "orders-1",
        None,
    )
    # a group that committed nothing yet (nothing to place) is not reported as filtered out
    assert judge({}).reason is None


def test_failback_divergent_runs_join_missing_changed_and_pending_source_offsets():
    src = side([1, 2, 3, 4, 5, 6, 7], 20)
    a = align(src, side([1, 9, 3, 4], 0), replicated_through=24)
    assert [(d.source_first, d.source_last, d.count) for d in divergent_runs(a, src)] == [(21, 21, 1), (24, 26, 3)]
    assert all(d.kind is DiffKind.MISSING and d.target_first is None for d in divergent_runs(a, src))


def test_failback_locates_the_last_copy_and_own_records_before_it():
    tgt = side([1, 2, 3, 50, 51], 0)  # copies 0..2, then records of the target's own
    a = align(side([1, 2, 3]), tgt, replicated_through=2)
    copies = locate_copies(a, tgt)
    assert (copies.last, copies.own_before_last) == (2, None)
    mixed = side([1, 50, 2, 3], 0)  # an own record between copies: no start position separates them
    m = locate_copies(align(side([1, 2, 3]), mixed, replicated_through=2), mixed)
    assert (m.last, m.own_before_last) == (3, 1)
