"""The migration from per-flow jobs: a flow's own Spark application of an earlier release, before engines.

Before engines, the process deployers ran one application per flow, in `$RECONCILER_STATE_DIR/jobs/<flow>/`
(`job.json`, `spec.json`, `job.log`, `exit_code`). Such a job is listed as an engine without a name holding its
one flow (`EarlierJobs.engines`), so the plan shows the flow moving into its engine; the move stops it gracefully
(it commits first, `EarlierJobs.stop`) before the flow starts in the engine, which resumes from the committed
offsets. While an engine holds the flow, whatever still runs of its earlier job is a stray of it (`flow_view`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import reconciler.deployers.instance as instance
from reconciler.contract.engine import write_json
from reconciler.deployers.base import Deployment, EngineDeployment, flow_slug
from reconciler.deployers.engine_dirs import load_spec
from reconciler.deployers.instance import JobProcess
from reconciler.deployers.process import recorded_job


def per_instance(procs: list[JobProcess]) -> tuple[str, ...]:
    """One description per instance of `procs`, by instance id."""
    return tuple(
        instance.summary([p for p in procs if p.instance_id == i]) for i in sorted({p.instance_id for p in procs})
    )


class EarlierJobs:
    """The per-flow jobs of an earlier release under `root/jobs` (`deployer`: the name to report them under when
    their record names none)."""

    def __init__(self, root: Path, deployer: str, stop_timeout: float):
        self.dir = root / "jobs"
        self.deployer = deployer
        self.stop_timeout = stop_timeout

    def job_dir(self, flow: str) -> str:
        return str((self.dir / flow_slug(flow)).resolve())

    def flows(self) -> list[str]:
        """The flows that have a job record here."""
        out = []
        for path in sorted(self.dir.glob("*/job.json")) if self.dir.is_dir() else []:
            try:
                out.append(json.loads(path.read_text())["flow"])
            except (OSError, ValueError, KeyError):
                continue
        return out

    def engines(self, procs: list[JobProcess]) -> list[EngineDeployment]:
        """Each recorded job as an engine without a name holding its one flow; `procs`: the processes running now
        under the state directory."""
        out = []
        for flow in self.flows():
            found = self.engine(flow, [p for p in procs if p.job_dir == self.job_dir(flow)])
            if found is not None:
                out.append(found)
        return out

    def engine(self, flow: str, procs: list[JobProcess]) -> EngineDeployment | None:
        d = Path(self.job_dir(flow))
        found = recorded_job(d, "spec.json")
        if found is None:
            return None
        record, job = found
        alive = job.alive()
        stopped = bool(record.get("stopped_at"))
        strays = [p for p in procs if not alive or p.instance_id != record.get("instance_id")]
        where = f"own application, instance {record.get('instance_id')}" + ("" if alive else " (ended)")
        deployer = record.get("deployer", self.deployer)
        dep = Deployment(
            flow,
            deployer,
            where,
            load_spec(d / "spec.json"),
            alive,
            record.get("started_at"),
            stopped and not alive,
            None if alive else job.exit_code(),
            "its own Spark application (a job of an earlier release, before engines)",
            options={"metrics_port": record.get("metrics_port")},  # no engine: the plan moves it into one
            instance_id=record.get("instance_id"),
            strays=per_instance(strays),
        )
        return EngineDeployment(None, deployer, where, alive, (dep,), per_instance(procs))

    def stop(self, flow: str) -> str:
        """Stop the flow's job of an earlier release, gracefully (it commits first); words ('' if none)."""
        d = Path(self.job_dir(flow))
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
