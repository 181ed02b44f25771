"""Issue 45: a cluster's client or CA certificate that expires within `slo.certificate_expiry_days` is drift.

Throwaway certificates from the openssl command line (`openssl req -x509 -days N`); "now" is the backend's clock,
set from the certificates' own expiry, so expired, expiring and fine are tested without waiting or faking time.
The drift runs are on the in-process memory admin backend (tests/plan_helpers.py `World`)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from reconciler.drift.certificates import (
    DAY_SECONDS,
    CertificateSource,
    Expiry,
    check,
    parse_pem,
)
from reconciler.drift.report import Category, Level
from reconciler.operations.apply import ApplyRequest, apply
from reconciler.operations.drift import drift
from reconciler.render import drift_html, drift_markdown, drift_prometheus, drift_text
from reconciler.topology.build import load_topology_text
from tests.plan_helpers import World

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
DAY_MS = DAY_SECONDS * 1000


def make_cert(directory: Path, name: str, days: int) -> Path:
    """A self-signed certificate valid for `days` days from now (key thrown away)."""
    path = directory / f"{name}.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        + ["-keyout", str(directory / f"{name}.key"), "-out", str(path), "-days", str(days), "-subj", f"/CN={name}"],
        check=True,
        capture_output=True,
    )
    return path


def not_after_ms(path: Path) -> int:
    return min(c.not_after_ms for c in parse_pem(path.read_bytes()))


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("certs")
    out = {name: make_cert(d, name, days) for name, days in (("client", 10), ("ca", 400), ("intermediate", 5))}
    bundle = d / "bundle.pem"  # a CA bundle: the one that expires first is in the middle
    bundle.write_bytes(out["ca"].read_bytes() + b"\n" + out["intermediate"].read_bytes() + out["ca"].read_bytes())
    out["bundle"] = bundle
    garbage = d / "garbage.pem"
    garbage.write_bytes(b"-----BEGIN CERTIFICATE-----\nc2VjcmV0LWNvbnRlbnQ=\n-----END CERTIFICATE-----\n")
    out["garbage"] = garbage
    return out


# --- the pure parse and check --------------------------------------------------------------------------


def test_parse_reads_every_certificate_of_a_bundle(certs):
    ca, inter = not_after_ms(certs["ca"]), not_after_ms(certs["intermediate"])
    parsed = parse_pem(certs["bundle"].read_bytes())
    assert [c.subject for c in parsed] == ["ca", "intermediate", "ca"]
    assert [c.not_after_ms for c in parsed] == [ca, inter, ca]
    assert 390 * DAY_MS < ca - inter < 400 * DAY_MS


def test_expired_expiring_fine_and_the_earliest_of_a_chain_counts(certs):
    data = certs["bundle"].read_bytes()
    end = not_after_ms(certs["intermediate"])  # 5 days from now: the bundle's earliest

    def at(now_ms: int, window: int = 30):
        return check(CertificateSource("west", "ssl.ca.location", "/b.pem", data=data), now_ms, window)

    soon = at(end - 3 * DAY_MS - 1000)
    assert (soon.state, soon.days_left, soon.certificates, soon.subject) == (Expiry.EXPIRING, 3, 3, "intermediate")
    assert at(end - 3 * DAY_MS, window=2).state is Expiry.OK
    assert at(end - 3 * DAY_MS, window=0).state is Expiry.OK  # 0: only expired ones
    gone = at(end + 2 * DAY_MS + 1000)
    assert (gone.state, gone.days_left) == (Expiry.EXPIRED, -2) and gone.seconds_left < 0
    assert at(end).state is Expiry.EXPIRED
    assert soon.to_dict()["not_after"].endswith("Z") and soon.to_dict()["location"] == "/b.pem"


@pytest.mark.parametrize(
    "data, problem",
    [
        (b"not a certificate at all", "no PEM certificate in it"),
        (b"-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----", "not valid base64"),
        (b"-----BEGIN CERTIFICATE-----\nc2VjcmV0LWNvbnRlbnQ=\n-----END CERTIFICATE-----", "certificate"),
        (b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", "malformed certificate (length)"),
        (b"-----BEGIN CERTIFICATE-----\nMIIBAA==\n-----END CERTIFICATE-----", "truncated"),
    ],
)
def test_unreadable_never_quotes_the_content(data, problem):
    c = check(CertificateSource("west", "ssl.certificate.pem", data=data), 0, 30)
    assert c.state is Expiry.UNREADABLE and problem in c.problem
    assert "secret" not in c.problem and "c2Vj" not in c.problem and c.seconds_left is None


# --- through a drift run on the memory backend -----------------------------------------------------------


def world_with(config_west: str, config_east: str = "{}", slo: str = "") -> World:
    text = f"""apiVersion: reconciler/v1
kind: Topology
metadata: {{name: certs}}
clusters:
  west: {{bootstrap_servers: "127.0.0.1:1", replication_principal: "User:mirror", config: {config_west}}}
  east: {{bootstrap_servers: "127.0.0.1:2", replication_principal: "User:mirror", config: {config_east}}}
