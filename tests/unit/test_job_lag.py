"""The lag rule (engine/lag.py): the driver's positions against the source's current end, not the end a
task saw when it ended; lag in seconds from the oldest unreplicated record's timestamp."""

from __future__ import annotations

from reconciler.contract.status import PartitionLag
from reconciler.engine.ends import PartitionEnds
from reconciler.engine.lag import (
    JobLag,
    LagPosition,
    OldestRecord,
    SourceEndReader,
    SourceEnds,
    committed_ahead,
    job_lag,
    lag_seconds,
    partition_lag,
    probe_targets,
)
from tests.ends_helpers import FakeEndRequests

COPY = {("orders", 0): "west.orders", ("orders", 1): "west.orders"}
NOW = 1_700_000_100_000


def test_lag_is_the_current_source_end_minus_the_drivers_position_not_the_end_a_task_saw():
    # The tasks last ended caught up (end 100 and 50); the workers have been held up since, while the
    # source grew to 24,100 and 80.
    seen = {("orders", 0): LagPosition("west.orders", 100, 100), ("orders", 1): LagPosition("west.orders", 50, 50)}
    positions = {("orders", 0): 100, ("orders", 1): 50}
    ends = SourceEnds({("orders", 0): 24_100, ("orders", 1): 80}, read_at=NOW - 500)
    lag = job_lag(COPY, positions, seen, ends, NOW)
    assert [(p.partition, p.next, p.end, p.lag) for p in lag.partitions] == [(0, 100, 24_100, 24_000), (1, 50, 80, 30)]
    assert lag.total == 24_030 and lag.read_at == NOW - 500
    assert job_lag(COPY, positions, seen, None, NOW).total == 0  # what a job reported before it read the source


def test_the_position_is_the_drivers_current_one_and_the_end_the_larger_of_the_task_and_the_read():
    seen = {("orders", 0): LagPosition("west.orders", 10, 500)}  # a task read to the true end, 500
    # Since then a batch moved the position to 400; the read (Tansu: last batch's base + 1) says 498.
    lag = job_lag(COPY, {("orders", 0): 400}, seen, SourceEnds({("orders", 0): 498}, NOW), NOW)
    assert lag.partitions == (PartitionLag("orders", 0, "west.orders", 400, 500, 100),)
    # A partition recreated: both the task's and the read's end are low again; the position past the end reads 0.
    lag = job_lag(COPY, {("orders", 0): 400}, {("orders", 0): LagPosition("west.orders", 400, 3)}, None, NOW)
    assert lag.partitions[0].lag == 0


def test_partitions_without_a_task_report_yet_count_once_they_have_a_position_and_an_end():
    positions = {("orders", 0): 0, ("orders", 1): -2}  # partition 1: no committed offset yet (from the beginning)
    lag = job_lag(COPY, positions, {}, SourceEnds({("orders", 0): 7, ("orders", 1): 9}, NOW), NOW)
    assert [(p.partition, p.remote, p.lag) for p in lag.partitions] == [(0, "west.orders", 7), (1, "west.orders", None)]
    assert lag.total == 7  # partition 1's earliest offset not read: unknown (the reader reads it: below)
    assert partition_lag(5, None) is None and partition_lag(None, 5) is None and partition_lag(9, 5) == 0


def test_lag_seconds_is_the_age_of_the_oldest_record_at_a_lagging_position():
    parts = [
        PartitionLag("orders", 0, "west.orders", 100, 200, 100),
        PartitionLag("orders", 1, "west.orders", 50, 60, 10),
        PartitionLag("orders", 2, "west.orders", 70, 70, 0),
    ]
    oldest = {
        ("orders", 0): OldestRecord(100, NOW - 12_000),
        ("orders", 1): OldestRecord(50, NOW - 3_000),
        ("orders", 2): OldestRecord(60, NOW - 90_000),  # caught up since: not a lagging record
    }
    assert lag_seconds(parts, oldest, NOW) == 12.0
    # Partition 0's position moved past the record read: that timestamp is of a record copied since.
    moved = [PartitionLag("orders", 0, "west.orders", 150, 200, 50), *parts[1:]]
    assert lag_seconds(moved, oldest, NOW) == 3.0
    assert lag_seconds(moved[:1], oldest, NOW) is None  # lagging, no timestamp at its position: unknown
    assert lag_seconds(parts[2:], oldest, NOW) == 0.0  # nothing lags
    assert lag_seconds(parts[:1], {("orders", 0): OldestRecord(100, NOW + 5_000)}, NOW) == 0.0  # a clock ahead


def test_job_lag_carries_the_lag_in_seconds_of_the_read():
    ends = SourceEnds({("orders", 0): 200}, NOW - 1_000, {("orders", 0): OldestRecord(100, NOW - 4_000)})
    lag = job_lag(COPY, {("orders", 0): 100}, {}, ends, NOW)
    assert lag == JobLag(lag.partitions, 100, 4.0, NOW - 1_000, {("orders", 0): 4.0})


def test_the_partitions_probed_for_a_timestamp_are_those_that_lag_most():
    positions = {("t", p): 0 for p in range(30)} | {("t", 99): -2}
    ends = {("t", p): p for p in range(30)} | {("t", 99): 1_000}
    assert probe_targets(positions, ends, limit=3) == {("t", 29): 0, ("t", 28): 0, ("t", 27): 0}
    assert len(probe_targets(positions, ends)) == 20
    assert probe_targets(positions, {}) == {}  # no ends read: nothing known to lag


