"""Relays in front of a Kafka-protocol broker: one that counts the requests of each kind that cross it
(`RequestCounter`), and one that gives a partition a leader of its own that can be made to stop answering
(`LeaderRelay`, further down).

Every Kafka request is a frame (a 4-byte big-endian size, then the request header whose first field is the
16-bit API key). `RequestCounter` relays bytes both ways unchanged and, on the client-to-broker side, reads the
frames' API keys. The broker must advertise the relay's address (`start_broker(..., advertised=relay)`), so every
connection a client opens after its bootstrap goes through the relay too: the counts are what the clients sent on
the wire, librdkafka's own metadata and version requests included.
"""

from __future__ import annotations

import socket
import threading
from collections import Counter

#: API keys by name (the Kafka protocol's numbering); keys not listed print as `api<N>`.
API_NAMES = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    22: "InitProducerId",
    23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    28: "TxnOffsetCommit",
    29: "DescribeAcls",
    30: "CreateAcls",
    31: "DeleteAcls",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    36: "SaslAuthenticate",
    37: "CreatePartitions",
    42: "DeleteGroups",
    44: "IncrementalAlterConfigs",
    60: "DescribeCluster",
    71: "GetTelemetrySubscriptions",
}


def api_name(key: int) -> str:
    return API_NAMES.get(key, f"api{key}")


class RequestCounter:
    """Listens on 127.0.0.1:`port` and relays to `upstream` (host, port), counting requests by API key."""

    def __init__(self, port: int, upstream: tuple[str, int]):
        self.upstream = upstream
        self._counts: Counter[int] = Counter()
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", port))
        self.port = self._server.getsockname()[1]
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def counts(self) -> Counter[int]:
        with self._lock:
            return Counter(self._counts)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()

    def close(self) -> None:
        self._stop.set()
        self._server.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                broker = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._requests, args=(client, broker), daemon=True).start()
            threading.Thread(target=self._responses, args=(broker, client), daemon=True).start()

    def _requests(self, client: socket.socket, broker: socket.socket) -> None:
        """Client -> broker: relay every byte, count each frame's API key."""
        pending = bytearray()
        need = 4  # bytes of the next frame still to read (size prefix, then payload)
        in_payload, size = False, 0
        try:
            while chunk := client.recv(65536):
                broker.sendall(chunk)
                pending += chunk
                while len(pending) >= need:
                    if not in_payload:
                        size = int.from_bytes(pending[:4], "big")
                        del pending[:4]
                        in_payload, need = True, max(size, 2)
                        continue
                    with self._lock:
                        self._counts[int.from_bytes(pending[:2], "big", signed=True)] += 1
                    del pending[:size]
                    in_payload, need = False, 4
        except OSError:
            pass
        finally:
            _close(client, broker)

    @staticmethod
    def _responses(broker: socket.socket, client: socket.socket) -> None:
        try:
            while chunk := broker.recv(65536):
                client.sendall(chunk)
        except OSError:
            pass
        finally:
            _close(client, broker)


def _close(*socks: socket.socket) -> None:
    for s in socks:
        try:
            s.close()
        except OSError:
            pass


# --- a partition whose leader does not answer ------------------------------------------------------------------------
METADATA = 3
LEADER_NOT_AVAILABLE = 5  # a topic's error code in a Metadata response


class _Reader:
    """Reads the Kafka protocol's primitive types from a frame (classic and flexible/compact encodings)."""

    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, n: int) -> bytes:
        out = self.data[self.at : self.at + n]
        if len(out) != n:
            raise ValueError("frame too short")
        self.at += n
        return out

    def int8(self) -> int:
        return int.from_bytes(self.take(1), "big", signed=True)

    def int16(self) -> int:
        return int.from_bytes(self.take(2), "big", signed=True)

    def int32(self) -> int:
        return int.from_bytes(self.take(4), "big", signed=True)

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def string(self, compact: bool) -> bytes | None:
        n = self.uvarint() - 1 if compact else self.int16()
        return None if n < 0 else self.take(n)

    def count(self, compact: bool) -> int:
        return self.uvarint() - 1 if compact else self.int32()

    def tagged(self) -> bytes:
        """The tagged fields, kept raw (their count, then each tag, size and bytes)."""
        start = self.at
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())
        return self.data[start : self.at]


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _string(s: bytes | None, compact: bool) -> bytes:
    if compact:
        return _uvarint(0 if s is None else len(s) + 1) + (s or b"")
    return (-1 if s is None else len(s)).to_bytes(2, "big", signed=True) + (s or b"")