flows:
  - {{source: west, target: east, topics: {{include: ["orders"]}}}}
{slo}
"""
    w = World(load_topology_text(text))
    w["west"].add_topic("orders", 2)
    apply(ApplyRequest(w.topology), w.backend(), _Yes())
    return w


class _Yes:
    progress = None

    def out(self, text: str = "", end: str = "\n") -> None:
        pass

    def err(self, text: str) -> None:
        pass

    def confirm(self, plan) -> bool:
        return True


def run(w: World, now_ms: int):
    return drift(w.topology, w.backend(clock=lambda: now_ms / 1000), check_jobs=False)


def cert_items(report):
    return [i for i in report.items if i.category is Category.CERTIFICATE]


def test_drift_reports_expiring_and_unreadable_certificates(certs, monkeypatch):
    monkeypatch.setenv("WEST_CERT", str(certs["client"]))
    ca_pem = json.dumps(certs["ca"].read_text())  # YAML reads a JSON string
    w = world_with(
        f'{{ssl.certificate.location: "${{WEST_CERT}}", ssl.ca.location: "{certs["bundle"]}", ssl.ca.pem: {ca_pem}}}',
        f'{{ssl.certificate.location: "{certs["client"].parent / "missing.pem"}", '
        f'ssl.ca.location: "{certs["garbage"]}"}}',
    )
    now = not_after_ms(certs["client"]) - 9 * DAY_MS - 1000  # client: 9 days left; bundle: its intermediate, 4
    report = run(w, now)
    assert report.status() == "drift" and report.counts() == {"certificate": 2}, report.headline()
    assert "(2 certificates expired or expiring) on 1 cluster" in report.headline()
    west = {i.subject: i for i in cert_items(report) if i.cluster == "west"}
    assert set(west) == {"ssl.certificate.location", "ssl.ca.location"}  # the 400-day PEM text is fine
    client, bundle = west["ssl.certificate.location"], west["ssl.ca.location"]
    assert client.level is Level.DRIFT and "in 9 days" in client.message and "${WEST_CERT}" in client.message
    assert str(certs["client"]) not in client.message  # the reference stays as the topology writes it
    assert "intermediate, the first to expire of its 3" in bundle.message and "in 4 days" in bundle.message
    assert "(slo.certificate_expiry_days 30)" in bundle.message
    east = {i.subject: i for i in cert_items(report) if i.cluster == "east"}
    assert {i.level for i in east.values()} == {Level.NOTE}
    assert "No such file or directory" in east["ssl.certificate.location"].message
    assert "c2Vj" not in east["ssl.ca.location"].message and "could not be read" in east["ssl.ca.location"].message
    [west_cluster] = [c for c in report.clusters if c.alias == "west"]
    assert [(c.setting, c.state.value) for c in west_cluster.certificates] == [
        ("ssl.certificate.location", "expiring"),
        ("ssl.ca.location", "expiring"),
        ("ssl.ca.pem", "ok"),
    ]


def test_expired_certificate_and_the_window_setting(certs):
    w = world_with(f'{{ssl.certificate.location: "{certs["client"]}"}}', slo="slo: {certificate_expiry_days: 5}")
    assert w.topology.slo.certificate_expiry_days == 5
    end = not_after_ms(certs["client"])
    assert run(w, end - 6 * DAY_MS).status() == "in-sync"  # 6 days left, window 5
    assert cert_items(run(w, end - 4 * DAY_MS))[0].level is Level.DRIFT
    report = run(w, end + 3 * DAY_MS)
    [item] = cert_items(report)
    assert report.status() == "drift" and "expired at" in item.message and "(3 days ago)" in item.message
    assert "connections to the cluster fail" in (item.hint or "")


def test_no_certificate_settings_no_certificates(certs):
    w = world_with("{}")
    report = run(w, 0)
    assert report.status() == "in-sync" and all(c.certificates == () for c in report.clusters)


def test_every_output_shows_it_escaped(certs, tmp_path):
    hostile = tmp_path / "a`b|*c_<i>\x1b[31m.pem"
    hostile.write_bytes(certs["client"].read_bytes())
    w = world_with(json.dumps({"ssl.certificate.location": str(hostile)}))
    report = run(w, not_after_ms(certs["client"]) - 2 * DAY_MS)
    [item] = cert_items(report)
    assert "in 2 days" in item.message

    text = drift_text.render(report)
    assert "! certificate" in text and "in 2 days" in text and "\\x1b[31m" in text and "\x1b" not in text
    doc = json.loads(drift_text.render_json(report))
    assert doc["summary"]["by_category"] == {"certificate": 1}
    [west] = [c for c in doc["clusters"] if c["cluster"] == "west"]
    [cert] = west["certificates"]
    assert (cert["setting"], cert["state"], cert["days_left"], cert["window_days"]) == (
        "ssl.certificate.location",
        "expiring",
        2,
        30,
    )
    md = drift_markdown.render(report)
    row = next(line for line in md.splitlines() if "| certificate |" in line)
    assert "in 2 days" in row and "a\\`b\\|\\*c\\_\\<i\\>\\\\x1b\\[31m" in row and "\x1b" not in md
    html = drift_html.render(report, w.topology)
    assert "certificates expired or expiring" in html and "in 2 days" in html  # html.escape, the HTML report's own rule
    assert "c_&lt;i&gt;" in html and "<i>" not in html
    prom = drift_prometheus.render(report)
    [sample] = [line for line in prom.splitlines() if line.startswith("reconciler_drift_certificate_expiry_seconds{")]
    assert 'cluster="west"' in sample and 'setting="ssl.certificate.location"' in sample
    assert float(sample.rsplit(" ", 1)[1]) == pytest.approx(2 * DAY_SECONDS, abs=1)
    assert 'reconciler_drift_items{category="certificate",cluster="west",level="drift"} 1.0' in prom
