"""An engine replaced in the plan (issue 49): one `ReplaceEngine` action (`-/+ replace engine E`) per engine and
target cluster, with the engine settings that force it (typed, secrets never shown) and every flow it restarts, each
with its own typed reason; a flow in it has no other action. Rendered as text, JSON and Markdown (hostile values
escaped), kept by a signed saved plan, checked by the executor's guard, and applied as one deployer unit. Without
Spark: desired x live jobs through `diff_jobs`, the recording deployers of tests/job_helpers.py and
tests/unit/test_deployer_engines.py. (A real engine replaced: tests/integration/test_engines.py.)"""

from __future__ import annotations

import dataclasses
import json

import pytest

from reconciler.apply.executor import ApplyContext
from reconciler.apply.guard import TopologyGuard
from reconciler.cli.main import main
from reconciler.deployers import Deployers
from reconciler.deployers.base import Deployment, FlowOp
from reconciler.drift.report import Category, build_report
from reconciler.jobplan.engines import plan_engines
from reconciler.jobplan.handlers import replace_engines
from reconciler.jobplan.plan import diff_jobs
from reconciler.jobplan.state import JobState, LiveJob, LiveJobs, desired_jobs
from reconciler.plan import planfile
from reconciler.plan.actions import Plan, action_from_dict
from reconciler.plan.engine_actions import EngineFlowOp, EngineSetting, ReplaceEngine
from reconciler.plan.job_actions import RestartJob, StopJob, UpdateJob
from reconciler.plan.reasons import ReasonKind
from reconciler.render import drift_html, drift_markdown, drift_text, plan_json, plan_markdown, plan_text
from tests.job_helpers import FakeDeployer, StatusBoard, fake_backend
from tests.plan_helpers import World, topology
from tests.unit.test_deployer_engines import Recording, dep, spec

# --- which restarts replace an engine (jobplan/engines.py) ------------------------------------------------------


def _live(alive: bool = True) -> LiveJobs:
    flows = ["west->east", "north->east", "south->east"]
    state = JobState.RUNNING if alive else JobState.DOWN
    jobs = {f: LiveJob(f, state, deployment=dep(f, "east", alive=alive)) for f in flows}
    jobs["solo->other"] = LiveJob("solo->other", JobState.RUNNING, deployment=dep("solo->other", "other"))
    return LiveJobs(jobs)


def _args(flow: str, engine: str) -> dict:
    s = spec(flow)
    return dict(
        cluster=flow.split("->")[1],
        flow=flow,
        deployer="local",
        options={"engine": engine},
        spec=s.to_dict(),
        spec_hash=s.spec_hash(),
    )


def _restart(flow: str = "west->east", engine: str = "east", **kw) -> RestartJob:
    return RestartJob(reason=kw.pop("reason", "test"), **_args(flow, engine), **kw)


def test_a_restart_for_spark_settings_replaces_the_engine_with_every_flow_it_restarts():
    spark_x = {"engine.spark_conf": [{"spark.y": "2"}, {"spark.x": "1", "spark.y": "2"}]}
    own = {
        "west->east": _restart(changes={**spark_x, "settings.delivery": ["at-least-once", "exactly-once"]}),
        "north->east": _restart("north->east", changes=spark_x, reason="north's words"),
    }
    [a] = plan_engines(own, _live())
    assert isinstance(a, ReplaceEngine) and (a.cluster, a.engine, a.deployer) == ("east", "east", "local")
    assert a.why is ReasonKind.JOB_ENGINE_SETTINGS and a.VERB.value == "-/+" and a.KIND.value == "replace_engine"
    assert a.settings == (EngineSetting("engine.spark_conf.spark.x", None, "1"),)
    assert a.flows == ("north->east", "south->east", "west->east"), "every flow of the engine, once"
    by = {e.flow: e for e in a.restarts}
    assert by["west->east"].op is EngineFlowOp.RESTART and by["west->east"].changes == {
        "settings.delivery": ["at-least-once", "exactly-once"]
    }, "its own changes; the engine's setting is said once, on the action"
    assert (by["north->east"].why, by["north->east"].reason) == (ReasonKind.JOB_STALE_SPEC, "north's words")
    assert by["south->east"].op is EngineFlowOp.NONE and by["south->east"].why is ReasonKind.JOB_WITH_ENGINE
    assert [e.flow for e in a.handed] == ["north->east", "west->east"]
    assert a.reason == "the settings of engine east changed (engine.spark_conf.spark.x)", "one setting per key"
    assert a.describe() == (
        "replace engine east (local local[2]): restarts 3 flows north->east, south->east, west->east"
    )
    details = a.details()
    assert details[0] == "engine.spark_conf.spark.x: (not set) -> 1 (forces replacement)"
    assert "then starts with the new settings; every flow resumes from its committed offsets" in details[1]
    assert "flow south->east: restarts with engine east (nothing of its own changes)" in details
    assert "  settings.delivery: at-least-once -> exactly-once" in details
    again = action_from_dict(json.loads(json.dumps(a.to_dict())))
    assert again == a, "a saved plan keeps every field"


