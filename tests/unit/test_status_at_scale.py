"""A flow of an organization's size still has a status: the record lists the groups and partitions an operator needs
first and counts the rest, and fits the status topic's message size whatever the names.

Found at 20,000 groups (bench/scale.py): a record listing every group was refused by the target
(MSG_SIZE_TOO_LARGE) and the flow read as down while it copied.
"""

from __future__ import annotations

from reconciler.cli.commands_status import render_text
from reconciler.contract.status import (
    GROUPS_SHOWN,
    LAG_PARTITIONS_SHOWN,
    PartitionLag,
    StatusRecord,
    StatusState,
    furthest_behind,
)
from reconciler.mirror.group_sync import GroupSync, GroupSyncReason, GroupTally, most_telling, tally
from reconciler.operations.status import JobRow

#: The broker's default `message.max.bytes` (and librdkafka's): a status record larger than this is refused.
DEFAULT_MAX_MESSAGE = 1_048_588
LONGEST_NAME = 249  # Kafka's limit on a topic name; group ids are held to the same here


def _groups(n: int) -> tuple[GroupSync, ...]:
    out = []
    for i in range(n):
        name = f"g{i:06d}".ljust(LONGEST_NAME, "x")
        if i % 1000 == 7:
            out.append(GroupSync(name, None, GroupSyncReason.NO_OFFSET_SYNC, f"{'t' * 200}-{i % 5}"))
        elif i % 100 == 3:
            out.append(GroupSync(name, None, GroupSyncReason.TOPIC_FILTERED))
        else:
            out.append(GroupSync(name, 1_000_000 + i, None))
    return tuple(out)


def _lag(n: int) -> tuple[PartitionLag, ...]:
    topic = "t" * LONGEST_NAME
    return tuple(
        PartitionLag(f"{topic[:-6]}{i // 5:06d}", i % 5, f"west.{topic}", i, i + i % 7, i % 7) for i in range(n)
    )


def test_a_flow_of_20000_groups_and_5000_partitions_has_a_status_record_that_fits_the_topic():
    syncs, lag = _groups(20_000), _lag(5_000)
    whole = StatusRecord(flow="west->east", state=StatusState.RUNNING, lag=lag, groups=syncs)
    assert len(whole.to_json()) > DEFAULT_MAX_MESSAGE  # what the engine wrote before: refused
    record = StatusRecord(
        flow="west->east",
        state=StatusState.RUNNING,
        lag_total=sum(p.lag or 0 for p in lag),
        lag=furthest_behind(lag),
        groups=most_telling(syncs, GROUPS_SHOWN),
        group_tally=tally(syncs),
    )
    assert len(record.to_json().encode()) < DEFAULT_MAX_MESSAGE
    back = StatusRecord.from_json(record.to_json())
    assert back.group_tally == tally(syncs)
    assert (back.group_tally.total, back.group_tally.synced) == (20_000, 19_780)
    assert back.group_tally.count(GroupSyncReason.NO_OFFSET_SYNC) == 20
    assert back.group_tally.count(GroupSyncReason.TOPIC_FILTERED) == 200
    assert back.group_tally.oldest_checkpoint_ms == 1_000_000
    assert len(back.lag) == LAG_PARTITIONS_SHOWN and len(back.groups) == GROUPS_SHOWN


def test_the_groups_listed_are_those_not_synced_first_then_the_oldest_checkpoints():
    syncs = (
        GroupSync("fresh", 300, None),
        GroupSync("other-flows", None, GroupSyncReason.TOPIC_FILTERED),
        GroupSync("stale", 100, None),
        GroupSync("empty", None, GroupSyncReason.PARTITION_EMPTY, "orders-1"),
        GroupSync("busy", 200, GroupSyncReason.ACTIVE_ON_TARGET),
    )
    assert [g.group for g in most_telling(syncs, 3)] == ["busy", "empty", "stale"]
    assert [g.group for g in most_telling(syncs, 10)] == ["busy", "empty", "stale", "fresh", "other-flows"]


def test_the_partitions_listed_are_those_furthest_behind_unknown_first():
    lag = (
        PartitionLag("a", 0, "w.a", 5, 5, 0),
        PartitionLag("a", 1, "w.a", 0, 90, 90),
        PartitionLag("b", 0, "w.b", None, None, None),
        PartitionLag("b", 1, "w.b", 1, 11, 10),
    )
    assert furthest_behind(lag, 2) == (lag[1], lag[2])
    assert furthest_behind(lag, 4) == lag


def test_a_tally_from_a_newer_or_damaged_record_reads_what_it_knows():
    t = GroupTally.from_dict({"total": 5, "synced": "3", "not_synced": {"partition_empty": 2, "moon_phase": 4}})
    assert (t.total, t.synced, t.not_synced, t.oldest_checkpoint_ms) == (
        5,
        0,
        ((GroupSyncReason.PARTITION_EMPTY, 2),),
        None,
    )


def test_status_counts_every_group_when_the_record_lists_only_some():
    syncs = _groups(2_000)
    listed = most_telling(syncs, 30)
    row = JobRow(
        flow="west->east",
        wanted=True,
        deployer="local",
        where="pid 1",
        state="running",
        job_state=None,
        why="",
        desired_hash="a",
        deployed_hash="a",
        running_hash="a",
        in_sync=True,
        lag_total=0,
        lag_seconds=0.0,
        latency_ms=None,
        records_per_second=0.0,
        records=0,
        records_stale=False,
        errors=0,
        last_error=None,
        faults=(),
        dead_lettered=0,
        data_loss=(),
        heartbeat_at=None,
        last_seen=None,
        unreadable=None,
        groups=listed,
        group_tally=tally(syncs),
    ).to_dict()
    text = render_text([row], 1_010_000)
    assert "west->east: 2,000 groups in all: 1,978 synced (oldest checkpoint" in text
    assert "2 no offset sync at or before its commit; 20 topic filtered out" in text
    assert "groups that read only topics the flow does not copy (20)" in text
