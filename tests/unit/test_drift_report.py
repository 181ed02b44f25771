"""Drift reports on the memory double: every kind of drift, grouping by cluster and flow, job and SLO
checks, applied revisions, the JSON shape, the renderers, and the `drift` command's exit codes.

ACL drift and partition increases are tested here because the embedded Tansu brokers have neither
ACL APIs nor CreatePartitions (the double obeys the same contract tests as the Kafka adapter)."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from types import SimpleNamespace

import pytest

from reconciler.cli.main import main
from reconciler.contract.spec import JobSpec
from reconciler.contract.status import FaultKind
from reconciler.drift.report import (
    FAULT_HINTS,
    SLO_CHECKS,
    Category,
    Level,
    SloKind,
    build_report,
    heartbeat_topic,
)
from reconciler.jobplan.state import JobState, classify
from reconciler.mirror.records import Heartbeat
from reconciler.plan.actions import Action, Phase, Plan, Verb
from reconciler.plan.reasons import ReasonKind
from reconciler.plan.risk import Risk
from reconciler.render import drift_html, drift_markdown, drift_text
from reconciler.state.live import AclBinding
from reconciler.state.live import AclOperation as Op
from reconciler.state.live import AclPermission as Perm
from reconciler.topology.model import Slo
from tests.plan_helpers import World, topology

NOW = 1_800_000_000_000
FLOWS = """flows:
  - {source: west, target: east, topics: {include: ["orders", "pay.*"]}}
  - {source: east, target: west, topics: {include: ["audit"]}}
