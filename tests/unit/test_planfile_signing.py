"""Issue 44: a saved plan cannot be edited into something else.

`plan --out` signs the plan (HMAC-SHA256, RECONCILER_PLAN_KEY) with the topology's content digest, its git commit
and a digest of its actions; `apply FILE TOPOLOGY` connects with the topology's settings (never the file's),
verifies the signature, checks the topology is what was planned, plans again and refuses any action the fresh plan
does not have; the executor refuses, whatever its input, what the topology does not allow (prune, remote topics,
the replication principal). Every refusal: one line, exit 1, the memory clusters unchanged (topics, configs, ACLs,
no write at all).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from reconciler.adapters.live_read import Connections
from reconciler.apply.executor import ApplyContext, execute
from reconciler.apply.guard import GuardRefused, TopologyGuard
from reconciler.cli.main import main
from reconciler.operations.handlers import handler_table
from reconciler.plan import planfile
from reconciler.plan.actions import CreateAcl, DeleteAcl, DeleteTopic, Plan, SetConfig
from reconciler.plan.job_actions import DeployJob
from reconciler.state.live import AclBinding
from reconciler.state.live import AclOperation as Op
from reconciler.state.live import AclPermission as Perm
from tests.plan_helpers import World, topology

KEY = "test-plan-key-0123456789abcdef"
OTHER_KEY = "another-plan-key-fedcba9876543210"
KEY_ID = planfile.key_id(KEY)

TOPO = """apiVersion: reconciler/v1
kind: Topology
metadata: {{name: signing}}
clusters:
  west: {{bootstrap_servers: "127.0.0.1:1", replication_principal: "User:mirror"}}
  east: {{bootstrap_servers: "127.0.0.1:2", replication_principal: "User:mirror"}}