def _count(n: int, compact: bool) -> bytes:
    return _uvarint(n + 1) if compact else n.to_bytes(4, "big", signed=True)


def _int32s(r: _Reader, compact: bool) -> list[int]:
    return [r.int32() for _ in range(max(0, r.count(compact)))]


def _put_int32s(values: list[int], compact: bool) -> bytes:
    return _count(len(values), compact) + b"".join(v.to_bytes(4, "big", signed=True) for v in values)


def rewrite_metadata(
    body: bytes,
    version: int,
    moved: frozenset[tuple[str, int]],
    node: int,
    port: int,
    unlisted: frozenset[str] = frozenset(),
) -> bytes:
    """A Metadata response (`body`: after the correlation id) with the partitions of `moved` led by node `node`, a
    broker at 127.0.0.1:`port` added to its brokers, and the topics of `unlisted` answered with LEADER_NOT_AVAILABLE
    and no partition (as a broker creating topics in bulk, or loaded, may list one) (versions 1 to 13; the response
    header's tagged fields of the flexible versions, 9 on, are part of `body`)."""
    flex = version >= 9
    r = _Reader(body)
    out = bytearray()
    if flex:
        out += r.tagged()  # the response header's
    if version >= 3:
        out += r.take(4)  # throttle_time_ms
    brokers = []
    for _ in range(r.count(flex)):
        b_node, host, b_port = r.int32(), r.string(flex), r.int32()
        rack = r.string(flex) if version >= 1 else None
        tags = r.tagged() if flex else b""
        brokers.append((b_node, host, b_port, rack, tags))
    if node not in {b[0] for b in brokers}:
        brokers.append((node, b"127.0.0.1", port, None, b"\x00" if flex else b""))
    out += _count(len(brokers), flex)
    for b_node, host, b_port, rack, tags in brokers:
        out += b_node.to_bytes(4, "big", signed=True) + _string(host, flex) + b_port.to_bytes(4, "big", signed=True)
        if version >= 1:
            out += _string(rack, flex)
        out += tags
    if version >= 2:
        out += _string(r.string(flex), flex)  # cluster_id
    if version >= 1:
        out += r.take(4)  # controller_id
    topics = r.count(flex)
    out += _count(topics, flex)
    for _ in range(max(0, topics)):
        topic_error = r.take(2)
        name = r.string(flex)
        hidden = name is not None and name.decode() in unlisted
        out += LEADER_NOT_AVAILABLE.to_bytes(2, "big", signed=True) if hidden else topic_error
        out += _string(name, flex)
        if version >= 10:
            out += r.take(16)  # topic_id
        if version >= 1:
            out += r.take(1)  # is_internal
        parts = r.count(flex)
        topic_out, out = out, bytearray()  # the partitions, dropped for a topic of `unlisted`
        for _ in range(max(0, parts)):
            error, index, leader = r.int16(), r.int32(), r.int32()
            epoch = r.int32() if version >= 7 else None
            replicas, isr = _int32s(r, flex), _int32s(r, flex)
            offline = _int32s(r, flex) if version >= 5 else []
            tags = r.tagged() if flex else b""
            if name is not None and (name.decode(), index) in moved:
                leader, replicas, isr = node, [node], [node]
            out += error.to_bytes(2, "big", signed=True) + index.to_bytes(4, "big", signed=True)
            out += leader.to_bytes(4, "big", signed=True)
            if epoch is not None:
                out += epoch.to_bytes(4, "big", signed=True)
            out += _put_int32s(replicas, flex) + _put_int32s(isr, flex)
            if version >= 5:
                out += _put_int32s(offline, flex)
            out += tags
        out, partitions_out = topic_out, out
        out += _count(0 if hidden else parts, flex) + (b"" if hidden else partitions_out)
        if version >= 8:
            out += r.take(4)  # topic_authorized_operations
        if flex:
            out += r.tagged()
    out += r.data[r.at :]  # cluster_authorized_operations (8-10), error_code (13), the tagged fields
    return bytes(out)


