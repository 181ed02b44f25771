"""Byte-level tests for MM2's Heartbeat / Checkpoint / OffsetSync formats.

Expected bytes are written out by hand from the Java schemas (apache/kafka,
connect/mirror-client/.../Heartbeat.java, Checkpoint.java and connect/mirror/.../OffsetSync.java):
STRING = INT16 byte length + UTF-8, INT32/INT64 big-endian, and a leading INT16 version (0) on the
Heartbeat and Checkpoint values only.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from reconciler.mirror.records import Checkpoint, Heartbeat, OffsetSync, RecordFormatError

# --- Heartbeat -----------------------------------------------------------------------------

HEARTBEAT = Heartbeat("us-west", "us-east", 1_700_000_000_000)
# KEY_SCHEMA = {sourceClusterAlias: STRING, targetClusterAlias: STRING}, no version header
HEARTBEAT_KEY = (
    b"\x00\x07"
    b"us-west"  # len("us-west") = 7
    b"\x00\x07"
    b"us-east"
)
# HEADER_SCHEMA {version: INT16} = 0, then VALUE_SCHEMA_V0 {timestamp: INT64}
# 1_700_000_000_000 = 0x0000_018B_CFE5_6800
HEARTBEAT_VALUE = b"\x00\x00\x00\x00\x01\x8b\xcf\xe5\x68\x00"

# --- Checkpoint ----------------------------------------------------------------------------

CHECKPOINT = Checkpoint("group-1", "us-west.orders", 3, 1000, 998, "meta")
# KEY_SCHEMA = {group: STRING, topic: STRING, partition: INT32}, no version header
CHECKPOINT_KEY = (
    b"\x00\x07"
    b"group-1"
    b"\x00\x0e"
    b"us-west.orders"  # 14 bytes
    b"\x00\x00\x00\x03"  # partition 3
)
# version 0, then VALUE_SCHEMA_V0 = {upstreamOffset: INT64, offset: INT64, metadata: STRING}
CHECKPOINT_VALUE = (
    b"\x00\x00"  # version 0
    b"\x00\x00\x00\x00\x00\x00\x03\xe8"  # upstreamOffset 1000 = 0x3e8
    b"\x00\x00\x00\x00\x00\x00\x03\xe6"  # offset (downstream) 998 = 0x3e6
    b"\x00\x04"
    b"meta"
)

# --- OffsetSync ----------------------------------------------------------------------------

OFFSET_SYNC = OffsetSync("orders", 3, 1000, 998)
# KEY_SCHEMA = {topic: STRING, partition: INT32}
OFFSET_SYNC_KEY = b"\x00\x06orders\x00\x00\x00\x03"
# VALUE_SCHEMA = {upstreamOffset: INT64, offset: INT64} -- no version header at all
OFFSET_SYNC_VALUE = b"\x00\x00\x00\x00\x00\x00\x03\xe8\x00\x00\x00\x00\x00\x00\x03\xe6"

CASES = [
    pytest.param(HEARTBEAT, HEARTBEAT_KEY, HEARTBEAT_VALUE, id="heartbeat"),
    pytest.param(CHECKPOINT, CHECKPOINT_KEY, CHECKPOINT_VALUE, id="checkpoint"),
    pytest.param(OFFSET_SYNC, OFFSET_SYNC_KEY, OFFSET_SYNC_VALUE, id="offset-sync"),
]


@pytest.mark.parametrize(("record", "key", "value"), CASES)
def test_serializes_to_the_java_bytes(record, key, value):
    assert record.record_key() == key
    assert record.record_value() == value


@pytest.mark.parametrize(("record", "key", "value"), CASES)
def test_deserializes_the_java_bytes(record, key, value):
    assert type(record).deserialize(key, value) == record


@pytest.mark.parametrize(("record", "key", "value"), CASES)
def test_accepts_any_bytes_like_input(record, key, value):
    assert type(record).deserialize(bytearray(key), memoryview(value)) == record


def test_only_heartbeat_and_checkpoint_values_carry_a_version_header():
    # Heartbeat value: 2 header bytes + 8 timestamp bytes; OffsetSync value: exactly two INT64s.
    assert len(HEARTBEAT.record_value()) == 2 + 8
    assert len(CHECKPOINT.record_value()) == 2 + 8 + 8 + 2 + len("meta")
    assert len(OFFSET_SYNC.record_value()) == 8 + 8
    # Keys never have one: they start straight with the first string's length.
    assert CHECKPOINT.record_key()[:2] == b"\x00\x07"


def test_unicode_lengths_count_utf8_bytes_not_characters():
    record = Checkpoint("grüppe", "🚀", 0, 0, 0, "グ")
    # "grüppe": ü is c3 bc, so 7 bytes; "🚀" is 4 bytes; "グ" is 3 bytes
    assert record.record_key() == (b"\x00\x07gr\xc3\xbcppe\x00\x04\xf0\x9f\x9a\x80\x00\x00\x00\x00")
    assert record.record_value().endswith(b"\x00\x03\xe3\x82\xb0")
    assert Checkpoint.deserialize(record.record_key(), record.record_value()) == record


def test_negative_numbers_are_twos_complement():
    record = Checkpoint("g", "t", -1, -2, -1, "")
    assert record.record_key() == b"\x00\x01g\x00\x01t\xff\xff\xff\xff"
    assert record.record_value() == (
        b"\x00\x00"
        b"\xff\xff\xff\xff\xff\xff\xff\xfe"  # -2
        b"\xff\xff\xff\xff\xff\xff\xff\xff"  # -1
        b"\x00\x00"  # empty metadata
    )
    assert Checkpoint.deserialize(record.record_key(), record.record_value()) == record


def test_extreme_int64_and_int32_values_round_trip():
    record = OffsetSync("t", 2**31 - 1, 2**63 - 1, -(2**63))
    assert record.record_key()[-4:] == b"\x7f\xff\xff\xff"
    assert record.record_value() == b"\x7f" + b"\xff" * 7 + b"\x80" + b"\x00" * 7
    assert OffsetSync.deserialize(record.record_key(), record.record_value()) == record


def test_round_trip_of_varied_records():
    rng = random.Random(382)
    alphabet = "abcXYZ.-_ü🚀"
    for _ in range(200):
        text = lambda: "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 20)))  # noqa: E731
        records = [
            Heartbeat(text(), text(), rng.randrange(-(2**63), 2**63)),
            Checkpoint(
                text(), text(), rng.randrange(-(2**31), 2**31), rng.randrange(2**63), rng.randrange(2**63), text()
            ),
            OffsetSync(text(), rng.randrange(2**31), rng.randrange(2**63), rng.randrange(2**63)),
        ]
        for record in records:
            assert type(record).deserialize(record.record_key(), record.record_value()) == record


def test_longest_string_allowed_is_short_max_bytes():
    longest = "x" * 0x7FFF
    record = OffsetSync(longest, 0, 0, 0)
    assert record.record_key()[:2] == b"\x7f\xff"
    assert OffsetSync.deserialize(record.record_key(), record.record_value()).topic == longest
    with pytest.raises(ValueError, match="32768 UTF-8 bytes"):
        OffsetSync("x" * 0x8000, 0, 0, 0)
    # The limit is on bytes: 16384 two-byte characters are 32768 bytes.
    with pytest.raises(ValueError, match="maximum is 32767"):
        OffsetSync("ü" * 0x4000, 0, 0, 0)


# --- construction-time validation ---------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"partition": 2**31}, "INT32"),
        ({"partition": -(2**31) - 1}, "INT32"),
        ({"upstream_offset": 2**63}, "INT64"),
        ({"downstream_offset": -(2**63) - 1}, "INT64"),
        ({"topic": "bad\udc80surrogate"}, "not encodable as UTF-8"),
    ],
)
def test_unencodable_fields_are_rejected_with_value_error(changes, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(OFFSET_SYNC, **changes)


@pytest.mark.parametrize(
    "changes",
    [{"partition": True}, {"partition": 1.0}, {"topic": None}, {"topic": b"orders"}, {"upstream_offset": "1"}],
)
def test_wrongly_typed_fields_are_rejected_with_type_error(changes):
    with pytest.raises(TypeError):
        dataclasses.replace(OFFSET_SYNC, **changes)


def test_records_are_frozen_and_hashable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        OFFSET_SYNC.partition = 4  # type: ignore[misc]
    assert {OFFSET_SYNC, OffsetSync("orders", 3, 1000, 998)} == {OFFSET_SYNC}


# --- decoding errors -----------------------------------------------------------------------


@pytest.mark.parametrize(("record", "key", "value"), CASES)
def test_every_truncation_is_a_format_error(record, key, value):
    cls = type(record)
    for cut in range(len(key)):
        with pytest.raises(RecordFormatError, match="key truncated"):
            cls.deserialize(key[:cut], value)
    for cut in range(len(value)):
        with pytest.raises(RecordFormatError, match="truncated"):
            cls.deserialize(key, value[:cut])


@pytest.mark.parametrize(("record", "key", "value"), CASES)
def test_trailing_bytes_are_rejected(record, key, value):
    cls = type(record)
    with pytest.raises(RecordFormatError, match="1 unexpected trailing bytes"):
        cls.deserialize(key + b"\x00", value)
    with pytest.raises(RecordFormatError, match="2 unexpected trailing bytes"):
        cls.deserialize(key, value + b"\x00\x00")


@pytest.mark.parametrize("version", [b"\x00\x01", b"\xff\xff"])
@pytest.mark.parametrize(("record", "key", "value"), CASES[:2])
def test_unknown_versions_are_rejected(record, key, value, version):
    with pytest.raises(RecordFormatError, match="unsupported version"):
        type(record).deserialize(key, version + value[2:])


def test_offset_sync_value_is_not_mistaken_for_a_versioned_one():
    # An OffsetSync value starting with 0x0001 is simply a large upstream offset, not "version 1".
    value = b"\x00\x01" + b"\x00" * 14
    assert OffsetSync.deserialize(OFFSET_SYNC_KEY, value).upstream_offset == 1 << 48


def test_negative_string_length_is_rejected():
    with pytest.raises(RecordFormatError, match="negative length -1"):
        OffsetSync.deserialize(b"\xff\xff" + b"\x00\x00\x00\x00", OFFSET_SYNC_VALUE)


def test_invalid_utf8_is_rejected():
    with pytest.raises(RecordFormatError, match="'topic' is not UTF-8"):
        OffsetSync.deserialize(b"\x00\x01\xff\x00\x00\x00\x00", OFFSET_SYNC_VALUE)


@pytest.mark.parametrize("bad", [None, "text", 42])
def test_missing_or_non_bytes_input_is_rejected(bad):
    with pytest.raises(RecordFormatError):
        Heartbeat.deserialize(bad, HEARTBEAT_VALUE)
    with pytest.raises(RecordFormatError):
        Heartbeat.deserialize(HEARTBEAT_KEY, bad)


def test_errors_name_the_record_and_field():
    with pytest.raises(RecordFormatError) as info:
        Checkpoint.deserialize(CHECKPOINT_KEY, CHECKPOINT_VALUE[:-2])
    assert str(info.value) == "Checkpoint value truncated: field 'metadata' needs 4 bytes, only 2 left"


def _mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    action = rng.randrange(3)
    pos = rng.randrange(len(buf) + 1)
    if action == 0 and buf:
        buf[min(pos, len(buf) - 1)] = rng.randrange(256)
    elif action == 1:
        buf.insert(pos, rng.randrange(256))
    elif buf:
        del buf[min(pos, len(buf) - 1)]
    return bytes(buf)


@pytest.mark.parametrize(("record", "key", "value"), CASES)
def test_corrupted_records_either_round_trip_exactly_or_raise_format_error(record, key, value):
    """Fuzz: no IndexError/struct.error/UnicodeDecodeError may leak, whatever the bytes."""
    cls = type(record)
    rng = random.Random(7)
    outcomes = {"accepted": 0, "rejected": 0}
    for _ in range(3000):
        bad_key, bad_value = (_mutate(rng, key), value) if rng.random() < 0.5 else (key, _mutate(rng, value))
        try:
            decoded = cls.deserialize(bad_key, bad_value)
        except RecordFormatError:
            outcomes["rejected"] += 1
            continue
        outcomes["accepted"] += 1
        # Whatever is accepted is a faithful reading: it re-encodes to exactly the input.
        assert (decoded.record_key(), decoded.record_value()) == (bad_key, bad_value)
    assert outcomes["accepted"] > 0 and outcomes["rejected"] > 0


def test_random_bytes_only_ever_raise_record_format_error():
    rng = random.Random(2)
    for _ in range(2000):
        key, value = rng.randbytes(rng.randrange(0, 24)), rng.randbytes(rng.randrange(0, 24))
        for cls in (Heartbeat, Checkpoint, OffsetSync):
            try:
                record = cls.deserialize(key, value)
            except RecordFormatError:
                continue
            assert (record.record_key(), record.record_value()) == (key, value)