def test_a_restart_in_place_does_not_replace_the_engine():
    restarts = [
        _restart(changes={"engine.parallelism": [1, 2]}),
        _restart(changes={"engine.master": ["local[1]", "local[4]"]}),  # one local[N] for another
        _restart(changes={"engine": ["old", "east"]}),  # a move into the engine
        _restart(changes={"engine.spark_conf.spark.x": [None, "1"]}, previous_deployer="kubernetes"),  # a move
        _restart(state="down"),  # its engine runs: the flow alone is down
    ]
    for r in restarts:
        assert plan_engines({r.flow: r}, _live()) == [r]


def test_a_duplicated_or_dead_engine_is_replaced_as_a_whole():
    [dup] = plan_engines({"west->east": _restart(state="duplicated", reason="2 instances run")}, _live())
    assert isinstance(dup, ReplaceEngine) and dup.why is ReasonKind.JOB_DUPLICATED and dup.settings == ()
    assert dup.reason == "engine east runs more than once (west->east: 2 instances run)"
    assert "every instance of it stopped (graceful, then SIGKILL), then exactly one started" in dup.details()[0]
    own = {f: _restart(f, state="down", running=False) for f in ("west->east", "north->east", "south->east")}
    [down] = plan_engines(own, _live(alive=False))
    assert isinstance(down, ReplaceEngine) and down.why is ReasonKind.JOB_DOWN
    assert [e.op for e in down.restarts] == [EngineFlowOp.RESTART] * 3
    assert "nothing of it runs (nothing to stop): it starts" in down.details()[0]
    [solo] = plan_engines({"solo->other": _restart("solo->other", "other", state="duplicated")}, _live())
    assert isinstance(solo, ReplaceEngine) and solo.flows == ("solo->other",)


def test_every_flow_is_in_one_action_only():
    """A hot change of a flow of the replaced engine is carried out with it (its spec handed over); a flow stopped or
    moving keeps its own action and is not listed; a flow into another cluster is listed by one replacement only."""
    spark_x = {"engine.spark_conf": [{}, {"spark.x": "1"}]}
    live = _live()
    live.jobs["west->north"] = LiveJob("west->north", JobState.RUNNING, deployment=dep("west->north", "east"))
    live.jobs["gone->east"] = LiveJob("gone->east", JobState.RUNNING, deployment=dep("gone->east", "east"))
    hot = UpdateJob(reason="hot", current_hash="a" * 64, changes={"settings.topics.include": [["a"], ["b"]]},
                    **_args("north->east", "east"))  # fmt: skip
    own = {
        "west->east": _restart(changes=spark_x),
        "north->east": hot,
        "south->east": RestartJob(reason="moves", changes={"engine": ["east", "big"]}, **_args("south->east", "big")),
    }
    stop = StopJob(reason="removed", **_args("gone->east", "east"))
    actions = plan_engines(own, live, {stop.flow})
    [replace] = [a for a in actions if isinstance(a, ReplaceEngine)]
    assert replace.flows == ("north->east", "west->east", "west->north")
    by = {e.flow: e for e in replace.restarts}
    assert by["north->east"].op is EngineFlowOp.PLACE and by["north->east"].spec_hash == hot.spec_hash
    assert by["west->north"].op is EngineFlowOp.NONE
    assert [a.flow for a in actions if isinstance(a, RestartJob)] == ["south->east"], "the move keeps its action"
    assert not any(isinstance(a, UpdateJob) for a in actions), "the hot change is carried by the replacement"

    # the engine replaced in both clusters: each cluster's own flows; a flow without a change of its own once
    north = _restart("west->north", changes=spark_x)
    actions = plan_engines({"west->east": _restart(changes=spark_x), "west->north": north}, _live())
    assert sorted((a.cluster, a.flows) for a in actions if isinstance(a, ReplaceEngine)) == [
        ("east", ("north->east", "south->east", "west->east")),
        ("north", ("west->north",)),
    ]


