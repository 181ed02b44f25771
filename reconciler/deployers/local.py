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

The engine directories (finding, locking, starting and stopping engines) are reconciler.deployers.engine_dirs; the
jobs of the earlier release, reconciler.deployers.migration. This module places and removes flows.

The `spark-standalone` deployer (reconciler.deployers.standalone) is this one with a `spark://` master: in client
mode the driver is a local process as well.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import reconciler.deployers.instance as instance
from reconciler import settings
from reconciler.adapters.base import OpResult
from reconciler.contract.deployers import LOCAL, local_threads
from reconciler.contract.engine import RESTART_SUFFIX, EngineRecord, FlowState, flow_files
from reconciler.contract.spec import JobSpec
from reconciler.deployers.base import (
    Deployer,
    Deployment,
    EngineChange,
    EngineDeployment,
    FlowChange,
    FlowOp,
    describe_exit,
    each_flow,
    engine_of,
    flow_view,
)
from reconciler.deployers.engine_dirs import (
    PICKUP_SECONDS,
    START_CHECK_SECONDS,
    STOP_TIMEOUT_SECONDS,
    EngineDirs,
    LocalEngine,
    load_spec,
)
from reconciler.deployers.instance import JobProcess
from reconciler.deployers.migration import EarlierJobs, per_instance
from reconciler.settings import ALL_INTERFACES, LOOPBACK

__all__ = ["PICKUP_SECONDS", "START_CHECK_SECONDS", "STOP_TIMEOUT_SECONDS", "LocalDeployer", "ProcessDeployer"]


def engine_name(spec: JobSpec, options: Mapping[str, Any] | None = None) -> str:
    """The engine a flow runs in: `job.engine` (in the deployment options), else its target cluster's alias."""
    return engine_of(spec.flow, options)


