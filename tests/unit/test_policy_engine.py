"""Policies (issue 48): reading policy files (every problem at FILE:LINE:COL), the Rego engine (conftest's
`deny` in OPA 1.x and 0.x syntax, libraries, structured messages), the YAML rules' selectors, the approval options,
and the risk class every action type declares."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.cli.main import main
from reconciler.plan import planfile
from reconciler.plan.actions import ACTION_TYPES
from reconciler.plan.policy_record import Approval, PolicyRecord
from reconciler.plan.risk import Risk
from reconciler.policy.engine import PolicyError, evaluate, load
from tests.plan_helpers import World, topology

KEY = "test-plan-key-0123456789abcdef"
FLOWS = """flows:
  - {source: west, target: east, topics: {include: ["orders.*"]}}"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def errors_of(*paths: str) -> list[str]:
    with pytest.raises(PolicyError) as info:
        load(list(paths))
    return [f"{d.where}: {d.message}" for d in info.value.diags.errors]


@pytest.fixture
def world() -> World:
    w = World(topology(FLOWS, extra="prune: {topics: true}"))
    w["west"].add_topic("orders.a", 3, {"retention.ms": "1000"})
    w["east"].add_topic("west.orders.gone", 1)
    return w


def judge(world: World, *paths: str, approval: Approval | None = None) -> PolicyRecord:
    return evaluate(load(list(paths)), world.plan(), world.topology, approval)


# --- risk classes ---------------------------------------------------------------------------------------------------


def test_every_action_type_declares_its_risk_class_and_the_schema_knows_them():
    schema = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "plan.schema.json").read_text())
    assert schema["$defs"]["risk"]["enum"] == [r.value for r in Risk]
    assert schema["$defs"]["actionKind"]["enum"] == [k.value for k in ACTION_TYPES]
    for kind, cls in ACTION_TYPES.items():
        assert isinstance(cls.RISK, Risk), cls.__name__
        assert schema["$defs"]["kinds"][kind.value]["properties"]["risk"] == {"const": cls.RISK.value}
    deletions = {k.value for k, c in ACTION_TYPES.items() if c.VERB.value == "-"}
    assert deletions == {k.value for k, c in ACTION_TYPES.items() if c.RISK is Risk.DELETE}


# --- reading policy files: every problem at its place ---------------------------------------------------------------


def test_yaml_rule_problems_name_file_and_line(tmp_path):
    path = write(
        tmp_path,
        "p.yaml",
        """apiVersion: reconciler/v1
kind: Policy
rules:
  - min_replication_factor: 0
  - topic_name: '(?=a)b'
  - forbid: [deleet]
  - retention_ms: {min: 10, max: 5}
  - max_partitions: 4
    min_insync_replicas: 2
  - require_approval: delete
    clusters: {env: [1]}
  - topic_nmae: x
""",
    )
    assert errors_of(path) == [
        f"{path}:4:29: min_replication_factor: 0 is not a whole number >= 1",
        f"{path}:5:17: topic_name: pattern '(?=a)b' is refused: lookahead `(?=` is not supported by the linear-time "
        "matcher; match the text itself, or move the condition into an exclude pattern (character 1 of the pattern)",
        f"{path}:6:14: forbid: 'deleet' is not a risk class",
        f"{path}:7:19: retention_ms: min 10 is above max 5",
        f"{path}:8:5: rules[4]: 2 checks (max_partitions, min_insync_replicas): one per rule; the checks: topic_name, "
        "min_replication_factor, min_insync_replicas, retention_ms, max_partitions, forbid, require_approval",
        f"{path}:11:21: clusters.env: a tag value or a list of them, not [1]",
        f"{path}:12:5: rules[6]: unknown key 'topic_nmae'",
        f"{path}:12:5: rules[6]: no check; the checks: topic_name, min_replication_factor, min_insync_replicas, "
        "retention_ms, max_partitions, forbid, require_approval",
    ]


def test_a_topology_or_broken_yaml_in_the_policy_directory_is_an_error(tmp_path):
    topo = write(tmp_path, "t.yaml", "apiVersion: reconciler/v1\nkind: Topology\nclusters: {}\n")
    broken = write(tmp_path, "b.yml", "apiVersion: reconciler/v1\nkind: Policy\nrules: [\n")
    found = errors_of(str(tmp_path))
    assert any(e.startswith(f"{topo}:2:7: not a policy") for e in found), found
    assert any(e.startswith(f"{broken}:4:1: YAML syntax error") for e in found), found
    assert errors_of(str(tmp_path / "nothing")) == [
        f"{tmp_path / 'nothing'}:1:1: --policy {tmp_path / 'nothing'}: no such file or directory"
    ]


