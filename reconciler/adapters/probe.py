"""Capability probe: one raw Kafka ApiVersions (api key 18, v0) request over a socket.

librdkafka does not expose which APIs a broker supports, and calling an unsupported one can abort
the process (Tansu + CreateAcls), so we ask the broker ourselves before any admin call. Request:
size, api_key, api_version, correlation_id, client_id; v0 has an empty body. Response (header v0):
correlation_id, error_code, [api_key, min_version, max_version]. A broker that does not speak v0
answers UNSUPPORTED_VERSION in v0 format with the list anyway, so the list is parsed in both cases.
TLS (security.protocol SSL / SASL_SSL) is honoured; ApiVersions is allowed before SASL authentication.

It is also how every network command learns, before its real work, that a cluster is down:
`require_reachable(alias, config)` raises `Unreachable` (no bootstrap address takes a TCP connection:
refused, no route, unknown host) or `NotAnswering` (a broker takes the connection and says nothing)
within CONNECT_TIMEOUT, with one line naming the cluster, its bootstrap servers and what to do, instead
of librdkafka retrying for the command's whole timeout.
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Mapping

from reconciler.adapters.connect_errors import Cause, diagnose, message

API_VERSIONS = 18
UNSUPPORTED_VERSION = 35
_CLIENT_ID = b"reconciler-probe"
#: Seconds a bootstrap address may take to accept a connection, and a broker to answer ApiVersions, before
#: the cluster counts as down (a refused connection fails at once).
CONNECT_TIMEOUT = 2.0


class ProbeError(Exception):
    def __init__(self, message: str, unreachable: bool = False, silent: bool = False, reasons: tuple[str, ...] = ()):
        super().__init__(message)
        self.reasons = reasons  # why each bootstrap address failed, without the address (same order)
        self.unreachable = unreachable  # no bootstrap address accepted a TCP connection (refused, no route)
        self.silent = silent  # a broker took the connection but did not answer in time (hung, paused, overloaded)


def encode_request(correlation_id: int = 1) -> bytes:
    body = struct.pack(">hhih", API_VERSIONS, 0, correlation_id, len(_CLIENT_ID)) + _CLIENT_ID
    return struct.pack(">i", len(body)) + body


def decode_response(payload: bytes, correlation_id: int = 1) -> dict[int, tuple[int, int]]:
    if len(payload) < 10:
        raise ProbeError("short ApiVersions response")
    corr, error, count = struct.unpack_from(">ihi", payload, 0)
    if corr != correlation_id:
        raise ProbeError(f"ApiVersions correlation id {corr} != {correlation_id}")
    if error not in (0, UNSUPPORTED_VERSION):
        raise ProbeError(f"ApiVersions error code {error}")
    if count < 0 or len(payload) < 10 + 6 * count:
        raise ProbeError("truncated ApiVersions response")
    out = {}
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", payload, 10 + 6 * i)
        out[key] = (lo, hi)
    return out


#: TLS settings the probe's Python `ssl` context cannot apply as librdkafka would (a PKCS#12 keystore, an OpenSSL
#: engine or provider, a Windows certificate store): with any of them a TLS failure of the probe proves nothing.
_FOREIGN_SSL_KEYS = ("ssl.keystore.", "ssl.engine.", "ssl.providers", "ssl.ca.certificate.stores", "ssl_engine")


def probe_speaks_for(config: Mapping[str, str]) -> bool:
    """True when the probe sets up TLS as the cluster's librdkafka clients do, so that its TLS failure is theirs."""
    return not any(str(k).startswith(_FOREIGN_SSL_KEYS) for k in config) and config.get("ssl.ca.location") != "probe"


