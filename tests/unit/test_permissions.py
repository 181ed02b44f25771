"""Issue 45, least privilege stated and checked: the ACLs each principal needs, derived from the flows; on a cluster
that enforces ACLs every one missing is a plan error naming it, and apply changes nothing."""

from __future__ import annotations

import json

import pytest

from reconciler.adapters.live_read import Connections
from reconciler.mirror.filters import GroupFilter
from reconciler.operations.apply import ApplyRequest, apply
from reconciler.operations.plan import make_plan
from reconciler.plan.desired import desired_state
from reconciler.plan.permissions import RequiredAcl, Role, granted, group_resource, required_acls
from reconciler.state.live import CLUSTER_RESOURCE_NAME, AclBinding, AclPattern, AclResource, AclUnavailable
from reconciler.state.live import AclOperation as Op
from reconciler.state.live import AclPermission as Perm
from reconciler.topology.build import load_topology_text
from tests.plan_helpers import World

PRINCIPALS = (
    'replication_principal: "User:mirror", reconciler_principal: "User:reconciler", plan_principal: "User:planner"'
)


def topo_text(flow_extra: str = "sync: {acls: false}", cluster_extra: str = "", extra: str = "") -> str:
    return f"""\
apiVersion: reconciler/v1
kind: Topology
metadata: {{name: perms}}
clusters:
  west: {{bootstrap_servers: "127.0.0.1:1", {PRINCIPALS}{cluster_extra}}}
  east: {{bootstrap_servers: "127.0.0.1:2", {PRINCIPALS}{cluster_extra}}}
flows:
  - source: west
    target: east
    topics: {{include: ["orders", "pay.*"]}}
    groups: {{include: ["billing-.*"]}}
    delivery: exactly-once
    {flow_extra}
{extra}"""


def world_of(text: str) -> World:
    w = World(load_topology_text(text))
    w["west"].add_topic("orders", 2)
    w["west"].add_topic("payments", 1)
    w["west"].add_topic("unrelated", 1)
    return w


def required(w: World) -> list[RequiredAcl]:
    live = w.live()
    return required_acls(w.topology, desired_state(w.topology, live))


def grant_all(w: World, reqs: list[RequiredAcl]) -> None:
    for r in reqs:
        w[r.cluster].acls.add(r.binding())


class _UI:
    def __init__(self):
        self.lines, self.errors, self.progress = [], [], None

    def out(self, text: str = "", end: str = "\n") -> None:
        self.lines.append(text)

    def err(self, text: str) -> None:
        self.errors.append(text)

    def confirm(self, plan) -> bool:
        return True


def snapshot(w: World) -> dict:
    return {a: (sorted(c.topics), sorted(c.acls), c.writes) for a, c in sorted(w.factory.clusters.items())}


def plan_of(w: World):
    backend = w.backend()
    with Connections(dict(w.topology.clusters), backend.admin_factory) as conns:
        return make_plan(w.topology, conns, backend)