class Reader(SourceEndReader):
    """The side channel's reader with its two reads answered from dicts (no clients)."""

    def __init__(self, ends, stamps, committed=None):
        self.stamps, self.probed, self.commits = stamps, [], committed or {}
        self.ends = PartitionEnds(FakeEndRequests(latest=ends, earliest={tp: 0 for tp in ends}))
        self.timeout = 10.0

    def committed(self, copy):
        return {tp: pos for tp, pos in self.commits.items() if tp in copy}

    def oldest_records(self, positions, timeout=2.0):
        self.probed.append(dict(positions))
        return {tp: OldestRecord(pos, self.stamps[tp]) for tp, pos in positions.items() if tp in self.stamps}


def test_a_timestamp_is_read_once_per_position_of_a_lagging_partition():
    reader = Reader({("orders", 0): 500, ("orders", 1): 40}, {("orders", 0): NOW - 9_000, ("orders", 1): NOW})
    seen = {("orders", 1): 50}  # a task saw partition 1 end at 50, past the read's 40
    first = reader.read(COPY, {("orders", 0): 100, ("orders", 1): 40}, seen)
    assert first.ends == {("orders", 0): 500, ("orders", 1): 40}
    assert reader.probed == [{("orders", 0): 100, ("orders", 1): 40}]
    assert first.oldest[("orders", 0)] == OldestRecord(100, NOW - 9_000)
    again = reader.read(COPY, {("orders", 0): 100, ("orders", 1): 50}, seen, first.oldest)  # 1 caught up
    assert reader.probed[1:] == [] and again.oldest == {("orders", 0): OldestRecord(100, NOW - 9_000)}
    reader.read(COPY, {("orders", 0): 300, ("orders", 1): 50}, seen, again.oldest)  # a batch moved partition 0
    assert reader.probed[1:] == [{("orders", 0): 300}]


def test_positions_a_running_task_committed_count_before_the_task_ends():
    # A worker commits every round (about a second); the driver learns its positions when the task ends
    # (max_batch_ms). A healthy job mid-task lags by what is not yet committed, not by a task's worth.
    reader = Reader({("orders", 0): 20_000, ("orders", 1): 40}, {("orders", 0): NOW - 800})
    reader.commits = {("orders", 0): 19_000, ("orders", 1): 10}  # partition 1's commit is behind the driver
    ends = reader.read(COPY, {("orders", 0): 0, ("orders", 1): 40}, {})
    assert ends.committed == {("orders", 0): 19_000, ("orders", 1): 10}
    assert reader.probed == [{("orders", 0): 19_000}], "the oldest record is read at the committed position"
    lag = job_lag(COPY, {("orders", 0): 0, ("orders", 1): 40}, {}, ends, NOW)
    assert lag.total == 1_000 and [p.next for p in lag.partitions] == [19_000, 40]
    assert lag.seconds == 0.8


def test_records_a_running_task_committed_count_before_it_reports():
    ends = SourceEnds({("orders", 0): 900}, NOW, committed={("orders", 0): 700, ("orders", 1): 5})
    assert committed_ahead({("orders", 0): 500, ("orders", 1): 10}, ends) == 200  # a commit behind counts 0
    assert committed_ahead({("orders", 0): -2}, ends) == 0  # the earliest offset not read: nothing known
    fresh = SourceEnds({}, NOW, committed={("orders", 0): 700}, starts={("orders", 0): 100})
    assert committed_ahead({("orders", 0): -2}, fresh) == 600  # a job's first task, from the earliest offset
    assert committed_ahead({("orders", 0): 500}, None) == 0


def test_a_partition_never_copied_lags_by_every_record_it_holds():
    # docs/benchmarks.md, the 2,500-partition run: 50 partitions never copied while the status said a lag of 3.
    # A partition whose position is still the earliest (-2: nothing copied, nothing committed) read as lag None,
    # summed as nothing: a flow that never copies a partition said it was caught up, and the stuck watch (which
    # skips unknown positions) never flagged it. Its lag counts from its earliest offset, read with the ends.
    reader = Reader({("orders", 0): 7, ("orders", 1): 9}, {("orders", 1): NOW - 30_000})
    reader.ends = PartitionEnds(
        FakeEndRequests(latest={("orders", 0): 7, ("orders", 1): 9}, earliest={("orders", 1): 2})
    )
    positions = {("orders", 0): 7, ("orders", 1): -2}
    ends = reader.read(COPY, positions, {})
    assert ends.starts == {("orders", 1): 2}
    assert reader.probed == [{("orders", 1): 2}], "the oldest record is read at the earliest offset"
    lag = job_lag(COPY, positions, {}, ends, NOW)
    assert [(p.partition, p.next, p.end, p.lag) for p in lag.partitions] == [(0, 7, 7, 0), (1, 2, 9, 7)]
    assert lag.total == 7 and lag.seconds == 30.0


def test_a_failed_read_of_the_earliest_offsets_leaves_the_ends_read():
    reader = Reader({("orders", 0): 7, ("orders", 1): 9}, {})
    reader.ends = PartitionEnds(
        FakeEndRequests(
            latest={("orders", 0): 7, ("orders", 1): 9}, earliest={("orders", 1): RuntimeError("timed out")}
        )
    )
    ends = reader.read(COPY, {("orders", 0): 3, ("orders", 1): -2}, {})
    assert ends.ends == {("orders", 0): 7, ("orders", 1): 9} and ends.starts == {}
    assert job_lag(COPY, {("orders", 0): 3, ("orders", 1): -2}, {}, ends, NOW).total == 4  # partition 1: unknown
