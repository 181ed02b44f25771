"""Credentials that change while replication runs (issue 45): `${NAME}` read from $RECONCILER_SECRETS_DIR/NAME
before the environment (topology/secrets.py), and the engine's client caches keyed by a fingerprint of the resolved
settings (engine/clients.py `Fingerprints`, worker.py), so a rewritten file makes new clients without a restart of
the engine process."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from reconciler.contract.spec import EXIT_RESTART_REQUIRED, ClusterSpec
from reconciler.engine import clients, worker
from reconciler.engine.clients import Fingerprints
from reconciler.engine.driver_parts import CredentialWatch
from reconciler.topology import secrets
from tests.spec_helpers import job_spec

WEST, EAST = "127.0.0.1:1", "127.0.0.1:2"  # nothing listens: no client is ever used


def env_with(directory: Path, **variables: str) -> dict[str, str]:
    return {"RECONCILER_SECRETS_DIR": str(directory), **variables}


# --- file-backed resolution -----------------------------------------------------------------------------------
def test_a_file_of_the_secrets_dir_is_read_before_the_environment(tmp_path):
    (tmp_path / "WEST_PASSWORD").write_text("from-file\n")
    env = env_with(tmp_path, WEST_PASSWORD="from-env", WEST_USER="user-env")
    conf = secrets.client_settings(
        "west", WEST, {"sasl.password": "${WEST_PASSWORD}", "sasl.username": "${WEST_USER}"}, env
    )
    assert conf["sasl.password"] == "from-file"  # the file wins, its trailing newline stripped
    assert conf["sasl.username"] == "user-env"  # no file: the environment's


def test_only_trailing_newlines_are_stripped(tmp_path):
    (tmp_path / "WEST_PASSWORD").write_text("  a b\n\n")
    (tmp_path / "WEST_CRLF").write_bytes(b"secret\r\n")
    env = env_with(tmp_path)
    assert secrets.lookup("WEST_PASSWORD", env) == "  a b"
    assert secrets.lookup("WEST_CRLF", env) == "secret"


def test_without_the_setting_files_are_not_read(tmp_path):
    (tmp_path / "WEST_PASSWORD").write_text("from-file")
    assert secrets.lookup("WEST_PASSWORD", {"WEST_PASSWORD": "from-env"}) == "from-env"


def test_missing_everywhere_is_unresolved(tmp_path):
    with pytest.raises(secrets.UnresolvedReference) as e:
        secrets.client_settings("west", WEST, {"sasl.password": "${WEST_PASSWORD}"}, env_with(tmp_path))
    assert e.value.names == ["WEST_PASSWORD"]


def test_the_prefix_rule_still_applies_to_files(tmp_path):
    (tmp_path / "EAST_PASSWORD").write_text("east's")
    (tmp_path / "GITHUB_TOKEN").write_text("ci's")
    for name in ("EAST_PASSWORD", "GITHUB_TOKEN"):
        with pytest.raises(secrets.RefusedReference):
            secrets.client_settings("west", WEST, {"sasl.password": f"${{{name}}}"}, env_with(tmp_path))
    with pytest.raises(secrets.RefusedReference):  # and the credential-keys rule
        secrets.client_settings("west", WEST, {"client.id": "${WEST_PASSWORD}"}, env_with(tmp_path))


def test_a_name_is_never_a_path(tmp_path):
    secret_dir = tmp_path / "secrets"
    secret_dir.mkdir()
    (tmp_path / "WEST_OUTSIDE").write_text("outside")
    env = env_with(secret_dir)
    # `${../WEST_OUTSIDE}` is no reference (the name rule): it stays text and reads nothing
    assert secrets.references("${../WEST_OUTSIDE}") == []
    assert secrets.resolve("${../WEST_OUTSIDE}", env) == "${../WEST_OUTSIDE}"
    for bad in ("../WEST_OUTSIDE", "WEST/X", "..", ""):
        with pytest.raises(secrets.SecretsError):
            secrets.lookup(bad, env)


def test_an_unreadable_entry_is_an_error_naming_the_file_not_a_silent_fallback(tmp_path):
    (tmp_path / "WEST_PASSWORD").mkdir()  # not a file
    with pytest.raises(secrets.SecretsError) as e:
        secrets.lookup("WEST_PASSWORD", env_with(tmp_path, WEST_PASSWORD="from-env"))
    assert "WEST_PASSWORD" in str(e.value) and "from-env" not in str(e.value)


def test_file_values_are_redacted(tmp_path):
    (tmp_path / "WEST_PASSWORD").write_text("hunter2-from-file\n")
    redact = secrets.Redactor()
    redact.add_from({"sasl.password": "${WEST_PASSWORD}"}, env_with(tmp_path))
    assert redact("login failed for hunter2-from-file") == "login failed for ***"


def test_the_fingerprint_is_a_digest_not_the_values():
    fp = secrets.fingerprint({"sasl.password": "hunter2", "bootstrap.servers": WEST})
    assert len(fp) == 64 and "hunter2" not in fp
    assert fp == secrets.fingerprint({"bootstrap.servers": WEST, "sasl.password": "hunter2"})
    assert fp != secrets.fingerprint({"bootstrap.servers": WEST, "sasl.password": "hunter3"})


# --- the fingerprint cache --------------------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


WEST_CLUSTER = ClusterSpec("west", WEST, {"sasl.username": "${WEST_USER}", "sasl.password": "${WEST_PASSWORD}"})


def test_fingerprints_are_re_resolved_after_their_ttl_only(tmp_path, caplog):
    (tmp_path / "WEST_USER").write_text("alice\n")
    (tmp_path / "WEST_PASSWORD").write_text("old-password\n")
    env, clock = env_with(tmp_path), Clock()
    fps = Fingerprints(ttl=5.0, clock=clock)
    first = fps.of(WEST_CLUSTER, env)
    clock.now += 3
    assert fps.of(WEST_CLUSTER, env) == first  # unchanged
    (tmp_path / "WEST_PASSWORD").write_text("new-password\n")
    clock.now += 1
    with caplog.at_level(logging.INFO, logger="reconciler.engine.clients"):
        assert fps.of(WEST_CLUSTER, env) == first  # within the TTL: the file is not read again
        clock.now += 1.5
        second = fps.of(WEST_CLUSTER, env)
        assert second != first
        clock.now += 10
        assert fps.of(WEST_CLUSTER, env) == second  # read again, unchanged: no new line
        (tmp_path / "WEST_PASSWORD").write_text("third-password\n")
        third = fps.of(WEST_CLUSTER, env, fresh=True)  # resolved now, whatever the TTL
        assert third not in (first, second)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["credentials of cluster 'west' changed: reconnecting"] * 2  # one line per change
    assert not any("password" in line for line in lines)


def test_a_resolution_that_fails_keeps_the_last_fingerprint(tmp_path):
    (tmp_path / "WEST_USER").write_text("alice")
    (tmp_path / "WEST_PASSWORD").write_text("pw")
    env, clock = env_with(tmp_path), Clock()
    fps = Fingerprints(ttl=5.0, clock=clock)
    first = fps.of(WEST_CLUSTER, env)
    (tmp_path / "WEST_PASSWORD").unlink()  # e.g. between two steps of an update by hand
    clock.now += 6
    assert fps.of(WEST_CLUSTER, env) == first
    assert Fingerprints().of(WEST_CLUSTER, env) == ""  # none known: the client made next says what is missing


# --- the worker's cached clients --------------------------------------------------------------------------------
class Fake:
    """A confluent_kafka client as the worker makes it: its settings, whether it was closed."""

    made: list[Fake] = []

    def __init__(self, conf: dict) -> None:
        self.conf, self.closed, self.inits = conf, False, 0
        Fake.made.append(self)

    @classmethod
    def of(cls, conf: dict) -> Fake:
        return cls(conf)

    def close(self) -> None:
        self.closed = True

    def init_transactions(self, timeout: float) -> None:
        self.inits += 1

    def unassign(self) -> None:
        pass


@pytest.fixture
def rotating(tmp_path, monkeypatch):
    """The process reads its credentials from tmp_path; the cache's clock is the test's; clients are Fakes."""
    (tmp_path / "WEST_PASSWORD").write_text("west-1\n")
    (tmp_path / "EAST_PASSWORD").write_text("east-1\n")
    monkeypatch.setenv("RECONCILER_SECRETS_DIR", str(tmp_path))
    clock = Clock()
    monkeypatch.setattr(clients, "FINGERPRINTS", Fingerprints(ttl=5.0, clock=clock))
    monkeypatch.setattr(clients, "CACHE", clients.ClientCache())
    monkeypatch.setattr(worker, "Producer", Fake)
    monkeypatch.setattr(worker, "TxnProducer", Fake)
    monkeypatch.setattr("confluent_kafka.Consumer", Fake)
    monkeypatch.setattr(worker, "SourceConsumer", Fake)  # the task's source consumer (worker.SourceConsumer.of)
    Fake.made = []
    spec = job_spec(
        "west->east",
        ClusterSpec("west", WEST, {"sasl.password": "${WEST_PASSWORD}"}),
        ClusterSpec("east", EAST, {"sasl.password": "${EAST_PASSWORD}"}),
    )
    return SimpleNamespace(dir=tmp_path, clock=clock, spec=spec)


def test_a_changed_file_gives_a_new_consumer_key_and_closes_the_old_consumer(rotating):
    spec = rotating.spec
    key = worker._consumer_key(spec, 0)
    first = worker._consumer(spec, 0)
    assert worker._consumer(spec, 0) is first and worker._consumer_key(spec, 0) == key  # unchanged: the same
    (rotating.dir / "WEST_PASSWORD").write_text("west-2\n")
    assert worker._consumer_key(spec, 0) == key  # within the TTL
    rotating.clock.now += 5
    assert worker._consumer_key(spec, 0) != key
    second = worker._consumer(spec, 0)
    assert second is not first and first.closed
    assert second.conf["sasl.password"] == "west-2"
    assert "west-2" not in repr(worker._consumer_key(spec, 0))  # a key holds a digest, never a value


def test_a_changed_target_file_replaces_the_plain_producer(rotating):
    spec = rotating.spec
    first = worker.plain_producer(spec)
    assert worker.plain_producer(spec) is first
    (rotating.dir / "EAST_PASSWORD").write_text("east-2\n")
    rotating.clock.now += 5
    second = worker.plain_producer(spec)
    assert second is not first and first.closed and second.conf["sasl.password"] == "east-2"
    assert worker.plain_producer(spec) is second


def test_a_changed_target_file_replaces_the_transactional_producer_with_the_same_id(rotating):
    spec, me = rotating.spec, clients.process_identity()
    first = worker.txn_producer(spec, "txn-0", me)
    assert worker.txn_producer(spec, "txn-0", me) is first  # this process used it last, same credentials
    (rotating.dir / "WEST_PASSWORD").write_text("west-2\n")  # the source's: the producer is the target's
    rotating.clock.now += 5
    assert worker.txn_producer(spec, "txn-0", me) is first
    (rotating.dir / "EAST_PASSWORD").write_text("east-2\n")
    rotating.clock.now += 5
    second = worker.txn_producer(spec, "txn-0", me)
    assert second is not first and first.closed
    # The same transactional id, initialised again: the broker fences the old producer's epoch and aborts any
    # transaction of it still open (the path a producer taken over by another process already takes).
    assert second.conf["transactional.id"] == first.conf["transactional.id"] == "txn-0"
    assert second.inits == 1 and second.conf["sasl.password"] == "east-2"


def test_shared_clients_of_rotated_credentials_are_new_ones():
    made = []

    class Factory:
        def producer(self, conf):
            made.append(conf)
            return SimpleNamespace(flush=lambda t: 0)

        def admin(self, conf):
            return self.producer(conf)

    shared = clients.SharedClients(Factory())
    old = shared.acquire(clients.Role.PRODUCER, {"bootstrap.servers": EAST, "sasl.password": "east-1"})
    assert shared.acquire(clients.Role.PRODUCER, {"bootstrap.servers": EAST, "sasl.password": "east-1"}) is old
    new = shared.acquire(clients.Role.PRODUCER, {"bootstrap.servers": EAST, "sasl.password": "east-2"})
    assert new is not old and len(made) == 2
    key = clients.sharing_key(clients.Role.PRODUCER, {"sasl.password": "east-2"})
    assert "east-2" not in repr(key)


# --- two clusters, two login contexts ---------------------------------------------------------------------------
def test_source_and_target_clients_get_their_own_clusters_credentials_only(rotating):
    spec = rotating.spec
    source = clients.consumer_config(spec.source, spec)
    target = clients.producer_config(spec.target, spec, transactional_id="t")
    group_meta = clients.consumer_config(spec.target, spec)
    assert source["sasl.password"] == "west-1" and source["bootstrap.servers"] == WEST
    assert target["sasl.password"] == "east-1" and target["bootstrap.servers"] == EAST
    assert group_meta["sasl.password"] == "east-1"
    for conf, other in ((source, "east-1"), (target, "west-1"), (group_meta, "west-1")):
        assert other not in {str(v) for v in conf.values()}


# --- the driver: a flow restarts in place -----------------------------------------------------------------------
def test_the_driver_stops_for_a_restart_in_place_when_a_credential_changed(rotating, caplog, monkeypatch):
    driver = SimpleNamespace(exit_code=0, log=logging.getLogger("test"))
    watch = CredentialWatch(rotating.spec, None)  # made with the clients (Connections.open)
    assert not watch.stops(driver) and driver.exit_code == 0
    (rotating.dir / "EAST_PASSWORD").write_text("east-2\n")
    rotating.clock.now += 5
    monkeypatch.setattr(CredentialWatch, "enabled", False)  # the one-flow entry point: its exit would end the job
    assert not watch.stops(driver)
    monkeypatch.setattr(CredentialWatch, "enabled", True)
    with caplog.at_level(logging.INFO):
        assert watch.stops(driver) and driver.exit_code == EXIT_RESTART_REQUIRED
    assert watch.changed() == ["east"]
    assert "cluster 'east' changed: restarting the flow in place" in caplog.text and "east-2" not in caplog.text


def test_a_certificate_renewed_at_the_same_path_changes_the_fingerprint(tmp_path):
    cert = tmp_path / "client.pem"
    cert.write_text("certificate 1")
    cluster = ClusterSpec("west", WEST, {"ssl.certificate.location": str(cert)})
    clock = Clock()
    fps = Fingerprints(ttl=5.0, clock=clock)
    first = fps.of(cluster, {})
    clock.now += 5
    assert fps.of(cluster, {}) == first
    cert.write_text("certificate 2")
    clock.now += 5
    assert fps.of(cluster, {}) != first
    # without `files` (what the shared clients' key uses) only the path counts
    conf = {"ssl.certificate.location": str(cert)}
    assert secrets.fingerprint(conf) == secrets.fingerprint(dict(conf))


def test_the_python_workers_are_told_the_secrets_dir(tmp_path, monkeypatch):
    from reconciler.engine.session import application_conf

    monkeypatch.delenv("RECONCILER_SECRETS_DIR", raising=False)
    assert "spark.executorEnv.RECONCILER_SECRETS_DIR" not in application_conf("e", "local[1]", {})
    monkeypatch.setenv("RECONCILER_SECRETS_DIR", str(tmp_path))
    conf = application_conf("e", "local[1]", {})
    assert conf["spark.executorEnv.RECONCILER_SECRETS_DIR"] == str(tmp_path)


def test_the_env_command_counts_a_file_of_the_secrets_dir_as_set(tmp_path, capsys, monkeypatch):
    from reconciler.cli.main import main

    root = Path(__file__).resolve().parents[2]
    path = str(root / "topologies" / "dr-active-passive")
    names = ("PRIMARY_BOOTSTRAP", "PRIMARY_MIRROR_USERNAME", "PRIMARY_MIRROR_PASSWORD")
    for name in (*names, "DR_BOOTSTRAP", "DR_MIRROR_USERNAME", "DR_MIRROR_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    for name in names:
        (secrets_dir / name).write_text("x\n")
    (secrets_dir / "DR_BOOTSTRAP").write_text("127.0.0.1:9092\n")
    monkeypatch.setenv("RECONCILER_SECRETS_DIR", str(secrets_dir))
    monkeypatch.setenv("DR_MIRROR_USERNAME", "mirror")
    assert main(["env", path, "--check"]) == 1
    captured = capsys.readouterr()
    assert "1 variable the topology needs is not set: DR_MIRROR_PASSWORD" in captured.err
    (secrets_dir / "DR_MIRROR_PASSWORD").write_text("pw\n")
    assert main(["env", path, "--check"]) == 0
    assert "NOT SET" not in capsys.readouterr().out


def test_a_spec_that_changes_credentials_alone_reconnects_the_flow_in_place(caplog):
    """A re-read spec whose clusters differ in credential settings only (`plan` shows a rotation): the driver
    stops for a restart in place (its engine runs the new spec at once), not in the restart-required state."""
    west = ClusterSpec("west", WEST, {"sasl.password": "${WEST_PASSWORD}"})
    old = job_spec("west->east", west, ClusterSpec("east", EAST, {}))
    new = job_spec("west->east", ClusterSpec("west", WEST, {"sasl.password": "${WEST_PASSWORD_2}"}), old.target)
    driver = SimpleNamespace(spec=old, log=logging.getLogger("test.rotation"))
    watch = CredentialWatch.__new__(CredentialWatch)  # rotated_in reads the specs only
    with caplog.at_level(logging.INFO, "test.rotation"):
        assert watch.rotated_in(driver, new) is True
    assert "credentials of cluster 'west' changed in the spec" in caplog.text
    assert old.restart_fields(new) == set()
    moved = job_spec("west->east", ClusterSpec("west", "other:1", west.config), old.target)
    assert watch.rotated_in(driver, moved) is False and old.restart_fields(moved) == {"source"}
