"""Credentials that change while replication runs (issue 45), end to end: an engine copies an exactly-once flow
whose clusters' credentials are files of RECONCILER_SECRETS_DIR (as a mounted Kubernetes Secret is); the files are
rewritten while a producer keeps writing; the engine sees each change within a minute, without a restart of its
process (the flow restarts in place, its clients made again), and the target holds every record once, in order.

The plaintext brokers enforce no authentication, so there the credential is `sasl.username` (a setting a reference
may stand in, ignored by a PLAINTEXT connection): what the first test observes is that the engine noticed it,
reconnected and copied on. The second test uses a broker that enforces its credential (mutual TLS, Tansu behind
stunnel: reconciler/dev/tls.py): a client certificate renewed in place, and the broker's own log showing the new
certificate in use."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import reconciler.deployers.instance as instance
from reconciler import logs
from reconciler.cli.main import main
from reconciler.deployers.local import LocalDeployer
from reconciler.jobplan.backend import read_job_status
from tests.integration.mirror_helpers import SequencedProducer, count_topic, create_topic, wait_for
from tests.integration.test_engines import _no_duplicates, _running, _status
from tests.integration.test_jobs_apply import Env

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.jobs]

TOPOLOGY = """apiVersion: reconciler/v1
kind: Topology
metadata: {{name: rotation-it}}
clusters:
  west: {{bootstrap_servers: "{west}", config: {{sasl.username: "${{WEST_SASL_USERNAME}}"}}}}
  east: {{bootstrap_servers: "{east}", config: {{sasl.username: "${{EAST_SASL_USERNAME}}"}}}}
defaults:
  sync: {{acls: false}}
  refresh_interval_seconds: 1
  heartbeats: {{interval_seconds: 1}}
  checkpoints: {{interval_seconds: 1}}
  job: {{deployer: local, master: "local[1]", parallelism: 1, trigger_interval_ms: 100}}
flows:
  - {{source: west, target: east, topics: {{include: ["orders"]}}, delivery: exactly-once}}
