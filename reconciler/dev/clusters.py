"""`reconciler dev up/down`: one Tansu broker per loopback cluster of a topology, tracked in a state dir."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from reconciler.dev.brokers import (
    DevClusterError,
    answers_kafka,
    is_loopback,
    parse_bootstrap,
    pid_alive,
    port_open,
    start_broker,
    stop_pid,
)
from reconciler.topology.connection import client_config
from reconciler.topology.model import Topology


def state_dir() -> Path:
    """Where the reconciler keeps local state (dev brokers, local jobs): $RECONCILER_STATE_DIR or ./.reconciler."""
    return Path(os.environ.get("RECONCILER_STATE_DIR", ".reconciler")).resolve()


@dataclass
class DevClusterStatus:
    alias: str
    bootstrap: str
    pid: int | None
    state: str  # started | running | stopped | foreign

    def line(self) -> str:
        pid = f" pid {self.pid}" if self.pid else ""
        return f"{self.alias:<16} {self.bootstrap:<22} {self.state}{pid}"


class DevClusters:
    def __init__(self, root: Path | None = None):
        self.dir = (root or state_dir()) / "dev"

    def _record(self, alias: str) -> Path:
        return self.dir / f"{alias}.json"

    def up(self, topology: Topology) -> list[DevClusterStatus]:
        """Start a broker for every loopback cluster; already running ones are left alone (idempotent)."""
        targets = []
        for alias, cluster in sorted(topology.clusters.items()):
            host, port = parse_bootstrap(client_config(cluster)["bootstrap.servers"])
            if not is_loopback(host):
                raise DevClusterError(
                    f"cluster {alias!r} has bootstrap address {cluster.bootstrap_servers!r}, which is not on loopback; "
                    "dev clusters only start on 127.0.0.1/localhost (point real clusters' topologies at real brokers)"
                )
            targets.append((alias, host, port))
        self.dir.mkdir(parents=True, exist_ok=True)
        out = []
        for alias, host, port in targets:
            rec = self._load(alias)
            if rec and pid_alive(rec["pid"]) and answers_kafka(f"{host}:{port}"):
                out.append(DevClusterStatus(alias, f"{host}:{port}", rec["pid"], "running"))
                continue
            if port_open(host, port):
                if answers_kafka(f"{host}:{port}"):
                    out.append(DevClusterStatus(alias, f"{host}:{port}", None, "foreign"))
                    continue
                raise DevClusterError(f"{host}:{port} for cluster {alias!r} is in use by something that is not Kafka")
            broker = start_broker(host, port, log_path=self.dir / f"{alias}.log")
            self._record(alias).write_text(
                json.dumps({"alias": alias, "bootstrap": broker.bootstrap, "pid": broker.pid})
            )
            out.append(DevClusterStatus(alias, broker.bootstrap, broker.pid, "started"))
        return out

    def down(self) -> list[DevClusterStatus]:
        out = []
        for rec_path in sorted(self.dir.glob("*.json")) if self.dir.exists() else []:
            rec = json.loads(rec_path.read_text())
            if pid_alive(rec["pid"]):
                stop_pid(rec["pid"])
            rec_path.unlink()
            out.append(DevClusterStatus(rec["alias"], rec["bootstrap"], rec["pid"], "stopped"))
        return out

    def status(self) -> list[DevClusterStatus]:
        out = []
        for rec_path in sorted(self.dir.glob("*.json")) if self.dir.exists() else []:
            rec = json.loads(rec_path.read_text())
            alive = pid_alive(rec["pid"])
            out.append(DevClusterStatus(rec["alias"], rec["bootstrap"], rec["pid"], "running" if alive else "dead"))
        return out

    def _load(self, alias: str) -> dict | None:
        path = self._record(alias)
        return json.loads(path.read_text()) if path.exists() else None
