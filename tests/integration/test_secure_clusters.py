"""The reconciler against brokers that enforce TLS and mutual TLS (reconciler/dev/tls.py: Tansu behind stunnel,
a throwaway private CA; the broker advertises the TLS port).

End to end: plan, apply, a job copying at-least-once and then exactly-once, status, drift and verify, with the
source over server-verified TLS and the target over mutual TLS (a client certificate required), the settings
written in the topology's `config:`. A client without TLS settings gets nothing from either port.

Clear errors: an untrusted CA, a certificate that does not name the address, a missing client certificate, a
plaintext client at a TLS port: `plan`, `drift`, `status` and `verify` exit 1 with one line naming the cluster,
its address and the cause, no traceback.

SASL cannot be enforced by any broker here (docs/brokers.md, "Secure test brokers"): its errors are unit tests
(tests/unit/test_connect_errors.py).
"""

from __future__ import annotations

import json
import textwrap
import time

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from reconciler import logs
from reconciler.adapters.read_to_end import read_to_end
from reconciler.cli.main import main
from reconciler.deployers.local import LocalDeployer
from reconciler.dev.brokers import Engine, free_port
from reconciler.dev.tls import CertificateAuthority, start_terminator
from tests.integration.mirror_helpers import wait_for

pytestmark = [pytest.mark.kafka]

N = 2_000  # records per delivery mode


def _yaml_map(conf: dict) -> str:
    return "{" + ", ".join(f"{k}: {json.dumps(v)}" for k, v in conf.items()) + "}"


def topology(west, east, *, west_conf=None, east_conf=None, delivery="at-least-once", jobs=True) -> str:
    west_conf = west.client_settings() if west_conf is None else west_conf
    east_conf = east.client_settings() if east_conf is None else east_conf
    job = '  job: {deployer: local, master: "local[1]", parallelism: 1, trigger_interval_ms: 100}\n' if jobs else ""
    return (
        textwrap.dedent(
            f"""\
        apiVersion: reconciler/v1
        kind: Topology
        metadata: {{name: secure-it}}
        clusters:
          west: {{bootstrap_servers: "{west.bootstrap}", config: {_yaml_map(west_conf)}}}
          east: {{bootstrap_servers: "{east.bootstrap}", config: {_yaml_map(east_conf)}}}
        defaults:
          sync: {{acls: false}}
          refresh_interval_seconds: 1
          heartbeats: {{interval_seconds: 1}}
          checkpoints: {{interval_seconds: 1}}
        """
        )
        + job
        + f"flows:\n  - {{source: west, target: east, topics: {{include: [orders]}}, delivery: {delivery}}}\n"
    )


class Cli:
    def __init__(self, path, capsys):
        self.path, self.capsys = path, capsys

    def run(self, *args) -> tuple[int, str]:
        code = main([a if a != "TOPO" else str(self.path) for a in args])
        out, err = self.capsys.readouterr()
        return code, out + err


