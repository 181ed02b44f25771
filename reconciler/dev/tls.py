"""Secure dev brokers: a Kafka-protocol broker behind a TLS terminator (stunnel), with a throwaway private CA.

Neither embedded broker terminates TLS in a way clients can rely on (Tansu 0.6's `tls://` listener answered
plaintext; noida-db has no TLS option for Kafka), so the broker listens in plaintext on a port of its own and
stunnel accepts TLS on the port the clients use, optionally requiring a client certificate signed by the CA
(mutual TLS). The broker *advertises the TLS port* (Tansu's `--advertised-listener-url`): a client that
bootstraps through the terminator is sent back to it by the metadata, never to the plaintext port.

SASL cannot be enforced here (docs/brokers.md, "Secure test brokers"): Tansu's `--authentication` refuses
clients without SASL, but users can only be created through the broker itself (`tansu user create`), which then
refuses the unauthenticated creator ("early eof"); in memory storage nothing created before a restart is kept.
noida-db has no Kafka authentication at all.

Needs the `openssl` and `stunnel4` Debian packages (`require_tools()` says which is missing).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from reconciler.dev.brokers import (
    Broker,
    DevClusterError,
    Engine,
    free_port,
    port_open,
    start_broker,
    stop_pid,
)

#: Debian package of each tool the secure brokers need.
TOOLS = {"openssl": "openssl", "stunnel4": "stunnel4"}


def missing_tools() -> list[str]:
    """The Debian packages of the tools that are not installed (empty: secure brokers can start)."""
    out = []
    if shutil.which("openssl") is None:
        out.append(TOOLS["openssl"])
    if shutil.which("stunnel4") is None and shutil.which("stunnel") is None:
        out.append(TOOLS["stunnel4"])
    return out


def _stunnel() -> str:
    path = shutil.which("stunnel4") or shutil.which("stunnel")
    if path is None:
        raise DevClusterError("stunnel is not installed (Debian: apt-get install stunnel4)")
    return path


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise DevClusterError(f"openssl {' '.join(args[:2])} failed: {proc.stderr.strip()[-400:]}")


@dataclass(frozen=True)
class CertificateAuthority:
    """A throwaway CA in `dir`: `ca.pem` (its certificate), and leaf certificates it signed."""

    dir: Path
    name: str = "reconciler-dev-ca"

    @property
    def cert(self) -> Path:
        return self.dir / "ca.pem"

    @property
    def key(self) -> Path:
        return self.dir / "ca.key"

    @classmethod
    def create(cls, dir: Path, name: str = "reconciler-dev-ca", days: int = 2) -> CertificateAuthority:
        dir.mkdir(parents=True, exist_ok=True)
        ca = cls(dir, name)
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
                 "-days", str(days), "-subj", f"/CN={name}",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                 cwd=dir)  # fmt: skip
        return ca

    def issue(self, name: str, *, server: bool, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"), days: int = 2):
        """A key and certificate `name.key` / `name.pem` signed by this CA: a server certificate for `hosts`
        (subjectAltName), or a client certificate (CN=name). Returns (cert, key) paths."""
        san = ",".join(f"IP:{h}" if h.replace(".", "").isdigit() or ":" in h else f"DNS:{h}" for h in hosts)
        ext = self.dir / f"{name}.ext"
        ext.write_text(
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
            + (f"extendedKeyUsage=serverAuth\nsubjectAltName={san}\n" if server else "extendedKeyUsage=clientAuth\n")
        )
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", f"/CN={name}", cwd=self.dir)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.pem", "-days", str(days), "-extfile", ext.name, cwd=self.dir)  # fmt: skip
        return self.dir / f"{name}.pem", self.dir / f"{name}.key"


@dataclass
class Terminator:
    """A running stunnel accepting TLS on `port` and forwarding to the broker's plaintext port."""

    host: str
    port: int
    backend_port: int
    pid: int
    mutual: bool
    conf: Path

    def stop(self) -> None:
        stop_pid(self.pid)