def test_a_rego_syntax_error_names_file_line_and_column(tmp_path):
    path = write(tmp_path, "bad.rego", "package reconciler\n\ndeny contains msg if {\n    input.x == \n}\n")
    (line,) = errors_of(path)
    assert line.startswith(f"{path}:4:13: Rego: "), line


def test_an_error_in_a_library_is_reported_once_at_the_library(tmp_path):
    lib = write(tmp_path, "lib.rego", "package lib.names\n\nok(x) if {\n  x ==\n}\n")
    write(tmp_path, "a.rego", "package reconciler\nimport data.lib.names\ndeny contains 1 if { names.ok(1) }\n")
    write(tmp_path, "b.rego", "package reconciler\ndeny contains 2 if { false }\n")
    (line,) = errors_of(str(tmp_path))
    assert line.startswith(f"{lib}:4:"), line


def test_opa_test_files_are_not_policies(tmp_path):
    write(tmp_path, "p.rego", 'package reconciler\ndeny contains "x" if { false }\n')
    write(tmp_path, "p_test.rego", "package reconciler\ntest_x if { true }\nbroken ==\n")
    assert [f for f, _ in load([str(tmp_path)]).files] == [str(tmp_path / "p.rego")]


# --- Rego: conftest's rules as they are -----------------------------------------------------------------------------


REGO_V1 = """package reconciler

import rego.v1

deny contains msg if {
	some a in input.actions
	a.kind == "create_topic"
	a.role == "remote"
	not startswith(a.topic, "west.orders.")
	msg := sprintf("%s is not an orders topic", [a.topic])
}

deny contains {"msg": "deletes are reviewed", "object": sprintf("topic %s", [a.topic]), "cluster": a.cluster} if {
	some a in input.actions
	a.risk == "delete"
}

warn contains "a warning" if { data.topology.clusters.east }
"""

REGO_V0 = """package reconciler

import future.keywords.in

deny[msg] {
	a := input.actions[_]
	a.kind == "create_topic"
	a.partitions > 2
	msg := sprintf("%s has %d partitions", [a.topic, a.partitions])
}
"""


def test_rego_v1_and_v0_policies_with_structured_messages(world, tmp_path, capfd):
    record = judge(world, write(tmp_path, "v1.rego", REGO_V1), write(tmp_path, "v0.rego", REGO_V0))
    lines = [v.line_text() for v in record.violations]
    assert lines == [
        f"{tmp_path}/v0.rego [deny] west.orders.a has 3 partitions",
        f"{tmp_path}/v1.rego [deny] west.heartbeats is not an orders topic",
        f"{tmp_path}/v1.rego [deny] topic west.orders.gone on east: deletes are reviewed",
    ]
    assert [w.line_text() for w in record.warnings] == [f"{tmp_path}/v1.rego [warn] a warning"]
    assert capfd.readouterr().out == "", "the engine prints nothing of its own"


def test_rego_libraries_and_require_approval(world, tmp_path):
    write(
        tmp_path,
        "lib.rego",
        'package lib.kafka\n\nimport rego.v1\n\nproduction(c) if data.topology.clusters[c].tags.env == "prod"\n',
    )
    write(
        tmp_path,
        "rules.rego",
        "package reconciler\n\nimport rego.v1\nimport data.lib.kafka\n\n"
        'require_approval contains "delete" if { some a in input.actions; a.risk == "delete"; not kafka.production("west") }\n',
    )
    record = judge(world, str(tmp_path))
    assert record.violations == () and [(a.risk, a.object, a.cluster) for a in record.approvals_required] == [
        (Risk.DELETE, "topic west.orders.gone", "east")
    ]
    assert record.unapproved == record.approvals_required
    approved = judge(world, str(tmp_path), approval=Approval.of("alice", "2026-11-28T23:00:00+01:00"))
    assert approved.unapproved == () and approved.approval == Approval("alice", "2026-11-28T22:00:00Z")


def test_a_rule_name_both_a_set_and_an_object_is_an_error_of_its_file(world, tmp_path):
    both = write(
        tmp_path, "both.rego", 'package reconciler\ndeny[msg] if { msg := "a" }\ndeny contains "b" if { true }\n'
    )
    with pytest.raises(PolicyError) as info:
        judge(world, both)
    assert str(info.value.diags.errors[0].where).startswith(both)


# --- YAML rules: selectors ------------------------------------------------------------------------------------------