def test_the_rights_are_derived_from_the_flows():
    w = world_of(topo_text())
    reqs = required(w)
    got = {
        (r.cluster, r.role.value, r.resource_type.value, r.pattern_type.value, r.name, r.operation.value) for r in reqs
    }
    rep = [
        # source: the replicated topics (not `unrelated`), the groups synced, the cluster
        ("west", "replication", "TOPIC", "LITERAL", "orders", "READ"),
        ("west", "replication", "TOPIC", "LITERAL", "payments", "DESCRIBE"),
        ("west", "replication", "TOPIC", "LITERAL", "orders", "DESCRIBE_CONFIGS"),
        ("west", "replication", "GROUP", "PREFIXED", "billing-", "DESCRIBE"),
        ("west", "replication", "CLUSTER", "LITERAL", CLUSTER_RESOURCE_NAME, "DESCRIBE"),
        ("west", "replication", "TOPIC", "LITERAL", "heartbeats", "WRITE"),
        ("west", "replication", "TOPIC", "LITERAL", "mm2-offset-syncs.east.internal", "READ"),
        # target: remote topics, internal topics, exactly-once transactional ids and group
        ("east", "replication", "TOPIC", "LITERAL", "west.orders", "CREATE"),
        ("east", "replication", "TOPIC", "LITERAL", "west.orders", "WRITE"),
        ("east", "replication", "TOPIC", "LITERAL", "west.payments", "ALTER_CONFIGS"),
        ("east", "replication", "TOPIC", "LITERAL", "west.heartbeats", "WRITE"),
        ("east", "replication", "TOPIC", "LITERAL", "west.checkpoints.internal", "WRITE"),
        ("east", "replication", "TOPIC", "LITERAL", "reconciler.status.internal", "WRITE"),
        ("east", "replication", "TRANSACTIONAL_ID", "PREFIXED", "reconciler.mirror.west->east.", "WRITE"),
        ("east", "replication", "TRANSACTIONAL_ID", "PREFIXED", "reconciler.mirror.west->east.", "DESCRIBE"),
        ("east", "replication", "GROUP", "LITERAL", "__reconciler.mirror.west->east", "READ"),
        # the reconciler: its topics, the lease; the plan principal: describe and read, nothing else
        ("east", "reconciler", "TOPIC", "LITERAL", "west.orders", "CREATE"),
        ("east", "reconciler", "TOPIC", "LITERAL", "west.orders", "ALTER_CONFIGS"),
        ("west", "reconciler", "TOPIC", "LITERAL", "reconciler.lease.internal", "WRITE"),
        ("west", "plan", "TOPIC", "LITERAL", "orders", "DESCRIBE_CONFIGS"),
        ("east", "plan", "TOPIC", "LITERAL", "reconciler.status.internal", "READ"),
        ("east", "plan", "CLUSTER", "LITERAL", CLUSTER_RESOURCE_NAME, "DESCRIBE"),
    ]
    assert set(rep) <= got, sorted(set(rep) - got)
    assert not [g for g in got if g[4] == "unrelated"]
    plan_ops = {g[5] for g in got if g[1] == "plan"}
    assert plan_ops <= {"DESCRIBE", "DESCRIBE_CONFIGS", "READ"}, "the plan principal never writes"
    assert not [g for g in got if g[1] == "reconciler" and g[3:] == ("LITERAL", CLUSTER_RESOURCE_NAME, "ALTER")]
    with_sync = required(world_of(topo_text("sync: {acls: true}")))
    assert ("east", Role.RECONCILER, AclResource.CLUSTER, Op.ALTER) in {
        (r.cluster, r.role, r.resource_type, r.operation) for r in with_sync
    }, "ACL sync needs ALTER on the target cluster"
    pruning = required(world_of(topo_text(extra="prune: {topics: true}")))
    assert ("east", "west.", AclPattern.PREFIXED, Op.DELETE) in {
        (r.cluster, r.name, r.pattern_type, r.operation) for r in pruning if r.role is Role.RECONCILER
    }


def test_at_least_once_commits_in_a_source_group_and_needs_no_transactional_id():
    reqs = required(world_of(topo_text().replace("delivery: exactly-once", "delivery: at-least-once")))
    assert not [r for r in reqs if r.resource_type is AclResource.TRANSACTIONAL_ID]
    assert [r.cluster for r in reqs if r.name == "__reconciler.mirror.west->east" and r.operation is Op.READ] == [
        "west"
    ]


@pytest.mark.parametrize(
    "include, want",
    [
        (["billing-.*"], (AclPattern.PREFIXED, "billing-")),
        (["billing"], (AclPattern.LITERAL, "billing")),
        (["billing\\.eu.*"], (AclPattern.PREFIXED, "billing.eu")),
        (["a.*", "b.*"], (AclPattern.LITERAL, "*")),
        ([".*"], (AclPattern.LITERAL, "*")),
        (["bill(ing|s)"], (AclPattern.LITERAL, "*")),
    ],
)
def test_a_group_filter_becomes_the_narrowest_acl_resource(include, want):
    assert group_resource(GroupFilter(tuple(include))) == want


