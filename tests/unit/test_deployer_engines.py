"""The deployers' unit is the engine: `engines()` lists engines with their flows, `apply()` takes an engine change,
and the per-flow view (`deployments`, `inspect`) and the per-flow operations derive from those, in one place
(`flow_view`). A restart that replaces a flow's whole engine says so in the plan and names the flows restarted
with it. Without Spark: engine directories written as a process deployer leaves them (no process runs)."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from reconciler.adapters.base import OpResult
from reconciler.apply.executor import ApplyContext
from reconciler.contract.spec import ClusterSpec, JobSpec
from reconciler.deployers import Deployers
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
from reconciler.jobplan.handlers import restart_jobs
from reconciler.jobplan.plan import _engine_restarts, diff_jobs
from reconciler.jobplan.state import JobState, LiveJob, LiveJobs, desired_jobs
from reconciler.plan.actions import Plan, action_from_dict
from reconciler.plan.job_actions import RestartJob
from reconciler.render import plan_markdown, plan_text
from tests.plan_helpers import topology
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


# --- a restart that replaces the engine, in the plan -----------------------------------------------------


def _live(alive: bool = True) -> LiveJobs:
    flows = ["west->east", "north->east", "south->east"]
    state = JobState.RUNNING if alive else JobState.DOWN
    jobs = {f: LiveJob(f, state, deployment=dep(f, "east", alive=alive)) for f in flows}
    jobs["solo->other"] = LiveJob("solo->other", JobState.RUNNING, deployment=dep("solo->other", "other"))
    return LiveJobs(jobs)


def _restart(flow: str = "west->east", engine: str = "east", **kw) -> RestartJob:
    s = spec(flow)
    return RestartJob(
        cluster=flow.split("->")[1],
        reason="test",
        flow=flow,
        deployer="local",
        options={"engine": engine},
        spec=s.to_dict(),
        spec_hash=s.spec_hash(),
        **kw,
    )


def test_a_restart_for_spark_settings_replaces_the_engine_and_names_its_other_flows():
    [a] = _engine_restarts([_restart(changes={"engine.spark_conf.spark.x": [None, "1"]})], _live())
    assert isinstance(a, RestartJob)
    assert a.engine_flows == ["north->east", "south->east"]
    assert "engine.spark_conf.spark.x" in a.engine_restart
    assert "and with it flows north->east, south->east: REPLACES engine east" in a.describe()
    assert any("the whole engine east restarts" in line and "north->east" in line for line in a.details())
    again = RestartJob.from_dict(a.to_dict())
    assert isinstance(again, RestartJob)
    assert (again.engine_restart, again.engine_flows) == (a.engine_restart, a.engine_flows), "a saved plan keeps it"


def test_a_restart_in_place_does_not_replace_the_engine():
    restarts = [
        _restart(changes={"engine.parallelism": [1, 2]}),
        _restart(changes={"engine.master": ["local[1]", "local[4]"]}),  # one local[N] for another
        _restart(changes={"engine": ["old", "east"]}),  # a move into the engine
        _restart(state="down"),  # its engine runs: the flow alone is down
    ]
    for a in _engine_restarts(list(restarts), _live()):
        assert isinstance(a, RestartJob) and a.engine_restart == "" and a.engine_flows == []
        assert "REPLACES" not in a.describe()


def test_what_replaces_an_engine_follows_the_settings_scope():
    """A change of an engine setting (settings_registry `Scope.ENGINE`) replaces the engine, on its deployer; a flow
    setting restarts the flow in place, on kubernetes too (its engine runs the new flow file)."""
    kube = {"deployer": "kubernetes", "options": {"engine": "east", "image": "img:1"}}
    replacing = [
        _restart(changes={"metrics_bind": ["127.0.0.1", "0.0.0.0"]}),  # the local engine's process listens there
        dataclasses.replace(_restart(changes={"image": ["img:1", "img:2"]}), **kube),
    ]
    for restart in replacing:
        [a] = _engine_restarts([restart], _live())
        assert isinstance(a, RestartJob) and a.engine_restart.startswith("its Spark settings changed"), a.changes
    in_place = [
        dataclasses.replace(_restart(changes={"settings.policy.kind": ["default", "identity"]}), **kube),
        dataclasses.replace(_restart(changes={"manifests_dir": ["a", "b"]}), **kube),
    ]
    for restart in in_place:
        [a] = _engine_restarts([restart], _live())
        assert isinstance(a, RestartJob) and a.engine_restart == "" and a.engine_flows == [], a.changes


def test_a_duplicated_or_dead_engine_restarts_as_a_whole():
    [dup] = _engine_restarts([_restart(state="duplicated")], _live())
    assert isinstance(dup, RestartJob) and dup.engine_restart == "it runs more than once"
    [down] = _engine_restarts([_restart(state="down", running=False)], _live(alive=False))
    assert isinstance(down, RestartJob) and down.engine_restart == "it is not running"
    assert down.engine_flows == ["north->east", "south->east"]
    [solo] = _engine_restarts([_restart("solo->other", "other", state="duplicated")], _live())
    assert isinstance(solo, RestartJob) and solo.engine_flows == [] and "REPLACES engine other" in solo.describe()


def test_a_plan_saved_before_engine_restarts_still_loads():
    saved = _restart().to_dict()
    del saved["engine_restart"], saved["engine_flows"]
    loaded = RestartJob.from_dict(saved)
    assert isinstance(loaded, RestartJob) and loaded.engine_restart == "" and loaded.engine_flows == []


# --- one engine replacement, one action (the demo's analytics engine killed: issue 37 follow-up) ----------


ANALYTICS = """flows:
  - {source: west, target: east, topics: {include: ["orders.*"]}}
  - {source: north, target: east, topics: {include: ["orders.*"]}}
  - {source: west, target: north, topics: {include: ["orders.*"]}}