def ssl_context(config: Mapping[str, str]) -> ssl.SSLContext:
    """librdkafka's TLS settings as a Python context (the probe's, and the batched group offsets reader's:
    adapters/group_offsets.py): the CA (file, directory or PEM text), the client certificate
    and key (files or PEM text), hostname verification and `enable.ssl.certificate.verification`."""
    import os
    import tempfile

    ca = config.get("ssl.ca.location") or None
    if ca == "probe":
        ca = None
    ctx = ssl.create_default_context(
        cafile=ca if ca and not os.path.isdir(ca) else None,
        capath=ca if ca and os.path.isdir(ca) else None,
        cadata=config.get("ssl.ca.pem") or None,
    )
    if config.get("ssl.endpoint.identification.algorithm", "https") == "none":
        ctx.check_hostname = False
    if str(config.get("enable.ssl.certificate.verification", "true")).lower() in ("false", "0"):
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    password = config.get("ssl.key.password") or None
    if config.get("ssl.certificate.location"):
        ctx.load_cert_chain(config["ssl.certificate.location"], config.get("ssl.key.location") or None, password)
    elif config.get("ssl.certificate.pem") and config.get("ssl.key.pem"):
        with tempfile.TemporaryDirectory(prefix="reconciler-probe-") as d:  # load_cert_chain reads files only
            cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
            for path, text in ((cert, config["ssl.certificate.pem"]), (key, config["ssl.key.pem"])):
                with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                    f.write(text)
            ctx.load_cert_chain(cert, key, password)
    return ctx


def recv_exact(sock: socket.socket, n: int, what: str = "ApiVersions") -> bytes:
    """Exactly `n` bytes from `sock` (read as they come: a large `n` allocates only what the peer sends)."""
    chunks: list[bytes] = []
    left = n
    while left > 0:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ProbeError(f"connection closed during {what}")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def open_socket(host: str, port: int, config: Mapping[str, str], timeout: float) -> socket.socket:
    """A connection to one broker as the cluster's librdkafka clients make it: TLS (security.protocol SSL or
    SASL_SSL) with `ssl_context`, else plain TCP; no SASL login (the caller's to refuse)."""
    raw = socket.create_connection((host, port), timeout=timeout)
    try:
        protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
        sock = ssl_context(config).wrap_socket(raw, server_hostname=host) if "SSL" in protocol else raw
    except BaseException:
        raw.close()
        raise
    sock.settimeout(timeout)
    return sock


def bootstrap_addresses(bootstrap: str) -> list[tuple[str, str]]:
    """(host, port) of each address of a `bootstrap.servers` list, its scheme removed (the port as written)."""
    out = []
    for address in [a.strip() for a in bootstrap.split(",") if a.strip()]:
        for prefix in ("PLAINTEXT://", "SSL://", "SASL_SSL://", "SASL_PLAINTEXT://", "tcp://"):
            address = address.removeprefix(prefix)
        host, _, port = address.rpartition(":")
        out.append((host.strip("[]"), port))
    return out


def probe_api_versions(
    bootstrap: str, config: Mapping[str, str] | None = None, timeout: float = 5.0
) -> dict[int, tuple[int, int]]:
    """Ask the first reachable bootstrap broker which API keys it supports. `config`: resolved client config."""
    config = config or {}
    protocol = config.get("security.protocol", "PLAINTEXT").upper()
    errors: list[str] = []
    reasons: list[str] = []
    connected = False
    silent = False
    for host, port in bootstrap_addresses(bootstrap):
        took = False
        try:
            with socket.create_connection((host, int(port)), timeout=timeout) as raw:
                connected = took = True
                sock = ssl_context(config).wrap_socket(raw, server_hostname=host) if "SSL" in protocol else raw
                sock.settimeout(timeout)
                sock.sendall(encode_request())
                size = struct.unpack(">i", recv_exact(sock, 4))[0]
                return decode_response(recv_exact(sock, size))
        except TimeoutError as exc:
            if took:
                silent = True
                reasons.append(f"took the connection but did not answer within {timeout:g}s")
            else:
                reasons.append(str(exc) or f"no connection within {timeout:g}s")
            errors.append(f"{host}:{port}: {reasons[-1]}")
        except (OSError, ValueError, ProbeError, ssl.SSLError) as exc:
            reason = str(exc)
            if (
                took
                and "SSL" in protocol
                and isinstance(exc, _CLOSED)
                and not isinstance(exc, ssl.SSLCertVerificationError)
            ):
                reason = _tls_alert(host, int(port), config, timeout) or reason
            reasons.append(reason)
            errors.append(f"{host}:{port}: {reasons[-1]}")
    raise ProbeError(
        "; ".join(errors) or "no bootstrap address",
        unreachable=not connected,
        silent=silent,
        reasons=tuple(reasons),
    )