def start_terminator(
    host: str,
    port: int,
    backend_port: int,
    cert: Path,
    key: Path,
    workdir: Path,
    ca: Path | None = None,
    timeout: float = 10.0,
) -> Terminator:
    """stunnel on host:port -> host:backend_port with `cert`/`key`; with `ca`, a client certificate signed by it
    is required (mutual TLS), else none is asked for."""
    workdir.mkdir(parents=True, exist_ok=True)
    conf = workdir / f"stunnel-{port}.conf"
    log = workdir / f"stunnel-{port}.log"
    lines = [
        "foreground = yes",
        f"output = {log}",
        "debug = 5",
        "[kafka]",
        f"accept = {host}:{port}",
        f"connect = {host}:{backend_port}",
        f"cert = {cert}",
        f"key = {key}",
        "sslVersionMin = TLSv1.2",
    ]
    lines += [f"CAfile = {ca}", "verifyChain = yes", "requireCert = yes"] if ca else ["verify = 0"]
    conf.write_text("\n".join(lines) + "\n")
    proc = subprocess.Popen(
        [_stunnel(), str(conf)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-600:] if log.exists() else ""
            raise DevClusterError(f"stunnel exited with code {proc.returncode} on {host}:{port}: {tail}")
        if port_open(host, port):
            return Terminator(host, port, backend_port, proc.pid, ca is not None, conf)
        time.sleep(0.05)
    stop_pid(proc.pid)
    raise DevClusterError(f"stunnel on {host}:{port} did not listen within {timeout:.0f}s")


@dataclass
class SecureBroker:
    """A broker reachable only through TLS at `bootstrap`; `client_settings()` are what a client writes."""

    broker: Broker  # the plaintext broker behind the terminator (its port is for nobody)
    terminator: Terminator
    ca: CertificateAuthority
    client_cert: Path | None = None
    client_key: Path | None = None
    sasl: bool = False  # the broker requires SASL (and, in memory storage, refuses every user: see the module doc)

    @property
    def host(self) -> str:
        return self.terminator.host

    @property
    def port(self) -> int:
        return self.terminator.port

    @property
    def bootstrap(self) -> str:
        return f"{self.terminator.host}:{self.terminator.port}"

    @property
    def mutual(self) -> bool:
        return self.terminator.mutual

    def client_settings(self) -> dict[str, str]:
        """The librdkafka settings (a topology's `clusters.<alias>.config`) of a client of this broker."""
        conf = {"security.protocol": "SASL_SSL" if self.sasl else "SSL", "ssl.ca.location": str(self.ca.cert)}
        if self.mutual and self.client_cert and self.client_key:
            conf |= {"ssl.certificate.location": str(self.client_cert), "ssl.key.location": str(self.client_key)}
        return conf

    def client_config(self) -> dict[str, str]:
        """client_settings() with bootstrap.servers: a confluent-kafka client's config."""
        return {"bootstrap.servers": self.bootstrap, **self.client_settings()}

    def stop(self) -> None:
        from reconciler.dev.brokers import discard

        self.terminator.stop()
        discard(self.broker)


def start_secure_broker(
    workdir: Path,
    ca: CertificateAuthority,
    *,
    mutual: bool = False,
    sasl: bool = False,
    host: str = "127.0.0.1",
    log_path: Path | None = None,
) -> SecureBroker:
    """A Tansu broker on a free plaintext port advertising a free TLS port, and stunnel on that TLS port (with
    `mutual`: a client certificate signed by `ca` required). Only Tansu can advertise another port than the one
    it listens on, so the secure brokers are Tansu whatever $RECONCILER_DEV_ENGINE says. `sasl`: Tansu requires
    SASL of every client (`--authentication`); no user can be created, so every client is refused: a broker for
    testing how a refused login is reported, not for a successful SASL_SSL login."""
    if missing := missing_tools():
        raise DevClusterError(f"secure dev brokers need {', '.join(missing)} (Debian packages)")
    tls_port, plain_port = free_port(), free_port()
    server_cert, server_key = ca.dir / "server.pem", ca.dir / "server.key"
    if not server_cert.exists():
        server_cert, server_key = ca.issue("server", server=True)
    broker = start_broker(
        host, plain_port, log_path=log_path, engine=Engine.TANSU, advertised=(host, tls_port), authentication=sasl
    )
    try:
        term = start_terminator(
            host, tls_port, plain_port, server_cert, server_key, workdir, ca=ca.cert if mutual else None
        )
    except Exception:
        from reconciler.dev.brokers import discard

        discard(broker)
        raise
    client_cert = client_key = None
    if mutual:
        client_cert, client_key = ca.dir / "client.pem", ca.dir / "client.key"
        if not client_cert.exists():
            client_cert, client_key = ca.issue("client", server=False)
    return SecureBroker(broker, term, ca, client_cert, client_key, sasl)
