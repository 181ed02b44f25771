"""Many consumer groups' committed offsets, read in batches: one home for "what has each of these groups committed".

A checkpoint round reads the committed offsets of every group a flow's filter matches (MirrorMaker 2's
MirrorCheckpointTask, `engine/emitters.py`); at 20,000 groups, one request per group every round cost an idle engine
a large part of a core (issue 47). Two readers answer the same question behind one interface (`GroupOffsetsReader`):

* `BatchedReader`: the Kafka protocol spoken here, over a socket. FindCoordinator v4 (KIP-699) asks for the
  coordinators of up to `GROUPS_PER_REQUEST` groups in one request, then OffsetFetch v8 (KIP-709) asks each
  coordinator for up to `GROUPS_PER_REQUEST` of its groups' offsets in one request (`topics` null: every partition the
  group committed). 10,000 groups on one coordinator: 10 FindCoordinator and 10 OffsetFetch requests a round instead
  of 10,000 of each (librdkafka looks up each group's coordinator too). It connects to each broker it needs per round and closes the connections at the round's
  end (one TCP connection, and TLS handshake, per coordinator per round: docs/benchmarks.md measures it against the
  round; held connections would save little and add a stale-connection path to get right).
* `PerGroupReader`: librdkafka's ListConsumerGroupOffsets, which takes one group per call (confluent-kafka 2.16:
  "Currently we support listing offsets for a single consumer group only"), `GROUP_READS_IN_FLIGHT` calls at a time.

The batched reader also answers many groups' states (`BatchedReader.states`: DescribeGroups v5, the same
coordinators, `GROUPS_PER_REQUEST` groups a request), which `sync.group_offsets` asks of the target every interval
(librdkafka's describe takes one group a request, with a FindCoordinator each: counted on the wire,
tests/integration/test_group_offsets.py); `MirrorKafka.group_states` chooses between it and librdkafka's.

`choose_reader` takes the batched one only when the cluster's ApiVersions (adapters/probe.py, `Capabilities`) give
OffsetFetch >= 8 and FindCoordinator >= 4 and the connection is PLAINTEXT, or SSL that the probe sets up as
librdkafka would (`probe_speaks_for`: the same TLS context, `probe.ssl_context`). SASL_PLAINTEXT and SASL_SSL
clusters keep the per-group path: a SASL login written here could not be tested (no broker here enforces SASL,
docs/brokers.md), and a wrong one would be a credential sent badly.

Both readers give the same typed answer (`GroupOffsets`, one per group asked): the group's offsets
`{(topic, partition): OffsetAndMetadata}`, or why it could not be read (`GroupError`: NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, GROUP_ID_NOT_FOUND, a partition's error, a broken connection, a malformed answer). A
group that failed is never turned into offsets; a partition whose offset is negative (-1: none committed) is left
out. A broken connection or a malformed answer fails the groups that request carried, not the others.

Every byte from a broker is hostile: frames are bounded (`MAX_FRAME_BYTES`; a longer answer is left unread and its
groups asked again in halves), every count and length is checked against the bytes left before anything is
allocated for it, and a malformed answer raises `MalformedAnswer`.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciler.adapters.probe import (
    ProbeError,
    bootstrap_addresses,
    open_socket,
    probe_api_versions,
    probe_speaks_for,
    recv_exact,
)
from reconciler.mirror.checkpoints import OffsetAndMetadata
from reconciler.mirror.mirror_client import GroupState
from reconciler.state.live import API_DESCRIBE_GROUPS, API_FIND_COORDINATOR, API_OFFSET_FETCH, Capabilities

#: Groups per FindCoordinator and per OffsetFetch request of the batched reader.
GROUPS_PER_REQUEST = 1000
#: Groups whose offsets the per-group reader asks for at once (requests in flight: the admin client pipelines them on
#: its connection to each group's coordinator).
GROUP_READS_IN_FLIGHT = 500
#: The largest answer read (a thousand groups of a hundred partitions each is ~5 MB).
MAX_FRAME_BYTES = 64 << 20
FIND_COORDINATOR_VERSION = 4
OFFSET_FETCH_VERSION = 8
DESCRIBE_GROUPS_VERSION = 5
_CLIENT_ID = b"reconciler-group-offsets"

#: Kafka's error codes a group read may meet, by name (others print as their number).
ERROR_NAMES = {
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
    29: "TOPIC_AUTHORIZATION_FAILED",
    30: "GROUP_AUTHORIZATION_FAILED",
    35: "UNSUPPORTED_VERSION",
    69: "GROUP_ID_NOT_FOUND",
    88: "UNSTABLE_OFFSET_COMMIT",
}

#: DescribeGroups' state names (Kafka's group states) -> the ConsumerGroupState names `GroupState` holds; any other
#: name a broker sends is UNKNOWN (active: its offsets are left alone), never the broker's string.
STATE_NAMES = {
    "Empty": "EMPTY",
    "Stable": "STABLE",
    "PreparingRebalance": "PREPARING_REBALANCE",
    "CompletingRebalance": "COMPLETING_REBALANCE",
    "Dead": "DEAD",
}
#: GROUP_ID_NOT_FOUND, for a group the broker does not know (later DescribeGroups versions answer it; v5 says Dead or,
#: Tansu, Empty): DEAD, as librdkafka's describe says it (`MirrorKafka.group_state`).
GROUP_ID_NOT_FOUND = 69

Offsets = Mapping[tuple[str, int], OffsetAndMetadata]


def now_ms() -> int:
    return int(time.time() * 1000)


class MalformedAnswer(Exception):
    """A broker's answer that does not decode: too short, a count or length past its end, a wrong correlation id."""


