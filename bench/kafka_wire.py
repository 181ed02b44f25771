"""A counting TCP relay in front of a Kafka-protocol broker: how many requests of each kind cross it.

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
