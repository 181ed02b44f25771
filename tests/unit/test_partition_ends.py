"""engine/ends.py's `PartitionEnds` against a fake of its broker requests (tests/ends_helpers.py): which request each
method makes, with which timeout, and what it makes of the answers. What each end IS on Tansu and on noida-db is
tests/integration/test_partition_ends.py's."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaError, KafkaException

from reconciler.contract.spec import ClusterSpec
from reconciler.engine.ends import (
    GATE_TIMEOUT_S,
    OFFSET_INVALID,
    WATERMARKS_TIMEOUT_S,
    KafkaEndRequests,
    NoAnswer,
    PartitionEnds,
    timed_out,
)
from reconciler.engine.tasks import TP
from tests.ends_helpers import FakeEndRequests
from tests.spec_helpers import job_spec

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
    fake = FakeEndRequests(marks={A0: (0, 11)}, reached={A0: 20})
    assert PartitionEnds(fake).true_end(A0) == 20
    assert fake.asked[-1] == ("read_end", (A0, 10), 5.0)


def test_the_true_end_is_never_below_the_high_watermark_and_starts_at_the_log_start():
    # An empty partition whose log starts at 5 (truncated): the read starts at the log start, not before it.
    fake = FakeEndRequests(marks={A0: (5, 5)}, reached={A0: 5})
    assert PartitionEnds(fake).true_end(A0, timeout=1.0) == 5
    assert fake.asked[-1] == ("read_end", (A0, 5), 1.0)
    fake = FakeEndRequests(marks={A0: (0, 20)}, reached={A0: 19})  # e.g. only the record at 19 was read
    assert PartitionEnds(fake).true_end(A0) == 20


def test_no_end_in_time_is_unknown():
    fake = FakeEndRequests(marks={A0: (0, 11)}, reached={A0: None})
    assert PartitionEnds(fake).true_end(A0) is None


def test_the_true_ends_of_many_partitions_are_one_read_from_their_listed_ends():
    """Issue 47: the silent partitions of a batch are read to their true ends together (one consumer), each from just
    before its listed end (its log start for an empty one), never below it; one not reached in time is left out."""
    a2 = ("a", 2)
    fake = FakeEndRequests(reached={A0: 20, A1: 4, a2: None})
    ends = PartitionEnds(fake).true_ends({A0: (0, 11), A1: (5, 5), a2: (0, 3)}, timeout=2.0)
    assert ends == {A0: 20, A1: 5}
    assert fake.asked == [("read_ends", {A0: 10, A1: 5, a2: 2}, 2.0)]
    assert PartitionEnds(fake).true_ends({}) == {} and len(fake.asked) == 1


# --- a partition whose leader does not answer (issue 47) -----------------------------------------------------------
def test_read_latest_tells_the_partitions_whose_leader_did_not_answer_from_the_errors():
    """A partition whose leader did not answer in time (`NoAnswer`, a future's or librdkafka's timeout) is unanswered;
    a partition the broker answered with an error (a topic deleted) is not: it is only left out."""
    fake = FakeEndRequests(latest={A0: 11, A1: NoAnswer("its leader did not answer within 3 s"), B0: RuntimeError("x")})
    read = PartitionEnds(fake).read_latest([A0, A1, B0])
    assert read.ends == {A0: 11} and read.unanswered == {A1: "its leader did not answer within 3 s"}
    assert timed_out(TimeoutError()) and timed_out(KafkaException(KafkaError(KafkaError._TIMED_OUT)))
    assert not timed_out(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))) and not timed_out(ValueError())
    with pytest.raises(RuntimeError, match="cannot read the source's end offsets"):  # none answered: the cluster
        PartitionEnds(FakeEndRequests(latest={A0: NoAnswer("hung")})).read_latest([A0])


@dataclass
class _Answer:
    offset: int


class _Admin:
    """The admin client's list_offsets: one future per partition, answered as librdkafka answers it (a partition
    whose leader did not answer in time: offset OFFSET_INVALID, no error), the request's timeout recorded."""

    def __init__(self, answers: dict[TP, int | Exception]):
        self.answers, self.request_timeouts = answers, []

    def list_offsets(self, wanted, isolation_level, request_timeout):
        self.request_timeouts.append(request_timeout)
        out = {}
        for tp in wanted:
            future: Future = Future()
            answer = self.answers[(tp.topic, tp.partition)]
            future.set_exception(answer) if isinstance(answer, Exception) else future.set_result(_Answer(answer))
            out[tp] = future
        return out


def test_kafka_list_offsets_takes_librdkafkas_invalid_offset_for_no_answer():
    admin = _Admin({A0: 11, A1: OFFSET_INVALID, B0: KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))})
    spec = job_spec("west->east", ClusterSpec("west", "127.0.0.1:1"), ClusterSpec("east", "127.0.0.1:2"))
    requests = KafkaEndRequests(spec, admin, lambda: None)
    got = requests.list_offsets([A0, A1, B0], False, 3.0)
    assert got[A0] == 11 and isinstance(got[A1], NoAnswer) and "3 s" in str(got[A1])
    assert isinstance(got[B0], KafkaException) and admin.request_timeouts == [3.0]