def test_yaml_selectors_by_cluster_tag_alias_and_topic(world, tmp_path):
    """(The world's clusters have no tags: a rule selecting clusters by tag judges none of them.)"""
    policy = write(
        tmp_path,
        "p.yaml",
        """apiVersion: reconciler/v1
kind: Policy
rules:
  - name: big-on-east
    max_partitions: 2
    clusters: [east]
    topics: 'west\\.orders\\..*'
  - name: big-on-west
    max_partitions: 2
    clusters: [west]
  - name: nothing-tagged-prod
    forbid: [create, delete]
    clusters: {env: prod}
  - name: retention
    retention_ms: {min: 60000}
    severity: warning
""",
    )
    record = judge(world, policy)
    assert [v.line_text() for v in record.violations] == [
        f"{policy}:5 [big-on-east] topic west.orders.a on east: 3 partitions, the policy allows at most 2"
    ]
    assert [w.line_text() for w in record.warnings] == [
        f"{policy}:15 [retention] topic west.orders.a on east: retention.ms created with 1000, the policy asks at "
        "least 60000"
    ]


# --- the command line: exit codes, approvals -------------------------------------------------------------------------


@pytest.fixture
def cli(world, tmp_path, monkeypatch):
    monkeypatch.setenv("RECONCILER_PLAN_KEY", KEY)
    path = tmp_path / "topology.yaml"
    path.write_text(
        "apiVersion: reconciler/v1\nkind: Topology\nmetadata: {name: test}\nclusters:\n"
        '  west: {bootstrap_servers: "127.0.0.1:1", replication_principal: "User:mirror"}\n'
        '  east: {bootstrap_servers: "127.0.0.1:2", replication_principal: "User:mirror"}\n'
        f"prune: {{topics: true}}\n{FLOWS}\n"
    )
    policy = write(
        tmp_path, "approve.yaml", "apiVersion: reconciler/v1\nkind: Policy\nrules:\n  - require_approval: [delete]\n"
    )

    def run(*argv: str) -> int:
        return main(list(argv), world.backend())

    return run, str(path), policy, tmp_path


def test_policy_file_errors_exit_1_before_any_cluster_is_read(cli, capsys, world):
    run, topo, _, tmp_path = cli
    bad = write(tmp_path, "bad.yaml", "apiVersion: reconciler/v1\nkind: Policy\nrules:\n  - forbid: [nope]\n")
    world["east"].reachable = False  # never asked
    assert run("plan", topo, "--policy", bad) == 1
    err = capsys.readouterr().err
    assert f"{bad}:4:14: error: forbid: 'nope' is not a risk class" in err
    assert "1 error in the policies; nothing was saved or applied" in err


@pytest.mark.parametrize(
    "argv,says",
    [
        (["--approved-by", "alice"], "--approved-by is recorded in a saved plan: give --out FILE"),
        (["--approved-at", "2026-01-01T00:00:00Z"], "--approved-at needs --approved-by"),
        (["--out", "{tmp}/p.json", "--approved-by", "alice", "--approved-at", "yesterday"], "is not an ISO 8601 time"),
        (["--out", "{tmp}/p.json", "--approved-by", "alice", "--approved-at", "2026-01-01T00:00:00"], "has no offset"),
        (["--out", "{tmp}/p.json", "--approved-by", " "], "give who approved the plan"),
        (["--out", "{tmp}/p.json", "--approved-by", "a\x1b[31mb"], "printable characters"),
    ],
)
def test_approval_options_are_checked(cli, capsys, argv, says):
    run, topo, policy, tmp_path = cli
    assert run("plan", topo, "--policy", policy, *[a.format(tmp=tmp_path) for a in argv]) == 1
    assert says in capsys.readouterr().err
    assert not (tmp_path / "p.json").exists()


def test_an_approval_cannot_be_added_to_a_saved_plan_afterwards(cli, capsys, world):
    run, topo, policy, tmp_path = cli
    out = tmp_path / "p.json"
    assert run("plan", topo, "--policy", policy, "--out", str(out)) == 0
    doc = json.loads(out.read_text())
    assert doc["format_version"] == planfile.FORMAT_VERSION == 3
    doc["plan"]["policy"]["approval"] = {"by": "mallory", "at": "2026-11-28T22:00:00Z"}
    out.write_text(json.dumps(doc))
    before = sorted(world["east"].topics)
    capsys.readouterr()
    assert run("apply", str(out), topo) == 1
    assert "signature does not verify" in capsys.readouterr().err
    doc["plan"]["policy"] = None  # nor can the requirement be removed
    out.write_text(json.dumps(doc))
    assert run("apply", str(out), topo) == 1 and sorted(world["east"].topics) == before


def test_show_prints_the_policy_record_of_a_saved_plan(cli, capsys):
    run, topo, policy, tmp_path = cli
    out = tmp_path / "p.json"
    assert run("plan", topo, "--policy", policy, "--out", str(out), "--approved-by", "bob") == 0
    capsys.readouterr()
    assert run("show", str(out)) == 0
    text = capsys.readouterr().out
    assert "1 change needing an approval (approved by bob at" in text
    assert run("show", str(out), "--format", "json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["policy"]["approval"]["by"] == "bob" and doc["saved"]["verified"] is True
