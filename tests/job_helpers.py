"""Test doubles for job planning without Spark: a deployer that only records, and status records
kept in memory (what jobs would publish on their target clusters)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from reconciler.adapters.base import OpResult
from reconciler.contract.spec import JobSpec
from reconciler.deployers import Deployers
from reconciler.deployers.base import (
    Deployer,
    Deployment,
    EngineChange,
    EngineDeployment,
    FlowChange,
    FlowOp,
    engine_of,
)
from reconciler.jobplan.backend import JobBackend
from reconciler.topology.flow_id import flow_ends


class FakeDeployer(Deployer):
    """Deployments in a dict, grouped into engines by their `engine` option (else the target's alias); `calls`
    records (operation, flow): a placement of a flow that runs is an "update", else a "deploy"."""

    def __init__(self, name: str = "local"):
        self.name = name
        self.jobs: dict[str, Deployment] = {}
        self.calls: list[tuple[str, str]] = []
        self.pid = 1000

    def _start(self, spec: JobSpec, options) -> OpResult:
        self.pid += 1
        self.jobs[spec.flow] = Deployment(
            spec.flow,
            self.name,
            f"pid {self.pid}, {spec.engine.master}",
            spec,
            True,
            time.time(),
            options=dict(options or {}),
        )
        return OpResult.success(f"started pid {self.pid}")

    def engines(self, options=None) -> list[EngineDeployment]:
        by: dict[str, list[Deployment]] = {}
        for d in self.jobs.values():
            by.setdefault(engine_of(d.flow, d.options), []).append(d)
        return [
            EngineDeployment(name, self.name, f"engine {name}", any(d.alive for d in deps), tuple(deps))
            for name, deps in sorted(by.items())
        ]

    def apply(self, change: EngineChange) -> list[OpResult]:
        return [self._one(fc) for fc in change.flows]

    def _one(self, fc: FlowChange) -> OpResult:
        if fc.op is FlowOp.REMOVE:
            self.calls.append(("stop", fc.flow))
            self.jobs[fc.flow] = replace(
                self.jobs[fc.flow], alive=False, stopped=True, detail="stopped by the reconciler"
            )
            return OpResult.success("stopped")
        assert fc.spec is not None
        if fc.op is FlowOp.RESTART:
            self.calls.append(("restart", fc.flow))
            return self._start(fc.spec, fc.options)
        running = self.jobs.get(fc.flow)
        if running is not None and running.alive and not running.stopped:
            self.calls.append(("update", fc.flow))
            self.jobs[fc.flow] = replace(running, spec=fc.spec)
            return OpResult.success("handed over")
        self.calls.append(("deploy", fc.flow))
        return self._start(fc.spec, fc.options)

    # --- test controls ------------------------------------------------------------------------
    def crash(self, flow: str, detail: str = "process 1001 exited with code 1 (failed)") -> None:
        self.jobs[flow] = replace(self.jobs[flow], alive=False, exit_code=1, detail=detail)

    def age(self, flow: str, seconds: float) -> None:
        """Pretend the job was started `seconds` ago (past the start grace period)."""
        d = self.jobs[flow]
        self.jobs[flow] = replace(d, started_at=d.started_at - seconds)


class StatusBoard:
    """What the jobs published: target alias -> flow -> status record."""

    def __init__(self):
        self.records: dict[str, dict[str, dict[str, Any]]] = {}

    def report(
        self, flow: str, spec: JobSpec | None = None, state: str = "running", age: float = 0.0, **fields: Any
    ) -> None:
        now = int(time.time() * 1000)
        target = flow_ends(flow)[1]
        self.records.setdefault(target, {})[flow] = {
            "flow": flow,
            "spec_hash": spec.spec_hash() if spec else "0" * 64,
            "state": state,
            "started_at": now - int(age * 1000) - 60_000,
            "heartbeat_at": now - int(age * 1000),
            "records": 10,
            "records_per_second": 5.0,
            "lag_total": 0,
            "latency_ms": {"p50": 40.0, "p95": 80.0, "p99": 120.0},
            "errors": 0,
            "last_error": None,
            **fields,
        }

    def reader(self, cluster) -> dict[str, dict[str, Any]]:
        return dict(self.records.get(cluster.alias, {}))


def fake_backend(board: StatusBoard, *deployers: FakeDeployer) -> JobBackend:
    ds = Deployers()
    for d in deployers or (FakeDeployer("local"),):
        ds.by_name[d.name] = d
    return JobBackend(ds, board.reader)
