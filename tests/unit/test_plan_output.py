"""Renderers, the JSON shape, saved plans and their staleness check, and secrets never leaking."""

import json

import pytest

from reconciler.plan import planfile
from reconciler.plan.actions import ACTION_TYPES, FORMAT_MINOR, FORMAT_VERSION, ActionKind, Plan
from reconciler.render import plan_json, plan_markdown, plan_text
from reconciler.state.live import AclBinding
from reconciler.state.live import AclOperation as Op
from reconciler.state.live import AclPermission as Perm
from reconciler.textutil import md_inline
from tests.plan_helpers import World, topology

FLOW = """flows:
  - source: west
    target: east
    topics: {include: ["orders"]}
"""


@pytest.fixture
def world():
    w = World(topology(FLOW, extra="prune: {topics: true}"))
    w["west"].add_topic("orders", 3, {"retention.ms": "1000"})
    w["west"].acls.add(AclBinding("orders", "User:alice", "*", Op.READ, Perm.ALLOW))
    w["east"].add_topic("west.gone", 1)
    return w


def test_text_is_terraform_like(world):
    text = plan_text.render(world.plan())
    assert "cluster east:" in text and "  + create topic west.orders (3 partitions" in text
    assert "        retention.ms = 1000" in text and "      # replicates west:orders (flow west->east)" in text
    assert "  - DELETE topic west.gone" in text and "WARNING: this plan DELETES 1 thing" in text
    assert text.rstrip().endswith("Plan: 8 to create, 0 to change, 1 to delete.")


def test_json_shape_and_round_trip(world):
    plan = world.plan()
    doc = json.loads(plan_json.render(plan))
    assert doc["format_version"] == FORMAT_VERSION and doc["summary"]["changes"] is True
    assert set(doc) == {
        "format_version",
        "format_minor",
        "topology",
        "environment",
        "clusters",
        "fingerprint",
        "summary",
        "actions",
        "findings",
        "permissions",
    }
    assert doc["permissions"] == []  # no cluster of the world enforces ACLs (test_permissions.py)
    assert doc["environment"] is None  # a topology without environments (test_environments.py)
    assert doc["format_minor"] == FORMAT_MINOR and all("reason_kind" in x for x in doc["actions"] + doc["findings"])
    assert all(x["risk"] == ACTION_TYPES[ActionKind(x["kind"])].RISK.value for x in doc["actions"])
    create = next(a for a in doc["actions"] if a["kind"] == "create_topic" and a["topic"] == "west.orders")
    assert create == {
        "kind": "create_topic",
        "verb": "+",
        "cluster": "east",
        "reason": create["reason"],
        "topic": "west.orders",
        "partitions": 3,
        "replication_factor": -1,
        "configs": {"retention.ms": "1000"},
        "role": "remote",
        "description": create["description"],
        "reason_kind": "topic-missing",
        "risk": "create",
    }
    acl = next(a for a in doc["actions"] if a["kind"] == "create_acl")
    assert set(acl["acl"]) == {"topic", "principal", "host", "operation", "permission", "pattern"}
    again = Plan.from_dict(plan.to_dict(include_scope=True))
    assert again.to_dict(include_scope=True) == plan.to_dict(include_scope=True)


def test_markdown_for_pull_requests(world):
    md = plan_markdown.render(world.plan())
    assert md.startswith("### Reconciler plan: `test`") and "```diff" in md and "> [!CAUTION]" in md
    assert "- DELETE topic west.gone" in md


def test_markdown_destructive_first_warnings_and_mermaid(world):
    from reconciler.topology.diagnostics import Diagnostic, SourceLocation
    from reconciler.topology.diagnostics import Severity as DSeverity

    warning = Diagnostic(
        DSeverity.WARNING,
        "diamond: records reach east twice",
        SourceLocation("flows.yaml", 7, 5),
        hint="narrow a filter",
    )
    md = plan_markdown.render(
        world.plan(), topology=world.topology, warnings=[warning], preface="**Changes since `main`**"
    )
    order = [
        md.index(s)
        for s in (
            "**Plan: 8 to create",
            "**Changes since `main`**",
            "> [!CAUTION]",
            "#### 🛑 Destructive changes (1)",
            "- DELETE topic west.gone",
            "#### Other changes (8)",
            "+ create topic west.orders",
            "#### Validation warnings (1)",
            "```mermaid",
        )
    ]
    assert order == sorted(order)
    assert md.count("DELETE topic west.gone") == 1, "each action once"
    assert f"`flows.yaml:7:5` {md_inline('diamond: records reach east twice')} _(narrow a filter)_" in md
    assert 'west -->|"orders (default)"| east' in md


def test_markdown_always_fits_a_github_comment(world):
    for i in range(3000):
        world["west"].add_topic(f"orders.{i:05d}-with-a-rather-long-name-to-fill-the-comment", 1)
    topo = topology(FLOW.replace('"orders"', '"orders.*"'))
    md = plan_markdown.render(world.plan(topo), topology=topo)
    assert len(md) <= plan_markdown.MAX_CHARS and "more actions" in md and "```mermaid" in md


