"""The engine directories of a state directory: finding engines, their records, one change at a time, start, stop.

`$RECONCILER_STATE_DIR/engines/<engine>/` holds everything about one engine (its files are listed in
reconciler.deployers.local). `EngineDirs` is the process deployers' (local, spark-standalone) hold on them: which
engines hold a flow's file, what an engine's record and running instance say (`LocalEngine`), a lock per engine
(apply handles the flows of a batch in parallel), and the start and graceful stop of an engine's application. It
decides nothing about flows: reconciler.deployers.local places and removes them.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import reconciler.deployers.instance as instance
from reconciler import settings
from reconciler.adapters.base import OpResult
from reconciler.contract.deployers import ENGINE_SLOTS_HINT, local_slots, local_threads
from reconciler.contract.engine import (
    FLOWS_DIR,
    EngineRecord,
    FlowRuntime,
    flow_files,
    read_runtime,
    runtime_flows,
    write_json,
)
from reconciler.contract.spec import JobSpec
from reconciler.deployers.base import describe_exit, flow_slug
from reconciler.deployers.process import LocalJob, recorded_job
from reconciler.settings import AUTO, BIND_ENV, LOOPBACK, PORT_ENV
from reconciler.topology.flow_id import flow_ends

#: Seconds to wait after starting an engine for an immediate failure (bad spark-submit, bad settings).
START_CHECK_SECONDS = 1.5
STOP_TIMEOUT_SECONDS = 60.0
#: Seconds a running engine may take to pick up a flow file (it looks once a second, and starts the flow).
PICKUP_SECONDS = 20.0


def load_spec(path: Path) -> JobSpec | None:
    """A flow's spec file (None: missing or unreadable)."""
    try:
        return JobSpec.load(path)
    except Exception:  # noqa: BLE001
        return None


def slots(engine_dir: Path) -> int:
    """The task slots of the flows whose files an engine directory holds."""
    return sum(s.engine.parallelism for s in (load_spec(p) for p in flow_files(engine_dir).values()) if s is not None)


@dataclass(frozen=True)
class LocalEngine:
    """One engine directory as found: its deployer record and, if it runs, its process."""

    name: str
    dir: Path
    record: dict | None
    job: LocalJob | None  # attached to the recorded instance (None: no record)

    @property
    def alive(self) -> bool:
        return self.job is not None and self.job.alive()

    @property
    def running(self) -> bool:
        """Alive and not stopped on purpose."""
        return self.alive and not (self.record or {}).get("stopped_at")

    def runtime(self) -> dict:
        """What the running instance says of itself ({} if not (yet) written or written by another instance)."""
        data = read_runtime(self.dir)
        if self.record is None or data.get("instance_id") != self.record.get("instance_id"):
            return {}
        return data

    def flows(self) -> dict[str, FlowRuntime]:
        return runtime_flows(self.runtime())

    def short_of_slots(self) -> str:
        """Words for an engine whose `local[N]` holds fewer task threads than its flows now have slots (they share
        them until the engine restarts); empty when it has room."""
        master = str((self.record or {}).get("master", ""))
        threads, wanted = local_threads(master), slots(self.dir)
        if threads is None or threads >= wanted:
            return ""
        return f" (it runs {master} for {wanted} task slots: its flows share those threads until it restarts)"

    def where(self, alive: bool = True) -> str:
        """Where the recorded instance runs (a dead one: which it was, not a pid that may be reused)."""
        record = self.record
        if record is None:
            return f"engine {self.name}, no job record"
        if not alive:
            return f"engine {self.name}, instance {record.get('instance_id') or '?'} (ended), {record.get('master')}"
        runtime = self.runtime()
        port = runtime.get("metrics_port") or record.get("metrics_port")
        metrics = f", metrics http://127.0.0.1:{port}/metrics" if port else ""
        inst = f"instance {record.get('instance_id')}" if record.get("instance_id") else "no instance id"
        if runtime.get("pid"):
            proc = f"driver pid {runtime['pid']} ({inst})"
        else:
            proc = f"supervisor pid {record.get('pid')} ({inst}, no driver yet)"
        app = f", app {runtime['application_id']}" if runtime.get("application_id") else ""
        return f"engine {self.name}: {proc}, {record.get('master')}{app}{metrics}"


