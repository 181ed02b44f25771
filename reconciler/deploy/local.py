"""`local` deployer: one detached `spark-submit --master local[N]` process per job.

Everything about a job lives in `$RECONCILER_STATE_DIR/jobs/<source>.<target>/`:

    spec.json     the spec the job runs and re-reads every refresh interval (hot reload)
    job.json      deployer, instance id, supervisor pid (+ its start time, against pid reuse), master,
                  started/stopped times, the metrics port asked for (None: the job binds a free one)
    runtime.json  written by the running job: its instance id, driver pid and the metrics port it bound
    job.log       the supervisor's and spark-submit's output (appended across restarts)
    exit_code     written by the supervisor when spark-submit ends (0 stopped, 1 failed, 3 restart
                  required, 128+N killed by signal N)

A job instance (one start) is a supervisor, the JVM, the driver and Spark's Python workers, all carrying
the instance id and the job directory in their environment (`reconciler.deploy.instance`); any of them dying
ends the rest (`reconciler.deploy.supervisor`). At most one instance of a flow runs: before a start, every
process of the job directory still alive (an orphan, a leftover of an earlier start or of a deployer killed
mid-start) is stopped and reported; `inspect` reports such processes beside a running instance as `strays`,
which `plan` shows as drift. Stop is graceful: SIGTERM to the Python driver, which finishes its batch,
commits, publishes a final status and stops Spark; every process of the job is SIGKILLed if it has not ended
after `stop_timeout` seconds. `reconciler.deploy.process.LocalJob` does the process work.

The `spark-standalone` deployer (reconciler.deploy.standalone) is this one with a `spark://`
master: in client mode the driver is a local process as well.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import reconciler.deploy.instance as instance
from reconciler import settings
from reconciler.adapters.base import OpResult
from reconciler.contract.deployers import LOCAL, RUNTIME_FILE
from reconciler.contract.metrics import AUTO, PORT_ENV
from reconciler.contract.spec import JobSpec
from reconciler.deploy.base import Deployer, Deployment, describe_exit, flow_slug
from reconciler.deploy.instance import JobProcess
from reconciler.deploy.process import LocalJob

#: Seconds to wait after starting a job for an immediate failure (bad spark-submit, bad spec).
START_CHECK_SECONDS = 1.5
STOP_TIMEOUT_SECONDS = 60.0


class ProcessDeployer(Deployer):
    """Jobs as local spark-submit processes (the driver runs here; executors wherever the master says)."""

    name = LOCAL

    def __init__(
        self, root: Path | None = None, stop_timeout: float = STOP_TIMEOUT_SECONDS, env: Mapping[str, str] | None = None
    ):
        self.dir = (root or settings.state_dir()) / "jobs"
        self.stop_timeout = stop_timeout
        self.env = dict(env or {})

    # --- files ----------------------------------------------------------------------------
    def job_dir(self, flow: str) -> Path:
        return self.dir / flow_slug(flow)

    def _record(self, flow: str) -> dict | None:
        try:
            return json.loads((self.job_dir(flow) / "job.json").read_text())
        except (OSError, ValueError):
            return None

    def _write_record(self, flow: str, record: dict) -> None:
        path = self.job_dir(flow) / "job.json"
        tmp = path.with_name(f"job.json.tmp{os.getpid()}")
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        tmp.replace(path)

    def _job(self, flow: str, record: dict) -> LocalJob:
        d = self.job_dir(flow)
        return LocalJob.attach(
            record.get("pid") or 0,
            d / "spec.json",
            d / "job.log",
            record.get("pid_start"),
            d / "exit_code",
            record.get("instance_id"),
        )

    def runtime(self, flow: str, record: Mapping[str, Any] | None) -> dict:
        """What the running instance says of itself (driver pid, bound metrics port); {} if not (yet) written
        or written by another instance."""
        try:
            data = json.loads((self.job_dir(flow) / RUNTIME_FILE).read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or record is None or data.get("instance_id") != record.get("instance_id"):
            return {}
        return data

    def metrics_port(self, flow: str) -> int | None:
        """The port the flow's running job serves /metrics on (bound by the job; None: none or not yet)."""
        record = self._record(flow)
        port = self.runtime(flow, record).get("metrics_port") or (record or {}).get("metrics_port")
        return port if isinstance(port, int) and port > 0 else None

    def where(self, record: Mapping[str, Any] | None, alive: bool = True) -> str:
        """Where the recorded instance runs (a dead one: which it was, not a pid that may be reused)."""
        if record is None:
            return "no job record"
        if not alive:
            return f"instance {record.get('instance_id') or '?'} (ended), {record.get('master')}"
        runtime = self.runtime(record.get("flow", ""), record)
        port = runtime.get("metrics_port") or record.get("metrics_port")
        metrics = f", metrics http://127.0.0.1:{port}/metrics" if port else ""
        inst = f"instance {record.get('instance_id')}" if record.get("instance_id") else "no instance id"
        if runtime.get("pid"):
            proc = f"driver pid {runtime['pid']} ({inst})"
        else:
            proc = f"supervisor pid {record.get('pid')} ({inst}, no driver yet)"
        app = f", app {runtime['application_id']}" if runtime.get("application_id") else ""
        return f"{proc}, {record.get('master')}{app}{metrics}"

    # --- what runs ------------------------------------------------------------------------
    def _processes(self, flow: str) -> list[JobProcess]:
        return instance.scan(job_dir=self.job_dir(flow).resolve())

    def inspect(
        self, flow: str, options: Mapping[str, Any] | None = None, procs: list[JobProcess] | None = None
    ) -> Deployment | None:
        record = self._record(flow)
        if record is None:
            return None
        if procs is None:
            procs = self._processes(flow)
        d = self.job_dir(flow)
        try:
            spec = JobSpec.load(d / "spec.json")
        except Exception:  # noqa: BLE001 - missing or damaged: the job must be restarted with the desired spec
            spec = None
        stopped = bool(record.get("stopped_at"))
        job = self._job(flow, record)
        alive = job.alive()
        exit_code = None if alive else job.exit_code()
        strays = [p for p in procs if not alive or p.instance_id != record.get("instance_id")]
        if alive:
            detail = ""
        elif stopped:
            detail = f"stopped by the reconciler at {_iso(record['stopped_at'])}"
        else:
            detail = f"instance {record.get('instance_id')} {describe_exit(exit_code)}"
        if strays:
            detail = (detail + "; " if detail else "") + f"still running unseen: {instance.summary(strays)}"
        return Deployment(
            flow,
            record.get("deployer", self.name),
            self.where(record, alive),
            spec,
            alive,
            record.get("started_at"),
            stopped and not alive,
            exit_code,
            detail,
            instance_id=record.get("instance_id"),
            strays=tuple(instance.summary([p for p in strays if p.instance_id == i]) for i in _ids(strays)),
        )

    def deployments(self, options: list[Mapping[str, Any]] | None = None) -> list[Deployment]:
        return [d for d in self.all_deployments() if d.deployer == self.name]

    def all_deployments(self) -> list[Deployment]:
        """Every job of the state directory, whichever process deployer (local, spark-standalone) started it."""
        out: list[Deployment] = []
        if not self.dir.exists():
            return out
        procs = instance.scan(under=self.dir.resolve())
        for path in sorted(self.dir.glob("*/job.json")):
            try:
                flow = json.loads(path.read_text())["flow"]
            except (OSError, ValueError, KeyError):
                continue
            job_dir = str(self.job_dir(flow).resolve())
            dep = self.inspect(flow, procs=[p for p in procs if p.job_dir == job_dir])
            if dep is not None:
                out.append(dep)
        return out

    # --- changes --------------------------------------------------------------------------
    def _start(self, spec: JobSpec, options: Mapping[str, Any] | None = None) -> OpResult:
        d = self.job_dir(spec.flow)
        d.mkdir(parents=True, exist_ok=True)
        # At most one instance: whatever still runs of this flow's job (an orphan, a leftover) ends first.
        leftovers = self._end_leftovers(spec.flow)
        # job.metrics_port: that port (0: none); unset: the job binds a free port itself (no race for it with
        # Spark's own ports), unless $RECONCILER_METRICS_PORT=0 here.
        port = (options or {}).get("metrics_port")
        port_env = AUTO if port is None else str(port)
        env = {**os.environ, **self.env}
        if port is None and settings.METRICS_PORT.raw(env) is not None and settings.metrics_port(env) == 0:
            port, port_env = 0, "0"
        inst = instance.new_instance_id()
        record = {
            "flow": spec.flow,
            "deployer": self.name,
            "instance_id": inst,
            "pid": None,  # written before the start: a deployer killed mid-start leaves an instance id behind
            "pid_start": None,
            "master": spec.engine.master,
            "started_at": time.time(),
            "spec_hash": spec.spec_hash(),
            "log": str(d / "job.log"),
            "metrics_port": port or None,
        }
        self._write_record(spec.flow, record)
        job = LocalJob.start(
            spec,
            d,
            master=spec.engine.master,
            spec_path=d / "spec.json",
            log_path=d / "job.log",
            exit_code_path=d / "exit_code",
            env={**self.env, PORT_ENV: port_env},
            instance_id=inst,
        )
        record = {**record, "pid": job.pid, "pid_start": job.start_time}
        self._write_record(spec.flow, record)
        code = job.wait(START_CHECK_SECONDS)
        if code is not None:
            return OpResult.failed(
                f"job {spec.flow} {describe_exit(code)} right after the start; see {d / 'job.log'}:\n{job.log_tail(15)}"
            )
        return OpResult.success(f"{leftovers}started, {self.where(record)}")

    def _end_leftovers(self, flow: str, keep: str | None = None) -> str:
        """Stop every process of the flow's job but those of instance `keep`; words for the result ('' if none)."""
        procs = [p for p in self._processes(flow) if p.instance_id != keep]
        if not procs:
            return ""
        killed = instance.end(procs, self.stop_timeout)
        how = f" ({len(killed)} SIGKILLed after {self.stop_timeout:.0f}s)" if killed else ""
        return f"stopped a leftover {instance.summary(procs)}{how}; "

    def _running(self, flow: str) -> tuple[dict | None, LocalJob | None]:
        record = self._record(flow)
        if record is None or record.get("stopped_at"):
            return record, None
        job = self._job(flow, record)
        return record, (job if job.alive() else None)

    def _stop_job(self, flow: str, record: dict, job: LocalJob | None) -> int | None:
        code = job.stop(self.stop_timeout) if job is not None else None
        record = {**record, "stopped_at": time.time()}
        self._write_record(flow, record)
        return code

    def deploy(self, spec: JobSpec, options: Mapping[str, Any] | None = None) -> OpResult:
        record, job = self._running(spec.flow)
        if job is not None:
            current = _load(job.spec_path)
            if current is not None and current.spec_hash() == spec.spec_hash():
                return OpResult.already(f"already running this spec, {self.where(record)}")
            return self.update(spec, options)
        return self._start(spec, options)

    def update(self, spec: JobSpec, options: Mapping[str, Any] | None = None) -> OpResult:
        record, job = self._running(spec.flow)
        if job is None:
            return self._start(spec, options)
        current = _load(job.spec_path)
        if current is None or current.restart_fields(spec):
            return self.restart(spec, options)
        spec.write(job.spec_path)  # atomic; the job applies it within its refresh interval
        return OpResult.success(f"spec handed to the running job ({self.where(record)}), no restart")

    def restart(self, spec: JobSpec, options: Mapping[str, Any] | None = None) -> OpResult:
        record, job = self._running(spec.flow)
        if record is not None and job is not None:
            code = self._stop_job(spec.flow, record, job)
            if code is None:
                stopped = "killed after the stop timeout"
            else:
                stopped = describe_exit(code)
        else:
            stopped = None
        res = self._start(spec, options)
        if stopped and res.ok:
            return OpResult.success(f"old job {stopped}; {res.message}")
        return res

    def stop(self, flow: str, options: Mapping[str, Any] | None = None) -> OpResult:
        record = self._record(flow)
        if record is None:
            left = self._end_leftovers(flow)
            return OpResult.success(left.rstrip("; ")) if left else OpResult.already("no such job")
        job = self._job(flow, record)
        if not job.alive():
            if not record.get("stopped_at"):
                self._write_record(flow, {**record, "stopped_at": time.time()})
            left = self._end_leftovers(flow)
            return OpResult.success(left.rstrip("; ")) if left else OpResult.already("not running")
        code = self._stop_job(flow, record, job)
        left = self._end_leftovers(flow)
        if code == 0:
            return OpResult.success(f"{left}stopped cleanly")
        return OpResult.success(left + ("killed after the stop timeout" if code is None else describe_exit(code)))

    def stop_all(self) -> list[tuple[str, OpResult]]:
        """Stop every job of this state directory that has a process left (in parallel), leftovers of earlier
        instances included: `dev down`, the demo's end."""
        deps = self.all_deployments()
        flows = [d.flow for d in deps if d.alive or d.strays]
        orphans: list[tuple[str, OpResult]] = []
        if self.dir.exists():  # processes of a job directory with no readable job.json
            known = {str(self.job_dir(d.flow).resolve()) for d in deps}
            for job_dir in sorted({p.job_dir for p in instance.scan(under=self.dir.resolve())} - known):
                procs = instance.scan(job_dir=job_dir)
                instance.end(procs, self.stop_timeout)
                orphans.append(
                    (Path(job_dir).name, OpResult.success(f"stopped an unrecorded {instance.summary(procs)}"))
                )
        if not flows:
            return orphans
        with ThreadPoolExecutor(max_workers=max(1, len(flows))) as pool:
            return orphans + list(zip(flows, pool.map(self.stop, flows)))


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