class ProcessDeployer(Deployer):
    """Engines as local spark-submit processes (the driver runs here; executors wherever the master says)."""

    name = LOCAL

    def __init__(
        self, root: Path | None = None, stop_timeout: float = STOP_TIMEOUT_SECONDS, env: Mapping[str, str] | None = None
    ):
        self.root = root or settings.state_dir()
        self.stop_timeout = stop_timeout
        self.dirs = EngineDirs(self.root, self.name, stop_timeout, env or {})
        self.earlier = EarlierJobs(self.root, self.name, stop_timeout)  # stopped, then moved into engines

    # --- where things are (the engine directories) ---------------------------------------------
    @property
    def dir(self) -> Path:
        """`<state dir>/engines`: one directory per engine."""
        return self.dirs.dir

    def engine_dir(self, engine: str) -> Path:
        return self.dirs.engine_dir(engine)

    def flow_file(self, engine: str, flow: str) -> Path:
        return self.dirs.flow_file(engine, flow)

    def engines_of(self, flow: str) -> list[str]:
        return self.dirs.engines_of(flow)

    def job_dir(self, flow: str) -> Path:
        return self.dirs.job_dir(flow)

    def _engine(self, name: str) -> LocalEngine:
        return self.dirs.engine(name)

    def _processes(self, flow: str) -> list[JobProcess]:
        """Every process of the engine running `flow` (leftovers of the engine directory included)."""
        return instance.scan(job_dir=self.job_dir(flow).resolve())

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

    # --- what runs: the engines ------------------------------------------------------------------
    def engines(self, options: list[Mapping[str, Any]] | None = None) -> list[EngineDeployment]:
        """Every engine of the state directory with a record, whichever process deployer (local, spark-standalone)
        started it, and every job of the earlier release (an engine without a name)."""
        names = self.dirs.names()
        earlier = self.earlier.flows()
        procs = instance.scan(under=self.root.resolve()) if names or earlier else []
        out = [self._engine_deployment(self.dirs.engine(n), procs) for n in names]
        return [e for e in out if e is not None] + self.earlier.engines(procs)

    def _engine_deployment(self, eng: LocalEngine, procs: list[JobProcess]) -> EngineDeployment | None:
        if eng.record is None:
            return None
        own = [p for p in procs if p.job_dir == str(eng.dir.resolve())]
        alive = eng.alive
        strays = [p for p in own if not alive or p.instance_id != eng.record.get("instance_id")]
        flows = []
        for path in flow_files(eng.dir).values():
            spec = load_spec(path)
            if spec is not None:
                flows.append(self._flow_deployment(eng, spec, alive, per_instance(strays)))
        where = eng.where(alive)
        return EngineDeployment(
            eng.name, eng.record.get("deployer", self.name), where, alive, tuple(flows), per_instance(own)
        )

    def _flow_deployment(self, eng: LocalEngine, spec: JobSpec, alive: bool, strays: tuple[str, ...]) -> Deployment:
        """One flow of an engine, as the engine's record and runtime file say (strays: the engine's)."""
        record = eng.record or {}
        flow = spec.flow
        stopped = bool(record.get("stopped_at"))
        exit_code = None if alive else eng.job.exit_code() if eng.job else None
        fr = eng.flows().get(flow) if alive else None
        flow_alive = alive and (fr is None or fr.state in (FlowState.RUNNING, FlowState.STOPPING))
        if alive and fr is not None and fr.state is FlowState.BACKOFF:
            detail = f"flow failed in engine {eng.name} ({describe_exit(fr.last_exit)}); the engine retries it"
        elif alive and fr is not None and fr.state is FlowState.SUPERSEDED:
            detail = f"flow stopped itself in engine {eng.name}: a newer instance of it runs elsewhere"
        elif alive:
            detail = ""
        elif stopped:
            detail = f"engine {eng.name} stopped by the reconciler at {_iso(record['stopped_at'])}"
        else:
            detail = f"instance {record.get('instance_id')} {describe_exit(exit_code)} (engine {eng.name})"
        return Deployment(
            flow,
            record.get("deployer", self.name),
            eng.where(alive),
            spec,
            flow_alive,
            (fr.since if fr is not None and fr.since else record.get("started_at")),
            stopped and not alive,
            exit_code if not alive else (fr.last_exit if fr is not None and not flow_alive else None),
            detail,
            options={"engine": eng.name, "metrics_port": record.get("metrics_port")},
            instance_id=record.get("instance_id"),
            strays=strays,
        )

    def all_deployments(self) -> list[Deployment]:
        """Every flow of the state directory, whichever process deployer (local, spark-standalone) started it."""
        return flow_view(self.engines())

    # --- changes ---------------------------------------------------------------------------------
    def refuse(self, spec: JobSpec) -> OpResult | None:
        """Why this deployer cannot run `spec` (None: it can)."""
        return None

    def apply(self, change: EngineChange) -> list[OpResult]:
        """Each flow change of the engine in parallel (a lock per engine keeps its changes one at a time; the waits
        for the running engine to pick a flow up overlap). A removal takes the flow out of every engine holding it
        and stops its job of an earlier release."""

        def one(fc: FlowChange) -> OpResult:
            if fc.op is FlowOp.REMOVE:
                return self._stop_flow(fc.flow)
            assert fc.spec is not None  # FlowChange checks it
            refused = self.refuse(fc.spec)
            if refused is not None:
                return refused
            if fc.op is FlowOp.RESTART:
                return self._restart(change.engine, fc.spec, fc.options)
            return self._place(change.engine, fc.spec, fc.options, restart=False)

        return each_flow(change, one)

    def _leave_other_engines(self, flow: str, engine: str) -> str:
        """The flow leaves every other engine (gracefully) and its own application of an earlier release."""
        said = self.earlier.stop(flow)
        for other in self.engines_of(flow):
            if other != engine:
                said += self._remove(other, flow) + "; "
        return said

    def _remove(self, engine: str, flow: str) -> str:
        """Remove a flow from an engine (its driver stops gracefully); the engine stops when it has no flow left."""
        with self.dirs.locked(engine):
            path = self.flow_file(engine, flow)
            path.unlink(missing_ok=True)
            path.with_suffix(RESTART_SUFFIX).unlink(missing_ok=True)
            eng = self._engine(engine)
            if not eng.running:
                return f"removed from engine {engine} (not running)"
            if not flow_files(eng.dir):
                return f"removed from engine {engine}, which had no other flow: " + self.dirs.stop(eng)
            fr = self.dirs.wait_flow(engine, flow, lambda f: f is None)
            if fr is not None:
                return f"removed from engine {engine}, but it still runs the flow ({fr.state.value})"
            n = len(flow_files(eng.dir))
            return f"removed from engine {engine} ({n} other flow{'s' if n != 1 else ''} kept running)"

    def _place(self, name: str, spec: JobSpec, options: Mapping[str, Any] | None, restart: bool) -> OpResult:
        """Make `spec.flow` run `spec` in engine `name`: added to the running engine, handed to the running flow
        (which takes it hot or restarts itself), restarted in place (`restart`), or the engine started."""
        moved = self._leave_other_engines(spec.flow, name)
        with self.dirs.locked(name):
            eng = self._engine(name)
            path = self.flow_file(name, spec.flow)
            current = load_spec(path)
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            wanted = EngineRecord(name, spec.engine.master, dict(spec.engine.spark_conf))
            if not eng.running:
                spec.write(path)
                res = self.dirs.start(name, wanted, options)
                return OpResult(res.code, moved + res.message)
            if eng.record is not None and (
                eng.record.get("spark_conf", {}) != dict(spec.engine.spark_conf)
                or not _same_master(eng.record.get("master", ""), spec.engine.master)
                or (options or {}).get("metrics_port") != eng.record.get("metrics_port")
                # an engine recorded before job.metrics_bind listens on every interface: it restarts on loopback
                or ((options or {}).get("metrics_bind") or LOOPBACK) != eng.record.get("metrics_bind", ALL_INTERFACES)
            ):
                spec.write(path)
                stopped = self.dirs.stop(eng)
                res = self.dirs.start(name, wanted, options)
                why = "its Spark settings (master, spark_conf, metrics port or address) changed"
                return OpResult(res.code, f"{moved}{why}: {stopped}; {res.message}")
            fr = eng.flows().get(spec.flow)
            hash_ = spec.spec_hash()
            if not restart and current is not None and current.spec_hash() == hash_:
                if fr is None:  # the engine has the file and runs it within a second (or is starting)
                    return OpResult.already(f"already handed this spec to engine {name}, {eng.where()}")
                if fr.state in (FlowState.RUNNING, FlowState.STOPPING):
                    return OpResult.already(f"already running this spec, {eng.where()}")
                restart = True  # in back-off or superseded: the restart token starts it now
            others = len(flow_files(eng.dir)) - (1 if current is not None else 0)
            kept = f"{others} other flow{'s' if others != 1 else ''} of engine {name} kept running"
            before = fr.since if fr is not None else None
            spec.write(path)
            if restart:
                path.with_suffix(RESTART_SUFFIX).write_text(f"{time.time_ns()}\n")
            if current is None:
                how = "added to the running engine" + eng.short_of_slots()
            elif restart or current.restart_fields(spec):
                how = "restarted in place"
            else:
                how = "spec handed to the running flow (hot reload, no restart)"
            if not eng.runtime():  # still starting (no driver yet): it runs every flow file it finds at its start
                return OpResult.success(f"{moved}handed to engine {name}, which is starting, {eng.where()}")
            if current is not None and not restart and not current.restart_fields(spec):
                return OpResult.success(f"{moved}{how}; {kept}, {eng.where()}")
        fr = self.dirs.wait_flow(
            name,
            spec.flow,
            lambda f: f is not None and f.spec_hash == hash_ and f.state is FlowState.RUNNING and f.since != before,
        )
        if fr is None or fr.spec_hash != hash_ or fr.state is not FlowState.RUNNING:
            state = "not picked up" if fr is None else fr.state.value
            return OpResult.failed(
                f"{moved}engine {name} did not start flow {spec.flow} ({state}); see {eng.dir / 'job.log'}"
            )
        return OpResult.success(f"{moved}{how}; {kept}, {self._engine(name).where()}")

    def _restart(self, name: str, spec: JobSpec, options: Mapping[str, Any] | None) -> OpResult:
        """Restart the flow in place; a dead engine, or one with leftover processes, starts afresh (all its flows)."""
        moved = self._leave_other_engines(spec.flow, name)
        with self.dirs.locked(name):  # looked at under the lock: a sibling restart of the batch may have started it
            eng = self._engine(name)
            own = (eng.record or {}).get("instance_id")
            strays = [p for p in instance.scan(job_dir=eng.dir.resolve()) if p.instance_id != own]
            if strays or (eng.record is not None and not eng.alive):  # a leftover, or a dead engine: afresh
                spec.write(self.flow_file(name, spec.flow))
                stopped = self.dirs.stop(eng) + "; " if eng.alive else ""
                wanted = EngineRecord(name, spec.engine.master, dict(spec.engine.spark_conf))
                res = self.dirs.start(name, wanted, options)
                return OpResult(res.code, moved + stopped + res.message)
        res = self._place(name, spec, options, restart=True)
        return OpResult(res.code, moved + res.message) if moved else res

    def _stop_flow(self, flow: str) -> OpResult:
        said = [m.rstrip("; ") for m in (self.earlier.stop(flow),) if m]
        said += [self._remove(engine, flow) for engine in self.engines_of(flow)]
        if not said:
            return OpResult.already("no such job")
        return OpResult.success("; ".join(said))

    def stop_all(self) -> list[tuple[str, OpResult]]:
        """Stop every engine of this state directory that has a process left (in parallel), leftovers and jobs of
        an earlier release included: `dev down`, the demo's end. The flows stay in their engines: the next
        apply starts the engines again."""
        out: list[tuple[str, OpResult]] = []
        engines = [self._engine(n) for n in self.dirs.names()]
        live = [e for e in engines if e.alive or instance.scan(job_dir=e.dir.resolve())]
        known = {str(e.dir.resolve()) for e in engines}
        for job_dir in sorted({p.job_dir for p in instance.scan(under=self.root.resolve())} - known):
            procs = instance.scan(job_dir=job_dir)
            instance.end(procs, self.stop_timeout)
            legacy = " (a job of an earlier release)" if job_dir.startswith(str(self.earlier.dir.resolve())) else ""
            out.append(
                (Path(job_dir).name, OpResult.success(f"stopped an unrecorded {instance.summary(procs)}{legacy}"))
            )
        if not live:
            return out
        with ThreadPoolExecutor(max_workers=max(1, len(live))) as pool:
            results = list(pool.map(self.dirs.stop, live))
        return out + [(f"engine {e.name}", OpResult.success(r)) for e, r in zip(live, results)]


def _same_master(running: str, wanted: str) -> bool:
    """An engine runs `local[N]` with N raised to its flows' slots (`local_slots`): any local[M] with M <= N fits."""
    if local_threads(running) is not None and local_threads(wanted) is not None:
        return True
    return running == wanted


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class LocalDeployer(ProcessDeployer):
    name = LOCAL