"""
SLO = "slo: {max_lag_records: 1000, max_lag_seconds: 60, max_heartbeat_age_seconds: 30, max_latency_p99_ms: 500}"


def spec_hash(topo, flow: str) -> str:
    return JobSpec.from_flow(topo, topo.flow(flow)).spec_hash()


def healthy(topo, flow: str, **overrides) -> dict:
    return {
        "flow": flow,
        "state": "running",
        "heartbeat_at": NOW - 2_000,
        "spec_hash": spec_hash(topo, flow),
        "records": 10,
        "lag_total": 0,
        "latency_ms": {"p50": 5.0, "p95": 9.0, "p99": 12.0, "samples": 9},
        "errors": 0,
        **overrides,
    }


def beats(topo, age_ms: int = 1_000) -> dict:
    out: dict = {}
    for f in topo.active_flows:
        out.setdefault(f.target, {})[heartbeat_topic(f)] = Heartbeat(f.source, f.target, NOW - age_ms)
    return out


def report_of(w: World, topo=None, statuses=None, hb=None, applied=None, **kw):
    topo = topo or w.topology
    live = w.live()
    plan = w.plan(topo)
    statuses = statuses if statuses is not None else {f.name: healthy(topo, f.name) for f in topo.active_flows}
    return build_report(
        topo,
        live,
        plan,
        job_statuses=statuses,
        heartbeats=hb if hb is not None else beats(topo),
        applied=applied or {},
        now_ms=NOW,
        **kw,
    )


@pytest.fixture
def world() -> World:
    w = World(topology(FLOWS, extra=SLO))
    w["west"].add_topic("orders", 3, {"retention.ms": "1000"})
    w["west"].add_topic("payments", 2)
    w["east"].add_topic("audit", 1)
    w["west"].acls.add(AclBinding("orders", "User:alice", "*", Op.READ, Perm.ALLOW))
    assert w.apply(w.plan()).ok
    return w


def flow_of(report, name: str):
    return next(f for f in report.flows if f.name == name)


def kinds(report) -> set[tuple[str, str, str]]:
    return {(i.category.value, i.cluster, i.subject) for i in report.drift}


def test_in_sync_is_no_drift(world):
    report = report_of(world)
    assert report.drift == [] and report.errors == [] and report.status() == "in-sync"
    assert [f.status for f in report.flows] == ["ok", "ok"]
    assert report.headline().startswith("No drift")
    assert {i.category for i in report.notes} >= {Category.REVISION}  # "no apply recorded" notes


def test_topic_config_partition_and_acl_drift(world):
    east = world["east"]
    del east.topics["west.payments"]  # missing remote topic
    east.topics["west.orders"].configs["retention.ms"] = "5"  # config drift
    east.topics["west.orders"].configs["segment.ms"] = "100"  # a key the source does not set (kept)
    world["west"].topics["orders"].partitions = 4  # source grew: partitions to add
    east.acls.discard(AclBinding("west.orders", "User:alice", "*", Op.READ, Perm.ALLOW))  # ACL removed by hand
    east.acls.add(AclBinding("west.orders", "User:mallory", "*", Op.WRITE, Perm.ALLOW))  # foreign writer
    east.add_topic("west.legacy", 1)  # no flow wants it
    east.add_topic("north.checkpoints.internal", 1)  # MM2 leftovers of no flow
    report = report_of(world)
    assert kinds(report) == {
        ("missing-topic", "east", "west.payments"),
        ("config", "east", "west.orders"),
        ("partitions", "east", "west.orders"),
        ("acl", "east", "west.orders"),
        ("unmanaged", "east", "west.legacy"),
        ("unmanaged", "east", "north.checkpoints.internal"),
    }
    configs = sorted(((i.verb or ""), i.message) for i in report.drift if i.category is Category.CONFIG)
    assert configs[0][0] == "" and "sets segment.ms='100', which west:orders does not; kept" in configs[0][1]
    assert configs[1][0] == "~"
    acl = [i for i in report.drift if i.category is Category.ACL]
    assert {i.verb for i in acl} == {"+", None}  # the missing READ is an action, the writer a security finding
    assert all(i.flows == ("west->east",) for i in report.drift if i.subject.startswith("west."))
    grouped = report.by_cluster()["east"]
    assert {i.subject for i in grouped["west->east"]} >= {"west.payments", "west.orders", "west.legacy"}
    assert [i.subject for i in grouped[""] if i.level is Level.DRIFT] == ["north.checkpoints.internal"]
    assert flow_of(report, "west->east").status == "drift" and flow_of(report, "east->west").status == "ok"


def test_extra_topics_with_prune_and_impossible_partitions(world):
    topo = topology(FLOWS, extra=SLO + "\nprune: {topics: true, acls: true}")
    world["east"].add_topic("west.gone", 2)
    world["east"].topics["west.payments"].partitions = 5  # more than the source: impossible
    report = report_of(world, topo)
    assert ("extra-topic", "east", "west.gone") in kinds(report)
    item = next(i for i in report.drift if i.subject == "west.gone")
    assert item.verb == "-" and item.action["kind"] == "delete_topic" and item.flows == ("west->east",)
    assert ("partitions", "east", "west.payments") in kinds(report)


def test_job_drift(world):
    topo = world.topology
    cases = {
        "no status": None,
        "stopped": healthy(topo, "west->east", state="failed", last_error="boom"),
        "stale": healthy(topo, "west->east", heartbeat_at=NOW - 600_000),
        "old spec": healthy(topo, "west->east", spec_hash="0" * 64, git_revision="c0ffee" * 6),
        "degraded": healthy(topo, "west->east", state="degraded", halted=["orders:1"]),
        "unreachable": healthy(
            topo,
            "west->east",
            state="degraded",
            lag_total=None,
            faults=[
                {
                    "topic": "orders",
                    "partition": 0,
                    "kind": "source-unreachable",
                    "reason": "the source cluster west has not answered the job for 40 s (last error: timed out)",
                    "offset": 7,
                    "since": 1_700_000_000_000,
                }
            ],
        ),
        "refused": healthy(
            topo,
            "west->east",
            state="degraded",
            halted=["orders:1"],
            faults=[
                {
                    "topic": "orders",
                    "partition": 1,
                    "kind": "refused-record",
                    "reason": "record at offset 50 refused by the target: too large",
                    "offset": 50,
                    "since": 1_700_000_000_000,
                }
            ],
        ),
    }
    words = {
        "no status": "not running: no status record on east",
        "stopped": "is down: state failed; last error: boom",
        "stale": "is not reporting: last status 600s ago",
        "old spec": "runs an old spec (000000000000",
        "degraded": "is degraded: 1 partition(s) not copied: orders:1",
        "refused": "is degraded: 1 partition(s) not copied: orders:1 (refused-record since 2023-11-14T22:13:20Z: "
        "record at offset 50 refused by the target: too large)",
        "unreachable": "is degraded: 1 partition(s) not copied: orders:0 (source-unreachable since "
        "2023-11-14T22:13:20Z: the source cluster west has not answered the job for 40 s",
    }
    for case, status in cases.items():
        statuses = {"east->west": healthy(topo, "east->west")}
        if status is not None:
            statuses["west->east"] = status
        report = report_of(world, statuses=statuses)
        jobs = [i for i in report.drift if i.category is Category.JOB]
        assert len(jobs) == 1 and jobs[0].flows == ("west->east",) and jobs[0].cluster == "east", case
        assert words[case] in jobs[0].message, (case, jobs[0].message)
        if case == "refused":
            assert "on_refused_record: skip" in (jobs[0].hint or ""), jobs[0].hint
        if case == "unreachable":  # a degraded job is drift (non-zero exit) with the fault's hint; its lag unknown
            assert jobs[0].level is Level.DRIFT and "cannot reach the source cluster" in (jobs[0].hint or "")
            assert flow_of(report, "west->east").job.last.lag_total is None
    flow = flow_of(report, "west->east")
    assert flow.job.last.halted == ("orders:1",) and flow.job.running


def test_every_fault_kind_has_a_hint():
    assert set(FAULT_HINTS) == set(FaultKind)


def test_every_verdict_has_its_items_and_every_slo_kind_its_check():
    from reconciler.drift.report.job_items import _BY_VERDICT

    assert set(_BY_VERDICT) == set(JobState)
    assert set(SLO_CHECKS) == set(SloKind)
    assert {k.value for k in SloKind} <= {f.name for f in fields(Slo)}


def test_drift_finds_a_job_stale_by_the_rule_plan_and_status_use(world):
    # One threshold: a record 20 s old is stale for plan and status (three 3 s intervals, at least 15 s), so
    # drift says so too (its own 60 s default is gone); --job-stale-seconds still overrides it when given.
    topo = world.topology
    statuses = {f.name: healthy(topo, f.name) for f in topo.active_flows}
    statuses["west->east"] = healthy(topo, "west->east", heartbeat_at=NOW - 20_000)
    jobs = [i for i in report_of(world, statuses=statuses).drift if i.category is Category.JOB]
    assert [i.flows for i in jobs] == [("west->east",)]
    assert "is not reporting: last status 20s ago" in jobs[0].message and "limit 15s" in jobs[0].message
    assert classify("west->east", statuses["west->east"], None, NOW)[0] is not JobState.ELSEWHERE, "plan agrees"
    lenient = report_of(world, statuses=statuses, job_stale_seconds=60.0)
    assert [i for i in lenient.drift if i.category is Category.JOB] == []


def test_slo_lag_latency_and_heartbeat_age(world):
    topo = world.topology
    statuses = {
        "west->east": healthy(topo, "west->east", lag_total=5_400),
        "east->west": healthy(topo, "east->west", latency_ms={"p99": 900.0}),
    }
    hb = beats(topo)
    hb["east"]["west.heartbeats"] = Heartbeat("west", "east", NOW - 95_000)
    report = report_of(world, statuses=statuses, hb=hb)
    assert {(i.category.value, i.flows) for i in report.drift} == {
        ("lag", ("west->east",)),
        ("heartbeat", ("west->east",)),
        ("latency", ("east->west",)),
    }
    text = {i.category.value: i.message for i in report.drift}
    assert "5,400 records behind (SLO 1,000)" in text["lag"] and "95.0s old (SLO 30s)" in text["heartbeat"]
    assert "p99 record age 900 ms (SLO max_latency_p99_ms 500 ms)" in text["latency"]
    assert flow_of(report, "west->east").heartbeat_age_seconds == 95.0
    assert flow_of(report, "west->east").job.last.lag_total == 5_400
    # without SLOs nothing is judged
    plain = report_of(world, topology(FLOWS), statuses=statuses, hb=hb)
    assert plain.drift == []


def test_slo_lag_in_seconds(world):
    # few records behind but the oldest of them waits long: a breach of max_lag_seconds only
    topo = world.topology
    statuses = {
        "west->east": healthy(topo, "west->east", lag_total=40, lag_seconds=95.5),
        "east->west": healthy(topo, "east->west", lag_total=40, lag_seconds=59.0),
    }
    report = report_of(world, statuses=statuses, hb=beats(topo))
    assert [(i.category.value, i.flows) for i in report.drift] == [("lag-age", ("west->east",))]
    assert "oldest record not replicated yet is 95.5s old (SLO max_lag_seconds 60s)" in report.drift[0].message
    assert flow_of(report, "west->east").job.last.lag_seconds == 95.5
    assert report.slo["max_lag_seconds"] == 60


def test_missing_heartbeat_and_unreadable_status():
    w = World(topology(FLOWS, extra=SLO))
    w["west"].add_topic("orders", 1)
    w.apply(w.plan())
    report = report_of(w, statuses={}, hb={"east": {}, "west": {}}, job_status_errors={"west": "timed out"})
    msgs = [i.message for i in report.items]
    assert any("no heartbeat from west in east:west.heartbeats" in m for m in msgs)
    err = [i for i in report.errors]
    assert len(err) == 1 and err[0].flows == ("east->west",) and "timed out" in err[0].message
    assert report.status() == "error"


def test_unreachable_cluster_is_an_error(world):
    world["east"].reachable = False
    report = report_of(world)
    assert report.status() == "error"
    assert any(i.category is Category.CLUSTER and i.cluster == "east" for i in report.errors)
    assert next(c for c in report.clusters if c.alias == "east").status == "error"


@dataclass(frozen=True)
class DeployJob(Action):
    """Stands in for the job issue's actions: a kind the drift code has never heard of, subject = flow; drift
    goes by its typed reason kind."""

    KIND = SimpleNamespace(value="deploy_job")  # type: ignore[assignment]
    REASON_KIND = ReasonKind.JOB_MISSING
    PHASE = Phase.ACL
    VERB = Verb.CREATE
    RISK = Risk.CREATE
    flow: str = ""

    @property
    def subject(self) -> str:
        return self.flow

    def describe(self) -> str:
        return f"deploy job {self.flow}"


def test_job_actions_of_the_plan_are_job_drift(world):
    live = world.live()
    plan = world.plan()
    plan = Plan(
        [*plan.actions, DeployJob("east", "no job runs flow west->east", "west->east")],
        plan.findings,
        plan.clusters,
        plan.scope,
        plan.fingerprint,
        plan.topology,
    )
    report = build_report(world.topology, live, plan, job_statuses={}, heartbeats=beats(world.topology), now_ms=NOW)
    jobs = [i for i in report.drift if i.category is Category.JOB and "west->east" in i.flows]
    assert [(i.verb, i.message, i.action["kind"]) for i in jobs] == [("+", "deploy job west->east", "deploy_job")], (
        "the action replaces the status-derived 'not running' item"
    )
    assert any(i.category is Category.JOB and i.flows == ("east->west",) and i.verb is None for i in report.drift)


def test_applied_revision_is_reported(world):
    applied = {
        "east": {
            "fingerprint": "sha256:x",
            "revision": "a" * 40,
            "at": NOW / 1000 - 60,
            "who": "ci@runner",
            "clusters": ["east", "west"],
            "actions": 3,
            "git": {
                "commit": "a" * 40,
                "short": "aaaaaaa",
                "author": "Alice",
                "email": "a@x",
                "time_iso": "2026-01-05T10:00:00+01:00",
                "message_subject": "add payments",
                "dirty": False,
            },
        },
        "west": {"revision": "b" * 40 + "-dirty", "at": NOW / 1000},
    }  # an older record: no `git`
    report = report_of(world, applied=applied, revision={"commit": "c" * 40, "short": "ccccccc"})
    east, west = (next(c for c in report.clusters if c.alias == a) for a in ("east", "west"))
    assert east.applied["short"] == "aaaaaaa" and east.applied["author"] == "Alice" and not east.applied["dirty"]
    assert east.applied["clusters"] == ["east", "west"] and east.applied["applied_at"].endswith("Z")
    assert west.applied["commit"] == "b" * 40 and west.applied["dirty"] is True
    notes = [i.message for i in report.notes if i.category is Category.REVISION]
    assert any(
        "east was last reconciled to aaaaaaa by ci@runner" in m and "topology checked is at ccccccc" in m for m in notes
    )


def test_json_shape(world):
    del world["east"].topics["west.payments"]
    doc = json.loads(drift_text.render_json(report_of(world)))
    assert set(doc) == {
        "format_version",
        "kind",
        "topology",
        "environment",
        "generated_at",
        "revision",
        "status",
        "summary",
        "slo",
        "plan",
        "clusters",
        "flows",
        "items",
    }
    assert doc["status"] == "drift" and doc["summary"]["by_category"] == {"missing-topic": 1}
    item = next(i for i in doc["items"] if i["level"] == "drift")
    assert set(item) == {
        "category",
        "level",
        "cluster",
        "flows",
        "subject",
        "message",
        "hint",
        "verb",
        "reason",
        "action",
    }
    assert item["action"]["kind"] == "create_topic" and item["flows"] == ["west->east"]
    flow = doc["flows"][0]
    assert (
        flow["flow"] == "west->east" and flow["job"]["spec_current"] is True and flow["heartbeat"]["age_seconds"] == 1.0
    )


def test_text_markdown_and_html(world):
    world["east"].topics["west.orders"].configs["retention.ms"] = "5"
    report = report_of(world, statuses={})
    text = drift_text.render(report)
    assert "cluster east: DRIFT" in text and "  flow west->east:" in text
    assert "    ! config        ~ set config retention.ms on west.orders: '5' -> '1000'" in text
    assert "        # west:orders sets retention.ms=1000" in text
    md = drift_markdown.render(report)
    assert md.startswith("### Drift report: `test`") and "#### Cluster `east`" in md and "| `west->east` |" in md
    html = drift_html.render(report, world.topology)
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html and "flow flow-drift" in html
    assert "<script" not in html and "<link" not in html and "@import" not in html
    assert [u for u in __import__("re").findall(r"(?:https?:)?//[\w.-]+", html) if "www.w3.org" not in u] == []


# --- the command ------------------------------------------------------------------------------------

TOPO = """apiVersion: reconciler/v1
kind: Topology
metadata: {name: cli}
clusters:
  west: {bootstrap_servers: "127.0.0.1:1", replication_principal: "User:mirror"}
  east: {bootstrap_servers: "127.0.0.1:2", replication_principal: "User:mirror"}