class EngineDirs:
    """The engine directories under `root/engines` of one process deployer (`deployer`: the name it records)."""

    def __init__(self, root: Path, deployer: str, stop_timeout: float, env: Mapping[str, str]):
        self.root = root
        self.dir = root / "engines"
        self.deployer = deployer
        self.stop_timeout = stop_timeout
        self.env = dict(env)

    # --- finding -----------------------------------------------------------------------------
    def engine_dir(self, engine: str) -> Path:
        return self.dir / engine

    def flow_file(self, engine: str, flow: str) -> Path:
        return self.engine_dir(engine) / FLOWS_DIR / f"{flow_slug(flow)}.json"

    def names(self) -> list[str]:
        """Every engine that has a deployer record."""
        return sorted(p.parent.name for p in self.dir.glob("*/job.json")) if self.dir.is_dir() else []

    def engines_of(self, flow: str) -> list[str]:
        """The engines holding a spec file of `flow` (normally one)."""
        if not self.dir.is_dir():
            return []
        name = f"{flow_slug(flow)}.json"
        return sorted(p.parent.parent.name for p in self.dir.glob(f"*/{FLOWS_DIR}/{name}"))

    def job_dir(self, flow: str) -> Path:
        """The directory of the engine that runs `flow` (its target's engine if none holds it yet)."""
        engines = self.engines_of(flow)
        return self.engine_dir(engines[0] if engines else flow_ends(flow)[1])

    def engine(self, name: str) -> LocalEngine:
        d = self.engine_dir(name)
        record, job = recorded_job(d, "engine.json") or (None, None)
        return LocalEngine(name, d, record, job)

    def write_record(self, engine: str, record: dict) -> None:
        write_json(self.engine_dir(engine) / "job.json", record)

    @contextmanager
    def locked(self, engine: str) -> Iterator[None]:
        """One change of an engine at a time (apply handles the flows of a batch in parallel)."""
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(self.dir / f".{engine}.lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    # --- start and stop -------------------------------------------------------------------------
    def start(self, name: str, wanted: EngineRecord, options: Mapping[str, Any] | None) -> OpResult:
        """Start the engine with the flow files in its directory (whatever still runs of it ends first)."""
        d = self.engine_dir(name)
        left = self.end_leftovers(d)
        master = local_slots(wanted.master, max(slots(d), int((options or {}).get(ENGINE_SLOTS_HINT) or 0)))
        EngineRecord(name, master, wanted.spark_conf).write(d)
        # job.metrics_port: that port (0: none); unset: the engine binds a free port itself (no race for it with
        # Spark's own ports), unless $RECONCILER_METRICS_PORT=0 here.
        port = (options or {}).get("metrics_port")
        port_env = AUTO if port is None else str(port)
        env = {**os.environ, **self.env}
        if port is None and settings.METRICS_PORT.raw(env) is not None and settings.metrics_port(env) == 0:
            port, port_env = 0, "0"
        # job.metrics_bind: that address; unset: this machine only (the endpoint has no authentication, issue 45)
        bind = (options or {}).get("metrics_bind") or LOOPBACK
        inst = instance.new_instance_id()
        record = {
            "engine": name,
            "deployer": self.deployer,
            "instance_id": inst,
            "pid": None,  # written before the start: a deployer killed mid-start leaves an instance id behind
            "pid_start": None,
            "master": master,
            "spark_conf": dict(wanted.spark_conf),
            "started_at": time.time(),
            "log": str(d / "job.log"),
            "metrics_port": port or None,
            "metrics_bind": bind,
        }
        self.write_record(name, record)
        job = LocalJob.start_engine(
            d,
            master=master,
            env={**self.env, PORT_ENV: port_env, BIND_ENV: bind},
            log_path=d / "job.log",
            exit_code_path=d / "exit_code",
            instance_id=inst,
        )
        record = {**record, "pid": job.pid, "pid_start": job.start_time}
        self.write_record(name, record)
        code = job.wait(START_CHECK_SECONDS)
        if code is not None:
            return OpResult.failed(
                f"engine {name} {describe_exit(code)} right after the start; see {d / 'job.log'}:\n{job.log_tail(15)}"
            )
        return OpResult.success(f"{left}started {self.engine(name).where()}")

    def stop(self, eng: LocalEngine) -> str:
        """Stop an engine gracefully (all its flows); words for what happened."""
        if eng.record is None:
            return f"engine {eng.name}: no record"
        code = eng.job.stop(self.stop_timeout) if eng.job is not None and eng.alive else None
        self.write_record(eng.name, {**eng.record, "stopped_at": time.time()})
        left = self.end_leftovers(eng.dir)
        if code is None and not left:
            return f"engine {eng.name} stopped" if eng.alive else f"engine {eng.name} was not running"
        how = (
            "killed after the stop timeout" if code is None else "stopped cleanly" if code == 0 else describe_exit(code)
        )
        return f"{left}engine {eng.name} {how}"

    def end_leftovers(self, job_dir: Path | str, keep: str | None = None) -> str:
        """Stop every process of a job or engine directory but those of instance `keep`; words ('' if none)."""
        procs = [p for p in instance.scan(job_dir=Path(job_dir).resolve()) if p.instance_id != keep]
        if not procs:
            return ""
        killed = instance.end(procs, self.stop_timeout)
        how = f" ({len(killed)} SIGKILLed after {self.stop_timeout:.0f}s)" if killed else ""
        return f"stopped a leftover {instance.summary(procs)}{how}; "

    def wait_flow(self, name: str, flow: str, done: Callable[[FlowRuntime | None], bool]) -> FlowRuntime | None:
        """Wait until the running engine's word on `flow` satisfies `done` (or it ends, or PICKUP_SECONDS pass)."""
        deadline = time.monotonic() + max(PICKUP_SECONDS, self.stop_timeout)
        while True:
            eng = self.engine(name)
            fr = eng.flows().get(flow)
            if done(fr) or not eng.alive or time.monotonic() >= deadline:
                return fr
            time.sleep(0.2)