#: How a TLS connection ends when the broker's alert (a client certificate required or refused) was lost: our request
#: written after the alert made the connection reset, which discards the alert.
_CLOSED = (ConnectionResetError, BrokenPipeError, ssl.SSLEOFError, ssl.SSLZeroReturnError, ProbeError)


def _tls_alert(host: str, port: int, config: Mapping[str, str], timeout: float) -> str | None:
    """After a TLS connection was closed on us: connect again and, before writing anything, wait up to 1 s for the
    alert a broker sends when it refuses the client (TLS 1.3 checks the client certificate after the handshake).
    The alert's text, or None."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw:
            with ssl_context(config).wrap_socket(raw, server_hostname=host) as sock:
                sock.settimeout(min(timeout, 1.0))
                sock.recv(1)
    except ssl.SSLError as exc:
        return str(exc)
    except OSError:
        return None
    return None


class Unreachable(Exception):
    """No bootstrap address of a cluster takes a connection (refused, no route, unknown host)."""


class HandshakeFailed(Unreachable):
    """A broker of the cluster takes connections but the TLS handshake fails (an untrusted or mismatched
    certificate, a client certificate required or refused, TLS spoken to a plaintext port): one line naming the
    cluster, the cause and the setting to change (adapters/connect_errors.py)."""


class NotAnswering(Exception):
    """A broker of the cluster takes connections but does not answer (hung, paused, overloaded): told apart
    from one that refuses, and not waited for any longer than the probe."""


def require_reachable(alias: str, config: Mapping[str, str], timeout: float = CONNECT_TIMEOUT) -> None:
    """Return once a broker of cluster `alias` answers ApiVersions; else raise Unreachable or NotAnswering
    within about `timeout` seconds, one line naming the cluster and its bootstrap servers and what to do; raise
    HandshakeFailed (an Unreachable) when the TLS handshake fails for a reason connect_errors.diagnose names.
    `config`: the cluster's resolved client config (bootstrap.servers, security). Any other failure (a
    protocol error) is left to the command's real call, which says it in its own words."""
    bootstrap = str(config.get("bootstrap.servers", ""))
    try:
        probe_api_versions(bootstrap, config, timeout=timeout)
    except ProbeError as exc:
        why = exc.reasons[0] if len(exc.reasons) == 1 else str(exc)
        if exc.unreachable:
            raise Unreachable(
                f"cannot connect to cluster {alias!r} at {bootstrap}: {why}; check that it is running and that "
                "its bootstrap_servers in the topology are right"
            ) from None
        cause = tls_cause(exc, config)
        if cause is not None:
            raise HandshakeFailed(message(alias, bootstrap, cause)) from None
        if exc.silent:
            tls = "SSL" in str(config.get("security.protocol", "PLAINTEXT")).upper()
            raise NotAnswering(
                f"cluster {alias!r} at {bootstrap} does not answer ({why}): it is hung, paused or overloaded"
                + (", or this is not a TLS port (some plaintext listeners never answer a TLS handshake)" if tls else "")
                + "; check the broker, then run again"
            ) from None


def tls_cause(exc: ProbeError, config: Mapping[str, str]) -> Cause | None:
    """The TLS failure a probe error shows (connect_errors.diagnose), when the probe set up TLS as the cluster's
    clients would and the handshake (not the network) failed; else None."""
    protocol = str(config.get("security.protocol", "PLAINTEXT"))
    if exc.unreachable or "SSL" not in protocol.upper() or not probe_speaks_for(config):
        return None
    cause = diagnose(exc.reasons, protocol)
    return cause if cause is not None and cause.is_tls else None
