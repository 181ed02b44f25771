"""MirrorMaker 2's binary record formats: heartbeats, checkpoints and offset syncs.

Byte-compatible with `org.apache.kafka.connect.mirror.{Heartbeat, Checkpoint, OffsetSync}`, which
write Kafka protocol `Struct`s: INT16/INT32/INT64 are big-endian two's complement and STRING is an
INT16 byte length followed by UTF-8. Heartbeat and Checkpoint *values* start with an INT16 version
header (only version 0 exists); their keys, and both halves of an OffsetSync, carry no header.
Matching the Java layout byte for byte lets the reconciler read and write MM2's internal topics
(`heartbeats`, `<alias>.checkpoints.internal`, `mm2-offset-syncs.<alias>.internal`) interchangeably
with real MirrorMaker 2 and with Java tooling such as RemoteClusterUtils.

Decoding is stricter than Java's: trailing bytes, unknown versions and invalid UTF-8 are rejected
with `RecordFormatError` (a ValueError) instead of being ignored or replaced, so garbage on an
internal topic is reported rather than silently turned into offsets.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Any, ClassVar, Self

#: The only value version Heartbeat.VERSION / Checkpoint.VERSION has ever had.
VERSION = 0

_MAX_STRING_BYTES = 0x7FFF  # Type.STRING rejects anything longer than Short.MAX_VALUE


class RecordFormatError(ValueError):
    """Bytes that are not a valid MirrorMaker 2 record (truncated, trailing garbage, bad version)."""


class _Type(enum.Enum):
    """The protocol types MM2's schemas use, with their fixed-width struct formats."""

    INT16 = ">h"
    INT32 = ">i"
    INT64 = ">q"
    STRING = "string"


_Schema = tuple[tuple[str, _Type], ...]

_HEADER: _Schema = (("version", _Type.INT16),)


def _check_value(field: str, kind: _Type, value: Any) -> None:
    """Reject what Java's Schema.write would reject, before anything is half-written."""
    if kind is _Type.STRING:
        if not isinstance(value, str):
            raise TypeError(f"{field} must be a str, not {type(value).__name__}")
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise ValueError(f"{field} is not encodable as UTF-8: {exc.reason}") from None
        if size > _MAX_STRING_BYTES:
            raise ValueError(f"{field} is {size} UTF-8 bytes; the maximum is {_MAX_STRING_BYTES}")
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be an int, not {type(value).__name__}")
    bits = struct.calcsize(kind.value) * 8
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not low <= value <= high:
        raise ValueError(f"{field}={value} does not fit in {kind.name} [{low}, {high}]")


def _encode(schema: _Schema, values: tuple[Any, ...]) -> bytes:
    out = bytearray()
    for (_, kind), value in zip(schema, values, strict=True):
        if kind is _Type.STRING:
            raw = value.encode("utf-8")
            out += struct.pack(">h", len(raw)) + raw
        else:
            out += struct.pack(kind.value, value)
    return bytes(out)


class _Reader:
    """Reads protocol fields off a buffer, turning every shortfall into a RecordFormatError."""

    def __init__(self, data: Any, what: str) -> None:
        if data is None:
            raise RecordFormatError(f"{what} is missing (null)")
        try:
            self._buf = memoryview(data).cast("B")
        except TypeError:
            raise RecordFormatError(f"{what} must be bytes, not {type(data).__name__}") from None
        self._pos = 0
        self._what = what

    def _take(self, field: str, size: int) -> memoryview:
        remaining = len(self._buf) - self._pos
        if size > remaining:
            raise RecordFormatError(
                f"{self._what} truncated: field '{field}' needs {size} bytes, only {remaining} left"
            )
        chunk = self._buf[self._pos : self._pos + size]
        self._pos += size
        return chunk

    def read(self, schema: _Schema) -> tuple[Any, ...]:
        return tuple(self._read_field(name, kind) for name, kind in schema)

    def _read_field(self, field: str, kind: _Type) -> Any:
        if kind is not _Type.STRING:
            return struct.unpack(kind.value, self._take(field, struct.calcsize(kind.value)))[0]
        (length,) = struct.unpack(">h", self._take(field, 2))
        if length < 0:
            raise RecordFormatError(f"{self._what}: field '{field}' has negative length {length}")
        raw = self._take(field, length)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"{self._what}: field '{field}' is not UTF-8: {exc.reason}") from None

    def finish(self) -> None:
        extra = len(self._buf) - self._pos
        if extra:
            raise RecordFormatError(f"{self._what} has {extra} unexpected trailing bytes")