class AnswerTooLarge(MalformedAnswer):
    """An answer longer than the reader reads (`MAX_FRAME_BYTES`), left unread: its connection is closed, and the
    request's groups are asked again in halves (groups that committed on very many partitions)."""


@dataclass(frozen=True)
class GroupError:
    """Why a group's offsets were not read this round. `code`: Kafka's error code; None: no answer (the connection
    failed, the answer was malformed, the request timed out). What a broker wrote in it (a topic name, an error
    message) is quoted with repr: no control character of theirs reaches a log line."""

    reason: str
    code: int | None = None

    @classmethod
    def of_code(cls, code: int, where: str = "") -> GroupError:
        name = ERROR_NAMES.get(code, f"error code {code}")
        return cls(f"{where}: {name}" if where else name, code)

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True)
class GroupOffsets:
    """One group's committed offsets (empty: none), or `error`; `read_at_ms`: taken before the request that read
    them was sent (MM2 takes it before listConsumerGroupOffsets: a checkpoint's timestamp)."""

    group: str
    read_at_ms: int
    offsets: Offsets = field(default_factory=dict)
    error: GroupError | None = None


@dataclass(frozen=True)
class Committed:
    """One partition of a group's answer, as either reader received it."""

    topic: str
    partition: int
    offset: int
    metadata: str | None
    error: GroupError | None = None


def group_answer(group: str, read_at_ms: int, partitions: Iterable[Committed]) -> GroupOffsets:
    """The one rule both readers apply to a group's answer: a partition's error fails the group (it is skipped this
    round, never half read); a negative offset is no committed offset; metadata ends at its first NUL byte, as
    confluent-kafka reads it (a C string), which writes it with a NUL at its end (noida-db answers 'hello\x00' to
    OffsetFetch for a confluent-kafka commit of 'hello'; Tansu keeps no metadata)."""
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for c in partitions:
        if c.error is not None:
            return GroupOffsets(
                group, read_at_ms, error=GroupError(f"{c.topic!r}-{c.partition}: {c.error}", c.error.code)
            )
        if c.offset >= 0:
            offsets[(c.topic, c.partition)] = OffsetAndMetadata(c.offset, (c.metadata or "").split("\x00", 1)[0])
    return GroupOffsets(group, read_at_ms, offsets)