def test_kafka_grant_rules():
    r = RequiredAcl(
        "east", Role.REPLICATION, "User:mirror", AclResource.TOPIC, AclPattern.LITERAL, "west.orders", Op.DESCRIBE
    )

    def allow(name, op, principal="User:mirror", pattern=AclPattern.LITERAL, host="*"):
        return AclBinding(name, principal, host, op, Perm.ALLOW, pattern)

    assert granted(r, [allow("west.orders", Op.DESCRIBE)])
    assert granted(r, [allow("west.orders", Op.WRITE)]), "WRITE implies DESCRIBE"
    assert granted(r, [allow("west.", Op.ALL, pattern=AclPattern.PREFIXED)])
    assert granted(r, [allow("*", Op.DESCRIBE, principal="User:*")])
    assert not granted(r, [allow("west.orders", Op.DESCRIBE, host="10.0.0.1")]), "from one host is not from any"
    assert not granted(r, [allow("west.orders", Op.DESCRIBE_CONFIGS)])
    assert not granted(r, [allow("east.", Op.ALL, pattern=AclPattern.PREFIXED)])
    deny = AclBinding("*", "User:*", "*", Op.DESCRIBE, Perm.DENY)
    assert not granted(r, [allow("west.orders", Op.ALL), deny]), "a DENY wins"
    txn = RequiredAcl(
        "east",
        Role.REPLICATION,
        "User:mirror",
        AclResource.TRANSACTIONAL_ID,
        AclPattern.PREFIXED,
        "reconciler.mirror.a->b.",
        Op.WRITE,
    )

    def as_txn(name, pattern):
        return AclBinding(name, "User:mirror", "*", Op.WRITE, Perm.ALLOW, pattern, AclResource.TRANSACTIONAL_ID)

    assert granted(txn, [as_txn("reconciler.mirror.", AclPattern.PREFIXED)])
    assert not granted(txn, [as_txn("reconciler.mirror.a->b.0", AclPattern.LITERAL)]), "one id is not every slot's"
    assert not granted(txn, [allow("reconciler.mirror.", Op.WRITE, pattern=AclPattern.PREFIXED)]), "a topic ACL"


def test_with_every_right_granted_the_plan_checks_them_and_has_no_permission_error():
    w = world_of(topo_text())
    reqs = required(w)
    grant_all(w, reqs)
    plan = plan_of(w)
    assert not plan.errors, [f.message for f in plan.errors]
    assert sorted(plan.permissions, key=RequiredAcl.sort_key) == reqs
    doc = json.loads(json.dumps(plan.to_dict()))
    assert doc["format_version"] == 2 and len(doc["permissions"]) == len(reqs)
    assert doc["permissions"][0].keys() >= {
        "cluster",
        "role",
        "principal",
        "resource_type",
        "pattern_type",
        "name",
        "operation",
    }


def test_removing_each_required_acl_in_turn_is_an_error_naming_it_and_apply_changes_nothing():
    w = world_of(topo_text())
    reqs = required(w)
    grant_all(w, reqs)
    for r in reqs:
        # the ACL, and any other granted ACL that implies it (WRITE implies DESCRIBE): without them r is missing
        gone = {
            b
            for b in w[r.cluster].acls
            if b.principal == r.principal
            and b.resource is r.resource_type
            and b.topic == r.name
            and (
                b == r.binding() or r.operation in (Op.DESCRIBE, Op.DESCRIBE_CONFIGS) and b.operation is not r.operation
            )
        }
        w[r.cluster].acls -= gone
        before = snapshot(w)
        plan = plan_of(w)
        errors = [f for f in plan.errors]
        assert errors and all(f.kind.value == "permission" and f.cluster == r.cluster for f in errors), r
        assert any(f.message.startswith(r.describe() + " is missing") for f in errors), (r.describe(), errors)
        assert f"--allow-principal '{r.principal}'" in " ".join(f.hint or "" for f in errors)
        outcome = apply(ApplyRequest(w.topology), w.backend(), ui := _UI())
        assert not outcome.ok and outcome.report is None and "nothing was applied" in ui.errors[0]
        assert snapshot(w) == before, f"apply changed something without {r.describe()}"
        w[r.cluster].acls |= gone


def test_the_plans_own_acl_sync_counts_as_granted():
    w = world_of(topo_text("sync: {acls: true}"))
    reqs = required(w)
    writes = [r for r in reqs if r.role is Role.REPLICATION and r.operation is Op.WRITE and r.name == "west.orders"]
    grant_all(w, [r for r in reqs if r not in writes])
    plan = plan_of(w)
    assert not plan.errors, [f.message for f in plan.errors]
    assert any(a.KIND.value == "create_acl" and a.acl == writes[0].binding() for a in plan.actions)


def test_a_cluster_whose_acls_never_name_a_declared_principal_is_not_checked():
    w = world_of(topo_text())
    w["east"].acls.add(AclBinding("other", "User:alice", "*", Op.READ, Perm.ALLOW))
    plan = plan_of(w)
    assert not plan.errors and plan.permissions == []


def test_acls_enforced_true_checks_a_cluster_without_acls_and_false_never():
    w = world_of(topo_text(cluster_extra=", acls_enforced: true"))
    plan = plan_of(w)
    assert {f.cluster for f in plan.errors} == {"west", "east"}
    assert all(f.kind.value == "permission" for f in plan.errors)
    off = world_of(topo_text(cluster_extra=", acls_enforced: false"))
    grant_all(off, required(off)[:3])  # names the principals: would be checked but for acls_enforced: false
    assert not plan_of(off).errors