flows:
  - {{source: west, target: east, topics: {{include: [{topics}]}}}}
{extra}"""


class Env:
    def __init__(self, tmp_path: Path, monkeypatch):
        self.tmp, self.monkeypatch = tmp_path, monkeypatch
        self.topo_path = tmp_path / "topology" / "t.yaml"
        self.topo_path.parent.mkdir()
        self.write()
        self.world = World(topology('flows:\n  - {source: west, target: east, topics: {include: ["orders"]}}'))
        self.world["west"].add_topic("orders", 2)
        self.world["west"].acls.add(AclBinding("orders", "User:alice", "*", Op.READ, Perm.ALLOW))
        self.world["west"].add_topic("payments", 3)  # not replicated
        self.world["east"].add_topic("payments", 3)  # an unrelated topic of east
        self.world["east"].acls.add(AclBinding("payments", "User:billing", "*", Op.READ, Perm.ALLOW))
        self.out = tmp_path / "ci-out" / "plan.json"
        self.bootstraps: list[str] = []
        monkeypatch.setenv("RECONCILER_PLAN_KEY", KEY)
        monkeypatch.delenv("RECONCILER_PLAN_KEY_PREVIOUS", raising=False)

    def write(self, topics: str = '"orders"', extra: str = "") -> None:
        self.topo_path.write_text(TOPO.format(topics=topics, extra=extra))

    def backend(self, **more):
        def admins(cluster):  # which connection settings apply reaches the clusters with
            self.bootstraps.append(cluster.bootstrap_servers)
            return self.world.factory(cluster)

        return self.world.backend(admin_factory=admins, **more)

    def run(self, *argv: str, **more) -> int:
        return main(list(argv), self.backend(**more))

    def plan(self) -> None:
        assert self.run("plan", str(self.topo_path), "--out", str(self.out)) == 0

    def apply(self) -> int:
        return self.run("apply", str(self.out), str(self.topo_path))

    def state(self) -> dict:
        """Everything apply could change on the memory clusters, and how many writes they took."""
        return {
            alias: (
                {n: (t.partitions, dict(t.configs)) for n, t in sorted(c.topics.items())},
                sorted(c.acls),
                c.writes,
            )
            for alias, c in sorted(self.world.factory.clusters.items())
        }

    def doc(self) -> dict:
        return json.loads(self.out.read_text())

    def save(self, doc: dict, key: str | None = None) -> None:
        """Write `doc` back; with `key`, signed again with it (what a thief of the key could do)."""
        if key is not None:
            planfile.sign(doc, planfile.PlanKey("RECONCILER_PLAN_KEY", key))
        self.out.write_text(json.dumps(doc, indent=1, sort_keys=True))


@pytest.fixture
def env(tmp_path, monkeypatch):
    return Env(tmp_path, monkeypatch)


def refused(env: Env, capsys, before: dict, *expected: str) -> str:
    """Apply the file: exit 1, one line on stderr with `expected`, no traceback, the clusters unchanged."""
    capsys.readouterr()
    assert env.apply() == 1
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("error: "), err
    for text in expected:
        assert text in err, err
    assert env.state() == before, "nothing changed on the clusters"
    return err


# --- the happy path ------------------------------------------------------------------------------------------------


def test_plan_out_then_apply_file_applies_with_the_topology_connection_settings(env, capsys):
    env.plan()
    mode = stat.S_IMODE(os.stat(env.out).st_mode)
    assert mode == 0o600 and stat.S_IMODE(os.stat(env.out.parent).st_mode) == 0o700
    doc = env.doc()
    assert doc["format_version"] == planfile.FORMAT_VERSION and "clusters" not in doc
    assert doc["signature"]["key_id"] == KEY_ID and doc["signature"]["algorithm"] == "HMAC-SHA256"
    assert doc["topology"]["content_sha256"] and doc["actions_sha256"] == planfile.actions_digest(
        doc["plan"]["actions"]
    )
    assert f"signed with key {KEY_ID}" in capsys.readouterr().err
    env.bootstraps.clear()
    assert env.apply() == 0
    assert env.world["east"].topics["west.orders"].partitions == 2
    assert AclBinding("west.orders", "User:mirror", "*", Op.WRITE, Perm.ALLOW) in env.world["east"].acls
    assert set(env.bootstraps) == {"127.0.0.1:1", "127.0.0.1:2"}
    assert "Apply complete" in capsys.readouterr().out


def test_a_plan_signed_with_the_previous_key_verifies_during_a_rotation(env, monkeypatch):
    env.plan()
    monkeypatch.setenv("RECONCILER_PLAN_KEY", OTHER_KEY)
    monkeypatch.setenv("RECONCILER_PLAN_KEY_PREVIOUS", KEY)
    assert env.apply() == 0 and "west.orders" in env.world["east"].topics


# --- edited files: the signature --------------------------------------------------------------------------------


def _create(doc: dict, name: str) -> dict:
    return next(a for a in doc["plan"]["actions"] if a["kind"] == "create_topic" and a["topic"] == name)


def test_an_edited_action_is_refused(env, capsys):
    env.plan()
    before = env.state()
    doc = env.doc()
    _create(doc, "west.orders")["topic"] = "payments-copy"
    env.save(doc)
    refused(
        env,
        capsys,
        before,
        f"plan file {env.out}: signature does not verify with key {KEY_ID} (RECONCILER_PLAN_KEY)",
        "plan again in this run or check the key",
    )
    env.save(doc, KEY)  # signed again with the stolen key: the fresh plan has no such action
    refused(env, capsys, before, "would not create topic payments-copy (2 partitions", "on east", "plan again")


DELETE_PAYMENTS = {
    "kind": "delete_topic",
    "verb": "-",
    "cluster": "east",
    "reason": "cleanup",
    "topic": "payments",
    "partitions": 3,
    "description": "DELETE topic payments (3 partitions, all its records)",
    "reason_kind": "topic-extra",
}
ALLOW_ATTACKER = {
    "kind": "create_acl",
    "verb": "+",
    "cluster": "east",
    "reason": "access",
    "acl": AclBinding("payments", "User:attacker", "*", Op.ALL, Perm.ALLOW).to_dict(),
    "description": "create ACL ALLOW User:attacker ALL on topic payments",
    "reason_kind": "acl",
}


@pytest.mark.parametrize(
    "appended,says",
    [
        ([DELETE_PAYMENTS], "would not DELETE topic payments (3 partitions, all its records) on east"),
        ([ALLOW_ATTACKER], "would not create ACL ALLOW User:attacker ALL on topic payments on east"),
        ([DELETE_PAYMENTS, ALLOW_ATTACKER], "(and 1 more)"),
    ],
)
def test_appended_actions_are_refused(env, capsys, appended, says):
    env.plan()  # prune is off
    before = env.state()
    doc = env.doc()
    doc["plan"]["actions"] += appended
    env.save(doc)
    refused(env, capsys, before, "signature does not verify with key")
    doc["actions_sha256"] = planfile.actions_digest(doc["plan"]["actions"])  # the digest alone: still the signature
    env.save(doc)
    refused(env, capsys, before, "signature does not verify with key")
    env.save(doc, KEY)
    refused(env, capsys, before, says, "refusing the whole plan")
    assert "payments" in env.world["east"].topics


def test_reordered_actions_are_refused(env, capsys):
    env.plan()
    before = env.state()
    doc = env.doc()
    doc["plan"]["actions"].reverse()
    env.save(doc)
    refused(env, capsys, before, "signature does not verify with key")


def test_an_actions_digest_that_does_not_match_is_refused(env, capsys):
    env.plan()
    before = env.state()
    doc = env.doc()
    key = planfile.PlanKey("RECONCILER_PLAN_KEY", KEY)
    doc["plan"]["actions"].pop()
    digest = doc["actions_sha256"]
    planfile.sign(doc, key)
    doc["actions_sha256"] = digest  # a signer that digested other actions (a bug): refused all the same
    doc["signature"]["value"] = key.sign(
        planfile.canonical({**doc, "signature": {"algorithm": "HMAC-SHA256", "key_id": KEY_ID}})
    )
    env.save(doc)
    refused(env, capsys, before, "its actions do not match their digest")


def test_a_truncated_file_is_refused(env, capsys):
    env.plan()
    before = env.state()
    text = env.out.read_text()
    env.out.write_text(text[: len(text) // 2])
    refused(env, capsys, before, f"plan file {env.out}: not a readable saved plan (truncated, or not JSON")


def test_an_unsigned_file_is_refused(env, capsys):
    env.plan()
    before = env.state()
    doc = env.doc()
    del doc["signature"]
    env.save(doc)
    refused(env, capsys, before, "not signed, so it may have been edited; plan again with RECONCILER_PLAN_KEY set")


def test_a_plan_of_the_earlier_unsigned_format_is_refused(env, capsys):
    env.plan()
    before = env.state()
    doc = env.doc()
    doc["format_version"] = 1
    doc["clusters"] = {"east": {"bootstrap_servers": "evil:9092"}}
    del doc["signature"]
    env.save(doc)
    refused(env, capsys, before, "format_version 1 (an unsigned plan with connection settings", "plan again")


def test_a_plan_signed_with_another_key_is_refused(env, capsys, monkeypatch):
    env.plan()
    before = env.state()
    monkeypatch.setenv("RECONCILER_PLAN_KEY", OTHER_KEY)
    other = planfile.key_id(OTHER_KEY)
    refused(
        env,
        capsys,
        before,
        f"signed with key {KEY_ID}, but this run has key {other} (RECONCILER_PLAN_KEY)",
        "plan again in this run or check the key",
    )
    env.save(env.doc(), OTHER_KEY[:-1] + "!")  # claims the right key id? it does not: another id
    monkeypatch.delenv("RECONCILER_PLAN_KEY")
    refused(env, capsys, before, "cannot verify its signature", "RECONCILER_PLAN_KEY is not set")


def test_a_forged_key_id_does_not_help(env, capsys):
    env.plan()
    before = env.state()
    doc = env.doc()
    doc["plan"]["actions"].append(DELETE_PAYMENTS)
    planfile.sign(doc, planfile.PlanKey("RECONCILER_PLAN_KEY", OTHER_KEY))
    doc["signature"]["key_id"] = KEY_ID  # names the real key, signed with another
    env.save(doc)
    refused(env, capsys, before, f"signature does not verify with key {KEY_ID}")


# --- what the file was planned from ------------------------------------------------------------------------------


def test_a_plan_of_other_topology_content_is_refused(env, capsys):
    env.plan()
    before = env.state()
    env.write(topics='"orders", "payments"')
    refused(env, capsys, before, "planned from other topology content", "plan again from this topology")
    env.write(extra="# a comment changes nothing\n")
    assert env.apply() == 0, "the same documents, another layout: the same content"


def test_a_plan_of_another_commit_is_refused(env, capsys):
    class Git:
        def __init__(self, commit):
            self.commit = commit

        def revision(self, paths, revision=None):
            return {"commit": self.commit, "short": self.commit[:7], "dirty": False}

    assert env.run("plan", str(env.topo_path), "--out", str(env.out), git=Git("a" * 40)) == 0
    assert env.doc()["topology"]["commit"] == "a" * 40
    before = env.state()
    capsys.readouterr()
    assert env.run("apply", str(env.out), str(env.topo_path), git=Git("b" * 40)) == 1
    err = capsys.readouterr().err
    assert f"planned at commit {'a' * 12}, the topology given is commit {'b' * 12}" in err
    assert env.state() == before
    assert env.run("apply", str(env.out), str(env.topo_path), git=Git("a" * 40)) == 0


def test_connection_settings_in_the_file_are_refused_and_never_used(env, capsys):
    env.plan()
    before = env.state()
    doc = env.doc()
    doc["clusters"] = {"east": {"bootstrap_servers": "evil.example.com:9092", "config": {}}}
    env.save(doc)
    refused(env, capsys, before, "signature does not verify")
    env.save(doc, KEY)
    env.bootstraps.clear()
    refused(env, capsys, before, "carries connection settings (`clusters`), which a saved plan never holds")
    assert "evil.example.com:9092" not in env.bootstraps


def test_apply_file_needs_the_topology(env, capsys):
    env.plan()
    before = env.state()
    capsys.readouterr()
    assert env.run("apply", str(env.out)) == 1
    err = capsys.readouterr().err
    assert "give the topology it was planned from too" in err and len(err.strip().splitlines()) == 1
    assert env.state() == before


# --- plan --out and its key ---------------------------------------------------------------------------------------


def test_plan_out_without_a_key_is_refused_before_any_work(env, capsys, monkeypatch):
    monkeypatch.delenv("RECONCILER_PLAN_KEY")
    monkeypatch.setenv("RECONCILER_PLAN_KEY_PREVIOUS", KEY)  # the previous key never signs
    env.bootstraps.clear()
    assert env.run("plan", str(env.topo_path), "--out", str(env.out)) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: RECONCILER_PLAN_KEY is not set") and len(err.strip().splitlines()) == 1
    assert not env.out.exists() and not env.out.parent.exists() and env.bootstraps == []


def test_a_short_key_is_refused_without_printing_it(env, capsys, monkeypatch):
    monkeypatch.setenv("RECONCILER_PLAN_KEY", "hunter2")
    assert env.run("plan", str(env.topo_path), "--out", str(env.out)) == 1
    err = capsys.readouterr().err
    assert "shorter than 16" in err and "hunter2" not in err and not env.out.exists()


# --- the executor's own guard ------------------------------------------------------------------------------------


PRUNE = "prune: {topics: true, acls: true}\n"


def _guarded(env: Env, plan: Plan, extra: str = ""):
    topo = topology('flows:\n  - {source: west, target: east, topics: {include: ["orders"]}}', extra=extra)
    with Connections(dict(topo.clusters), env.world.factory) as conns:
        return execute(plan, ApplyContext(conns.get), handler_table(), guard=TopologyGuard(topo))


@pytest.mark.parametrize(
    "action,extra,says",
    [
        (DeleteTopic("east", "x", topic="payments", partitions=3), "", "does not set prune.topics"),
        (DeleteTopic("east", "x", topic="payments", partitions=3), PRUNE, "not a remote topic"),
        (DeleteTopic("east", "x", topic="heartbeats", partitions=1), PRUNE, "not a remote topic"),
        (DeleteTopic("east", "x", topic="west.orders", partitions=2), "", "does not set prune.topics"),
        (
            CreateAcl("east", "x", AclBinding("payments", "User:attacker", "*", Op.ALL, Perm.ALLOW)),
            "",
            "not a remote or internal topic",
        ),
        (
            CreateAcl("east", "x", AclBinding("west.orders", "User:attacker", "*", Op.ALL, Perm.ALLOW)),
            "",
            "grants only READ",
        ),
        (
            CreateAcl("east", "x", AclBinding("west.orders", "User:attacker", "*", Op.WRITE, Perm.ALLOW)),
            "",
            "only the replication principal of east (User:mirror)",
        ),
        (
            DeleteAcl("east", "x", AclBinding("west.orders", "User:mirror", "*", Op.WRITE, Perm.ALLOW)),
            "",
            "does not set prune.acls",
        ),
        (SetConfig("east", "x", topic="payments", key="retention.ms", value="1"), "", "not a remote or internal"),
        (DeployJob("east", "x", flow="east->west"), "", "no enabled flow east->west into east"),
        (DeleteTopic("north", "x", topic="west.orders"), PRUNE, "cluster 'north' is not in the topology"),
    ],
)
def test_the_executor_refuses_what_the_topology_does_not_allow(env, action, extra, says):
    env.world["east"].add_topic("west.orders", 2)
    before = env.state()
    harmless = SetConfig("east", "x", topic="west.orders", key="retention.ms", value="5")
    with pytest.raises(GuardRefused) as exc:
        _guarded(env, Plan([harmless, action], []), extra)
    assert says in str(exc.value) and "nothing was applied" in str(exc.value)
    assert env.state() == before, "not even the allowed action ran"


def test_the_executor_runs_what_the_topology_allows(env):
    env.world["east"].add_topic("west.orders", 2)
    env.world["east"].add_topic("west.legacy", 1)
    plan = Plan(
        [
            SetConfig("east", "x", topic="west.orders", key="retention.ms", value="5"),
            CreateAcl("east", "x", AclBinding("west.orders", "User:mirror", "*", Op.WRITE, Perm.ALLOW)),
            CreateAcl("east", "x", AclBinding("west.orders", "User:alice", "*", Op.READ, Perm.ALLOW)),
            DeleteTopic("east", "x", topic="west.legacy", partitions=1),
        ],
        [],
    )
    assert _guarded(env, plan, PRUNE).ok
    assert "west.legacy" not in env.world["east"].topics and "payments" in env.world["east"].topics


# --- show, and the private file mode ------------------------------------------------------------------------------


def test_show_verifies_when_a_key_is_set_and_says_when_it_cannot(env, capsys, monkeypatch):
    env.plan()
    capsys.readouterr()
    assert env.run("show", str(env.out)) == 0
    assert f"signed with key {KEY_ID} (verified)" in capsys.readouterr().out
    doc = env.doc()
    doc["plan"]["actions"].append(DELETE_PAYMENTS)
    doc["actions_sha256"] = planfile.actions_digest(doc["plan"]["actions"])
    env.save(doc)
    assert env.run("show", str(env.out)) == 1
    assert "signature does not verify" in capsys.readouterr().err
    monkeypatch.delenv("RECONCILER_PLAN_KEY")
    assert env.run("show", str(env.out), "--format", "json") == 0  # a reviewer without the key reads it ...
    captured = capsys.readouterr()
    assert json.loads(captured.out)["saved"]["verified"] is False
    assert "not verified" in captured.err  # ... told so; apply would refuse it


def test_private_outputs_are_0600_whatever_the_umask_or_the_old_file(tmp_path):
    from reconciler import outputs

    old = os.umask(0)
    try:
        target = tmp_path / "a" / "b" / "spec.json"
        outputs.write_text(target, "x", private=True)
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
        assert {stat.S_IMODE(p.stat().st_mode) for p in (target.parent, target.parent.parent)} == {0o700}
        target.chmod(0o644)
        outputs.write_text(target, "y", private=True)
        assert stat.S_IMODE(target.stat().st_mode) == 0o600 and target.read_text() == "y"
        public = tmp_path / "public.txt"
        outputs.write_text(public, "z")
        assert stat.S_IMODE(public.stat().st_mode) == 0o666  # the default: what open() would give
    finally:
        os.umask(old)
