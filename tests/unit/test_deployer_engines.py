"""The deployers' unit is the engine: `engines()` lists engines with their flows, `apply()` takes an engine change,
and the per-flow view (`deployments`, `inspect`) and the per-flow operations derive from those, in one place
(`flow_view`). (An engine replaced in the plan: test_engine_replacement.py.) Without Spark: engine directories
written as a process deployer leaves them (no process runs)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from reconciler.adapters.base import OpResult
from reconciler.contract.spec import ClusterSpec, JobSpec
from reconciler.deployers.base import (
    Deployer,
    Deployment,
    EngineChange,
    EngineDeployment,
    FlowChange,
    FlowOp,
    each_flow,
    flow_view,
)
from reconciler.deployers.local import LocalDeployer
from reconciler.deployers.standalone import StandaloneDeployer
from tests.spec_helpers import job_spec


def spec(flow: str, **kw) -> JobSpec:
    source, target = flow.split("->")
    return job_spec(flow, ClusterSpec(source, f"{source}:1"), ClusterSpec(target, f"{target}:1"), **kw)


def dep(flow: str, engine: str | None, alive: bool | None = True, **kw) -> Deployment:
    options = {"engine": engine} if engine else {}
    return Deployment(flow, "local", f"engine {engine}", spec(flow), alive, 1.0, options=options, **kw)


# --- the per-flow view, derived once -----------------------------------------------------------------


def test_flow_view_gives_each_flow_the_deployment_of_its_first_engine():
    engines = [
        EngineDeployment("east", "local", "engine east", True, (dep("west->east", "east"), dep("north->east", "east"))),
        EngineDeployment("old", "local", "engine old", True, (dep("west->east", "old"),)),
        EngineDeployment(
            None, "local", "own application", True, (dep("west->east", None),), ("instance ab: driver 7",)
        ),
        EngineDeployment(None, "local", "own application", False, (dep("south->east", None, alive=False),)),
    ]
    view = {d.flow: d for d in flow_view(engines)}
    assert sorted(view) == ["north->east", "south->east", "west->east"]
    west = view["west->east"]
    assert west.options["engine"] == "east", "the first engine holding it"
    assert "also in engine(s) old" in west.detail
    assert west.strays == ("instance ab: driver 7",), "its earlier job still running is a stray of it"
    assert "still running unseen: instance ab: driver 7" in west.detail
    assert view["north->east"].strays == () and view["north->east"].detail == ""
    assert "engine" not in view["south->east"].options, "a flow no engine holds: its earlier job"


def _write_engine(state: Path, name: str, flows: list[str], deployer: str = "local") -> None:
    d = state / "engines" / name
    (d / "flows").mkdir(parents=True)
    record = {"engine": name, "deployer": deployer, "instance_id": "i1", "pid": 0, "master": "local[2]"}
    (d / "job.json").write_text(json.dumps({**record, "started_at": time.time() - 60}))
    (d / "exit_code").write_text("1\n")
    for flow in flows:
        spec(flow).write(d / "flows" / f"{flow.replace('->', '.')}.json")


def test_process_deployer_lists_its_engines_with_their_flows_and_derives_the_flows(tmp_path):
    _write_engine(tmp_path, "east", ["west->east", "north->east"])
    earlier = tmp_path / "jobs" / "south.east"
    earlier.mkdir(parents=True)
    (earlier / "job.json").write_text(json.dumps({"flow": "south->east", "deployer": "local", "pid": 0}))
    spec("south->east").write(earlier / "spec.json")

    deployer = LocalDeployer(root=tmp_path)
    engines = deployer.engines()
    assert [(e.name, sorted(d.flow for d in e.flows), e.alive) for e in engines] == [
        ("east", ["north->east", "west->east"], False),
        (None, ["south->east"], False),
    ]
    flows = {d.flow: d for d in deployer.deployments()}
    assert sorted(flows) == ["north->east", "south->east", "west->east"]
    assert flows["west->east"].options["engine"] == "east" and flows["west->east"].alive is False
    assert "exited with code 1 (failed)" in flows["west->east"].detail
    assert "earlier release" in flows["south->east"].detail
    inspected = deployer.inspect("west->east")
    assert inspected is not None and inspected.options["engine"] == "east"
    assert deployer.inspect("nowhere->east") is None
    standalone = StandaloneDeployer(root=tmp_path)
    assert standalone.deployments() == [], "the flows a local deployer started are not spark-standalone's"
    assert standalone.inspect("west->east") is not None, "but they share the state directory"


def test_process_deployer_removes_a_flow_of_an_engine_that_is_not_running(tmp_path):
    _write_engine(tmp_path, "east", ["west->east", "north->east"])
    deployer = LocalDeployer(root=tmp_path)
    [res] = deployer.apply(EngineChange("east", (FlowChange(FlowOp.REMOVE, "west->east"),)))
    assert res.ok and "removed from engine east (not running)" in res.message
    assert [d.flow for d in deployer.deployments()] == ["north->east"]
    assert deployer.stop("west->east").message == "no such job"


class Recording(Deployer):
    """A deployer that only records the engine changes it is handed."""

    name = "local"

    def __init__(self) -> None:
        self.changes: list[EngineChange] = []

    def engines(self, options=None) -> list[EngineDeployment]:
        return []

    def apply(self, change: EngineChange) -> list[OpResult]:
        self.changes.append(change)
        return [OpResult.success(f"{fc.op.value} {fc.flow}") for fc in change.flows]


def test_the_per_flow_operations_are_engine_changes_of_one_flow():
    d = Recording()
    s = spec("west->east")
    assert d.deploy(s, {"engine": "big"}).message == "place west->east"
    assert d.update(s).message == "place west->east"
    assert d.restart(s, {"engine": "big"}).message == "restart west->east"
    assert d.stop("west->east").message == "remove west->east"
    assert [(c.engine, [(f.op, f.flow) for f in c.flows]) for c in d.changes] == [
        ("big", [(FlowOp.PLACE, "west->east")]),
        ("east", [(FlowOp.PLACE, "west->east")]),  # no engine option: the target's alias
        ("big", [(FlowOp.RESTART, "west->east")]),
        ("east", [(FlowOp.REMOVE, "west->east")]),
    ]


def test_a_flow_change_that_raises_fails_alone():
    change = EngineChange("east", tuple(FlowChange(FlowOp.REMOVE, f) for f in ("a->east", "b->east", "c->east")))

    def fn(fc: FlowChange) -> OpResult:
        if fc.flow == "b->east":
            raise RuntimeError("boom")
        return OpResult.success(fc.flow)

    results = each_flow(change, fn)
    assert [r.ok for r in results] == [True, False, True]
    assert results[1].message == "RuntimeError: boom" and results[2].message == "c->east"


def test_what_replaces_an_engine_follows_the_settings_scope():
    """A change of an engine setting (settings_registry `Scope.ENGINE`) replaces the engine, on its deployer; a flow
    setting restarts the flow in place, on kubernetes too (its engine runs the new flow file)."""
    from reconciler.jobplan.engines import engine_settings
    from reconciler.plan.job_actions import RestartJob

    def restart(deployer: str, **changes) -> RestartJob:
        s = spec("west->east")
        return RestartJob(
            cluster="east",
            reason="test",
            flow="west->east",
            deployer=deployer,
            options={"engine": "east"},
            spec=s.to_dict(),
            spec_hash=s.spec_hash(),
            changes={k: list(v) for k, v in changes.items()},
        )

    assert engine_settings(restart("local", metrics_bind=("127.0.0.1", "0.0.0.0")))  # the engine's process listens
    assert engine_settings(restart("kubernetes", image=("img:1", "img:2")))
    assert engine_settings(restart("local", **{"engine.spark_conf.spark.x": (None, "1")}))
    assert not engine_settings(restart("kubernetes", **{"settings.policy.kind": ("default", "identity")}))
    assert not engine_settings(restart("kubernetes", manifests_dir=("a", "b")))
    assert not engine_settings(
        restart("local", **{"engine.master": ("local[1]", "local[4]")})
    )  # one local[N] for another
