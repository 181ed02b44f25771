"""The example policies of policies/examples/ (issue 48), each judged with its good and its bad topology
(policies/examples/topologies/NAME/) in the memory world of tests/policy_helpers.py:

- a policy that forbids: `plan --policy` of the good topology exits 0 with no violation; of the bad one exits 3,
  one line per violation naming the rule (file, line, name) and the object, and saves nothing;
- a policy that asks an approval: the bad topology's plan exits 0 and lists the changes needing one; `apply` of the
  topology, and of a saved plan without an approval, exits 3 and changes nothing; the same plan saved with
  `--approved-by` is applied.
"""

from __future__ import annotations

import json

import pytest

from reconciler.cli.main import main
from reconciler.plan.policy_record import PolicyFinding
from tests.policy_helpers import EXAMPLES, ROOT, example_backend, example_world

KEY = "test-plan-key-0123456789abcdef"
HINT_RF = "replication factor: the broker's default, which the plan does not know; the policy asks at least 3 (set the flow's replication_factor)"

#: example -> the lines of its bad topology's plan: `x` a violation, `?` a change needing an approval
BAD: dict[str, list[str]] = {
    "topic-names": [
        "x policies/examples/topic-names.yaml:9 [lowercase-dotted] topic west.orders.Refunds on east: the name does "
        "not match '[a-z0-9]+(\\.[a-z0-9-]+)*'",
    ],
    "min-replication-factor": [
        f"x policies/examples/min-replication-factor.yaml:9 [replication-factor-in-production] topic {topic}: {HINT_RF}"
        for topic in (
            "west.checkpoints.internal on east",
            "west.heartbeats on east",
            "west.payments.pii on east",
            "heartbeats on west",
            "mm2-offset-syncs.east.internal on west",
        )
    ],
    "min-insync-replicas": [
        "x policies/examples/min-insync-replicas.yaml:9 [min-insync-replicas-in-production] topic west.clicks on east: "
        "min.insync.replicas created with 1, the policy asks at least 2",
        "x policies/examples/min-insync-replicas.yaml:9 [min-insync-replicas-in-production] topic west.payments.pii on "
        "east: min.insync.replicas not set: the broker's default applies; the policy asks at least 2",
    ],
    "retention-bounds": [
        "x policies/examples/retention-bounds.yaml:8 [retention-1d-to-30d] topic west.audit on east: retention.ms "
        "created with -1 (kept forever), the policy asks at most 2592000000",
        "x policies/examples/retention-bounds.yaml:8 [retention-1d-to-30d] topic west.clicks on east: retention.ms "
        "created with 3600000, the policy asks at least 86400000",
    ],
    "no-delete-in-production": [
        "x policies/examples/no-delete-in-production.yaml:8 [no-delete-in-production] topic west.legacy on east: a "
        "delete change is forbidden here: DELETE topic west.legacy (1 partitions, all its records)",
    ],
    "approve-deletes": [
        "? policies/examples/approve-deletes.yaml:8 [approve-deletes] topic west.legacy on east: a delete change "
        "needs an approval: DELETE topic west.legacy (1 partitions, all its records)",
    ],
    "exactly-once-into-production": [
        "x policies/examples/exactly-once-into-production.rego [deny] flow west->east on east: delivers "
        "at-least-once into production; set delivery: exactly-once",
    ],
    "pii-stays-in-eu": [
        "x policies/examples/pii-stays-in-eu.rego [deny] topic west.payments.pii on lab (region us): personal data "
        "stays in the EU",
    ],
    "max-partitions": [
        "x policies/examples/max-partitions.rego [deny] topic west.clicks on east would have 96 partitions, more "
        "than 48",
    ],
    "acl-no-wildcard-principal": [
        "x policies/examples/acl-no-wildcard-principal.rego [deny] create ACL ALLOW User:* READ on topic "
        "west.orders.created on east would let every principal READ topic west.orders.created",
    ],
    "approve-partition-growth": [
        "? policies/examples/approve-partition-growth.rego [require_approval] topic west.orders.created on east: a "
        "grow change needs an approval: add partitions to west.orders.created: 3 -> 6",
    ],
    "no-retention-decrease": [
        "x policies/examples/no-retention-decrease.rego [deny] west.orders.created on east: retention.ms 2592000000 "
        "-> 604800000 would shorten retention",
    ],
}
APPROVALS = sorted(name for name, lines in BAD.items() if lines[0].startswith("?"))
#: the risk class each approval example asks an approval for
APPROVED_RISK = {"approve-deletes": "delete", "approve-partition-growth": "grow"}


def _policy(name: str) -> str:
    (found,) = [p for p in EXAMPLES.glob(f"{name}.*") if p.suffix in (".rego", ".yaml")]
    return str(found.relative_to(ROOT))


def _topology(name: str, which: str) -> str:
    return f"policies/examples/topologies/{name}/{which}.yaml"


def _policy_lines(out: str) -> list[str]:
    """The lines of the policy section (after the plan and its findings)."""
    section = out.split("\nPolicy (", 1)[1]
    return [line[2:] for line in section.splitlines() if line.startswith(("  x ", "  ? ", "  ! "))]


@pytest.fixture(autouse=True)
def _in_the_repository(monkeypatch):
    monkeypatch.chdir(ROOT)  # the policy lines name the files as given: relative to the repository
    monkeypatch.setenv("RECONCILER_PLAN_KEY", KEY)