class _Record:
    """Shared plumbing: subclasses declare their key and value schemas and field order."""

    __slots__ = ()
    KEY_SCHEMA: ClassVar[_Schema]
    VALUE_SCHEMA: ClassVar[_Schema]
    VERSIONED: ClassVar[bool]  # whether the value starts with the INT16 version header

    def _key_fields(self) -> tuple[Any, ...]:
        raise NotImplementedError

    def _value_fields(self) -> tuple[Any, ...]:
        raise NotImplementedError

    def __post_init__(self) -> None:
        for schema, values in ((self.KEY_SCHEMA, self._key_fields()), (self.VALUE_SCHEMA, self._value_fields())):
            for (field, kind), value in zip(schema, values, strict=True):
                _check_value(field, kind, value)

    def record_key(self) -> bytes:
        return _encode(self.KEY_SCHEMA, self._key_fields())

    def record_value(self) -> bytes:
        body = _encode(self.VALUE_SCHEMA, self._value_fields())
        return _encode(_HEADER, (VERSION,)) + body if self.VERSIONED else body

    @classmethod
    def _decode(cls, key: bytes | None, value: bytes | None) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        name = cls.__name__
        if key is None or value is None:
            raise RecordFormatError(f"{name} record has no {'key' if key is None else 'value'}")
        key_reader = _Reader(key, f"{name} key")
        key_fields = key_reader.read(cls.KEY_SCHEMA)
        key_reader.finish()
        value_reader = _Reader(value, f"{name} value")
        if cls.VERSIONED:
            (version,) = value_reader.read(_HEADER)
            if version != VERSION:
                raise RecordFormatError(f"{name} value has unsupported version {version}; only {VERSION} is known")
        value_fields = value_reader.read(cls.VALUE_SCHEMA)
        value_reader.finish()
        return key_fields, value_fields


@dataclass(frozen=True, slots=True)
class Heartbeat(_Record):
    """Emitted by MirrorHeartbeatConnector so replication flows are observable end to end."""

    source_cluster_alias: str
    target_cluster_alias: str
    timestamp: int  # epoch milliseconds

    KEY_SCHEMA: ClassVar[_Schema] = (("sourceClusterAlias", _Type.STRING), ("targetClusterAlias", _Type.STRING))
    VALUE_SCHEMA: ClassVar[_Schema] = (("timestamp", _Type.INT64),)
    VERSIONED: ClassVar[bool] = True

    def _key_fields(self) -> tuple[Any, ...]:
        return (self.source_cluster_alias, self.target_cluster_alias)

    def _value_fields(self) -> tuple[Any, ...]:
        return (self.timestamp,)

    @classmethod
    def deserialize(cls, key: bytes | None, value: bytes | None) -> Self:
        (source, target), (timestamp,) = cls._decode(key, value)
        return cls(source, target, timestamp)


@dataclass(frozen=True, slots=True)
class Checkpoint(_Record):
    """A consumer group's upstream offset and its translation on the target cluster.

    `topic` is the topic as named on the target (already renamed by the replication policy).
    """

    consumer_group_id: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    KEY_SCHEMA: ClassVar[_Schema] = (("group", _Type.STRING), ("topic", _Type.STRING), ("partition", _Type.INT32))
    VALUE_SCHEMA: ClassVar[_Schema] = (
        ("upstreamOffset", _Type.INT64),
        ("offset", _Type.INT64),
        ("metadata", _Type.STRING),
    )
    VERSIONED: ClassVar[bool] = True

    def _key_fields(self) -> tuple[Any, ...]:
        return (self.consumer_group_id, self.topic, self.partition)

    def _value_fields(self) -> tuple[Any, ...]:
        return (self.upstream_offset, self.downstream_offset, self.metadata)

    @classmethod
    def deserialize(cls, key: bytes | None, value: bytes | None) -> Self:
        (group, topic, partition), (upstream, downstream, metadata) = cls._decode(key, value)
        return cls(group, topic, partition, upstream, downstream, metadata)


@dataclass(frozen=True, slots=True)
class OffsetSync(_Record):
    """A pair of offsets known to denote the same record upstream and downstream.

    `topic` is the *source* topic name. Unlike the other two formats this one (which lives in
    connect/mirror, not mirror-client) has no version header at all.
    """

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    KEY_SCHEMA: ClassVar[_Schema] = (("topic", _Type.STRING), ("partition", _Type.INT32))
    VALUE_SCHEMA: ClassVar[_Schema] = (("upstreamOffset", _Type.INT64), ("offset", _Type.INT64))
    VERSIONED: ClassVar[bool] = False

    def _key_fields(self) -> tuple[Any, ...]:
        return (self.topic, self.partition)

    def _value_fields(self) -> tuple[Any, ...]:
        return (self.upstream_offset, self.downstream_offset)

    @classmethod
    def deserialize(cls, key: bytes | None, value: bytes | None) -> Self:
        (topic, partition), (upstream, downstream) = cls._decode(key, value)
        return cls(topic, partition, upstream, downstream)