def test_a_secret_setting_is_never_shown_nor_kept():
    secret = {
        "engine.spark_conf": [
            {"spark.authenticate.secret": "${EAST_OLD}"},
            {"spark.authenticate.secret": "${EAST_NEW}"},
        ]
    }
    [a] = plan_engines({"west->east": _restart(changes=secret)}, _live())
    assert isinstance(a, ReplaceEngine)
    [s] = a.settings
    assert (s.path, s.old, s.new, s.sensitive) == ("engine.spark_conf.spark.authenticate.secret", None, None, True)
    assert a.details()[0] == "engine.spark_conf.spark.authenticate.secret: (sensitive value) (forces replacement)"
    text = json.dumps(a.to_dict())
    assert "EAST_OLD" not in text and "EAST_NEW" not in text and "EAST_" not in a.describe() + "".join(a.details())


# --- one replacement in a plan: text, JSON, Markdown -----------------------------------------------------------

ANALYTICS = """flows:
  - {source: west, target: east, topics: {include: ["orders.*"]}}
  - {source: north, target: east, topics: {include: ["orders.*"]}}
  - {source: west, target: north, topics: {include: ["orders.*"]}}
"""


def _dead_engine_plan() -> Plan:
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


def test_a_plan_that_replaces_an_engine_shows_one_replace_action_listing_its_flows():
    plan = _dead_engine_plan()
    [a] = plan.actions
    assert isinstance(a, ReplaceEngine) and a.why is ReasonKind.JOB_DOWN and a.flows == ("north->east", "west->east")
    assert [(e.op, e.state, e.why) for e in a.restarts] == [(EngineFlowOp.RESTART, "down", ReasonKind.JOB_DOWN)] * 2
    assert plan.counts() == {"create": 0, "update": 0, "delete": 0, "replace": 1}
    assert plan.summary_line() == "Plan: 0 to create, 1 to replace, 0 to change, 0 to delete."

    text = plan_text.render(plan)
    assert text.count("replace engine") == 1, text
    assert "  -/+ replace engine east (local local[4]): restarts 2 flows north->east, west->east" in text
    assert "        flow west->east (spec " in text and "killed by SIGKILL" in text
    assert "      # engine east is not running: none of its flows runs" in text

    doc = json.loads(plan_json.render(plan))
    assert doc["format_version"] == 2 and doc["summary"]["replace"] == 1
    [saved] = doc["actions"]
    assert (saved["kind"], saved["verb"], saved["engine"], saved["reason_kind"]) == (
        "replace_engine",
        "-/+",
        "east",
        "job-down",
    )
    assert [(e["flow"], e["op"], e["reason_kind"]) for e in saved["restarts"]] == [
        ("north->east", "restart", "job-down"),
        ("west->east", "restart", "job-down"),
    ]
    assert not {"joined", "engine_restart", "engine_flows"} & set(saved)
    assert Plan.from_dict(doc).actions == plan.actions

    markdown = plan_markdown.render(plan)
    assert markdown.count("! -/+ replace engine east") == 1, markdown
    assert "> **This plan REPLACES 1 engine**: `east` (2 flows into `east`)." in markdown
    assert "!     flow north->east (spec " in markdown