"""


def _dead_engine_plan():
    """The plan of a topology whose engine east (two flows) was killed (SIGKILL: both flows down, nothing alive),
    pure: desired jobs x live jobs through `diff_jobs`, no broker, no deployer."""
    topo = topology(ANALYTICS, {"west": "127.0.0.1:1", "north": "127.0.0.1:2", "east": "127.0.0.1:3"})
    desired = desired_jobs(topo)
    jobs = {}
    for flow, d in desired.items():
        east = d.cluster == "east"
        deployment = Deployment(
            flow, d.deployer, f"engine {d.options['engine']}", d.spec, not east, 1.0, options=dict(d.options)
        )
        why = "instance ab12 was killed by SIGKILL (exit code 137) (engine east)" if east else ""
        jobs[flow] = LiveJob(flow, JobState.DOWN if east else JobState.RUNNING, why, deployment=deployment)
    actions, findings = diff_jobs(topo, desired, LiveJobs(jobs))
    return Plan(actions, findings, sorted(topo.clusters), topology="t")


def test_one_engine_replacement_is_one_action_naming_all_its_flows():
    plan = _dead_engine_plan()
    [a] = plan.actions
    assert isinstance(a, RestartJob) and a.engine_restart == "it is not running"
    assert (a.flow, a.engine_flows, [j.flow for j in a.joined]) == ("north->east", ["west->east"], ["west->east"])
    assert a.flows == ("north->east", "west->east")
    [j] = a.joined
    assert j.engine_restart == "" and j.spec_hash == spec_of(plan, "west->east") and not j.joined
    assert plan.counts() == {"create": 0, "update": 1, "delete": 0}

    text = plan_text.render(plan)
    assert text.count("REPLACES engine east") == 1, text
    assert "start job north->east and with it flow west->east: REPLACES engine east" in text
    assert "with it flow west->east (spec " in text and "killed by SIGKILL" in text
    markdown = plan_markdown.render(plan)
    assert markdown.count("REPLACES engine east") == 1, markdown

    [saved] = json.loads(json.dumps([a.to_dict() for a in plan.actions]))
    assert saved["description"].count("REPLACES") == 1
    assert [x["flow"] for x in saved["joined"]] == ["west->east"] and saved["joined"][0]["kind"] == "restart_job"
    again = action_from_dict(saved)
    assert again == a and isinstance(again, RestartJob) and again.joined == a.joined, "a saved plan keeps it"


def test_apply_hands_an_engine_replacement_and_the_restarts_it_carries_to_one_engine_change(tmp_path):
    plan = _dead_engine_plan()
    recording = Recording()
    deployers = Deployers(tmp_path)
    deployers.by_name[recording.name] = recording
    [res] = restart_jobs(ApplyContext(lambda cluster: None, deployers=deployers), "east", plan.actions)
    assert [(c.engine, [(f.op, f.flow, f.spec.spec_hash()) for f in c.flows]) for c in recording.changes] == [
        (
            "east",
            [
                (FlowOp.RESTART, "north->east", spec_of(plan, "north->east")),
                (FlowOp.RESTART, "west->east", spec_of(plan, "west->east")),
            ],
        )
    ]
    assert res.ok and res.message == "north->east: restart north->east; west->east: restart west->east"


def spec_of(plan: Plan, flow: str) -> str:
    for a in plan.actions:
        for j in (a, *getattr(a, "joined", ())):
            if getattr(j, "flow", None) == flow:
                return j.spec_hash
    raise AssertionError(f"no action for {flow}")
