"""`local` deployer: one detached `spark-submit --master local[N]` process per job.

Everything about a job lives in `$RECONCILER_STATE_DIR/jobs/<source>.<target>/`:

    spec.json   the spec the job runs and re-reads every refresh interval (hot reload)
    job.json    deployer, pid (+ its start time, against pid reuse), master, started/stopped times
    job.log     spark-submit's output (appended across restarts)
    exit_code   written by the wrapper when spark-submit ends (0 stopped, 1 failed, 3 restart required)

The process runs in its own session, so it survives the CLI that started it and a Ctrl-C in that
terminal. Stop is graceful: SIGTERM to the Python driver, which finishes its batch, commits,
publishes a final status and stops Spark; everything is SIGKILLed if it has not ended after
`stop_timeout` seconds. `reconciler.deploy.process.LocalJob` does the process work.

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

from reconciler.adapters.base import OpResult
from reconciler.contract.deployers import LOCAL
from reconciler.contract.metrics import PORT_ENV, free_port
from reconciler.contract.spec import JobSpec
from reconciler.deploy.base import Deployer, Deployment, describe_exit, flow_slug
from reconciler.deploy.process import LocalJob

#: Seconds to wait after starting a job for an immediate failure (bad spark-submit, bad spec).
START_CHECK_SECONDS = 1.5
STOP_TIMEOUT_SECONDS = 60.0


def state_root() -> Path:
    return Path(os.environ.get("RECONCILER_STATE_DIR", ".reconciler")).resolve()


class ProcessDeployer(Deployer):
    """Jobs as local spark-submit processes (the driver runs here; executors wherever the master says)."""

    name = LOCAL

    def __init__(
        self, root: Path | None = None, stop_timeout: float = STOP_TIMEOUT_SECONDS, env: Mapping[str, str] | None = None
    ):
        self.dir = (root or state_root()) / "jobs"
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
        return LocalJob.attach(record["pid"], d / "spec.json", d / "job.log", record.get("pid_start"), d / "exit_code")

    def where(self, record: Mapping[str, Any] | None) -> str:
        if record is None:
            return "no job record"

        metrics = f", metrics http://127.0.0.1:{record['metrics_port']}/metrics" if record.get("metrics_port") else ""
        return f"pid {record.get('pid')}, {record.get('master')}{metrics}"

    # --- what runs ------------------------------------------------------------------------
    def inspect(self, flow: str, options: Mapping[str, Any] | None = None) -> Deployment | None:
        record = self._record(flow)
        if record is None:
            return None
        d = self.job_dir(flow)
        try:
            spec = JobSpec.load(d / "spec.json")
        except Exception:  # noqa: BLE001 - missing or damaged: the job must be restarted with the desired spec
            spec = None
        stopped = bool(record.get("stopped_at"))
        job = self._job(flow, record)
        alive = job.alive()
        exit_code = None if alive else job.exit_code()
        if alive:
            detail = ""
        elif stopped:
            detail = f"stopped by the reconciler at {_iso(record['stopped_at'])}"
        else:
            detail = f"process {record.get('pid')} {describe_exit(exit_code)}"
        return Deployment(
            flow,
            record.get("deployer", self.name),
            self.where(record),
            spec,
            alive,
            record.get("started_at"),
            stopped and not alive,
            exit_code,
            detail,
        )

    def deployments(self, options: list[Mapping[str, Any]] | None = None) -> list[Deployment]:
        return [d for d in self.all_deployments() if d.deployer == self.name]

    def all_deployments(self) -> list[Deployment]:
        """Every job of the state directory, whichever process deployer (local, spark-standalone) started it."""
        out: list[Deployment] = []
        if not self.dir.exists():
            return out
        for path in sorted(self.dir.glob("*/job.json")):
            try:
                flow = json.loads(path.read_text())["flow"]
            except (OSError, ValueError, KeyError):
                continue
            dep = self.inspect(flow)
            if dep is not None:
                out.append(dep)
        return out

    # --- changes --------------------------------------------------------------------------
    def _start(self, spec: JobSpec, options: Mapping[str, Any] | None = None) -> OpResult:
        d = self.job_dir(spec.flow)
        d.mkdir(parents=True, exist_ok=True)
        # job.metrics_port: that port (0: none); unset: a free port, unless $RECONCILER_METRICS_PORT=0 here.
        port = (options or {}).get("metrics_port")
        if port is None:
            port = 0 if {**os.environ, **self.env}.get(PORT_ENV, "").strip() == "0" else free_port()
        job = LocalJob.start(
            spec,
            d,
            master=spec.engine.master,
            spec_path=d / "spec.json",
            log_path=d / "job.log",
            exit_code_path=d / "exit_code",
            env={**self.env, PORT_ENV: str(port)},
        )
        record = {
            "flow": spec.flow,
            "deployer": self.name,
            "pid": job.pid,
            "pid_start": job.start_time,
            "master": spec.engine.master,
            "started_at": time.time(),
            "spec_hash": spec.spec_hash(),
            "log": str(d / "job.log"),
            "metrics_port": port or None,
        }
        self._write_record(spec.flow, record)
        code = job.wait(START_CHECK_SECONDS)
        if code is not None:
            return OpResult.failed(
                f"job {spec.flow} {describe_exit(code)} right after the start; see {d / 'job.log'}:\n{job.log_tail(15)}"
            )
        return OpResult.success(f"started, {self.where(record)}")

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
            return OpResult.already("no such job")
        job = self._job(flow, record)
        if not job.alive():
            if not record.get("stopped_at"):
                self._write_record(flow, {**record, "stopped_at": time.time()})
            return OpResult.already("not running")
        code = self._stop_job(flow, record, job)
        if code == 0:
            return OpResult.success("stopped cleanly")
        return OpResult.success("killed after the stop timeout" if code is None else describe_exit(code))

    def stop_all(self) -> list[tuple[str, OpResult]]:
        """Stop every running job of this state directory (in parallel): `dev down`, the demo's end."""
        flows = [d.flow for d in self.all_deployments() if d.alive]
        if not flows:
            return []
        with ThreadPoolExecutor(max_workers=max(1, len(flows))) as pool:
            return list(zip(flows, pool.map(self.stop, flows)))


def _load(path: Path) -> JobSpec | None:
    try:
        return JobSpec.load(path)
    except Exception:  # noqa: BLE001
        return None


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class LocalDeployer(ProcessDeployer):
    name = LOCAL