def test_hostile_values_in_a_replacement_are_escaped():
    """A Spark setting's value (from the topology) and a flow's reason (from a status record) reach a terminal and
    a pull-request comment only escaped."""
    hostile = "x\x1b[2J\u202e```\n# injected"
    [a] = plan_engines(
        {"west->east": _restart(changes={"engine.spark_conf.spark.x": ["1", hostile]}, reason=hostile)}, _live()
    )
    plan = Plan([a], topology="t")
    text = plan_text.render(plan)
    assert "\x1b" not in text and "\u202e" not in text and "\n# injected" not in text and "\\x1b[2J" in text
    markdown = plan_markdown.render(plan)
    assert "\x1b" not in markdown and "\u202e" not in markdown and "\n# injected" not in markdown
    fence = next(line for line in markdown.splitlines() if line.startswith("```") and line.endswith("diff"))
    assert len(fence) - len("diff") > 3, "the fence is longer than the backtick run inside"


def test_drift_shows_the_replacement_as_one_job_item_of_its_flows():
    w = World(topology('flows:\n  - {source: west, target: east, topics: {include: ["orders"]}}'))
    w["west"].add_topic("orders", 1)
    live = LiveJobs({"west->east": LiveJob("west->east", JobState.RUNNING, deployment=dep("west->east", "east"))})
    [a] = plan_engines({"west->east": _restart(changes={"engine.spark_conf": [{}, {"spark.x": "`<b>x</b>`"}]})}, live)
    base = w.plan()
    plan = Plan([*base.actions, a], base.findings, base.clusters, base.scope, base.fingerprint, base.topology)
    report = build_report(w.topology, w.live(), plan, job_statuses={}, heartbeats={}, now_ms=1_700_000_000_000)
    jobs = [i for i in report.drift if i.category is Category.JOB and "west->east" in i.flows]
    assert [(i.verb, i.message, i.subject, i.action["kind"]) for i in jobs] == [
        ("-/+", a.describe(), "engine east", "replace_engine")
    ], "the replacement stands for the flow's job: no status-derived item beside it"
    assert "-/+ replace engine east (local local[2]): restarts 1 flow west->east" in drift_text.render(report)
    assert "`-/+` replace engine east" in drift_markdown.render(report)
    html = drift_html.render(report)
    assert '<span class="verb v-tilde">-/+</span> replace engine east' in html and "<b>x</b>" not in html


# --- apply: one deployer unit ---------------------------------------------------------------------------------------


def test_apply_hands_an_engine_replacement_to_one_engine_change(tmp_path):
    plan = _dead_engine_plan()
    recording = Recording()
    deployers = Deployers(tmp_path)
    deployers.by_name[recording.name] = recording
    [a] = plan.actions
    assert isinstance(a, ReplaceEngine)
    [res] = replace_engines(ApplyContext(lambda cluster: None, deployers=deployers), "east", [a])
    assert [(c.engine, [(f.op, f.flow, f.spec.spec_hash()) for f in c.flows]) for c in recording.changes] == [
        ("east", [(FlowOp.RESTART, e.flow, e.spec_hash) for e in a.restarts])
    ]
    assert res.ok and res.message == "north->east: restart north->east; west->east: restart west->east"


def test_the_guard_allows_a_replacement_only_of_the_topologys_flows_in_that_engine():
    topo = topology(ANALYTICS, {"west": "127.0.0.1:1", "north": "127.0.0.1:2", "east": "127.0.0.1:3"})
    [a] = _dead_engine_plan().actions
    assert isinstance(a, ReplaceEngine)
    guard = TopologyGuard(topo)
    assert guard.refusal(a) is None
    first = a.restarts[0]

    def refusal(*restarts) -> str:
        return str(guard.refusal(dataclasses.replace(a, restarts=restarts)))

    assert "is not in engine east" in refusal(dataclasses.replace(first, options={"engine": "other"}))
    assert "no enabled flow west->north into east" in refusal(dataclasses.replace(first, flow="west->north"))
    assert "hands no flow" in refusal()
    assert "hands no flow" in refusal(dataclasses.replace(first, op=EngineFlowOp.NONE))