def failed(groups: Iterable[str], read_at_ms: int, error: GroupError) -> dict[str, GroupOffsets]:
    return {g: GroupOffsets(g, read_at_ms, error=error) for g in groups}


class GroupOffsetsReader(Protocol):
    def read(self, groups: Sequence[str], timeout: float) -> dict[str, GroupOffsets]:
        """An answer for every group of `groups` (the same keys), each request waiting at most about `timeout`."""
        ...

    def close(self) -> None: ...


# --- the per-group reader (librdkafka) -------------------------------------------------------------------------------
class PerGroupReader:
    """librdkafka's ListConsumerGroupOffsets, one group per request, `GROUP_READS_IN_FLIGHT` at a time (waiting for
    each before the next made a round of 10,000 groups take minutes). Any cluster, SASL included. `admin`: an
    AdminClient the caller owns (not closed here); `grace`: seconds waited for an answer past the request's own
    timeout (librdkafka then answers with an error for a broker that did not answer)."""

    def __init__(self, admin: Any, grace: float = 2.0) -> None:
        self.admin, self.grace = admin, grace

    def read(self, groups: Sequence[str], timeout: float) -> dict[str, GroupOffsets]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        out: dict[str, GroupOffsets] = {}
        for i in range(0, len(groups), GROUP_READS_IN_FLIGHT):
            chunk = groups[i : i + GROUP_READS_IN_FLIGHT]
            read_at = now_ms()
            futures = {
                group: self.admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group)], request_timeout=timeout
                )[group]
                for group in chunk
            }
            for group, future in futures.items():
                out[group] = self._answer(group, read_at, future, timeout)
        return out

    def _answer(self, group: str, read_at: int, future: Any, timeout: float) -> GroupOffsets:
        try:
            res = future.result(timeout + self.grace)
        except Exception as exc:  # noqa: BLE001 - a group may vanish meanwhile; a broker may not answer
            return GroupOffsets(group, read_at, error=GroupError(str(exc), _kafka_code(exc)))
        return group_answer(
            group,
            read_at,
            (
                Committed(
                    tp.topic, tp.partition, tp.offset, tp.metadata, None if tp.error is None else _error(tp.error)
                )
                for tp in res.topic_partitions
            ),
        )

    def close(self) -> None:
        """Nothing of its own: the admin client is the caller's."""


def _error(err: Any) -> GroupError:
    code = err.code() if callable(getattr(err, "code", None)) else None
    return GroupError(err.str() if callable(getattr(err, "str", None)) else str(err), code)


def _kafka_code(exc: BaseException) -> int | None:
    err = exc.args[0] if exc.args else None
    code = getattr(err, "code", None)
    return code() if callable(code) else None


# --- the wire: Kafka's flexible encoding (compact strings and arrays, tagged fields) --------------------------------
class Decoder:
    """Reads a broker's answer. Every length and count is checked against the bytes left before it is used: an
    array of n elements needs at least n bytes, a string of n bytes n bytes."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def left(self) -> int:
        return len(self.data) - self.at

    def take(self, n: int) -> bytes:
        if n < 0 or n > self.left():
            raise MalformedAnswer(f"{n} bytes asked at byte {self.at} of a {len(self.data)}-byte answer")
        out = self.data[self.at : self.at + n]
        self.at += n
        return out

    def int8(self) -> int:
        return struct.unpack(">b", self.take(1))[0]

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def uvarint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):  # at most 5 bytes: a 32-bit value
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
        raise MalformedAnswer(f"a varint longer than 5 bytes at byte {self.at}")

    def string(self) -> str | None:
        """A COMPACT_NULLABLE_STRING (also a COMPACT_STRING), UTF-8; bytes that are not UTF-8 are replaced."""
        n = self.uvarint() - 1
        return None if n < 0 else self.take(n).decode("utf-8", "replace")

    def skip_bytes(self) -> None:
        """A COMPACT_BYTES (or COMPACT_NULLABLE_BYTES), skipped."""
        n = self.uvarint() - 1
        if n > 0:
            self.take(n)

    def count(self) -> int:
        """A COMPACT_ARRAY's element count (-1: null), bounded by the bytes left."""
        n = self.uvarint() - 1
        if n > self.left():
            raise MalformedAnswer(f"an array of {n} elements in {self.left()} bytes")
        return n

    def tagged(self) -> None:
        """Tagged fields, skipped (none is read)."""
        fields = self.uvarint()
        if fields > self.left():
            raise MalformedAnswer(f"{fields} tagged fields in {self.left()} bytes")
        for _ in range(fields):
            self.uvarint()
            self.take(self.uvarint())


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def compact_string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return uvarint(len(raw) + 1) + raw