def test_markdown_is_cut_for_huge_plans(world):
    for i in range(50):
        world["west"].add_topic(f"orders{i}", 1)
    topo = topology(FLOW.replace('"orders"', '"orders.*"'))
    md = plan_markdown.render(world.plan(topo), max_actions=10)
    assert "more actions" in md


KEY = planfile.PlanKey("RECONCILER_PLAN_KEY", "test-plan-key-0123456789abcdef")


def test_saved_plan_round_trip_and_staleness(world, tmp_path):
    plan = world.plan()
    path = tmp_path / "plan.json"
    planfile.save(path, plan, world.topology, KEY, revision="abc123")
    assert planfile.is_plan_file(path) and not planfile.is_plan_file(tmp_path)
    saved = planfile.load(path, [KEY])
    assert saved.revision == "abc123" and saved.plan.to_dict() == plan.to_dict()
    assert saved.topology_digest == world.topology.content_digest and saved.key_id == KEY.id
    assert "clusters" not in json.loads(path.read_text()), "no connection settings in a saved plan"
    assert planfile.stale_reason(saved.plan, world.live()) is None
    world["east"].add_topic("totally-unrelated", 1)  # outside the plan's scope: still fresh
    assert planfile.stale_reason(saved.plan, world.live()) is None
    world["west"].topics["orders"].configs["retention.ms"] = "7"  # inside: stale
    assert "run `reconciler plan` again" in planfile.stale_reason(saved.plan, world.live())


def test_damaged_or_foreign_plan_files_are_refused(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"kind": "something-else"}')
    with pytest.raises(planfile.PlanFileError):
        planfile.load(p)
    p.write_text('{"kind": "reconciler-saved-plan", "format_version": 99}')
    with pytest.raises(planfile.PlanFileError, match="format_version"):
        planfile.load(p, [KEY])
    p.write_text('{"kind": "reconciler-saved-plan", "format_version": 1, "clusters": {}}')
    with pytest.raises(planfile.PlanFileError, match="from an earlier reconciler.*plan again"):
        planfile.load(p, [KEY])


def test_secrets_never_reach_plans_or_saved_plans(tmp_path, monkeypatch):
    monkeypatch.setenv("EAST_SASL_PASSWORD", "hunter2-very-secret")
    topo_text = (
        """apiVersion: reconciler/v1
kind: Topology
clusters:
  west: {bootstrap_servers: "127.0.0.1:1"}
  east:
    bootstrap_servers: "127.0.0.1:2"
    config: {sasl.username: mirror, sasl.password: "${EAST_SASL_PASSWORD}"}
"""
        + FLOW
    )
    from reconciler.topology.build import load_topology_text

    topo = load_topology_text(topo_text)
    w = World(topo)
    w["west"].add_topic("orders", 1)
    plan = w.plan()
    path = tmp_path / "plan.json"
    planfile.save(path, plan, topo, KEY)
    outputs = [plan_text.render(plan), plan_json.render(plan), plan_markdown.render(plan), path.read_text()]
    assert all("hunter2" not in o for o in outputs)
    assert "EAST_SASL_PASSWORD" not in path.read_text(), "no connection settings, not even references"


def test_summary_of_a_plan_with_errors_does_not_claim_a_match(world):
    world["west"].reachable = False
    plan = world.plan()
    assert plan.summary_line().startswith("Plan incomplete") and "1 error" in plan.summary_line()


def test_every_action_and_finding_says_what_it_is_about_as_a_type():
    from reconciler.plan.actions import ACTION_TYPES
    from reconciler.plan.findings import Finding, FindingKind, Severity
    from reconciler.plan.job_actions import RestartJob
    from reconciler.plan.reasons import ReasonKind

    assert all("REASON_KIND" in vars(cls) for cls in ACTION_TYPES.values()), "each action kind names its default"
    down = RestartJob("east", "the job is failed: exit 1", flow="west->east", why=ReasonKind.JOB_DOWN)
    assert down.reason_kind is ReasonKind.JOB_DOWN and down.to_dict()["reason_kind"] == "job-down"
    assert "why" not in down.to_dict() and RestartJob.from_dict(down.to_dict()) == down
    old = {k: v for k, v in down.to_dict().items() if k != "reason_kind"}  # a plan saved before minor 1
    assert RestartJob.from_dict(old).reason_kind is ReasonKind.JOB_STALE_SPEC
    f = Finding(
        Severity.INFO, FindingKind.PRUNE_DISABLED, "east", "t", "ACL x is not granted; kept", why=ReasonKind.ACL
    )
    assert Finding.from_dict(f.to_dict()) == f and f.to_dict()["reason_kind"] == "acl"
    assert Finding(Severity.ERROR, FindingKind.UNREACHABLE, "east", "", "down").reason_kind is ReasonKind.CLUSTER