flows:
  - {source: west, target: east, topics: {include: ["orders"]}}
"""


@pytest.fixture
def cli(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(TOPO)
    w = World(topology('flows:\n  - {source: west, target: east, topics: {include: ["orders"]}}'))
    w["west"].add_topic("orders", 2)
    from reconciler.topology.build import load_topology

    topo, _ = load_topology([path])
    w.statuses = {"west->east": healthy(topo, "west->east")}
    w.cli = w.backend(
        status_reader=lambda cluster: dict(w.statuses),
        heartbeat_reader=lambda cluster, policy: beats(topo).get(cluster.alias, {}),
        clock=lambda: NOW / 1000,
    )
    w.path = str(path)
    return w


def test_drift_command_exit_codes_and_outputs(cli, capsys, tmp_path):
    assert main(["drift", cli.path], cli.cli) == 2  # nothing applied yet: missing topics
    assert "missing-topic" in capsys.readouterr().out
    assert main(["apply", cli.path, "--auto-approve"], cli.cli) == 0
    capsys.readouterr()
    assert main(["drift", cli.path], cli.cli) == 0
    assert "No drift" in capsys.readouterr().out
    cli.statuses = {}
    assert main(["drift", cli.path, "--format", "json"], cli.cli) == 2
    assert json.loads(capsys.readouterr().out)["summary"]["by_category"] == {"job": 1}
    assert main(["drift", cli.path, "--no-jobs"], cli.cli) == 0
    capsys.readouterr()
    outs = [tmp_path / "r.html", tmp_path / "r.md", tmp_path / "r.json"]
    assert main(["drift", cli.path, *[a for p in outs for a in ("--out", str(p))]], cli.cli) == 2
    out = capsys.readouterr().out
    assert out.startswith("Drift report for topology cli")
    assert outs[0].read_text().startswith("<!DOCTYPE html>") and outs[1].read_text().startswith("### Drift report")
    assert json.loads(outs[2].read_text())["status"] == "drift"
    cli["east"].reachable = False
    assert main(["drift", cli.path], cli.cli) == 1
    assert "could not be read" in capsys.readouterr().out