# --- through the CLI: a signed saved plan, applied ------------------------------------------------------------------

TOPO = """apiVersion: reconciler/v1
kind: Topology
metadata: {{name: engines}}
clusters:
  west: {{bootstrap_servers: "127.0.0.1:1"}}
  north: {{bootstrap_servers: "127.0.0.1:3"}}
  east: {{bootstrap_servers: "127.0.0.1:2"}}
defaults:
  job: {{master: "local[1]", parallelism: 1, spark_conf: {{{conf}}}}}
flows:
  - {{source: west, target: east, topics: {{include: ["orders"]}}}}
  - {{source: north, target: east, topics: {{include: ["orders"]}}}}
"""


class CountingDeployer(FakeDeployer):
    """A FakeDeployer that also counts its engine changes."""

    def __init__(self) -> None:
        super().__init__("local")
        self.applied: list[tuple[str, list[tuple[str, str]]]] = []

    def apply(self, change):
        self.applied.append((change.engine, [(fc.op.value, fc.flow) for fc in change.flows]))
        return super().apply(change)


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RECONCILER_PLAN_KEY", "test-plan-key-0123456789abcdef")
    path = tmp_path / "t.yaml"
    world = World(topology("flows: []", {"west": "127.0.0.1:1", "north": "127.0.0.1:3", "east": "127.0.0.1:2"}))
    world["west"].add_topic("orders", 1)
    world["north"].add_topic("orders", 1)
    board, deployer = StatusBoard(), CountingDeployer()
    backend = world.backend(fake_backend(board, deployer))
    path.write_text(TOPO.format(conf='"spark.ui.enabled": "false"'))
    assert main(["apply", str(path), "--auto-approve"], backend) == 0
    for flow, d in deployer.jobs.items():
        board.report(flow, d.spec)
    deployer.applied.clear()
    capsys.readouterr()
    return path, backend, deployer, board


def test_a_replacement_round_trips_through_a_signed_plan_file_and_replaces_the_engine_once(cli, tmp_path, capsys):
    path, backend, deployer, _ = cli
    path.write_text(TOPO.format(conf='"spark.ui.enabled": "true"'))
    out = tmp_path / "plan.json"
    assert main(["plan", str(path), "--out", str(out)], backend) == 0
    capsys.readouterr()
    doc = json.loads(out.read_text())
    [saved] = [a for a in doc["plan"]["actions"] if a["kind"].endswith(("_job", "_engine"))]
    assert saved["kind"] == "replace_engine" and [e["flow"] for e in saved["restarts"]] == ["north->east", "west->east"]
    assert saved["settings"] == [
        {"path": "engine.spark_conf.spark.ui.enabled", "old": "false", "new": "true", "sensitive": False}
    ]
    loaded = planfile.load(out)
    assert [a for a in loaded.plan.actions if isinstance(a, ReplaceEngine)] == [action_from_dict(saved)], (
        "the signed file reads back as the action planned"
    )

    assert main(["apply", str(out), str(path)], backend) == 0
    printed = capsys.readouterr().out
    assert deployer.applied == [("east", [("restart", "north->east"), ("restart", "west->east")])], "one unit"
    assert "-/+ replace engine east (local local[2]): restarts 2 flows north->east, west->east: done" in printed
    assert "Apply complete: 0 created, 1 replaced, 0 changed, 0 deleted" in printed


def test_a_saved_plan_of_the_earlier_plan_format_is_refused(cli, tmp_path, capsys):
    path, backend, deployer, _ = cli
    path.write_text(TOPO.format(conf='"spark.ui.enabled": "true"'))
    out = tmp_path / "plan.json"
    assert main(["plan", str(path), "--out", str(out)], backend) == 0
    doc = json.loads(out.read_text())
    doc["plan"]["format_version"] = 1  # what a reconciler before `replace_engine` wrote (signed with the key)
    planfile.sign(doc, planfile.signing_key())
    out.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["apply", str(out), str(path)], backend) == 1
    err = capsys.readouterr().err
    assert "plan JSON format_version 1" in err and "plan again" in err and deployer.applied == []