def test_an_enforcing_cluster_whose_acls_cannot_be_read_is_an_error():
    w = world_of(topo_text(cluster_extra=", acls_enforced: true"))
    w["east"].acls_unavailable = AclUnavailable.UNAUTHORIZED
    grant_all(w, [r for r in required(w) if r.cluster == "west"])
    [error] = plan_of(w).errors
    assert error.cluster == "east" and "cannot be checked" in error.message


def test_an_undeclared_replication_principal_on_an_enforcing_cluster_is_a_warning_not_a_guess():
    text = topo_text(cluster_extra=", acls_enforced: true").replace('replication_principal: "User:mirror", ', "", 1)
    w = world_of(text)
    grant_all(w, [r for r in required(w) if r.principal is not None])
    plan = plan_of(w)
    assert not plan.errors, [f.message for f in plan.errors]
    [warning] = [f for f in plan.findings if f.kind.value == "permission"]
    assert warning.cluster == "west" and "replication_principal" in warning.message


def test_the_permissions_command_lists_them_and_exits_1_when_one_is_missing(tmp_path, capsys):
    from reconciler.cli.main import main

    path = tmp_path / "t.yaml"
    path.write_text(topo_text())
    w = world_of(topo_text())
    backend = w.backend()
    assert main(["permissions", str(path)], backend) == 0, "no cluster enforces ACLs: listed, not checked"
    out = capsys.readouterr().out
    assert (
        "cluster east, replication principal User:mirror (not checked: no ACL of it names a declared principal):" in out
    )
    assert (
        "  ALLOW topic west.orders: " in out
        and "  ALLOW transactional-id reconciler.mirror.west->east. (prefixed): DESCRIBE, WRITE" in out
    )
    reqs = required(w)
    grant_all(w, [r for r in reqs if not (r.cluster == "west" and r.name == "orders" and r.operation is Op.READ)])
    assert main(["permissions", str(path), "--format", "json"], backend) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [(m["cluster"], m["principal"], m["name"], m["operation"]) for m in doc["missing"]] == [
        ("west", "User:mirror", "orders", "READ")
    ]
    assert doc["clusters"]["west"]["checked"] is True and len(doc["required"]) == len(reqs)
    assert main(["permissions", str(path), "--format", "markdown"], backend) == 1
    assert (
        "| `west` | replication `User:mirror` | topic orders | DESCRIBE, DESCRIBE_CONFIGS, READ ❌ |"
        in capsys.readouterr().out
    )


def test_the_plan_shows_the_rights_it_checked_in_text_and_markdown():
    from reconciler.render import plan_markdown, plan_text

    w = world_of(topo_text())
    reqs = required(w)
    grant_all(
        w,
        [
            r
            for r in reqs
            if r.name != "west.payments" or r.operation is not Op.CREATE or r.role is not Role.REPLICATION
        ],
    )
    plan = plan_of(w)
    text = plan_text.render(plan)
    assert "Permissions (the ACLs the flows need on the clusters that enforce ACLs" in text
    assert "  east: replication principal User:mirror: " in text and "1 missing (see the errors)" in text
    assert "  west: plan principal User:planner: " in text and "all granted" in text
    md = plan_markdown.render(plan)
    assert "<details open><summary>ACLs the flows need on the clusters that enforce ACLs" in md
    assert (
        "| `east` | replication `User:mirror` | topic west\\.payments | ALTER_CONFIGS, CREATE ❌, DESCRIBE, WRITE |"
        in md
    )
    assert [r.to_dict()["granted"] for r in plan.permissions].count(False) == 1


def test_the_permissions_command_fails_on_an_enforcing_cluster_whose_acls_cannot_be_read(tmp_path, capsys):
    from reconciler.cli.main import main

    path = tmp_path / "t.yaml"
    path.write_text(topo_text(cluster_extra=", acls_enforced: true"))
    w = world_of(path.read_text())
    w["east"].acls_unavailable = AclUnavailable.UNAUTHORIZED
    grant_all(w, [r for r in required(w) if r.cluster == "west"])
    assert main(["permissions", str(path)], w.backend()) == 1
    out = capsys.readouterr().out
    assert "cluster east enforces ACLs (acls_enforced: true) but they cannot be read: the reconciler's principal" in out
