"""`local` deployer: one detached `spark-submit --master local[N]` process per engine, running its flows.

An engine (reconciler.engine.host) is one Spark application holding several flows: by default every
flow into one target cluster (`job.engine`, default the target's alias). Everything about an engine lives in
`$RECONCILER_STATE_DIR/engines/<engine>/`:

    engine.json    the engine's Spark settings (name, master, spark_conf), read by the engine at start
    flows/<source>.<target>.json
                   one job spec per flow, re-read by the flow's driver every refresh interval (hot reload);
                   added, rewritten and removed here, picked up by the running engine within a second
    flows/<source>.<target>.restart
                   a token: a new value makes the engine restart that flow in place
    job.json       deployer, instance id, supervisor pid (+ its start time, against pid reuse), master,
                   started/stopped times, the metrics port asked for (None: the engine binds a free one)
    runtime.json   written by the running engine: its instance id, driver pid, metrics port, Spark application
                   id and each flow's state (running, stopping, backoff after a failure, superseded)
    job.log        the supervisor's and spark-submit's output (appended across restarts)
    exit_code      written by the supervisor when spark-submit ends (0 stopped, 1 failed, 128+N killed by N)

Adding a flow to a running engine, changing it (hot or not) and removing it leave the engine's other flows
running: only a change of the engine's own Spark settings (master, spark_conf) restarts the application. A
flow's job of an earlier release (one application per flow, `$RECONCILER_STATE_DIR/jobs/<flow>/`) is stopped
gracefully (it commits) before its flow starts in an engine, which resumes from the committed offsets.

An engine instance (one start) is a supervisor, the JVM, the driver and Spark's Python workers, all carrying the
instance id and the engine directory in their environment (`reconciler.deployers.instance`); any of them dying ends
the rest (`reconciler.deployers.supervisor`). At most one instance of an engine runs: before a start, every
process of the engine directory still alive is stopped and reported; `inspect` reports such processes beside a
running instance as `strays`, which `plan` shows as drift. Stop is graceful: SIGTERM to the Python driver, whose
flows finish their batches, commit and publish a final status; every process is SIGKILLed if it has not ended
after `stop_timeout` seconds. `reconciler.deployers.process.LocalJob` does the process work.

The `spark-standalone` deployer (reconciler.deployers.standalone) is this one with a `spark://` master: in client
mode the driver is a local process as well.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import reconciler.deployers.instance as instance
from reconciler import settings
from reconciler.adapters.base import OpResult
from reconciler.contract.deployers import ENGINE_SLOTS_HINT, LOCAL, local_slots, local_threads
from reconciler.contract.engine import (
    FLOWS_DIR,
    RESTART_SUFFIX,
    EngineRecord,
    FlowRuntime,
    FlowState,
    flow_files,
    read_runtime,
    runtime_flows,
    write_json,
)
from reconciler.contract.spec import JobSpec
from reconciler.deployers.base import Deployer, Deployment, describe_exit, flow_slug
from reconciler.deployers.instance import JobProcess
from reconciler.deployers.process import LocalJob
from reconciler.settings import AUTO, PORT_ENV
from reconciler.topology.flow_id import flow_ends

#: Seconds to wait after starting an engine for an immediate failure (bad spark-submit, bad settings).
START_CHECK_SECONDS = 1.5
STOP_TIMEOUT_SECONDS = 60.0
#: Seconds a running engine may take to pick up a flow file (it looks once a second, and starts the flow).
PICKUP_SECONDS = 20.0


def engine_name(spec: JobSpec, options: Mapping[str, Any] | None = None) -> str:
    """The engine a flow runs in: `job.engine` (in the deployment options), else its target cluster's alias."""
    name = (options or {}).get("engine")
    return str(name) if name else flow_ends(spec.flow)[1]


def _slots(engine_dir: Path) -> int:
    """The task slots of the flows whose files an engine directory holds."""
    return sum(s.engine.parallelism for s in (_load(p) for p in flow_files(engine_dir).values()) if s is not None)


@dataclass(frozen=True)
class _Engine:
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