def produce(conf: dict, topic: str, start: int, n: int) -> None:
    p = Producer(logs.client_config({**conf, "linger.ms": 5}))
    for i in range(start, start + n):
        p.produce(topic, f"{i}".encode(), key=f"k{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0


def values(conf: dict, topic: str, partitions: int = 2) -> list[int]:
    """Every record value of `topic` (as ints), read to the end over `conf` (read_uncommitted: Tansu shows
    aborted records anyway, docs/brokers.md)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        logs.client_config(
            {
                **conf,
                "group.id": f"verify-{time.monotonic_ns()}",
                "enable.partition.eof": True,
                "enable.auto.commit": False,
            }
        )
    )
    out: list[int] = []
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        pending = read_to_end(
            c,
            10,
            lambda m: out.append(int(m.value())),
            partitions=[(topic, p) for p in range(partitions)],
            batch=10_000,
            poll_seconds=0.5,
        )
        if pending:
            return []
    except KafkaException:
        return []
    finally:
        c.close()
    return out


def refused(bootstrap: str, conf: dict | None = None) -> bool:
    """True when a client with `conf` (default: none, plaintext) gets no metadata from `bootstrap`."""
    admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap, **(conf or {})}))
    try:
        admin.list_topics(timeout=3)
        return False
    except KafkaException:
        return True


@pytest.fixture(scope="module")
def secure_pair(secure_factory):
    """west: TLS (server verified); east: mutual TLS (client certificate required)."""
    return secure_factory.start(mutual=False), secure_factory.start(mutual=True)


# --- the terminated brokers really enforce TLS -------------------------------------------------------------------
def test_only_tls_clients_get_through(secure_pair):
    west, east = secure_pair
    for b in (west, east):
        assert not refused(b.bootstrap, b.client_settings())
        assert refused(b.bootstrap), f"a plaintext client got metadata through the TLS port of {b.bootstrap}"
        # the metadata names the TLS port, never the broker's own plaintext one
        md = AdminClient(logs.client_config(b.client_config())).list_topics(timeout=10)
        assert [f"{m.host}:{m.port}" for m in md.brokers.values()] == [b.bootstrap]
    assert refused(east.bootstrap, {"security.protocol": "SSL", "ssl.ca.location": str(east.ca.cert)}), (
        "the mutual-TLS port took a client without a certificate"
    )


# --- clear errors ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rogue_ca(tmp_path_factory):
    return CertificateAuthority.create(tmp_path_factory.mktemp("rogue-ca"), name="not-the-brokers-ca")


def _one_line_error(out: str) -> None:
    assert "Traceback" not in out, out


def test_untrusted_ca_is_named_with_the_setting_to_change(secure_pair, rogue_ca, tmp_path, capsys, state_dir):
    west, east = secure_pair
    path = tmp_path / "topology.yaml"
    path.write_text(topology(west, east, west_conf={**west.client_settings(), "ssl.ca.location": str(rogue_ca.cert)}))
    cli = Cli(path, capsys)
    want = (
        f"cluster 'west' ({west.bootstrap}): TLS handshake failed: the broker's certificate is not trusted "
        "(certificate verify failed); set ssl.ca.location to the CA that signed it"
    )
    for args in (("plan", "TOPO"), ("drift", "TOPO"), ("verify", "TOPO", "--flow", "west->east")):
        started = time.monotonic()
        code, out = cli.run(*args)
        assert code == 1 and want in out, (args, out)
        _one_line_error(out)
        assert time.monotonic() - started < 20, f"{args[0]} waited {time.monotonic() - started:.0f}s for an answer"
        assert "Broker transport failure" not in out, out


def test_missing_client_certificate_is_named(secure_pair, tmp_path, capsys, state_dir):
    west, east = secure_pair
    path = tmp_path / "topology.yaml"
    no_cert = {"security.protocol": "SSL", "ssl.ca.location": str(east.ca.cert)}
    path.write_text(topology(west, east, east_conf=no_cert))
    want = (
        f"cluster 'east' ({east.bootstrap}): TLS handshake failed: the broker requires a client certificate "
        "(mutual TLS) and none was sent; set ssl.certificate.location and ssl.key.location"
    )
    cli = Cli(path, capsys)
    for args in (("plan", "TOPO"), ("drift", "TOPO"), ("status", "TOPO")):
        code, out = cli.run(*args)
        assert code == 1 and want in out, (args, out)
        _one_line_error(out)


def test_certificate_for_another_name_is_a_hostname_mismatch(secure_pair, secure_ca, tmp_path, capsys, state_dir):
    west, east = secure_pair
    cert, key = secure_ca.issue("elsewhere", server=True, hosts=("broker.example.invalid",))
    term = start_terminator("127.0.0.1", free_port(), west.broker.port, cert, key, tmp_path)
    try:
        elsewhere = type("B", (), {"bootstrap": f"127.0.0.1:{term.port}", "client_settings": west.client_settings})
        path = tmp_path / "topology.yaml"
        path.write_text(topology(elsewhere, east))
        code, out = Cli(path, capsys).run("plan", "TOPO")
        assert code == 1, out
        assert (
            f"cluster 'west' (127.0.0.1:{term.port}): TLS handshake failed: the broker's certificate does not name"
            in out
        )
        assert "(hostname mismatch)" in out
        _one_line_error(out)
    finally:
        term.stop()


def test_tls_client_at_a_plaintext_port_is_told_the_port_does_not_speak_tls(
    secure_pair, broker_factory, tmp_path, capsys, state_dir
):
    """noida-db's plaintext listener closes a TLS handshake (librdkafka: "connecting to a PLAINTEXT broker
    listener?"); Tansu's waits for more bytes, which the probe reports as a broker that does not answer."""
    west, east = secure_pair
    noida = broker_factory.start(Engine.NOIDA)
    plaintext = type("B", (), {"bootstrap": noida.bootstrap, "client_settings": west.client_settings})
    path = tmp_path / "topology.yaml"
    path.write_text(topology(plaintext, east))
    code, out = Cli(path, capsys).run("plan", "TOPO")
    assert code == 1, out
    assert (
        f"cluster 'west' ({noida.bootstrap}): TLS handshake failed: the broker does not speak TLS on this port "
        "(a plaintext listener); use the port of its TLS listener"
    ) in out
    _one_line_error(out)


def test_plaintext_client_at_a_tls_port_is_told_to_set_security_protocol(secure_pair, tmp_path, capsys, state_dir):
    west, east = secure_pair
    path = tmp_path / "topology.yaml"
    path.write_text(topology(west, east, west_conf={}))
    code, out = Cli(path, capsys).run("plan", "TOPO")
    assert code == 1, out
    assert f"cluster 'west' ({west.bootstrap}): the broker closed the connection before answering" in out
    assert "set security.protocol" in out
    _one_line_error(out)


def test_refused_sasl_login_is_named_without_the_password(
    secure_factory, secure_pair, tmp_path, capsys, state_dir, monkeypatch
):
    """SASL_SSL through the terminator to a Tansu that requires SASL (`--authentication`) and knows no user: the
    login every client gets there is the one a wrong password gets."""
    west, _ = secure_pair
    east = secure_factory.start(sasl=True)
    secret = "correct-horse-battery-staple"
    monkeypatch.setenv("EAST_SASL_PASSWORD", secret)
    sasl = {
        **east.client_settings(),
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "mirror",
        "sasl.password": "${EAST_SASL_PASSWORD}",
    }
    assert sasl["security.protocol"] == "SASL_SSL"
    path = tmp_path / "topology.yaml"
    path.write_text(topology(west, east, east_conf=sasl))
    want = (
        f"cluster 'east' ({east.bootstrap}): SASL authentication failed: the broker refused the credentials "
        "(wrong user name or password, or wrong sasl.mechanism); check sasl.username, sasl.password and sasl.mechanism"
    )
    cli = Cli(path, capsys)
    # the probe's ApiVersions needs no login: the cause is librdkafka's, and still no command waits its timeout
    for args in (("plan", "TOPO"), ("drift", "TOPO"), ("status", "TOPO"), ("verify", "TOPO", "--flow", "west->east")):
        started = time.monotonic()
        code, out = cli.run(*args)
        assert code == 1 and want in out, (args, out)
        assert secret not in out
        _one_line_error(out)
        assert time.monotonic() - started < 10, f"{args[0]} waited {time.monotonic() - started:.0f}s"


# --- reconciler dev up from the topology's own settings -------------------------------------------------------------
def test_dev_up_starts_tls_and_mutual_tls_clusters_from_the_topologys_settings(secure_ca, tmp_path, capsys, state_dir):
    """`dev up` reads each cluster's `config`: SSL starts Tansu behind stunnel on the cluster's port with the dev CA
    written to ssl.ca.location; ssl.certificate.location makes it mutual TLS (and gets a client certificate)."""
    from reconciler.dev.brokers import free_port, pid_alive

    certs = tmp_path / "certs"
    wport, eport = free_port(), free_port()
    west = {"security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem")}
    east = {**west, "ssl.certificate.location": str(certs / "east.pem"), "ssl.key.location": str(certs / "east.key")}
    path = tmp_path / "topology.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            apiVersion: reconciler/v1
            kind: Topology
            clusters:
              west: {{bootstrap_servers: "127.0.0.1:{wport}", config: {_yaml_map(west)}}}
              east: {{bootstrap_servers: "127.0.0.1:{eport}", config: {_yaml_map(east)}}}
            flows:
              - {{source: west, target: east}}
            """
        )
    )
    cli = Cli(path, capsys)
    try:
        code, out = cli.run("dev", "up", "TOPO")
        assert code == 0 and "started (tls)" in out and "started (mutual)" in out, out
        records = {p.stem: json.loads(p.read_text()) for p in (state_dir / "dev").glob("*.json")}
        for alias, port, conf in (("west", wport, west), ("east", eport, east)):
            bootstrap = f"127.0.0.1:{port}"
            assert not refused(bootstrap, conf), alias
            assert refused(bootstrap), f"{alias}: a plaintext client got through"
            md = AdminClient(logs.client_config({"bootstrap.servers": bootstrap, **conf})).list_topics(timeout=10)
            assert [f"{m.host}:{m.port}" for m in md.brokers.values()] == [bootstrap]
        assert refused(f"127.0.0.1:{eport}", west), "east requires a client certificate"
        code, out = cli.run("dev", "up", "TOPO")  # idempotent: the same brokers, the same certificates
        assert code == 0 and out.count("running") == 2, out
        code, out = cli.run("plan", "TOPO", "--detailed-exitcode")
        assert code in (0, 2), out
    finally:
        code, out = cli.run("dev", "down")
    assert code == 0, out
    for rec in records.values():
        assert not pid_alive(rec["pid"]) and not pid_alive(rec["terminator_pid"])


def test_dev_up_refuses_sasl_and_a_foreign_ca_file(tmp_path, capsys, state_dir, rogue_ca):
    from reconciler.dev.brokers import free_port

    foreign = tmp_path / "ca.pem"
    foreign.write_text(rogue_ca.cert.read_text())  # a CA that is not a dev CA: the user's own
    for conf, said in (
        ({"security.protocol": "SASL_SSL", "ssl.ca.location": str(foreign)}, "cannot require SASL"),
        ({"security.protocol": "SSL", "ssl.ca.location": str(foreign)}, "was not written by dev up"),
    ):
        path = tmp_path / "topology.yaml"
        path.write_text(
            "apiVersion: reconciler/v1\nkind: Topology\nclusters:\n"
            f'  west: {{bootstrap_servers: "127.0.0.1:{free_port()}", config: {_yaml_map(conf)}}}\n'
            "flows: []\n"
        )
        cli = Cli(path, capsys)
        try:
            code, out = cli.run("dev", "up", "TOPO")
        finally:
            cli.run("dev", "down")
        assert code == 1 and said in out and "Traceback" not in out, out
    assert foreign.read_text() == rogue_ca.cert.read_text(), "left as it was"


# --- end to end -------------------------------------------------------------------------------------------------
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.jobs
def test_plan_apply_copy_status_drift_verify_over_tls_and_mutual_tls(secure_factory, tmp_path, capsys, state_dir):
    west, east = secure_factory.start(mutual=False), secure_factory.start(mutual=True)
    wconf, econf = west.client_config(), east.client_config()
    admin = AdminClient(logs.client_config(wconf))
    for f in admin.create_topics([NewTopic("orders", 2, 1)]).values():
        f.result(15)
    produce(wconf, "orders", 0, N)
    path = tmp_path / "topology.yaml"
    path.write_text(topology(west, east))
    cli = Cli(path, capsys)

    def log() -> str:
        try:
            return (LocalDeployer().job_dir("west->east") / "job.log").read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    try:
        # plan: the remote topic and the job; apply; the records arrive, over TLS from west, mutual TLS to east
        code, out = cli.run("plan", "TOPO", "--detailed-exitcode")
        assert code == 2 and "west.orders" in out and "deploy job west->east" in out, out
        code, out = cli.run("apply", "TOPO", "--auto-approve")
        assert code == 0, out
        wait_for(
            lambda: sorted(values(econf, "west.orders")) == list(range(N)) or None,
            180,
            interval=2,
            what=f"{N} records copied at-least-once (job log: {log()})",
        )
        code, out = cli.run("plan", "TOPO", "--detailed-exitcode")
        assert code == 0, out

        # exactly-once: the transactional producer and the offsets group on the mutual-TLS target
        path.write_text(topology(west, east, delivery="exactly-once"))
        code, out = cli.run("apply", "TOPO", "--auto-approve")
        assert code == 0 and "restart" in out, out
        produce(wconf, "orders", N, N)
        wait_for(
            lambda: set(values(econf, "west.orders")) >= set(range(2 * N)) or None,
            180,
            interval=2,
            what=f"{N} more records copied exactly-once (job log: {log()})",
        )
        after = [v for v in values(econf, "west.orders") if v >= N]
        assert sorted(after) == list(range(N, 2 * N)), "exactly-once: each record once"

        # status, drift, verify: all read the clusters over TLS
        def running():
            code, out = cli.run("status", "TOPO")
            [row] = [line for line in out.splitlines() if line.startswith("west->east ")]
            return out if code == 0 and " running " in row and "1 of 1 job run the desired spec" in out else None

        wait_for(running, 60, interval=2, what="status: the job runs the desired (exactly-once) spec")
        code, out = cli.run("drift", "TOPO", "--format", "json")
        doc = json.loads(out[: out.rindex("}") + 1])
        assert code == 0 and doc["status"] == "in-sync" and doc["flows"][0]["status"] == "ok", out
        code, out = cli.run("verify", "TOPO", "--flow", "west->east")
        assert code == 0 and "clean" in out, out
    finally:
        LocalDeployer().stop_all()