class LeaderRelay:
    """A source broker whose partitions `moved` have a leader of their own that can be made to stop answering.

    Two listeners relay to one broker (which must advertise `port`, the first: `start_broker(..., advertised=...)`).
    Every Metadata response crossing either is rewritten (`rewrite_metadata`): the partitions of `moved` are led by a
    second node, whose address is the second listener (`leader_port`). The broker itself serves every partition
    whichever node a request went to, so while both answer nothing differs for the clients but the connection
    their requests for the moved partitions take. `stall()`: the second node stops answering, as a leader whose host
    hangs (a broker stopped with SIGSTOP, a network partition): its connections stay open, every byte sent to it is
    read and nothing comes back, and new connections are accepted the same way. `answer()`: it answers again (its
    stalled connections are closed: the clients reconnect). The other partitions, led by the first node, are not
    touched. Chained behind `RequestCounter`s (one relaying to `port`, the broker advertising it; one relaying to
    `leader_port`, its port set as `advertised_leader_port`), every request of both nodes is counted (bench/scale.py).
    `unlisted` (set it at any time): topics every Metadata response then lists with LEADER_NOT_AVAILABLE and no
    partition."""

    def __init__(self, upstream: tuple[str, int], moved: set[tuple[str, int]], node: int = 4242):
        self.upstream, self.moved, self.node = upstream, frozenset(moved), node
        self.unlisted: frozenset[str] = frozenset()
        self.stalled = threading.Event()
        self._stalled_socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._servers = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
        self.port, self.leader_port = (s.getsockname()[1] for s in self._servers)
        # the second node's address in the Metadata responses: another relay chained in front of `leader_port` (a
        # `RequestCounter`, whose requests then count too) sets its own port here
        self.advertised_leader_port = self.leader_port
        self._stop = threading.Event()
        for i, server in enumerate(self._servers):
            threading.Thread(target=self._accept, args=(server, i == 1), daemon=True).start()

    def stall(self) -> None:
        self.stalled.set()

    def answer(self) -> None:
        self.stalled.clear()
        with self._lock:
            socks, self._stalled_socks = self._stalled_socks, []
        for s in socks:  # shut down first: a close alone does not end a recv blocked in another thread
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        _close(*socks)

    def close(self) -> None:
        self._stop.set()
        for s in self._servers:
            s.close()
        self.answer()

    def _accept(self, server: socket.socket, leader: bool) -> None:
        while not self._stop.is_set():
            try:
                client, _ = server.accept()
            except OSError:
                return
            if leader and self.stalled.is_set():
                self._hold(client)
                continue
            try:
                broker = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            pending: dict[int, tuple[int, int]] = {}  # correlation id -> (api key, version)
            args = (client, broker, pending, leader)
            threading.Thread(target=self._requests, args=args, daemon=True).start()
            threading.Thread(target=self._responses, args=args, daemon=True).start()

    def _hold(self, client: socket.socket) -> None:
        """A connection to a node that does not answer: read and drop what comes, answer nothing."""
        with self._lock:
            self._stalled_socks.append(client)

        def drain() -> None:
            try:
                while client.recv(65536):
                    pass
            except OSError:
                pass

        threading.Thread(target=drain, daemon=True).start()

    @staticmethod
    def _frames(sock: socket.socket):
        """The Kafka frames read from `sock`, each with its 4-byte size prefix."""
        buf = bytearray()
        while chunk := sock.recv(65536):
            buf += chunk
            while len(buf) >= 4 and len(buf) >= 4 + (size := int.from_bytes(buf[:4], "big")):
                yield bytes(buf[: 4 + size])
                del buf[: 4 + size]

    def _stalls(self, leader: bool, *socks: socket.socket) -> bool:
        if leader and self.stalled.is_set():
            with self._lock:
                self._stalled_socks.extend(socks)
            return True
        return False

    def _requests(self, client: socket.socket, broker: socket.socket, pending: dict, leader: bool) -> None:
        try:
            for frame in self._frames(client):
                if self._stalls(leader, client, broker):
                    continue  # read, never sent on: the node does not answer
                key = int.from_bytes(frame[4:6], "big", signed=True)
                version = int.from_bytes(frame[6:8], "big", signed=True)
                pending[int.from_bytes(frame[8:12], "big", signed=True)] = (key, version)
                broker.sendall(frame)
        except OSError:
            pass
        finally:
            if not (leader and self.stalled.is_set()):
                _close(client, broker)

    def _responses(self, client: socket.socket, broker: socket.socket, pending: dict, leader: bool) -> None:
        try:
            for frame in self._frames(broker):
                if self._stalls(leader, client, broker):
                    continue
                correlation = int.from_bytes(frame[4:8], "big", signed=True)
                key, version = pending.pop(correlation, (-1, -1))
                if key == METADATA and version >= 1:
                    body = rewrite_metadata(
                        frame[8:], version, self.moved, self.node, self.advertised_leader_port, self.unlisted
                    )
                    frame = (4 + len(body)).to_bytes(4, "big") + frame[4:8] + body
                client.sendall(frame)
        except OSError:
            pass
        finally:
            if not (leader and self.stalled.is_set()):
                _close(client, broker)
