"""engine/ends.py's `PartitionEnds` against a fake of its broker requests (tests/ends_helpers.py): which request each
method makes, with which timeout, and what it makes of the answers. What each end IS on Tansu and on noida-db is
tests/integration/test_partition_ends.py's."""

from __future__ import annotations

import logging

import pytest

from reconciler.engine.ends import GATE_TIMEOUT_S, WATERMARKS_TIMEOUT_S, PartitionEnds
from tests.ends_helpers import FakeEndRequests

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def test_listed_latest_is_one_list_offsets_request_with_the_gates_short_timeout_by_default():
    fake = FakeEndRequests(latest={A0: 11, A1: 0, B0: 7})
    ends = PartitionEnds(fake)
    assert ends.listed_latest([B0, A0, A0, A1]) == {A0: 11, A1: 0, B0: 7}
    assert fake.asked == [("latest", [A0, A1, B0], GATE_TIMEOUT_S)]  # one request, each partition once, sorted
    assert ends.listed_latest([A0], timeout=10.0) == {A0: 11}
    assert fake.asked[-1] == ("latest", [A0], 10.0)


def test_listed_earliest_asks_for_the_log_start():
    fake = FakeEndRequests(latest={A0: 11}, earliest={A0: 4})
    assert PartitionEnds(fake).listed_earliest([A0], timeout=10.0) == {A0: 4}
    assert fake.asked == [("earliest", [A0], 10.0)]


def test_no_partition_no_request():
    fake = FakeEndRequests()
    ends = PartitionEnds(fake)
    assert ends.listed_latest([]) == {} and ends.listed_earliest([]) == {} and fake.asked == []


def test_a_partition_that_failed_or_answered_no_offset_is_left_out(caplog):
    fake = FakeEndRequests(latest={A0: 11, A1: RuntimeError("UNKNOWN_TOPIC_OR_PART"), B0: -1})
    with caplog.at_level(logging.INFO, logger="reconciler.engine.ends"):
        assert PartitionEnds(fake).listed_latest([A0, A1, B0]) == {A0: 11}
    assert "a[1]: UNKNOWN_TOPIC_OR_PART" in caplog.text


def test_every_partition_failed_raises_with_the_first_error():
    fake = FakeEndRequests(latest={A0: RuntimeError("broker down"), A1: RuntimeError("broker down")})
    with pytest.raises(RuntimeError, match=r"cannot read the source's end offsets: a\[0\]: broker down"):
        PartitionEnds(fake).listed_latest([A0, A1])


def test_watermarks_are_asked_of_the_broker():
    fake = FakeEndRequests(marks={A0: (3, 11)})
    assert PartitionEnds(fake).watermarks(A0) == (3, 11)
    assert fake.asked == [("watermarks", A0, WATERMARKS_TIMEOUT_S)]


def test_the_true_end_is_read_from_just_before_the_high_watermark():
    # Tansu: 20 records in two batches of ten list as 11; the read from offset 10 reaches 20.
    fake = FakeEndRequests(marks={A0: (0, 11)}, read_ends={A0: 20})
    assert PartitionEnds(fake).true_end(A0) == 20
    assert fake.asked[-1] == ("read_end", (A0, 10), 5.0)


def test_the_true_end_is_never_below_the_high_watermark_and_starts_at_the_log_start():
    # An empty partition whose log starts at 5 (truncated): the read starts at the log start, not before it.
    fake = FakeEndRequests(marks={A0: (5, 5)}, read_ends={A0: 5})
    assert PartitionEnds(fake).true_end(A0, timeout=1.0) == 5
    assert fake.asked[-1] == ("read_end", (A0, 5), 1.0)
    fake = FakeEndRequests(marks={A0: (0, 20)}, read_ends={A0: 19})  # e.g. only the record at 19 was read
    assert PartitionEnds(fake).true_end(A0) == 20


def test_no_end_in_time_is_unknown():
    fake = FakeEndRequests(marks={A0: (0, 11)}, read_ends={A0: None})
    assert PartitionEnds(fake).true_end(A0) is None
