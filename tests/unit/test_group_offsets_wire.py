"""The batched group offsets reader's encoding and decoding against bytes built by hand from the Kafka protocol's
message definitions (FindCoordinator v4, OffsetFetch v8; request header v2, response header v1). The proof that it
talks to real brokers is tests/integration/test_group_offsets.py."""

from __future__ import annotations

import struct

import pytest

from reconciler.adapters.group_offsets import (
    Committed,
    Coordinator,
    Decoder,
    GroupError,
    MalformedAnswer,
    decode_find_coordinator,
    decode_offset_fetch,
    find_coordinator_body,
    group_answer,
    offset_fetch_body,
    request_frame,
)
from reconciler.mirror.checkpoints import OffsetAndMetadata


def cstr(s: str | None) -> bytes:
    """COMPACT_(NULLABLE_)STRING: length + 1 as an unsigned varint (0: null), then the bytes (all < 127 here)."""
    return b"\x00" if s is None else bytes([len(s.encode()) + 1]) + s.encode()


def i16(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def i64(n: int) -> bytes:
    return struct.pack(">q", n)


def test_a_find_coordinator_request_is_header_v2_and_a_compact_array_of_keys():
    frame = request_frame(10, 4, 7, find_coordinator_body(["g1", "gr2"]))
    client = b"reconciler-group-offsets"
    header = i16(10) + i16(4) + i32(7) + i16(len(client)) + client + b"\x00"
    body = b"\x00" + b"\x03" + b"\x03g1" + b"\x04gr2" + b"\x00"  # key_type 0, 2 keys (count + 1), tags
    assert frame == i32(len(header) + len(body)) + header + body


def test_an_offset_fetch_request_asks_every_partition_of_each_group():
    body = offset_fetch_body(["a", "bb"])
    group = lambda g: cstr(g) + b"\x00" + b"\x00"  # noqa: E731 - topics null, the group's tags
    assert body == b"\x03" + group("a") + group("bb") + b"\x00" + b"\x00"  # require_stable false, tags


def test_a_find_coordinator_answer_gives_each_group_its_coordinator_or_its_error():
    answer = (
        i32(0)  # throttle_time_ms
        + b"\x04"
        + cstr("g1")
        + i32(1)
        + cstr("broker-1")
        + i32(9092)
        + i16(0)
        + cstr(None)
        + b"\x00"
        + cstr("g2")
        + i32(-1)
        + cstr("")
        + i32(-1)
        + i16(15)
        + cstr("loading")
        + b"\x00"
        + cstr("g3")
        + i32(2)
        + cstr("h")
        + i32(70000)  # not a port
        + i16(0)
        + cstr(None)
        + b"\x00"
        + b"\x00"
    )
    found = decode_find_coordinator(Decoder(answer))
    assert found["g1"] == Coordinator(1, "broker-1", 9092)
    assert isinstance(found["g2"], GroupError) and found["g2"].code == 15
    assert "COORDINATOR_NOT_AVAILABLE" in str(found["g2"]) and "loading" in str(found["g2"])
    assert isinstance(found["g3"], GroupError) and found["g3"].code is None


def partition(index: int, offset: int, metadata: str | None, error: int = 0) -> bytes:
    return i32(index) + i64(offset) + i32(-1) + cstr(metadata) + i16(error) + b"\x00"


def test_an_offset_fetch_answer_gives_each_group_its_partitions_or_its_error():
    answer = (
        i32(0)
        + b"\x04"  # three groups
        + cstr("ok")
        + b"\x02"  # one topic
        + cstr("orders")
        + b"\x04"
        + partition(0, 42, "meta\x00")
        + partition(1, -1, "")
        + partition(2, 7, None)
        + b"\x00"
        + i16(0)
        + b"\x00"
        + cstr("moved")
        + b"\x01"
        + i16(16)  # NOT_COORDINATOR
        + b"\x00"
        + cstr("half")
        + b"\x02"
        + cstr("t")
        + b"\x03"
        + partition(0, 5, "")
        + partition(1, -1, "", 88)  # UNSTABLE_OFFSET_COMMIT
        + b"\x00"
        + i16(0)
        + b"\x00"
        + b"\x00"
    )
    fetched = decode_offset_fetch(Decoder(answer))
    code, parts = fetched["ok"]
    assert code == 0
    assert group_answer("ok", 1, parts).offsets == {
        ("orders", 0): OffsetAndMetadata(42, "meta"),  # up to its first NUL, as confluent-kafka reads it
        ("orders", 2): OffsetAndMetadata(7, ""),  # partition 1: offset -1, none committed
    }
    assert fetched["moved"] == (16, [])
    half = group_answer("half", 1, fetched["half"][1])
    assert half.offsets == {} and half.error is not None and half.error.code == 88 and "'t'-1" in str(half.error)


@pytest.mark.parametrize(
    "answer, why",
    [
        (i32(0) + b"\xff\xff\xff\xff\x0f", "array of"),  # 4 billion groups in 0 bytes
        (i32(0) + b"\x02" + b"\xff\xff\xff\x7f" + b"x", "bytes asked"),  # a group id of 268 MB
        (i32(0) + b"\x80\x80\x80\x80\x80\x01", "varint"),  # a varint of 6 bytes
        (i32(0) + b"\x02" + cstr("g") + b"\x01", "bytes asked"),  # cut short
        (b"\x00\x00", "bytes asked"),  # no throttle time
    ],
)
def test_a_malformed_answer_raises_at_once_without_allocating_what_it_claims(answer, why):
    with pytest.raises(MalformedAnswer, match=why):
        decode_offset_fetch(Decoder(answer))


def test_tagged_fields_are_skipped_and_bounded():
    d = Decoder(b"\x02" + b"\x00\x01x" + b"\x05\x02yz" + b"\x07")
    d.tagged()
    assert d.uvarint() == 7
    with pytest.raises(MalformedAnswer):
        Decoder(b"\x7f").tagged()


def test_a_group_with_a_partition_error_is_never_half_read():
    parts = [Committed("t", 0, 3, None), Committed("t", 1, 4, None, GroupError.of_code(3))]
    answer = group_answer("g", 5, parts)
    assert answer.offsets == {} and answer.read_at_ms == 5
    assert str(answer.error) == "'t'-1: UNKNOWN_TOPIC_OR_PARTITION"
