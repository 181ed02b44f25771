"""Why a connection to a cluster failed, in words a user can act on.

librdkafka reports a TLS or SASL failure through its error callback and log lines
(`SSL handshake failed: ... certificate verify failed`, `Receive failed: ... tlsv13 alert certificate
required`, `SASL authentication error: ...`) while the call that failed only says `Broker transport failure`
or `Failed to get metadata`. `ErrorCollector` is the `error_cb` of the CLI's clients: it keeps those
errors, and `diagnose()` turns the first one that explains the failure (or the raw ApiVersions probe's
Python `ssl` error, adapters/probe.py) into one line with what to set:

    cluster 'west' (127.0.0.1:1234): TLS handshake failed: the broker's certificate is not trusted
    (certificate verify failed); set ssl.ca.location to the CA that signed it

Nothing here prints a setting's value: the texts are librdkafka's and OpenSSL's, which carry no secrets,
and callers pass the result through their Redactor anyway.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cause:
    """A diagnosed connection failure: `kind` (tls-untrusted, tls-hostname, tls-expired, tls-client-cert-required,
    tls-client-cert-refused, tls-not-tls, tls, sasl-auth, sasl-mechanism, not-tls-client), the sentence."""

    kind: str
    text: str

    @property
    def is_tls(self) -> bool:
        return self.kind.startswith("tls")


_HANDSHAKE = "TLS handshake failed"


def _rules() -> list[tuple[re.Pattern[str], str, str]]:
    def rx(p: str) -> re.Pattern[str]:
        return re.compile(p, re.IGNORECASE)

    return [
        # the broker's certificate, checked by us
        (
            rx(r"hostname mismatch|ip address mismatch|doesn't match|does not match|certificate is not valid for"),
            "tls-hostname",
            f"{_HANDSHAKE}: the broker's certificate does not name the address in bootstrap_servers (hostname "
            "mismatch); connect with a name or IP address the certificate was issued for, or (not recommended) set "
            "ssl.endpoint.identification.algorithm to none",
        ),
        (
            rx(r"certificate has expired|certificate is not yet valid"),
            "tls-expired",
            f"{_HANDSHAKE}: the broker's certificate has expired or is not valid yet (certificate verify failed); "
            "renew the broker's certificate or check this machine's clock",
        ),
        (
            rx(r"certificate verify failed|CERTIFICATE_VERIFY_FAILED|unable to get local issuer|self[- ]signed cert"),
            "tls-untrusted",
            f"{_HANDSHAKE}: the broker's certificate is not trusted (certificate verify failed); set "
            "ssl.ca.location to the CA that signed it",
        ),
        # our certificate, checked by the broker
        (
            rx(r"certificate required|CERTIFICATE_REQUIRED"),
            "tls-client-cert-required",
            f"{_HANDSHAKE}: the broker requires a client certificate (mutual TLS) and none was sent; set "
            "ssl.certificate.location and ssl.key.location to a certificate signed by a CA the broker trusts",
        ),
        (
            rx(r"alert bad certificate|alert unknown ca|BAD_CERTIFICATE|UNKNOWN_CA|alert certificate unknown"),
            "tls-client-cert-refused",
            f"{_HANDSHAKE}: the broker refused the client certificate (it is not signed by a CA the broker trusts, "
            "or it expired); set ssl.certificate.location and ssl.key.location to one it accepts",
        ),
        # TLS spoken to a port that does not (a plaintext listener)
        (
            rx(
                r"wrong version number|WRONG_VERSION_NUMBER|packet length too long|record layer failure|http request|"
                r"connecting to a PLAINTEXT broker listener"
            ),
            "tls-not-tls",
            f"{_HANDSHAKE}: the broker does not speak TLS on this port (a plaintext listener); use the port of its "
            "TLS listener, or security.protocol PLAINTEXT / SASL_PLAINTEXT if this listener is not encrypted",
        ),
        # SASL
        (
            rx(
                r"unsupported sasl mechanism|UNSUPPORTED_SASL_MECHANISM|no worthy mechs|"
                r"mechanism .* not (enabled|supported)|mechanism handshake failed"
            ),
            "sasl-mechanism",
            "SASL authentication failed: the broker does not offer this mechanism; set sasl.mechanism to one its "
            "listener enables (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)",
        ),
        (
            rx(
                r"SASL authentication error|authentication failed|invalid credentials|SASL_AUTHENTICATION_FAILED|"
                r"_AUTHENTICATION|Authentication failure"
            ),
            "sasl-auth",
            "SASL authentication failed: the broker refused the credentials (wrong user name or password, or "
            "wrong sasl.mechanism); check sasl.username, sasl.password and sasl.mechanism",
        ),
        (
            rx(r"handshake failure|HANDSHAKE_FAILURE|protocol version|no protocols available|no shared cipher"),
            "tls",
            f"{_HANDSHAKE}: client and broker agree on no TLS version or cipher, or the broker wanted a client "
            "certificate; check ssl.certificate.location / ssl.key.location and the broker's TLS settings",
        ),
    ]


_RULES = _rules()
#: A plaintext client at a TLS (or SASL) port: the broker closes the connection before it answers ApiVersions.
_CLOSED_EARLY = re.compile(
    r"(connection reset by peer|Disconnected).{0,60}in state APIVERSION_QUERY|"
    r"connection closed during ApiVersions|^\[Errno 104\] Connection reset by peer$",
    re.IGNORECASE,
)


def diagnose(texts: Iterable[str], protocol: str = "PLAINTEXT") -> Cause | None:
    """The first of `texts` (librdkafka error/log texts, or the probe's reasons) that explains a failed connection,
    as a Cause; None when none does (the caller keeps its own wording). `protocol`: the client's
    security.protocol, for telling a plaintext client at a TLS port."""
    texts = [t for t in texts if t]
    for pattern, kind, sentence in _RULES:
        for t in texts:
            if pattern.search(t):
                return Cause(kind, sentence)
    if "SSL" not in protocol.upper() and "SASL" not in protocol.upper():
        for t in texts:
            if _CLOSED_EARLY.search(t):
                return Cause(
                    "not-tls-client",
                    "the broker closed the connection before answering (connection reset): it probably expects TLS "
                    "or SASL; set security.protocol (SSL, SASL_SSL or SASL_PLAINTEXT) and the settings that go with it",
                )
    for t in texts:
        if "_SSL" in t or "SSL handshake failed" in t or "SSLError" in t:
            return Cause("tls", f"{_HANDSHAKE}: {t}")
    return None


def message(alias: str, bootstrap: str, cause: Cause) -> str:
    """The one line: cluster 'west' (host:port): <cause>."""
    return f"cluster {alias!r} ({bootstrap}): {cause.text}"


class ConnectionFailed(Exception):
    """A client call failed and librdkafka said why (`cause`); the caller names the cluster (`message`)."""

    def __init__(self, cause: Cause):
        super().__init__(cause.text)
        self.cause = cause


def explain(collector: ErrorCollector, client: Any, protocol: str) -> Cause | None:
    """After a failed call of `client` (a confluent-kafka client whose error_cb is `collector`): serve its queued
    callbacks (poll: for a Consumer, only before it is assigned, or a record would be taken), then diagnose what
    they said."""
    try:
        client.poll(0.2)
    except Exception:  # noqa: BLE001 - a closed or odd client: use what was collected
        pass
    return diagnose(collector.snapshot(), protocol)


#: Seconds of one metadata request's wait, after which librdkafka's error callbacks are looked at (`list_topics`).
METADATA_SLICE = 2.0


def list_topics(client: Any, collector: ErrorCollector, timeout: float, protocol: str, topic: str | None = None):
    """`client.list_topics(topic, timeout=...)`, waited for in slices while connections fail: a TLS or SASL failure
    librdkafka reports (error_cb: `collector`) ends the wait at once with ConnectionFailed, since retrying cannot
    cure it; a broker that is connected but slow (no error reported) gets the rest of `timeout` in one wait. At the
    end, the last KafkaException (the caller words it)."""
    import time

    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout
    first = True
    while True:
        remaining = deadline - time.monotonic()
        failing = first or bool(collector.snapshot())
        wait = min(METADATA_SLICE, remaining) if failing else remaining
        first = False
        try:
            return client.list_topics(topic, timeout=max(0.1, wait))
        except KafkaException:
            cause = explain(collector, client, protocol)
            if cause is not None:
                raise ConnectionFailed(cause) from None
            if wait >= remaining:
                raise


class ErrorCollector:
    """An `error_cb` for confluent-kafka clients keeping the errors' texts (thread-safe, bounded)."""

    LIMIT = 50

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.texts: list[str] = []

    def __call__(self, err) -> None:  # confluent_kafka.KafkaError
        try:
            text = f"{err.name()}: {err.str()}"
        except Exception:  # noqa: BLE001 - anything librdkafka hands us
            text = str(err)
        with self._lock:
            if len(self.texts) < self.LIMIT:
                self.texts.append(text)

    def snapshot(self) -> list[str]:
        with self._lock:
            return list(self.texts)
