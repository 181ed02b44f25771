"""ApiVersions probe: the wire format, against a fake broker socket."""

import socket
import struct
import threading

import pytest

from reconciler.adapters.probe import ProbeError, decode_response, encode_request, probe_api_versions
from reconciler.state.live import Capabilities


def _response(keys, error=0, corr=1):
    body = struct.pack(">ihi", corr, error, len(keys)) + b"".join(struct.pack(">hhh", k, 0, 3) for k in keys)
    return struct.pack(">i", len(body)) + body


def test_request_is_api_versions_v0():
    req = encode_request(7)
    size, key, version, corr, cid_len = struct.unpack_from(">ihhih", req)
    assert (key, version, corr) == (18, 0, 7) and size == len(req) - 4 and req[14:] == b"reconciler-probe"


def test_decode_and_tansu_like_capabilities():
    keys = [0, 1, 3, 18, 19, 20, 29, 30, 32, 44]  # Tansu: Describe/CreateAcls but no DeleteAcls, no CreatePartitions
    caps = Capabilities(decode_response(_response(keys)[4:]))
    assert caps.describe_configs and caps.alter_configs
    assert not caps.acls and not caps.create_partitions


def test_unsupported_version_answer_still_lists_apis():
    assert 37 in decode_response(_response([18, 37], error=35)[4:])


def test_bad_answers_raise_probe_error():
    with pytest.raises(ProbeError):
        decode_response(b"\x00\x00")
    with pytest.raises(ProbeError):
        decode_response(_response([1], corr=9)[4:])


def test_probe_over_a_socket():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def serve():
        conn, _ = srv.accept()
        with conn:
            size = struct.unpack(">i", conn.recv(4))[0]
            conn.recv(size)
            conn.sendall(_response([18, 37]))

    threading.Thread(target=serve, daemon=True).start()
    assert probe_api_versions(f"127.0.0.1:{srv.getsockname()[1]}") == {18: (0, 3), 37: (0, 3)}
    srv.close()


def test_probe_of_nothing_listening_fails_cleanly():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(ProbeError):
        probe_api_versions(f"127.0.0.1:{port}", timeout=1)


def test_a_broker_that_takes_connections_but_never_answers_is_told_apart_from_one_that_refuses():
    """A frozen broker (SIGSTOPped, hung) completes TCP handshakes in the kernel and says nothing; `status` must
    say so after the probe's few seconds, not wait out the status read and report a transport failure."""
    from reconciler.adapters.probe import NotAnswering, Unreachable
    from reconciler.jobplan.backend import kafka_status_reader
    from reconciler.topology.model import Cluster

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # never accepted, never answered
    refused = socket.socket()
    refused.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
    try:
        with pytest.raises(ProbeError) as frozen:
            probe_api_versions(f"127.0.0.1:{silent.getsockname()[1]}", timeout=0.5)
        assert frozen.value.silent and not frozen.value.unreachable
        assert "did not answer within 0.5s" in str(frozen.value)
        with pytest.raises(ProbeError) as down:
            probe_api_versions(f"127.0.0.1:{refused.getsockname()[1]}", timeout=0.5)
        assert down.value.unreachable and not down.value.silent
        with pytest.raises(NotAnswering, match="hung, paused or overloaded"):
            kafka_status_reader(Cluster("east", f"127.0.0.1:{silent.getsockname()[1]}"))
        with pytest.raises(Unreachable, match="cannot connect"):
            kafka_status_reader(Cluster("east", f"127.0.0.1:{refused.getsockname()[1]}"))
    finally:
        silent.close()
        refused.close()


def test_require_reachable_names_the_cluster_its_bootstrap_and_what_to_do():
    from reconciler.adapters.probe import NotAnswering, Unreachable, require_reachable

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # never accepted, never answered
    refused = socket.socket()
    refused.bind(("127.0.0.1", 0))
    one = f"127.0.0.1:{refused.getsockname()[1]}"
    try:
        with pytest.raises(Unreachable) as down:
            require_reachable("east", {"bootstrap.servers": one})
        assert str(down.value) == (
            f"cannot connect to cluster 'east' at {one}: [Errno 111] Connection refused; "
            "check that it is running and that its bootstrap_servers in the topology are right"
        )
        two = f"{one},127.0.0.1:{refused.getsockname()[1]}"
        with pytest.raises(Unreachable, match=f"cluster 'east' at {two}: {one}: .*refused; {one}: "):
            require_reachable("east", {"bootstrap.servers": two})
        hung = f"127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(NotAnswering, match=f"cluster 'west' at {hung} does not answer .*hung, paused"):
            require_reachable("west", {"bootstrap.servers": hung}, timeout=0.3)
    finally:
        silent.close()
        refused.close()
