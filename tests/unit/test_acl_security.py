"""Issue 45, ACL sync that cannot open a cluster: principals that name one identity only, every ACL that lets someone
else write a remote topic found, and no source DENY copied that would deny the replicator."""

import pytest

from reconciler.plan.desired import replicator_denies, synced_acls
from reconciler.state.live import AclBinding, AclPattern
from reconciler.state.live import AclOperation as Op
from reconciler.state.live import AclPermission as Perm
from tests.helpers import diagnose, rendered_errors, write
from tests.plan_helpers import World, kinds, topology

FLOW = """flows:
  - source: west
    target: east
    topics: {include: ["orders", "pay.*"]}
"""


@pytest.mark.parametrize(
    "written, why",
    [
        ('"User:*"', "is a wildcard"),
        ('"*"', "not of the form <Type>:<name>"),
        ('""', "it is empty"),
        ('"mirror"', "not of the form <Type>:<name>"),
        ('"User:"', "not of the form <Type>:<name>"),
        ('" User:mirror"', "leading or trailing blanks"),
        ('"User:mir*"', "is a wildcard"),
        ('"User:ANONYMOUS"', "every unauthenticated client"),
    ],
)
def test_a_replication_principal_names_one_identity(tmp_path, written, why):
    f = write(
        tmp_path,
        "t.yaml",
        f"""\
        apiVersion: reconciler/v1
        kind: Topology
        clusters:
          west: {{bootstrap_servers: "127.0.0.1:1"}}
          east:
            bootstrap_servers: "127.0.0.1:2"
            replication_principal: {written}
        flows:
          - {{source: west, target: east}}
        """,
    )
    lines = rendered_errors(diagnose(f))
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{f}:7:28: error: ") and "error: cluster 'east': replication_principal" in lines[0]
    assert why in lines[0]


def test_a_well_formed_principal_is_accepted(tmp_path):
    f = write(
        tmp_path,
        "t.yaml",
        """\
        apiVersion: reconciler/v1
        kind: Topology
        clusters:
          west: {bootstrap_servers: "127.0.0.1:1", replication_principal: "User:CN=mirror,OU=kafka"}
          east: {bootstrap_servers: "127.0.0.1:2", replication_principal: "User:mirror"}
        flows:
          - {source: west, target: east}
        """,
    )
    assert rendered_errors(diagnose(f)) == []


@pytest.fixture
def world():
    w = World(topology(FLOW))
    w["west"].add_topic("orders", 1)
    w["west"].add_topic("payments", 1)
    return w


def security(plan):
    return [f for f in plan.findings if f.kind.value == "security"]


@pytest.mark.parametrize(
    "acl, opened",
    [
        (AclBinding("west.", "User:mallory", "*", Op.WRITE, Perm.ALLOW, AclPattern.PREFIXED), 3),
        (AclBinding("west.pay", "User:mallory", "*", Op.ALL, Perm.ALLOW, AclPattern.PREFIXED), 1),
        (AclBinding("*", "User:mallory", "*", Op.WRITE, Perm.ALLOW), 3),  # west.heartbeats, west.orders, west.payments
        (AclBinding("*", "User:*", "*", Op.ALL, Perm.ALLOW), 3),
    ],
)
def test_every_acl_that_lets_someone_else_write_a_remote_topic_is_found(world, acl, opened):
    world["east"].acls.add(acl)
    found = security(world.plan())
    assert len(found) == 1, found
    assert acl.describe() in found[0].message and f"{opened} remote topic(s)" in found[0].message
    assert found[0].severity.value == "warning"


@pytest.mark.parametrize(
    "acl",
    [
        AclBinding("west.", "User:mirror", "*", Op.WRITE, Perm.ALLOW, AclPattern.PREFIXED),  # the replicator
        AclBinding("east.", "User:mallory", "*", Op.WRITE, Perm.ALLOW, AclPattern.PREFIXED),  # no remote topic
        AclBinding("*", "User:*", "*", Op.READ, Perm.ALLOW),  # reading is not writing
        AclBinding("*", "User:*", "*", Op.WRITE, Perm.DENY),
    ],
)
def test_acls_that_do_not_let_anyone_else_write_are_not_findings(world, acl):
    world["east"].acls.add(acl)
    assert security(world.plan()) == []


def test_a_literal_wildcard_principal_writer_is_found_and_pruned_with_acl_sync(world):
    world["east"].acls.add(AclBinding("west.orders", "User:*", "*", Op.WRITE, Perm.ALLOW))
    found = security(world.plan())
    assert [f.message for f in found] == [
        "User:* may WRITE remote topic east:west.orders; only the replication principal should write it"
    ]


def test_a_literal_foreign_writer_is_found_without_acl_sync_too(world):
    topo = topology(FLOW.replace('pay.*"]}', 'pay.*"]}\n    sync: {acls: false}'))
    world["east"].acls.add(AclBinding("west.orders", "User:mallory", "*", Op.WRITE, Perm.ALLOW))
    found = security(world.plan(topo))
    assert [f.subject for f in found] == ["west.orders"]


def test_a_source_deny_that_would_match_the_replicator_is_not_copied():
    up = [
        AclBinding("orders", "User:alice", "*", Op.READ, Perm.ALLOW),
        AclBinding("orders", "User:bob", "*", Op.READ, Perm.ALLOW),
        AclBinding("orders", "User:*", "*", Op.WRITE, Perm.DENY),  # would stop the replicator writing
        AclBinding("orders", "User:mirror", "*", Op.DESCRIBE, Perm.DENY),
        AclBinding("orders", "User:eve", "*", Op.READ, Perm.DENY),  # copied: not the replicator
    ]
    assert synced_acls("west.orders", up, "User:mirror") == {
        AclBinding("west.orders", "User:alice", "*", Op.READ, Perm.ALLOW),
        AclBinding("west.orders", "User:bob", "*", Op.READ, Perm.ALLOW),
        AclBinding("west.orders", "User:eve", "*", Op.READ, Perm.DENY),
        AclBinding("west.orders", "User:mirror", "*", Op.WRITE, Perm.ALLOW),
    }
    assert replicator_denies(up, "User:mirror") == sorted(up[2:4])


def test_a_wildcard_deny_of_read_keeps_the_remote_topic_as_closed_as_its_source():
    # DENY User:* READ: nobody may read the source; copying the ALLOW READ of alice without the DENY would open the
    # remote topic to her; copying the DENY would stop the next hop. Neither is copied.
    up = [
        AclBinding("orders", "User:alice", "*", Op.READ, Perm.ALLOW),
        AclBinding("orders", "User:*", "*", Op.READ, Perm.DENY),
    ]
    assert synced_acls("west.orders", up, "User:mirror") == {
        AclBinding("west.orders", "User:mirror", "*", Op.WRITE, Perm.ALLOW)
    }


def test_an_uncopied_deny_is_a_plan_warning_and_nothing_denies_the_replicator(world):
    world["west"].acls.add(AclBinding("orders", "User:*", "*", Op.ALL, Perm.DENY))
    plan = world.plan()
    found = security(plan)
    assert len(found) == 1 and "DENY User:* ALL on topic orders" in found[0].message
    assert found[0].cluster == "east" and found[0].subject == "west.orders"
    assert ("east", "create_acl", "west.orders") in kinds(plan)
    world.apply(plan)
    assert not [a for a in world["east"].acls if a.permission is Perm.DENY]