class ProcessDeployer(Deployer):
    """Engines as local spark-submit processes (the driver runs here; executors wherever the master says)."""

    name = LOCAL

    def __init__(
        self, root: Path | None = None, stop_timeout: float = STOP_TIMEOUT_SECONDS, env: Mapping[str, str] | None = None
    ):
        self.root = root or settings.state_dir()
        self.dir = self.root / "engines"
        self.legacy_dir = self.root / "jobs"  # one application per flow (before engines): stopped, then moved
        self.stop_timeout = stop_timeout
        self.env = dict(env or {})

    # --- files ----------------------------------------------------------------------------
    def engine_dir(self, engine: str) -> Path:
        return self.dir / engine

    def flow_file(self, engine: str, flow: str) -> Path:
        return self.engine_dir(engine) / FLOWS_DIR / f"{flow_slug(flow)}.json"

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

    def _engine(self, name: str) -> _Engine:
        d = self.engine_dir(name)
        try:
            record = json.loads((d / "job.json").read_text())
        except (OSError, ValueError):
            record = None
        job = None
        if record is not None:
            job = LocalJob.attach(
                record.get("pid") or 0,
                d / "engine.json",
                d / "job.log",
                record.get("pid_start"),
                d / "exit_code",
                record.get("instance_id"),
            )
        return _Engine(name, d, record, job)

    def _write_record(self, engine: str, record: dict) -> None:
        write_json(self.engine_dir(engine) / "job.json", record)

    @contextmanager
    def _locked(self, engine: str) -> Iterator[None]:
        """One change of an engine at a time (apply handles the flows of a batch in parallel)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / f".{engine}.lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def runtime(self, flow: str, record: Mapping[str, Any] | None = None) -> dict:
        """What the engine running `flow` says of itself ({} if none)."""
        engines = self.engines_of(flow)
        return self._engine(engines[0]).runtime() if engines else {}

    def metrics_port(self, flow: str) -> int | None:
        """The port the flow's engine serves /metrics on (bound by the engine; None: none or not yet)."""
        engines = self.engines_of(flow)
        if not engines:
            return None
        eng = self._engine(engines[0])
        port = eng.runtime().get("metrics_port") or (eng.record or {}).get("metrics_port")
        return port if isinstance(port, int) and port > 0 else None

    def where(self, eng: _Engine, alive: bool = True) -> str:
        """Where the recorded instance runs (a dead one: which it was, not a pid that may be reused)."""
        record = eng.record
        if record is None:
            return f"engine {eng.name}, no job record"
        if not alive:
            return f"engine {eng.name}, instance {record.get('instance_id') or '?'} (ended), {record.get('master')}"
        runtime = eng.runtime()
        port = runtime.get("metrics_port") or record.get("metrics_port")
        metrics = f", metrics http://127.0.0.1:{port}/metrics" if port else ""
        inst = f"instance {record.get('instance_id')}" if record.get("instance_id") else "no instance id"
        if runtime.get("pid"):
            proc = f"driver pid {runtime['pid']} ({inst})"
        else:
            proc = f"supervisor pid {record.get('pid')} ({inst}, no driver yet)"
        app = f", app {runtime['application_id']}" if runtime.get("application_id") else ""
        return f"engine {eng.name}: {proc}, {record.get('master')}{app}{metrics}"

    # --- what runs ------------------------------------------------------------------------
    def _processes(self, flow: str) -> list[JobProcess]:
        """Every process of the engine running `flow` (leftovers of the engine directory included)."""
        return instance.scan(job_dir=self.job_dir(flow).resolve())

    def inspect(
        self, flow: str, options: Mapping[str, Any] | None = None, procs: list[JobProcess] | None = None
    ) -> Deployment | None:
        engines = self.engines_of(flow)
        legacy = (
            self._legacy_processes(flow) if procs is None else [p for p in procs if p.job_dir == self._legacy(flow)]
        )
        if not engines:
            return self._inspect_legacy(flow, legacy)
        eng = self._engine(engines[0])
        if eng.record is None:
            return None
        own = (
            instance.scan(job_dir=eng.dir.resolve())
            if procs is None
            else [p for p in procs if p.job_dir == str(eng.dir.resolve())]
        )
        spec = _load(self.flow_file(eng.name, flow))
        alive = eng.alive
        stopped = bool(eng.record.get("stopped_at"))
        exit_code = None if alive else eng.job.exit_code() if eng.job else None
        fr = eng.flows().get(flow) if alive else None
        flow_alive = alive and (fr is None or fr.state in (FlowState.RUNNING, FlowState.STOPPING))
        strays = [p for p in own if not alive or p.instance_id != eng.record.get("instance_id")] + legacy
        if alive and fr is not None and fr.state is FlowState.BACKOFF:
            detail = f"flow failed in engine {eng.name} ({describe_exit(fr.last_exit)}); the engine retries it"
        elif alive and fr is not None and fr.state is FlowState.SUPERSEDED:
            detail = f"flow stopped itself in engine {eng.name}: a newer instance of it runs elsewhere"
        elif alive:
            detail = ""
        elif stopped:
            detail = f"engine {eng.name} stopped by the reconciler at {_iso(eng.record['stopped_at'])}"
        else:
            detail = f"instance {eng.record.get('instance_id')} {describe_exit(exit_code)} (engine {eng.name})"
        if len(engines) > 1:
            detail = (detail + "; " if detail else "") + f"also in engine(s) {', '.join(engines[1:])}"
        if strays:
            detail = (detail + "; " if detail else "") + f"still running unseen: {instance.summary(strays)}"
        return Deployment(
            flow,
            eng.record.get("deployer", self.name),
            self.where(eng, alive),
            spec,
            flow_alive,
            (fr.since if fr is not None and fr.since else eng.record.get("started_at")),
            stopped and not alive,
            exit_code if not alive else (fr.last_exit if fr is not None and not flow_alive else None),
            detail,
            options={"engine": eng.name, "metrics_port": eng.record.get("metrics_port")},
            instance_id=eng.record.get("instance_id"),
            strays=tuple(instance.summary([p for p in strays if p.instance_id == i]) for i in _ids(strays)),
        )

    def deployments(self, options: list[Mapping[str, Any]] | None = None) -> list[Deployment]:
        return [d for d in self.all_deployments() if d.deployer == self.name]

    def all_deployments(self) -> list[Deployment]:
        """Every flow of the state directory, whichever process deployer (local, spark-standalone) started it."""
        out: list[Deployment] = []
        flows: set[str] = set()
        for engine_dir in sorted(self.dir.glob("*/")) if self.dir.is_dir() else []:
            for path in flow_files(engine_dir).values():
                spec = _load(path)
                if spec is not None:
                    flows.add(spec.flow)
        for path in sorted(self.legacy_dir.glob("*/job.json")) if self.legacy_dir.is_dir() else []:
            try:
                flows.add(json.loads(path.read_text())["flow"])
            except (OSError, ValueError, KeyError):
                continue
        procs = instance.scan(under=self.root.resolve()) if flows else []
        for flow in sorted(flows):
            dep = self.inspect(flow, procs=procs)
            if dep is not None:
                out.append(dep)
        return out

    # --- engines --------------------------------------------------------------------------
    def _start_engine(self, name: str, wanted: EngineRecord, options: Mapping[str, Any] | None) -> OpResult:
        """Start the engine with the flow files in its directory (whatever still runs of it ends first)."""
        d = self.engine_dir(name)
        left = self._end_leftovers(d)
        master = local_slots(wanted.master, max(_slots(d), int((options or {}).get(ENGINE_SLOTS_HINT) or 0)))
        EngineRecord(name, master, wanted.spark_conf).write(d)
        # job.metrics_port: that port (0: none); unset: the engine binds a free port itself (no race for it with
        # Spark's own ports), unless $RECONCILER_METRICS_PORT=0 here.
        port = (options or {}).get("metrics_port")
        port_env = AUTO if port is None else str(port)
        env = {**os.environ, **self.env}
        if port is None and settings.METRICS_PORT.raw(env) is not None and settings.metrics_port(env) == 0:
            port, port_env = 0, "0"
        inst = instance.new_instance_id()
        record = {
            "engine": name,
            "deployer": self.name,
            "instance_id": inst,
            "pid": None,  # written before the start: a deployer killed mid-start leaves an instance id behind
            "pid_start": None,
            "master": master,
            "spark_conf": dict(wanted.spark_conf),
            "started_at": time.time(),
            "log": str(d / "job.log"),
            "metrics_port": port or None,
        }
        self._write_record(name, record)
        job = LocalJob.start_engine(
            d,
            master=master,
            env={**self.env, PORT_ENV: port_env},
            log_path=d / "job.log",
            exit_code_path=d / "exit_code",
            instance_id=inst,
        )
        record = {**record, "pid": job.pid, "pid_start": job.start_time}
        self._write_record(name, record)
        code = job.wait(START_CHECK_SECONDS)
        if code is not None:
            return OpResult.failed(
                f"engine {name} {describe_exit(code)} right after the start; see {d / 'job.log'}:\n{job.log_tail(15)}"
            )
        return OpResult.success(f"{left}started {self.where(self._engine(name))}")

    def _stop_engine(self, eng: _Engine) -> str:
        """Stop an engine gracefully (all its flows); words for what happened."""
        if eng.record is None:
            return f"engine {eng.name}: no record"
        code = eng.job.stop(self.stop_timeout) if eng.job is not None and eng.alive else None
        self._write_record(eng.name, {**eng.record, "stopped_at": time.time()})
        left = self._end_leftovers(eng.dir)
        if code is None and not left:
            return f"engine {eng.name} stopped" if eng.alive else f"engine {eng.name} was not running"
        how = (
            "killed after the stop timeout" if code is None else "stopped cleanly" if code == 0 else describe_exit(code)
        )
        return f"{left}engine {eng.name} {how}"

    def _end_leftovers(self, job_dir: Path | str, keep: str | None = None) -> str:
        """Stop every process of a job or engine directory but those of instance `keep`; words ('' if none)."""
        procs = [p for p in instance.scan(job_dir=Path(job_dir).resolve()) if p.instance_id != keep]
        if not procs:
            return ""
        killed = instance.end(procs, self.stop_timeout)
        how = f" ({len(killed)} SIGKILLed after {self.stop_timeout:.0f}s)" if killed else ""
        return f"stopped a leftover {instance.summary(procs)}{how}; "

    def _wait_flow(self, name: str, flow: str, done: Callable[[FlowRuntime | None], bool]) -> FlowRuntime | None:
        """Wait until the running engine's word on `flow` satisfies `done` (or it ends, or PICKUP_SECONDS pass)."""
        deadline = time.monotonic() + max(PICKUP_SECONDS, self.stop_timeout)
        while True:
            eng = self._engine(name)
            fr = eng.flows().get(flow)
            if done(fr) or not eng.alive or time.monotonic() >= deadline:
                return fr
            time.sleep(0.2)

    # --- flows of the earlier release (one application per flow) ---------------------------
    def _legacy(self, flow: str) -> str:
        return str((self.legacy_dir / flow_slug(flow)).resolve())

    def _legacy_processes(self, flow: str) -> list[JobProcess]:
        return instance.scan(job_dir=self._legacy(flow)) if self.legacy_dir.is_dir() else []

    def _inspect_legacy(self, flow: str, procs: list[JobProcess]) -> Deployment | None:
        d = Path(self._legacy(flow))
        try:
            record = json.loads((d / "job.json").read_text())
        except (OSError, ValueError):
            return None
        job = LocalJob.attach(
            record.get("pid") or 0,
            d / "spec.json",
            d / "job.log",
            record.get("pid_start"),
            d / "exit_code",
            record.get("instance_id"),
        )
        alive = job.alive()
        stopped = bool(record.get("stopped_at"))
        strays = [p for p in procs if not alive or p.instance_id != record.get("instance_id")]
        detail = "its own Spark application (a job of an earlier release, before engines)"
        if strays:
            detail += f"; still running unseen: {instance.summary(strays)}"
        where = f"own application, instance {record.get('instance_id')}" + ("" if alive else " (ended)")
        return Deployment(
            flow,
            record.get("deployer", self.name),
            where,
            _load(d / "spec.json"),
            alive,
            record.get("started_at"),
            stopped and not alive,
            None if alive else job.exit_code(),
            detail,
            options={"metrics_port": record.get("metrics_port")},  # no engine: the plan moves it into one
            instance_id=record.get("instance_id"),
            strays=tuple(instance.summary([p for p in strays if p.instance_id == i]) for i in _ids(strays)),
        )

    def _stop_legacy(self, flow: str) -> str:
        """Stop the flow's job of an earlier release, gracefully (it commits first); words ('' if none)."""
        d = Path(self._legacy(flow))
        procs = instance.scan(job_dir=str(d)) if d.is_dir() else []
        if not procs:
            return ""
        killed = instance.end(procs, self.stop_timeout)
        try:
            record = json.loads((d / "job.json").read_text())
            write_json(d / "job.json", {**record, "stopped_at": time.time()})
        except (OSError, ValueError):
            pass
        how = f" ({len(killed)} SIGKILLed after {self.stop_timeout:.0f}s)" if killed else ""
        return f"stopped its own application ({instance.summary(procs)}){how}; "

    # --- changes --------------------------------------------------------------------------
    def _leave_other_engines(self, flow: str, engine: str) -> str:
        """The flow leaves every other engine (gracefully) and its own application of an earlier release."""
        said = self._stop_legacy(flow)
        for other in self.engines_of(flow):
            if other != engine:
                said += self._remove(other, flow) + "; "
        return said

    def _remove(self, engine: str, flow: str) -> str:
        """Remove a flow from an engine (its driver stops gracefully); the engine stops when it has no flow left."""
        with self._locked(engine):
            path = self.flow_file(engine, flow)
            path.unlink(missing_ok=True)
            path.with_suffix(RESTART_SUFFIX).unlink(missing_ok=True)
            eng = self._engine(engine)
            if not eng.running:
                return f"removed from engine {engine} (not running)"
            if not flow_files(eng.dir):
                return f"removed from engine {engine}, which had no other flow: " + self._stop_engine(eng)
            fr = self._wait_flow(engine, flow, lambda f: f is None)
            if fr is not None:
                return f"removed from engine {engine}, but it still runs the flow ({fr.state.value})"
            n = len(flow_files(eng.dir))
            return f"removed from engine {engine} ({n} other flow{'s' if n != 1 else ''} kept running)"

    def _place(self, spec: JobSpec, options: Mapping[str, Any] | None, restart: bool) -> OpResult:
        """Make `spec.flow` run `spec` in its engine: added to the running engine, handed to the running flow (which
        takes it hot or restarts itself), restarted in place (`restart`), or the engine started."""
        name = engine_name(spec, options)
        moved = self._leave_other_engines(spec.flow, name)
        with self._locked(name):
            eng = self._engine(name)
            path = self.flow_file(name, spec.flow)
            current = _load(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            wanted = EngineRecord(name, spec.engine.master, dict(spec.engine.spark_conf))
            if not eng.running:
                spec.write(path)
                res = self._start_engine(name, wanted, options)
                return OpResult(res.code, moved + res.message)
            if eng.record is not None and (
                eng.record.get("spark_conf", {}) != dict(spec.engine.spark_conf)
                or not _same_master(eng.record.get("master", ""), spec.engine.master)
                or (options or {}).get("metrics_port") != eng.record.get("metrics_port")
            ):
                spec.write(path)
                stopped = self._stop_engine(eng)
                res = self._start_engine(name, wanted, options)
                why = "its Spark settings (master, spark_conf, metrics port) changed"
                return OpResult(res.code, f"{moved}{why}: {stopped}; {res.message}")
            fr = eng.flows().get(spec.flow)
            hash_ = spec.spec_hash()
            if not restart and current is not None and current.spec_hash() == hash_:
                if fr is None:  # the engine has the file and runs it within a second (or is starting)
                    return OpResult.already(f"already handed this spec to engine {name}, {self.where(eng)}")
                if fr.state in (FlowState.RUNNING, FlowState.STOPPING):
                    return OpResult.already(f"already running this spec, {self.where(eng)}")
                restart = True  # in back-off or superseded: the restart token starts it now
            others = len(flow_files(eng.dir)) - (1 if current is not None else 0)
            kept = f"{others} other flow{'s' if others != 1 else ''} of engine {name} kept running"
            before = fr.since if fr is not None else None
            spec.write(path)
            if restart:
                path.with_suffix(RESTART_SUFFIX).write_text(f"{time.time_ns()}\n")
            if current is None:
                how = "added to the running engine" + _short_of_slots(eng)
            elif restart or current.restart_fields(spec):
                how = "restarted in place"
            else:
                how = "spec handed to the running flow (hot reload, no restart)"
            if not eng.runtime():  # still starting (no driver yet): it runs every flow file it finds at its start
                return OpResult.success(f"{moved}handed to engine {name}, which is starting, {self.where(eng)}")
            if current is not None and not restart and not current.restart_fields(spec):
                return OpResult.success(f"{moved}{how}; {kept}, {self.where(eng)}")
        fr = self._wait_flow(
            name,
            spec.flow,
            lambda f: f is not None and f.spec_hash == hash_ and f.state is FlowState.RUNNING and f.since != before,
        )
        if fr is None or fr.spec_hash != hash_ or fr.state is not FlowState.RUNNING:
            state = "not picked up" if fr is None else fr.state.value
            return OpResult.failed(
                f"{moved}engine {name} did not start flow {spec.flow} ({state}); see {eng.dir / 'job.log'}"
            )
        return OpResult.success(f"{moved}{how}; {kept}, {self.where(self._engine(name))}")

    def refuse(self, spec: JobSpec) -> OpResult | None:
        """Why this deployer cannot run `spec` (None: it can)."""
        return None

    def deploy(self, spec: JobSpec, options: Mapping[str, Any] | None = None) -> OpResult:
        return self.refuse(spec) or self._place(spec, options, restart=False)

    def update(self, spec: JobSpec, options: Mapping[str, Any] | None = None) -> OpResult:
        return self.refuse(spec) or self._place(spec, options, restart=False)

    def restart(self, spec: JobSpec, options: Mapping[str, Any] | None = None) -> OpResult:
        refused = self.refuse(spec)
        if refused is not None:
            return refused
        name = engine_name(spec, options)
        moved = self._leave_other_engines(spec.flow, name)
        with self._locked(name):  # looked at under the lock: a sibling restart of the batch may have started it
            eng = self._engine(name)
            own = (eng.record or {}).get("instance_id")
            strays = [p for p in instance.scan(job_dir=eng.dir.resolve()) if p.instance_id != own]
            if strays or (eng.record is not None and not eng.alive):  # a leftover, or a dead engine: afresh
                spec.write(self.flow_file(name, spec.flow))
                stopped = self._stop_engine(eng) + "; " if eng.alive else ""
                wanted = EngineRecord(name, spec.engine.master, dict(spec.engine.spark_conf))
                res = self._start_engine(name, wanted, options)
                return OpResult(res.code, moved + stopped + res.message)
        res = self._place(spec, options, restart=True)
        return OpResult(res.code, moved + res.message) if moved else res

    def stop(self, flow: str, options: Mapping[str, Any] | None = None) -> OpResult:
        said = [m.rstrip("; ") for m in (self._stop_legacy(flow),) if m]
        said += [self._remove(engine, flow) for engine in self.engines_of(flow)]
        if not said:
            return OpResult.already("no such job")
        return OpResult.success("; ".join(said))

    def stop_all(self) -> list[tuple[str, OpResult]]:
        """Stop every engine of this state directory that has a process left (in parallel), leftovers and jobs of
        an earlier release included: `dev down`, the demo's end. The flows stay in their engines: the next
        apply starts the engines again."""
        out: list[tuple[str, OpResult]] = []
        names = sorted(p.parent.name for p in self.dir.glob("*/job.json")) if self.dir.is_dir() else []
        engines = [self._engine(n) for n in names]
        live = [e for e in engines if e.alive or instance.scan(job_dir=e.dir.resolve())]
        known = {str(e.dir.resolve()) for e in engines}
        for job_dir in sorted({p.job_dir for p in instance.scan(under=self.root.resolve())} - known):
            procs = instance.scan(job_dir=job_dir)
            instance.end(procs, self.stop_timeout)
            legacy = " (a job of an earlier release)" if job_dir.startswith(str(self.legacy_dir.resolve())) else ""
            out.append(
                (Path(job_dir).name, OpResult.success(f"stopped an unrecorded {instance.summary(procs)}{legacy}"))
            )
        if not live:
            return out
        with ThreadPoolExecutor(max_workers=max(1, len(live))) as pool:
            results = list(pool.map(self._stop_engine, live))
        return out + [(f"engine {e.name}", OpResult.success(r)) for e, r in zip(live, results)]


def _short_of_slots(eng: _Engine) -> str:
    """Words for an engine whose `local[N]` holds fewer task threads than its flows now have slots (they share
    them until the engine restarts); empty when it has room."""
    master = str((eng.record or {}).get("master", ""))
    threads, slots = local_threads(master), _slots(eng.dir)
    if threads is None or threads >= slots:
        return ""
    return f" (it runs {master} for {slots} task slots: its flows share those threads until it restarts)"


def _same_master(running: str, wanted: str) -> bool:
    """An engine runs `local[N]` with N raised to its flows' slots (`local_slots`): any local[M] with M <= N fits."""
    if local_threads(running) is not None and local_threads(wanted) is not None:
        return True
    return running == wanted


def _ids(procs: list[JobProcess]) -> list[str]:
    return sorted({p.instance_id for p in procs})


def _load(path: Path) -> JobSpec | None:
    try:
        return JobSpec.load(path)
    except Exception:  # noqa: BLE001
        return None


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class LocalDeployer(ProcessDeployer):
    name = LOCAL