"""
FLOW = "west->east"
RECONNECT = "credentials of cluster '{alias}' changed: reconnecting"


def _log(state_dir: Path) -> str:
    try:
        return (state_dir / "engines" / "east" / "job.log").read_text(errors="replace")
    except OSError:
        return ""


def _rotate(
    env: Env, state_dir: Path, path: Path, line: str, pid: int | None, instance_id: str | None, producer
) -> None:
    """Rewrite a credential file as the kubelet updates a mounted Secret (one rename); the engine logs `line`, the
    flow restarts in place in the same process within a minute, and copies on (more than before the rotation, or,
    the producer done, everything it sent)."""
    before, log_before = _status(env.east, FLOW), len(_log(state_dir))
    copied = count_topic(env.east, "west.orders", 2)
    staged = path.with_name(f".{path.name}.new")
    staged.write_text("mirror-2026-02\n")
    os.replace(staged, path)
    rotated_at = time.monotonic()
    wait_for(lambda: line in _log(state_dir)[log_before:], 60, what=f"the engine logs {line!r}")
    restarted = wait_for(
        lambda: (
            s if (s := _status(env.east, FLOW)).state_name == "running" and s.started_at != before.started_at else None
        ),
        60,
        what="the flow restarted in place",
    )
    assert time.monotonic() - rotated_at < 60, "reconnected within a minute"
    assert restarted.pid == pid and restarted.instance_id == instance_id, "the same engine process"

    def copied_on() -> bool:
        now = count_topic(env.east, "west.orders", 2)
        return now > copied or (not producer.is_alive() and now >= producer.produced)

    wait_for(copied_on, 60, what="copying on after the rotation")


def test_a_rotated_credential_file_reconnects_an_exactly_once_flow_without_restarting_the_engine(
    fresh_clusters, tmp_path, capsys, state_dir, monkeypatch
):
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    (secrets_dir / "WEST_SASL_USERNAME").write_text("mirror-2026-01\n")
    (secrets_dir / "EAST_SASL_USERNAME").write_text("mirror-2026-01\n")
    monkeypatch.setenv("RECONCILER_SECRETS_DIR", str(secrets_dir))  # the CLI's and the engine's (inherited)
    env = Env(fresh_clusters, tmp_path, capsys)
    env.path.write_text(TOPOLOGY.format(west=env.west, east=env.east))
    create_topic(env.west, "orders", 2)
    deployer = LocalDeployer(root=state_dir)
    producer = SequencedProducer(env.west, "orders", 2, 6_000, 100.0)  # about a minute of records
    try:
        out = env.apply()
        assert f"+ deploy job {FLOW} (engine east, local" in out, out
        producer.start()
        first = _running(env.east, FLOW)
        assert first.delivery == "exactly-once"
        wait_for(lambda: count_topic(env.east, "west.orders", 2) >= 300, 120, what="records copied")
        pid = first.pid

        for alias, name in (("east", "EAST_SASL_USERNAME"), ("west", "WEST_SASL_USERNAME")):
            _rotate(env, state_dir, secrets_dir / name, RECONNECT.format(alias=alias), pid, first.instance_id, producer)

        text = _log(state_dir)
        assert "mirror-2026-02" not in text and "mirror-2026-01" not in text, "no credential in the engine's log"
        producer.join(180)
        assert producer.error is None
        _no_duplicates(env.east, "west.orders", producer)  # 0 missing, 0 duplicates, in order
        assert _status(env.east, FLOW).pid == pid
    finally:
        producer.stop(5)
        deployer.stop_all()
        if os.environ.get("SHOW_OUTPUT"):
            print("\n".join(env.outputs))
            print(_log(state_dir)[-20_000:])
    assert instance.scan(under=state_dir.resolve()) == []


class _TlsProducer(threading.Thread):
    """Writes 0, 1, 2, ... to `topic` (partition = value % 2) at about `rate` records/s over `conf` until stopped."""

    def __init__(self, conf: dict, topic: str, rate: float) -> None:
        super().__init__(daemon=True)
        self.conf, self.topic, self.rate = conf, topic, rate
        self.produced, self.error = 0, None
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            p = Producer(logs.client_config({**self.conf, "linger.ms": 5, "enable.idempotence": True}))
            while not self._stop_event.wait(1 / self.rate):
                p.produce(self.topic, str(self.produced).encode(), key=b"k", partition=self.produced % 2)
                self.produced += 1
                p.poll(0)
            assert p.flush(30) == 0
        except Exception as exc:  # noqa: BLE001 - the test reads it
            self.error = exc

    def stop(self) -> None:
        self._stop_event.set()
        if self.ident is not None:  # started
            self.join(60)


def test_a_client_certificate_renewed_in_place_reaches_the_live_connections_of_a_running_engine(
    secure_factory, secure_ca, tmp_path, capsys, state_dir
):
    """The stronger proof, on a broker that enforces the credential: east requires a client certificate (mutual TLS,
    stunnel in front of Tansu). The engine's certificate and key files are renewed in place (same paths, a new
    certificate of another name from the same CA); stunnel's log shows the broker accepting the new name from the
    engine within a minute, the engine's process is the same, and an exactly-once flow copied every record once."""
    from tests.integration.test_secure_clusters import topology, values

    west, east = secure_factory.start(mutual=False), secure_factory.start(mutual=True)
    assert east.client_cert is not None and east.client_key is not None
    certs = tmp_path / "certs"
    certs.mkdir()
    cert, key = certs / "mirror.pem", certs / "mirror.key"
    shutil.copyfile(east.client_cert, cert)
    shutil.copyfile(east.client_key, key)
    engine_conf = {**east.client_settings(), "ssl.certificate.location": str(cert), "ssl.key.location": str(key)}
    renewed_cert, renewed_key = secure_ca.issue(f"mirror-renewed-{os.getpid()}", server=False)
    renewed_name = renewed_cert.stem
    wconf, econf = west.client_config(), east.client_config()
    admin = AdminClient(logs.client_config(wconf))
    for f in admin.create_topics([NewTopic("orders", 2, 1)]).values():
        f.result(15)
    path = tmp_path / "topology.yaml"
    path.write_text(topology(west, east, east_conf=engine_conf, delivery="exactly-once"))
    stunnel_log = east.terminator.conf.with_name(f"stunnel-{east.port}.log")
    producer = _TlsProducer(wconf, "orders", 100.0)
    deployer = LocalDeployer(root=state_dir)
    try:
        code = main(["apply", str(path), "--auto-approve"])
        out = capsys.readouterr()
        assert code == 0, out
        producer.start()
        status = wait_for(
            lambda: s if (s := read_job_status(econf, FLOW, timeout=5)) and s.state_name == "running" else None,
            120,
            what="the flow running over mutual TLS",
        )
        wait_for(lambda: len(values(econf, "west.orders")) >= 300, 120, interval=2, what="records copied")
        accepted = stunnel_log.read_text(errors="replace")
        assert f"CN={east.client_cert.stem}" in accepted, "the broker's log names each client certificate it accepts"
        assert renewed_name not in accepted
        log_before = len(_log(state_dir))
        # renewed in place: a new key and certificate at the same paths (each file replaced in one rename)
        for source, dest in ((renewed_key, key), (renewed_cert, cert)):
            staged = dest.with_name(f".{dest.name}.new")
            shutil.copyfile(source, staged)
            os.replace(staged, dest)
        rotated_at = time.monotonic()
        line = RECONNECT.format(alias="east")
        wait_for(lambda: line in _log(state_dir)[log_before:], 60, what=f"the engine logs {line!r}")
        wait_for(
            lambda: f"CN={renewed_name}" in stunnel_log.read_text(errors="replace"),
            60,
            what="the broker accepting the renewed certificate from the engine",
        )
        assert time.monotonic() - rotated_at < 60, "reconnected within a minute"
        time.sleep(10)  # records keep flowing after the rotation
        producer.stop()
        assert producer.error is None
        n = producer.produced
        wait_for(
            lambda: set(values(econf, "west.orders")) >= set(range(n)) or None,
            180,
            interval=2,
            what=f"all {n} records on the target",
        )
        assert sorted(values(econf, "west.orders")) == list(range(n)), "exactly-once: every record once"
        after = read_job_status(econf, FLOW, timeout=5)
        assert after is not None and after.pid == status.pid, "the same engine process"
        assert after.started_at != status.started_at, "the flow restarted in place"
    finally:
        producer.stop()
        deployer.stop_all()