def test_a_dozen_examples_each_with_a_good_and_a_bad_topology():
    policies = sorted(p.stem for p in EXAMPLES.iterdir() if p.suffix in (".rego", ".yaml"))
    assert policies == sorted(BAD) and len(policies) >= 12
    assert {p.suffix for p in EXAMPLES.iterdir() if p.is_file()} == {".rego", ".yaml"}, "Rego and YAML both"
    for name in policies:
        assert sorted(p.name for p in (EXAMPLES / "topologies" / name).iterdir()) == ["bad.yaml", "good.yaml"]


@pytest.mark.parametrize("name", sorted(BAD))
def test_the_good_topology_passes(name, capsys):
    factory = example_world()
    assert main(["plan", _topology(name, "good"), "--policy", _policy(name)], example_backend(factory)) == 0
    out = capsys.readouterr().out
    assert "Policy (1 file): no violation." in out and _policy_lines(out) == []


@pytest.mark.parametrize("name", sorted(set(BAD) - set(APPROVALS)))
def test_the_bad_topology_is_refused_with_one_line_per_violation(name, capsys, tmp_path):
    factory = example_world()
    out_file = tmp_path / "plan.json"
    argv = ["plan", _topology(name, "bad"), "--policy", _policy(name), "--out", str(out_file), "--format", "markdown"]
    assert main(argv, example_backend(factory)) == 3
    captured = capsys.readouterr()
    assert f"policy violation; not saved to {out_file} (exit 3)" in captured.err.replace("violations", "violation")
    assert not out_file.exists(), "a plan that violates a policy is not saved"
    assert "⛔" in captured.out  # the pull-request comment says so first
    assert main(["plan", _topology(name, "bad"), "--policy", _policy(name)], example_backend(factory)) == 3
    assert _policy_lines(capsys.readouterr().out) == BAD[name]


@pytest.mark.parametrize("name", sorted(set(BAD) - set(APPROVALS)))
def test_the_bad_topology_in_json(name, capsys):
    factory = example_world()
    assert (
        main(["plan", _topology(name, "bad"), "--policy", _policy(name), "--format", "json"], example_backend(factory))
        == 3
    )
    doc = json.loads(capsys.readouterr().out)
    policy = doc["policy"]
    assert [f["file"] for f in policy["files"]] == [_policy(name)]
    assert ["x " + PolicyFinding.from_dict(v).line_text() for v in policy["violations"]] == BAD[name]
    assert policy["approvals_required"] == [] and policy["approval"] is None


def _state(factory) -> dict:
    return {
        alias: ({n: (t.partitions, dict(t.configs)) for n, t in sorted(c.topics.items())}, sorted(c.acls), c.writes)
        for alias, c in sorted(factory.clusters.items())
    }


@pytest.mark.parametrize("name", APPROVALS)
def test_a_change_that_needs_an_approval_is_applied_only_with_one_recorded(name, capsys, tmp_path):
    factory = example_world()
    backend = example_backend(factory)
    bad, policy = _topology(name, "bad"), _policy(name)
    assert main(["plan", bad, "--policy", policy], backend) == 0, "an approval is not a violation"
    out = capsys.readouterr().out
    assert _policy_lines(out) == BAD[name] and "needing an approval (not approved)" in out
    before = _state(factory)

    # apply of the topology itself: there is nowhere to record an approval
    assert main(["apply", bad, "--policy", policy, "--auto-approve"], backend) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: refused by policy: 1 change needs an approval this plan does not record")
    assert BAD[name][0] in err and "--approved-by NAME" in err
    assert _state(factory) == before, "nothing changed on the clusters"

    # a saved plan without an approval: refused too, even by an apply that is not given the policies
    unapproved = tmp_path / "unapproved.json"
    assert main(["plan", bad, "--policy", policy, "--out", str(unapproved)], backend) == 0
    assert main(["apply", str(unapproved), bad], backend) == 3
    assert "refused by policy" in capsys.readouterr().err and _state(factory) == before

    # the same plan saved with an approval (who, when): applied
    approved = tmp_path / "approved.json"
    argv = ["plan", bad, "--policy", policy, "--out", str(approved), "--approved-by", "alice"]
    assert main([*argv, "--approved-at", "2026-11-28T22:00:00Z"], backend) == 0
    saved = json.loads(approved.read_text())
    assert saved["plan"]["policy"]["approval"] == {"by": "alice", "at": "2026-11-28T22:00:00Z"}
    assert [a["risk"] for a in saved["plan"]["policy"]["approvals_required"]] == [APPROVED_RISK[name]]
    capsys.readouterr()
    assert main(["apply", str(approved), bad, "--policy", policy], backend) == 0
    out = capsys.readouterr().out
    assert "The saved plan records: approved by alice at 2026-11-28T22:00:00Z." in out and "Apply complete" in out
    assert _state(factory) != before


@pytest.mark.parametrize("name", APPROVALS)
def test_the_good_topology_of_an_approval_policy_applies_without_one(name, capsys):
    factory = example_world()
    assert (
        main(["apply", _topology(name, "good"), "--policy", _policy(name), "--auto-approve"], example_backend(factory))
        == 0
    )
    assert "Apply complete" in capsys.readouterr().out


def test_every_example_together_judges_a_plan(capsys):
    """`--policy policies/examples`: the directory's twelve files at once (not its topologies/)."""
    factory = example_world()
    assert (
        main(["plan", _topology("topic-names", "bad"), "--policy", "policies/examples"], example_backend(factory)) == 3
    )
    out = capsys.readouterr().out
    assert "Policy (12 files):" in out and BAD["topic-names"][0] in _policy_lines(out)
