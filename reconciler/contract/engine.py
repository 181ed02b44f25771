"""The engine directory: what a deployer and a running engine (reconciler.engine.host) say to each other.

DIR/engine.json        `EngineRecord`: the engine's name and the settings of its Spark application
DIR/flows/<flow>.json  one job spec per flow (reconciler.contract.spec)
DIR/flows/<flow>.restart
                       a token: a new value restarts that flow in place
DIR/flow.<flow>.json, DIR/flow.<flow>.restart
                       the same, flat: for a directory that cannot have subdirectories (a Kubernetes ConfigMap
                       mounted as a volume: its keys are file names; reconciler.deployers.kubernetes)
DIR/runtime.json       written by the engine: instance, driver pid, metrics port, Spark application id and
                       each flow's `FlowRuntime`
"""

from __future__ import annotations

import enum
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reconciler import outputs
from reconciler.contract.deployers import RUNTIME_FILE
from reconciler.topology.flow_id import flow_ends

log = logging.getLogger(__name__)

ENGINE_FILE = "engine.json"
FLOWS_DIR = "flows"
#: Flow files may also lie in the engine directory itself as `flow.<flow>.json` (a ConfigMap has no subdirectories).
FLAT_FLOW_PREFIX = "flow."
RESTART_SUFFIX = ".restart"
#: An EngineRecord's master (and `--master`) meaning: do not set spark.master, keep the one spark-submit was
#: started with (the Kubernetes operator's).
INHERIT_MASTER = "inherit"
#: The module Spark runs as the job's Python daemon (`spark.python.daemon.module`, engine/daemon.py): its workers are
#: forked from it and carry it on their command line, which is how a deployer tells them (deployers/instance.py).
WORKER_DAEMON_MODULE = "reconciler.engine.daemon"


@dataclass(frozen=True)
class EngineRecord:
    """What the deployer writes to DIR/engine.json: the engine's name and the settings of its Spark application
    (the same for all its flows; a change restarts the application)."""

    name: str
    master: str
    spark_conf: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, engine_dir: Path) -> EngineRecord:
        data = json.loads((engine_dir / ENGINE_FILE).read_text())
        return cls(str(data["name"]), str(data["master"]), {str(k): str(v) for k, v in data["spark_conf"].items()})

    def write(self, engine_dir: Path) -> None:
        write_json(engine_dir / ENGINE_FILE, asdict(self))


class FlowState(str, enum.Enum):
    RUNNING = "running"  # its driver thread runs (the status record says how it is doing)
    STOPPING = "stopping"  # asked to stop (removed, or restarting): finishing its batch
    BACKOFF = "backoff"  # it failed; it starts again at `retry_at`
    SUPERSEDED = "superseded"  # a newer instance of the flow runs elsewhere: stopped until its spec changes


@dataclass(frozen=True)
class FlowRuntime:
    """One flow of an engine, as runtime.json says it (the deployer reads it back)."""

    flow: str
    state: FlowState
    spec_hash: str | None
    since: float  # epoch seconds of the last start
    restarts: int = 0  # starts after the first (failures, restarts asked, restart-required changes)
    last_exit: int | None = None  # the exit code of the flow's last driver run

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "state": self.state.value}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FlowRuntime:
        return cls(
            str(data["flow"]),
            FlowState(data["state"]),
            data.get("spec_hash"),
            float(data.get("since") or 0.0),
            int(data.get("restarts") or 0),
            data.get("last_exit"),
        )


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Atomic (a temporary file beside `path`, then a rename), readable by its owner only (0600, directories
    created 0700): engine and job records name clusters and processes."""
    outputs.write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n", private=True)


def flow_files(engine_dir: Path) -> dict[str, Path]:
    """The engine's flow spec files by file stem: DIR/flows/<stem>.json and DIR/flow.<stem>.json (one layout per
    engine directory; were a stem in both, DIR/flows/ wins). A flow's restart token is its file's name with
    `.restart` instead of `.json`."""
    found = {
        p.name[len(FLAT_FLOW_PREFIX) : -len(".json")]: p
        for p in sorted(engine_dir.glob(f"{FLAT_FLOW_PREFIX}*.json"))
        if p.is_file() and len(p.name) > len(FLAT_FLOW_PREFIX) + len(".json")
    }
    d = engine_dir / FLOWS_DIR
    if d.is_dir():
        found.update({p.name[: -len(".json")]: p for p in sorted(d.glob("*.json")) if p.is_file()})
    return dict(sorted(found.items()))


def flat_flow_file(flow: str) -> str:
    """The flat file name of a flow in an engine directory (a ConfigMap key: `[-._a-zA-Z0-9]+`):
    `west->east` -> `flow.west.east.json`, `west->east:orders` -> `flow.west.east.orders.json` (aliases and
    family names never contain '.')."""
    source, target, family = flow_ends(flow)
    return FLAT_FLOW_PREFIX + ".".join(p for p in (source, target, family) if p) + ".json"


def write_runtime(
    job_dir: Path,
    instance_id: str | None,
    metrics_port: int | None,
    application_id: str | None,
    flows: list[FlowRuntime] | None = None,
) -> None:
    """Say who this job is in its directory (the deployer reads it): instance, driver pid, metrics port, Spark
    application id (on a standalone cluster the executors are the application's: they end with it) and, for an
    engine, its flows."""
    record: dict[str, Any] = {
        "instance_id": instance_id,
        "pid": os.getpid(),
        "metrics_port": metrics_port,
        "application_id": application_id,
        "at": time.time(),
    }
    if flows is not None:
        record["flows"] = [f.to_json() for f in flows]
    try:
        write_json(job_dir / RUNTIME_FILE, record)
    except OSError as exc:
        log.warning("cannot write %s: %s", job_dir / RUNTIME_FILE, exc)


def read_runtime(engine_dir: Path) -> dict[str, Any]:
    """DIR/runtime.json as written by the engine ({} when missing or unreadable)."""
    try:
        data = json.loads((engine_dir / RUNTIME_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def runtime_flows(runtime: Mapping[str, Any]) -> dict[str, FlowRuntime]:
    out: dict[str, FlowRuntime] = {}
    for item in runtime.get("flows") or []:
        try:
            f = FlowRuntime.from_json(item)
        except (KeyError, ValueError, TypeError):
            continue
        out[f.flow] = f
    return out
