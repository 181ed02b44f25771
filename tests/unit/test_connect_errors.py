"""connect_errors.diagnose: librdkafka's error texts (as its error_cb and log lines give them, confluent-kafka 2.16 /
librdkafka 2.13, seen against the secure test brokers) and Python `ssl`'s (the probe's) -> one cause and the setting
to change. The end-to-end proofs are tests/integration/test_secure_clusters.py; SASL texts other than a refused
login cannot be produced by any broker here (docs/brokers.md)."""

from __future__ import annotations

import ssl

import pytest

from reconciler.adapters.connect_errors import Cause, ErrorCollector, diagnose, message
from reconciler.adapters.probe import ProbeError, probe_speaks_for, ssl_context, tls_cause

B = "ssl://127.0.0.1:9093/bootstrap"
CASES = [
    (
        f"_SSL: {B}: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate "
        "could not be verified, verify that ssl.ca.location is correctly configured or root CA certificates are "
        "installed (install ca-certificates package) (after 3ms in state SSL_HANDSHAKE)",
        "tls-untrusted",
    ),
    (
        "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate",
        "tls-untrusted",
    ),
    (
        "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: IP address mismatch, certificate is not valid "
        "for '127.0.0.1'. (_ssl.c:1006)",
        "tls-hostname",
    ),
    (
        "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate has expired (_ssl.c:1006)",
        "tls-expired",
    ),
    (
        f"_TRANSPORT: {B}: Receive failed: error:0A00045C:SSL routines::tlsv13 alert certificate required: SSL alert "
        "number 116 (after 0ms in state APIVERSION_QUERY)",
        "tls-client-cert-required",
    ),
    (
        "[SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] tlsv13 alert certificate required (_ssl.c:2580)",
        "tls-client-cert-required",
    ),
    (
        f"_SSL: {B}: SSL handshake failed: error:0A000418:SSL routines::tlsv1 alert unknown ca",
        "tls-client-cert-refused",
    ),
    (f"_SSL: {B}: SSL handshake failed: error:0A00010B:SSL routines::wrong version number", "tls-not-tls"),
    (
        f"_TRANSPORT: {B}: SSL handshake failed: Disconnected: SSL connection closed by peer: connecting to a "
        "PLAINTEXT broker listener? (after 4ms in state SSL_HANDSHAKE)",
        "tls-not-tls",
    ),
    (
        "_AUTHENTICATION: sasl_ssl://127.0.0.1:9093/bootstrap: SASL authentication error: SASL SCRAM authentication "
        "failed: broker responded with unknown-user (after 82ms in state AUTH_REQ)",
        "sasl-auth",
    ),
    (
        "_AUTHENTICATION: sasl_ssl://127.0.0.1:9093/bootstrap: SASL authentication error: Authentication failed during "
        "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 5ms in state AUTH_REQ)",
        "sasl-auth",
    ),
    (
        "_AUTHENTICATION: sasl_plaintext://127.0.0.1:9093/bootstrap: SASL PLAIN mechanism handshake failed: Local: "
        "Broker transport failure: broker's supported mechanisms: (n/a) (after 0ms in state DOWN)",
        "sasl-mechanism",
    ),
    (
        "_AUTHENTICATION: sasl_ssl://b:9093/bootstrap: SASL SCRAM-SHA-256 mechanism handshake failed: Broker: "
        "Unsupported SASL mechanism: broker's supported mechanisms: PLAIN",
        "sasl-mechanism",
    ),
]


@pytest.mark.parametrize(("text", "kind"), CASES)
def test_each_librdkafka_or_ssl_text_has_its_cause(text, kind):
    cause = diagnose(["_ALL_BROKERS_DOWN: 1/1 brokers are down", text], "SSL")
    assert cause is not None and cause.kind == kind, cause
    assert text not in cause.text  # the sentence is ours: no librdkafka text (nor anything it might carry) printed


def test_the_sentences_name_the_setting_to_change():
    def said(kind: str) -> str:
        text = next(t for t, k in CASES if k == kind)
        cause = diagnose([text], "SASL_SSL")
        assert cause is not None
        return cause.text

    assert said("tls-untrusted") == (
        "TLS handshake failed: the broker's certificate is not trusted (certificate verify failed); "
        "set ssl.ca.location to the CA that signed it"
    )
    assert "ssl.certificate.location and ssl.key.location" in said("tls-client-cert-required")
    assert "check sasl.username, sasl.password and sasl.mechanism" in said("sasl-auth")
    assert "set sasl.mechanism" in said("sasl-mechanism")
    assert "use the port of its TLS listener" in said("tls-not-tls")


def test_a_plaintext_client_reset_by_a_tls_port_is_told_to_set_security_protocol():
    reset = "[Errno 104] Connection reset by peer"
    cause = diagnose(["_ALL_BROKERS_DOWN: 1/1 brokers are down", reset], "PLAINTEXT")
    assert cause is not None and cause.kind == "not-tls-client" and "set security.protocol" in cause.text
    assert diagnose([reset], "SSL") is None  # a TLS client reset: nothing to say about TLS


def test_nothing_to_say_keeps_the_callers_wording():
    assert diagnose(["_ALL_BROKERS_DOWN: 1/1 brokers are down", "Connection refused"], "PLAINTEXT") is None
    assert diagnose([], "SSL") is None


def test_message_names_the_cluster_and_its_address():
    line = message("west", "127.0.0.1:1234", Cause("tls-untrusted", "TLS handshake failed: x"))
    assert line == "cluster 'west' (127.0.0.1:1234): TLS handshake failed: x"


def test_error_collector_keeps_the_callbacks_texts_bounded():
    class Err:
        def name(self):
            return "_SSL"

        def str(self):
            return "SSL handshake failed"

    c = ErrorCollector()
    for _ in range(ErrorCollector.LIMIT + 10):
        c(Err())
    assert c.snapshot()[0] == "_SSL: SSL handshake failed" and len(c.snapshot()) == ErrorCollector.LIMIT


def test_the_probe_blames_tls_only_when_it_set_tls_up_as_librdkafka_would():
    verify = ProbeError("x", reasons=("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed",))
    ssl_conf = {"security.protocol": "SSL", "ssl.ca.location": "/nonexistent.pem"}
    cause = tls_cause(verify, ssl_conf)
    assert cause is not None and cause.kind == "tls-untrusted"
    assert tls_cause(verify, {"security.protocol": "PLAINTEXT"}) is None
    assert tls_cause(ProbeError("x", unreachable=True, reasons=verify.reasons), ssl_conf) is None
    keystore = {"security.protocol": "SSL", "ssl.keystore.location": "/k.p12", "ssl.keystore.password": "pw"}
    assert not probe_speaks_for(keystore) and tls_cause(verify, keystore) is None
    assert not probe_speaks_for({"ssl.ca.location": "probe"}) and probe_speaks_for(ssl_conf)


def test_probe_context_follows_librdkafka_settings(tmp_path):
    ctx = ssl_context({"enable.ssl.certificate.verification": "false"})
    assert ctx.verify_mode == ssl.CERT_NONE and not ctx.check_hostname
    ctx = ssl_context({"ssl.endpoint.identification.algorithm": "none"})
    assert ctx.verify_mode == ssl.CERT_REQUIRED and not ctx.check_hostname
    assert ssl_context({}).check_hostname
    (tmp_path / "cadir").mkdir()
    assert ssl_context({"ssl.ca.location": str(tmp_path / "cadir")}).verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(ssl.SSLError):  # PEM text is read as PEM text (here: not a certificate)
        ssl_context({"ssl.ca.pem": "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"})
