"""`reconciler dev up/down`: one broker (Tansu or noida-db) per loopback cluster of a topology, tracked in a
state dir: `dev/<alias>.json` (alias, bootstrap, pid, engine), `dev/<alias>.log`, and for noida
`dev/<alias>.data` (its data; removed by `dev down`, so a dev cluster starts empty on either engine).

A cluster whose `config` says `security.protocol: SSL` gets a Tansu broker behind stunnel on its port (TLS; with
ssl.certificate.location, mutual TLS), certificates from the state dir's dev CA written where its settings name
them (`reconciler/dev/tls.py`, docs/brokers.md "Secure test brokers")."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from reconciler import settings
from reconciler.dev.brokers import (
    Broker,
    DevClusterError,
    Engine,
    answers_kafka,
    default_engine,
    discard,
    is_loopback,
    parse_bootstrap,
    pid_alive,
    port_open,
    start_broker,
    stop_pid,
)
from reconciler.dev.tls import dev_tls_mode, start_dev_secure_broker
from reconciler.topology.connection import client_config
from reconciler.topology.model import Topology


@dataclass
class DevClusterStatus:
    alias: str
    bootstrap: str
    pid: int | None
    state: str  # started | running | stopped | foreign
    engine: Engine | None = None  # None: not ours (foreign)

    def line(self) -> str:
        pid = f" pid {self.pid}" if self.pid else ""
        engine = f" ({self.engine.product})" if self.engine else ""
        return f"{self.alias:<16} {self.bootstrap:<22} {self.state}{pid}{engine}"


class DevClusters:
    def __init__(self, root: Path | None = None):
        self.dir = (root or settings.state_dir()) / "dev"

    def _record(self, alias: str) -> Path:
        return self.dir / f"{alias}.json"

    def up(self, topology: Topology, engine: Engine | None = None) -> list[DevClusterStatus]:
        """Start a broker for every loopback cluster on `engine` (default: $RECONCILER_DEV_ENGINE, else Tansu);
        already running ones are left alone, whatever their engine (idempotent)."""
        engine = engine or default_engine()
        targets = []
        for alias, cluster in sorted(topology.clusters.items()):
            host, port = parse_bootstrap(client_config(cluster)["bootstrap.servers"])
            if not is_loopback(host):
                raise DevClusterError(
                    f"cluster {alias!r} has bootstrap address {cluster.bootstrap_servers!r}, which is not on loopback; "
                    "dev clusters only start on 127.0.0.1/localhost (point real clusters' topologies at real brokers)"
                )
            config = client_config(cluster)
            targets.append((alias, host, port, config, dev_tls_mode(alias, config)))
        self.dir.mkdir(parents=True, exist_ok=True)
        out = []
        for alias, host, port, config, tls in targets:
            security = {k: v for k, v in config.items() if k != "bootstrap.servers"} if tls else None
            rec = self._load(alias)
            if rec and pid_alive(rec["pid"]) and answers_kafka(f"{host}:{port}", config=security):
                out.append(DevClusterStatus(alias, f"{host}:{port}", rec["pid"], "running", _engine(rec)))
                continue
            if port_open(host, port):
                if answers_kafka(f"{host}:{port}", config=security):
                    out.append(DevClusterStatus(alias, f"{host}:{port}", None, "foreign"))
                    continue
                raise DevClusterError(f"{host}:{port} for cluster {alias!r} is in use by something that is not Kafka")
            if tls:  # Tansu behind stunnel on the cluster's port (reconciler/dev/tls.py)
                broker, term = start_dev_secure_broker(
                    alias, host, port, config, tls, self.dir, self.dir / f"{alias}.log"
                )
                record = {"alias": alias, "bootstrap": f"{host}:{port}", "pid": broker.pid, "engine": "tansu"}
                record |= {"tls": tls, "terminator_pid": term.pid, "plaintext_port": broker.port}
                self._record(alias).write_text(json.dumps(record))
                out.append(DevClusterStatus(alias, f"{host}:{port}", broker.pid, f"started ({tls})", Engine.TANSU))
                continue
            data = self.dir / f"{alias}.data"
            if engine is Engine.NOIDA:  # a leftover of a broker that was not stopped by `dev down`
                discard(Broker(host, port, data_dir=data))
            broker = start_broker(host, port, log_path=self.dir / f"{alias}.log", engine=engine, data_dir=data)
            record = {"alias": alias, "bootstrap": broker.bootstrap, "pid": broker.pid, "engine": engine.value}
            if broker.data_dir is not None:
                record["data_dir"] = str(broker.data_dir)
            self._record(alias).write_text(json.dumps(record))
            out.append(DevClusterStatus(alias, broker.bootstrap, broker.pid, "started", engine))
        return out

    def down(self) -> list[DevClusterStatus]:
        out = []
        for rec_path in sorted(self.dir.glob("*.json")) if self.dir.exists() else []:
            rec = json.loads(rec_path.read_text())
            if rec.get("terminator_pid") and pid_alive(rec["terminator_pid"]):
                stop_pid(rec["terminator_pid"])
            if pid_alive(rec["pid"]):
                stop_pid(rec["pid"])
            if rec.get("data_dir"):
                shutil.rmtree(rec["data_dir"], ignore_errors=True)
            rec_path.unlink()
            out.append(DevClusterStatus(rec["alias"], rec["bootstrap"], rec["pid"], "stopped", _engine(rec)))
        return out

    def status(self) -> list[DevClusterStatus]:
        out = []
        for rec_path in sorted(self.dir.glob("*.json")) if self.dir.exists() else []:
            rec = json.loads(rec_path.read_text())
            alive = pid_alive(rec["pid"])
            state = "running" if alive else "dead"
            out.append(DevClusterStatus(rec["alias"], rec["bootstrap"], rec["pid"], state, _engine(rec)))
        return out

    def engines(self) -> set[Engine]:
        """The engines of the dev brokers recorded here."""
        return {s.engine for s in self.status() if s.engine is not None}

    def _load(self, alias: str) -> dict | None:
        path = self._record(alias)
        return json.loads(path.read_text()) if path.exists() else None


def _engine(record: dict) -> Engine:
    """The engine a state record names (records written before there were two: Tansu)."""
    try:
        return Engine(record.get("engine") or Engine.TANSU.value)
    except ValueError:
        return Engine.TANSU