def compact_array(items: Sequence[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


NO_TAGS = b"\x00"


def request_frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    """A request: size, then header v2 (api key, version, correlation id, client id as a classic nullable string,
    tagged fields), then `body`."""
    header = struct.pack(">hhih", api_key, version, correlation_id, len(_CLIENT_ID)) + _CLIENT_ID + NO_TAGS
    return struct.pack(">i", len(header) + len(body)) + header + body


def find_coordinator_body(groups: Sequence[str]) -> bytes:
    """FindCoordinator v4: key_type 0 (a group), coordinator_keys."""
    return b"\x00" + compact_array([compact_string(g) for g in groups]) + NO_TAGS


def offset_fetch_body(groups: Sequence[str]) -> bytes:
    """OffsetFetch v8: per group its id and `topics` null (every partition it committed); require_stable false."""
    return compact_array([compact_string(g) + b"\x00" + NO_TAGS for g in groups]) + b"\x00" + NO_TAGS


def describe_groups_body(groups: Sequence[str]) -> bytes:
    """DescribeGroups v5: the group ids, include_authorized_operations false."""
    return compact_array([compact_string(g) for g in groups]) + b"\x00" + NO_TAGS


@dataclass(frozen=True)
class Coordinator:
    node: int
    host: str
    port: int

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)


def decode_find_coordinator(d: Decoder) -> dict[str, Coordinator | GroupError]:
    """FindCoordinator v4's answer (after the response header): each key's coordinator, or its error."""
    d.int32()  # throttle_time_ms
    out: dict[str, Coordinator | GroupError] = {}
    for _ in range(d.count()):
        key, node, host, port, error = d.string(), d.int32(), d.string(), d.int32(), d.int16()
        message = d.string()
        d.tagged()
        if key is None or key in out:
            continue
        if error:
            out[key] = GroupError.of_code(error, f"FindCoordinator ({message!r})" if message else "FindCoordinator")
        elif host is None or not 0 < port < 65536:
            out[key] = GroupError(f"FindCoordinator: no usable coordinator address ({host!r}:{port})")
        else:
            out[key] = Coordinator(node, host, port)
    d.tagged()
    return out


def decode_offset_fetch(d: Decoder) -> dict[str, tuple[int, list[Committed]]]:
    """OffsetFetch v8's answer (after the response header): each group's error code and partitions."""
    d.int32()  # throttle_time_ms
    out: dict[str, tuple[int, list[Committed]]] = {}
    for _ in range(d.count()):
        group = d.string()
        partitions: list[Committed] = []
        for _ in range(d.count()):
            topic = d.string() or ""
            for _ in range(d.count()):
                index, offset, _epoch, metadata, error = d.int32(), d.int64(), d.int32(), d.string(), d.int16()
                d.tagged()
                partitions.append(
                    Committed(topic, index, offset, metadata, GroupError.of_code(error) if error else None)
                )
            d.tagged()
        error = d.int16()
        d.tagged()
        if group is not None and group not in out:
            out[group] = (error, partitions)
    d.tagged()
    return out


def decode_describe_groups(d: Decoder) -> dict[str, GroupState | GroupError]:
    """DescribeGroups v5's answer (after the response header): each group's state and member count, or its error.
    The members' ids, hosts, metadata and assignments are skipped (only their count is kept)."""
    d.int32()  # throttle_time_ms
    out: dict[str, GroupState | GroupError] = {}
    for _ in range(d.count()):
        error, group, state = d.int16(), d.string(), d.string()
        d.string(), d.string()  # protocol_type, protocol_data
        members = max(0, d.count())
        for _ in range(members):
            d.string(), d.string(), d.string(), d.string()  # member_id, group_instance_id, client_id, client_host
            d.skip_bytes()  # member_metadata
            d.skip_bytes()  # member_assignment
            d.tagged()
        d.int32()  # authorized_operations
        d.tagged()
        if group is None or group in out:
            continue
        if error == GROUP_ID_NOT_FOUND:
            out[group] = GroupState(group, "DEAD", 0)
        elif error:
            out[group] = GroupError.of_code(error, "DescribeGroups")
        else:
            out[group] = GroupState(group, STATE_NAMES.get(state or "", "UNKNOWN"), members)
    d.tagged()
    return out


# --- the batched reader ------------------------------------------------------------------------------------------------
class Connection:
    """One broker connection for one round: requests one at a time, each answer checked and bounded."""

    def __init__(self, sock: socket.socket, max_frame: int = MAX_FRAME_BYTES) -> None:
        self.sock, self.max_frame, self._correlation = sock, max_frame, 0

    def call(self, api_key: int, version: int, body: bytes) -> Decoder:
        """Send one request; its answer's body (after response header v1: correlation id, tagged fields)."""
        self._correlation += 1
        self.sock.sendall(request_frame(api_key, version, self._correlation, body))
        size = struct.unpack(">i", recv_exact(self.sock, 4, "a group offsets read"))[0]
        if size > self.max_frame:
            raise AnswerTooLarge(f"an answer of {size} bytes (at most {self.max_frame} are read)")
        if size < 5:
            raise MalformedAnswer(f"an answer of {size} bytes")
        d = Decoder(recv_exact(self.sock, size, "a group offsets read"))
        correlation = d.int32()
        if correlation != self._correlation:
            raise MalformedAnswer(f"correlation id {correlation}, expected {self._correlation}")
        d.tagged()
        return d

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


#: What a broker connection or its answer can fail with: the groups of that request fail, not the round.
_BROKEN = (OSError, ssl.SSLError, ProbeError, MalformedAnswer)


class BatchedReader:
    """FindCoordinator v4 then OffsetFetch v8, `groups_per_request` groups a request (see the module's doc). `config`:
    the cluster's resolved librdkafka settings (bootstrap.servers, security.protocol PLAINTEXT or SSL, ssl.*);
    `connect`: how a broker connection is opened (`probe.open_socket`; a test's relay may stand in front);
    `describes`: the cluster speaks DescribeGroups v5 too (`states`)."""

    def __init__(
        self,
        config: Mapping[str, str],
        groups_per_request: int = GROUPS_PER_REQUEST,
        connect: Callable[[str, int, Mapping[str, str], float], socket.socket] = open_socket,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        describes: bool = False,
    ) -> None:
        self.config = dict(config)
        self.bootstrap = [(h, int(p)) for h, p in bootstrap_addresses(str(config.get("bootstrap.servers", "")))]
        self.groups_per_request = max(1, groups_per_request)
        self._connect = connect
        self.max_frame_bytes = max_frame_bytes
        self.describes = describes

    def read(self, groups: Sequence[str], timeout: float) -> dict[str, GroupOffsets]:
        round_ = _Round(self, timeout)
        try:
            by_coordinator, lost = self._coordinated(round_, groups)
            out = {g: GroupOffsets(g, round_.started_ms, error=error) for g, error in lost.items()}
            for address, members in by_coordinator.items():
                for chunk in _chunks(members, self.groups_per_request):
                    out.update(round_.offsets(address, chunk))
            return out
        finally:
            round_.close()

    def states(self, groups: Sequence[str], timeout: float) -> dict[str, GroupState | GroupError]:
        """Each group's state and member count (DescribeGroups v5, `groups_per_request` groups a request to each
        coordinator), or why it could not be read. Only where `describes`. A group of the consumer protocol
        (KIP-848) is DEAD to DescribeGroups (Kafka describes classic groups only): the caller asks again where that
        matters (`MirrorKafka.group_states`)."""
        round_ = _Round(self, timeout)
        try:
            by_coordinator, lost = self._coordinated(round_, groups)
            out: dict[str, GroupState | GroupError] = dict(lost)
            for address, members in by_coordinator.items():
                for chunk in _chunks(members, self.groups_per_request):
                    out.update(round_.states(address, chunk))
            return out
        finally:
            round_.close()

    def _coordinated(
        self, round_: _Round, groups: Sequence[str]
    ) -> tuple[dict[tuple[str, int], list[str]], dict[str, GroupError]]:
        """The groups by their coordinator's address, and the groups whose coordinator was not found."""
        by_coordinator: dict[tuple[str, int], list[str]] = {}
        lost: dict[str, GroupError] = {}
        for chunk in _chunks(groups, self.groups_per_request):
            for group, found in round_.coordinators(chunk).items():
                if isinstance(found, GroupError):
                    lost[group] = found
                else:
                    by_coordinator.setdefault(found.address, []).append(group)
        return by_coordinator, lost

    def close(self) -> None:
        """Nothing held between rounds: each round's connections are closed at its end."""


def _chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    return (items[i : i + size] for i in range(0, len(items), size))


class _Round:
    """One read's connections (one per broker, opened when first needed, all closed at its end) and the brokers
    that failed in it (their later requests this round fail at once, without waiting for another timeout)."""

    def __init__(self, reader: BatchedReader, timeout: float) -> None:
        self.reader, self.timeout = reader, timeout
        self.started_ms = now_ms()
        self.connections: dict[tuple[str, int], Connection] = {}
        self.broken: dict[tuple[str, int], GroupError] = {}

    def connection(self, address: tuple[str, int]) -> Connection:
        if address in self.broken:
            raise ProbeError(self.broken[address].reason)
        if address not in self.connections:
            sock = self.reader._connect(address[0], address[1], self.reader.config, self.timeout)
            self.connections[address] = Connection(sock, self.reader.max_frame_bytes)
        return self.connections[address]

    def fail(self, address: tuple[str, int], exc: BaseException) -> GroupError:
        error = GroupError(f"{address[0]}:{address[1]}: {type(exc).__name__}: {exc}")
        self.broken.setdefault(address, error)
        self.drop(address)
        return error

    def drop(self, address: tuple[str, int]) -> None:
        connection = self.connections.pop(address, None)
        if connection is not None:
            connection.close()

    def coordinators(self, groups: Sequence[str]) -> dict[str, Coordinator | GroupError]:
        """Each group's coordinator, asked of the first bootstrap broker that answers."""
        error = GroupError("no bootstrap address")
        for address in self.reader.bootstrap:
            try:
                answer = self.connection(address).call(
                    API_FIND_COORDINATOR, FIND_COORDINATOR_VERSION, find_coordinator_body(groups)
                )
                found = decode_find_coordinator(answer)
            except _BROKEN as exc:
                error = self.fail(address, exc)
                continue
            missing = GroupError("FindCoordinator: not in the answer")
            return {g: found.get(g, missing) for g in groups}
        return dict.fromkeys(groups, error)

    def ask(
        self,
        address: tuple[str, int],
        groups: Sequence[str],
        ask: Callable[[Connection, Sequence[str]], Mapping[str, Any]],
        name: str,
    ) -> tuple[dict[str, Any], dict[str, GroupError]]:
        """`ask`'s decoded answers by group, and the groups lost with their errors: a connection that broke or an
        answer that was malformed loses every group asked; an answer too large to read is asked again in halves (a
        single group's too large answer is its error)."""
        try:
            return dict(ask(self.connection(address), groups)), {}
        except AnswerTooLarge as exc:
            self.drop(address)  # the answer is still on the connection
            if len(groups) == 1:
                return {}, dict.fromkeys(groups, GroupError(f"{name}: {exc}"))
            half = len(groups) // 2
            first, first_lost = self.ask(address, groups[:half], ask, name)
            second, second_lost = self.ask(address, groups[half:], ask, name)
            return first | second, first_lost | second_lost
        except _BROKEN as exc:
            return {}, dict.fromkeys(groups, self.fail(address, exc))

    def states(self, address: tuple[str, int], groups: Sequence[str]) -> dict[str, GroupState | GroupError]:
        def ask(connection: Connection, chunk: Sequence[str]) -> dict[str, GroupState | GroupError]:
            return decode_describe_groups(
                connection.call(API_DESCRIBE_GROUPS, DESCRIBE_GROUPS_VERSION, describe_groups_body(chunk))
            )

        described, lost = self.ask(address, groups, ask, "DescribeGroups")
        missing = GroupError("DescribeGroups: not in the answer")
        return {g: lost[g] if g in lost else described.get(g, missing) for g in groups}

    def offsets(self, address: tuple[str, int], groups: Sequence[str]) -> dict[str, GroupOffsets]:
        read_at = now_ms()

        def ask(connection: Connection, chunk: Sequence[str]) -> dict[str, tuple[int, list[Committed]]]:
            return decode_offset_fetch(
                connection.call(API_OFFSET_FETCH, OFFSET_FETCH_VERSION, offset_fetch_body(chunk))
            )

        fetched, lost = self.ask(address, groups, ask, "OffsetFetch")
        out = {}
        for group in groups:
            if group in lost:
                out[group] = GroupOffsets(group, read_at, error=lost[group])
            elif group not in fetched:
                out[group] = GroupOffsets(group, read_at, error=GroupError("OffsetFetch: not in the answer"))
            else:
                code, partitions = fetched[group]
                out[group] = (
                    GroupOffsets(group, read_at, error=GroupError.of_code(code, "OffsetFetch"))
                    if code
                    else group_answer(group, read_at, partitions)
                )
        return out

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()
        self.connections.clear()


# --- which reader ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReaderChoice:
    """The reader for a cluster and why. `settled`: the choice stands (False: the probe failed, so the per-group
    reader serves now and the choice is made again next time)."""

    reader: GroupOffsetsReader
    batched: bool
    why: str
    settled: bool = True


def batched_refusal(config: Mapping[str, str]) -> str | None:
    """Why the batched reader cannot speak for this cluster's connection settings; None: it can."""
    protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
    if protocol.startswith("SASL"):
        return f"security.protocol {protocol}: the batched reader does not log in with SASL"
    if protocol not in ("PLAINTEXT", "SSL"):
        return f"security.protocol {protocol} is not PLAINTEXT or SSL"
    if not probe_speaks_for(config):
        return "TLS settings the probe cannot apply as librdkafka does (a keystore, an engine, a certificate store)"
    return None


def choose_reader(config: Mapping[str, str], admin: Any, timeout: float = 5.0, grace: float = 2.0) -> ReaderChoice:
    """The batched reader where the cluster speaks OffsetFetch v8 and FindCoordinator v4 and its connection is one
    the batched reader can make (`batched_refusal`); else the per-group reader over `admin`."""
    why = batched_refusal(config)
    if why is None:
        try:
            versions = probe_api_versions(str(config.get("bootstrap.servers", "")), config, timeout=timeout)
        except ProbeError as exc:
            return ReaderChoice(PerGroupReader(admin, grace), False, f"ApiVersions not answered: {exc}", False)
        capabilities = Capabilities(versions)
        if capabilities.batched_group_offsets:
            reader = BatchedReader(config, describes=capabilities.batched_group_states)
            return ReaderChoice(reader, True, "OffsetFetch v8 and FindCoordinator v4")
        why = "the cluster does not speak OffsetFetch v8 and FindCoordinator v4"
    return ReaderChoice(PerGroupReader(admin, grace), False, why)
