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

#: Days the throwaway certificates are valid: longer than any `slo.certificate_expiry_days` a test or a dev topology
#: would set, so that `drift` does not report them as expiring (the default warns 30 days ahead).
VALID_DAYS = 400

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
    def create(cls, dir: Path, name: str = "reconciler-dev-ca", days: int = VALID_DAYS) -> CertificateAuthority:
        dir.mkdir(parents=True, exist_ok=True)
        ca = cls(dir, name)
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
                 "-days", str(days), "-subj", f"/CN={name}",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                 cwd=dir)  # fmt: skip
        return ca

    def issue(
        self, name: str, *, server: bool, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"), days: int = VALID_DAYS
    ):
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


# --- `reconciler dev up` of a cluster whose settings ask for TLS ---------------------------------------------------
def dev_tls_mode(alias: str, config: dict) -> str | None:
    """What `dev up` starts for a cluster with these (resolved) client settings: None (plaintext), "tls" or "mutual"
    (ssl.certificate.location set). Raises DevClusterError for what it cannot start (SASL, certificates as PEM text)."""
    protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
    if protocol == "PLAINTEXT":
        return None
    if protocol.startswith("SASL"):
        raise DevClusterError(
            f"cluster {alias!r} asks for {protocol}: dev clusters cannot require SASL with a working login "
            "(docs/brokers.md, 'Secure test brokers'); use security.protocol SSL or PLAINTEXT for a dev cluster"
        )
    if protocol != "SSL":
        raise DevClusterError(f"cluster {alias!r}: security.protocol {protocol!r} is not one dev up can start")
    if not config.get("ssl.ca.location") or config.get("ssl.ca.pem"):
        raise DevClusterError(
            f"cluster {alias!r} uses TLS: dev up writes its CA to the file named by ssl.ca.location (set it; "
            "ssl.ca.pem is not supported by dev up)"
        )
    if bool(config.get("ssl.certificate.location")) != bool(config.get("ssl.key.location")):
        raise DevClusterError(f"cluster {alias!r}: set both ssl.certificate.location and ssl.key.location, or neither")
    return "mutual" if config.get("ssl.certificate.location") else "tls"


def _issued_by_a_dev_ca(path: Path) -> bool:
    """True when `path` is a certificate whose issuer is a dev CA (CN=reconciler-dev-ca): one dev up wrote."""
    out = subprocess.run(["openssl", "x509", "-noout", "-issuer", "-in", str(path)], capture_output=True, text=True)
    return out.returncode == 0 and "CN=reconciler-dev-ca" in out.stdout.replace(" ", "")


def _place(source: Path, dest: Path, what: str, alias: str, ours: bool | None = None) -> None:
    """Copy `source` to `dest` unless `dest` already holds it; overwrite only what a dev up wrote (a certificate
    of a dev CA, or the key beside one: `ours`), never anything else."""
    if dest.exists():
        if dest.read_bytes() == source.read_bytes():
            return
        if not (_issued_by_a_dev_ca(dest) if ours is None else ours):
            raise DevClusterError(
                f"cluster {alias!r}: {dest} exists and was not written by dev up ({what}); "
                "remove it or name another file"
            )
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest)
    dest.chmod(0o600 if what == "key" else 0o644)


def start_dev_secure_broker(
    alias: str, host: str, port: int, config: dict, mode: str, state: Path, log_path: Path
) -> tuple[Broker, Terminator]:
    """`dev up` of a TLS cluster: the state dir's dev CA (`state/tls/`, made once), its certificate written to the
    topology's ssl.ca.location (and, for mutual TLS, a client certificate and key to ssl.certificate.location and
    ssl.key.location) unless already there; Tansu on a free port advertising host:port; stunnel on host:port."""
    if missing := missing_tools():
        raise DevClusterError(f"cluster {alias!r} uses TLS: dev up needs {', '.join(missing)} (Debian packages)")
    ca_dir = state / "tls"
    ca = CertificateAuthority(ca_dir) if (ca_dir / "ca.key").exists() else CertificateAuthority.create(ca_dir)
    _place(ca.cert, Path(config["ssl.ca.location"]), "CA certificate", alias)
    server_cert, server_key = ca_dir / "server.pem", ca_dir / "server.key"
    if not server_cert.exists():
        server_cert, server_key = ca.issue("server", server=True)
    if mode == "mutual":
        cert, key = ca_dir / f"client-{alias}.pem", ca_dir / f"client-{alias}.key"
        if not cert.exists():
            cert, key = ca.issue(f"client-{alias}", server=False)
        cert_dest, key_dest = Path(config["ssl.certificate.location"]), Path(config["ssl.key.location"])
        ours = not cert_dest.exists() or _issued_by_a_dev_ca(cert_dest)
        _place(cert, cert_dest, "client certificate", alias)
        _place(key, key_dest, "key", alias, ours=ours)
    plain_port = free_port()
    broker = start_broker(host, plain_port, log_path=log_path, engine=Engine.TANSU, advertised=(host, port))
    try:
        term = start_terminator(
            host, port, plain_port, server_cert, server_key, state / "tls", ca=ca.cert if mode == "mutual" else None
        )
    except Exception:
        from reconciler.dev.brokers import discard

        discard(broker)
        raise
    return broker, term
