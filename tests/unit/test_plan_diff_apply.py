"""Diff + apply against the memory double: the plan/apply logic, including what Tansu cannot do (ACLs, partitions)."""

import pytest

from reconciler.adapters.memory_admin import SimulatedCrash
from reconciler.plan.actions import ActionKind as K
from reconciler.state.live import (
    API_CREATE_PARTITIONS,
    API_DELETE_ACLS,
    API_INCREMENTAL_ALTER_CONFIGS,
    AclBinding,
    AclUnavailable,
    ConfigSourceMode,
)
from reconciler.state.live import (
    AclOperation as Op,
)
from reconciler.state.live import (
    AclPermission as Perm,
)
from tests.plan_helpers import World, kinds, topology

FLOW = """flows:
  - source: west
    target: east
    topics: {include: ["orders", "pay.*"]}
"""


@pytest.fixture
def world():
    w = World(topology(FLOW))
    w["west"].add_topic("orders", 3, {"retention.ms": "1000", "min.insync.replicas": "2"})
    w["west"].add_topic("payments", 2)
    w["west"].add_topic("unrelated", 1)
    w["west"].acls.add(AclBinding("orders", "User:alice", "*", Op.READ, Perm.ALLOW))
    return w


def converge(w, plan=None):
    report = w.apply(plan or w.plan())
    assert report.ok, [r.result for r in report.results]
    return w.plan()


def test_first_plan_creates_everything_in_order(world):
    plan = world.plan()
    assert kinds(plan) == [
        ("east", "create_topic", "west.checkpoints.internal"),
        ("east", "create_topic", "west.heartbeats"),
        ("east", "create_topic", "west.orders"),
        ("east", "create_topic", "west.payments"),
        ("east", "create_acl", "west.heartbeats"),
        ("east", "create_acl", "west.orders"),
        ("east", "create_acl", "west.orders"),
        ("east", "create_acl", "west.payments"),
        ("west", "create_topic", "heartbeats"),
        ("west", "create_topic", "mm2-offset-syncs.east.internal"),
    ]
    assert all(a.reason for a in plan.actions)
    assert plan.counts() == {"create": 10, "update": 0, "delete": 0, "replace": 0}


@pytest.mark.parametrize("mode", [ConfigSourceMode.SOURCES, ConfigSourceMode.STORED_ONLY])
def test_apply_then_plan_is_empty_in_both_config_dialects(mode):
    w = World(topology(FLOW), config_mode=mode)
    w["west"].add_topic("orders", 3, {"retention.ms": "1000"})
    second = converge(w)
    assert second.actions == [] and not second.errors
    assert w["east"].topics["west.orders"].configs == {"retention.ms": "1000"}
    assert w.live().cluster("east").config_mode is mode


def test_hand_changed_config_is_put_back(world):
    converge(world)
    world["east"].topics["west.orders"].configs["retention.ms"] = "5"
    plan = world.plan()
    assert [(a.KIND, a.key, a.current, a.value) for a in plan.actions] == [(K.SET_CONFIG, "retention.ms", "5", "1000")]
    assert converge(world).actions == []


def test_new_matching_source_topic_becomes_a_new_remote_topic(world):
    converge(world)
    world["west"].add_topic("payments-eu", 4)
    world["west"].add_topic("nope", 4)
    plan = world.plan()
    assert [(a.KIND, a.subject) for a in plan.actions if a.KIND is K.CREATE_TOPIC] == [
        (K.CREATE_TOPIC, "west.payments-eu")
    ]


def test_partition_increase_is_in_place(world):
    converge(world)
    world["west"].topics["orders"].partitions = 5
    plan = world.plan()
    [a] = plan.actions
    assert (a.KIND, a.current, a.total) == (K.ADD_PARTITIONS, 3, 5)
    assert converge(world).actions == [] and world["east"].topics["west.orders"].partitions == 5


def test_partition_increase_unsupported_is_a_finding(world):
    converge(world)
    world["east"].capabilities = world["east"].capabilities.without(API_CREATE_PARTITIONS)
    world["west"].topics["orders"].partitions = 5
    plan = world.plan()
    assert plan.actions == []
    [f] = [f for f in plan.findings if f.kind.value == "unsupported"]
    assert "CreatePartitions" in f.message and f.subject == "west.orders"


def test_partition_decrease_and_replication_factor_are_reported_impossible(world):
    converge(world)
    world["west"].topics["orders"].partitions = 1  # source recreated smaller
    world["east"].topics["west.payments"].replication_factor = 3
    w_topo = topology(FLOW.replace('pay.*"]}', 'pay.*"]}\n    replication_factor: 1'))
    plan = world.plan(w_topo)
    impossible = {f.subject: f for f in plan.findings if f.kind.value == "impossible"}
    assert "cannot remove partitions" in impossible["west.orders"].message
    assert "reassign" in impossible["west.payments"].hint
    assert not any(a.KIND in (K.DELETE_TOPIC, K.CREATE_TOPIC) for a in plan.actions)  # never recreated


def test_pruning_off_deletes_nothing(world):
    converge(world)
    world["east"].add_topic("west.legacy", 2)  # looks remote, no flow wants it
    world["east"].topics["west.orders"].configs["segment.ms"] = "9"  # not set at the source
    world["east"].acls.add(AclBinding("west.orders", "User:bob", "*", Op.READ, Perm.ALLOW))
    world["east"].acls.add(AclBinding("west.orders", "User:mallory", "*", Op.WRITE, Perm.ALLOW))
    world["east"].add_topic("local-stuff", 1)
    plan = world.plan()
    assert plan.actions == []
    by_kind = {}
    for f in plan.findings:
        by_kind.setdefault(f.kind.value, []).append(f.subject)
    assert by_kind["unmanaged"] == ["west.legacy"]
    assert by_kind["security"] == ["west.orders"]
    assert by_kind["prune-disabled"] == ["west.orders", "west.orders"]
    assert "local-stuff" not in str(plan.findings)


def test_pruning_on_deletes_loudly_and_last(world):
    converge(world)
    prune_topo = topology(FLOW, extra="prune: {topics: true, configs: true, acls: true}")
    world["east"].add_topic("west.legacy", 2)
    world["east"].topics["west.orders"].configs["segment.ms"] = "9"
    world["east"].topics["west.orders"].configs["min.insync.replicas"] = "2"  # filtered out: not ours
    world["east"].acls.add(AclBinding("west.orders", "User:mallory", "*", Op.WRITE, Perm.ALLOW))
    world["east"].topics["west.payments"].configs["retention.ms"] = "1"
    plan = world.plan(prune_topo)
    assert kinds(plan) == [("east", "set_config", "west.payments")] * 0 + [
        ("east", "delete_acl", "west.orders"),
        ("east", "delete_config", "west.orders"),
        ("east", "delete_config", "west.payments"),
        ("east", "delete_topic", "west.legacy"),
    ]
    assert all(a.VERB.value == "-" for a in plan.actions) and "DELETE" in plan.actions[-1].describe()
    world.apply(plan)
    assert "west.legacy" not in world["east"].topics
    assert world["east"].topics["west.orders"].configs == {"retention.ms": "1000", "min.insync.replicas": "2"}
    assert world.plan(prune_topo).actions == []


def test_prune_never_touches_sources_internal_or_disabled_flows():
    topo = topology(
        """flows:
  - {source: west, target: east, topics: {include: ["orders"]}}
  - {source: east, target: west, enabled: false, topics: {include: ["x"]}}
""",
        extra="prune: {topics: true}",
    )
    w = World(topo)
    w["west"].add_topic("orders", 1)
    w["west"].add_topic("east.x", 1)  # belongs to the disabled flow
    w["east"].add_topic("east.foo", 1)  # own alias: local
    w["east"].add_topic("west.checkpoints.internal", 1)
    w["east"].add_topic("some.internal", 1)
    plan = w.plan()
    assert not [a for a in plan.actions if a.KIND is K.DELETE_TOPIC]
    assert [f.subject for f in plan.findings if f.kind.value == "retained"] == ["east.x"]


def test_acl_changes_need_acl_apis(world):
    world["east"].capabilities = world["east"].capabilities.without(API_DELETE_ACLS)
    plan = world.plan()
    assert not [a for a in plan.actions if a.KIND is K.CREATE_ACL]
    assert any(f.kind.value == "unsupported" and "ACL" in f.message for f in plan.findings)


@pytest.mark.parametrize(
    "why, message",
    [
        (AclUnavailable.DISABLED, "ACLs are not enabled on cluster east: no authorizer is configured on its brokers"),
        (AclUnavailable.UNAUTHORIZED, "the reconciler's principal may not manage ACLs on cluster east"),
    ],
)
def test_acls_of_a_cluster_without_an_authorizer_or_rights_are_a_finding_not_a_failed_action(world, why, message):
    # Kafka without an authorizer answers every ACL request SECURITY_DISABLED; a principal without ALTER on the
    # cluster gets an authorization error. Either way the plan says so once, with a hint, and proposes no ACL.
    world["east"].acls_unavailable = why
    plan = world.plan()
    assert not [a for a in plan.actions if a.KIND in (K.CREATE_ACL, K.DELETE_ACL)]
    [finding] = [f for f in plan.findings if f.kind.value == "unsupported" and f.cluster == "east"]
    assert message in finding.message and "sync.acls: false" in (finding.hint or "")
    assert world.apply(plan).ok, "nothing fails on apply"


def test_config_changes_need_incremental_alter_configs(world):
    converge(world)
    world["east"].capabilities = world["east"].capabilities.without(API_INCREMENTAL_ALTER_CONFIGS)
    world["east"].topics["west.orders"].configs["retention.ms"] = "5"
    plan = world.plan()
    assert plan.actions == [] and any("IncrementalAlterConfigs" in f.message for f in plan.findings)


def test_acl_sync_follows_source_changes(world):
    converge(world)
    world["west"].acls.add(AclBinding("payments", "User:dave", "*", Op.ALL, Perm.ALLOW))
    plan = world.plan()
    [a] = plan.actions
    assert a.KIND is K.CREATE_ACL and a.acl == AclBinding("west.payments", "User:dave", "*", Op.READ, Perm.ALLOW)


def test_run_killed_half_way_converges():
    w = World(topology(FLOW))
    for i in range(6):
        w["west"].add_topic(f"pay{i}", 2, {"retention.ms": str(i + 1)})
    w["east"].fail_after = 4
    with pytest.raises(SimulatedCrash):
        w.apply(w.plan())
    w["east"].fail_after = None
    plan = w.plan()
    assert plan.actions and len(plan.actions) < 6 + 6 + 2
    assert converge(w, plan).actions == []


def test_unreachable_cluster_is_an_error_and_deletes_nothing(world):
    prune_topo = topology(FLOW, extra="prune: {topics: true}")
    converge(world)
    world["west"].reachable = False
    plan = world.plan(prune_topo)
    assert [f.kind.value for f in plan.errors] == ["unreachable"]
    assert not [a for a in plan.actions if a.KIND is K.DELETE_TOPIC]


def test_plan_is_deterministic(world):
    assert world.plan().to_dict() == world.plan().to_dict()


def test_topics_of_a_removed_flow_need_prune_flows_too():
    w = World(
        topology("""flows:
  - {source: west, target: east, topics: {include: ["orders"]}}
""")
    )
    w["west"].add_topic("orders", 1)
    w["east"].add_topic("west.orders", 1)
    w["west"].add_topic("east.stuff", 1)  # no flow east->west at all
    only_topics = topology(
        'flows:\n  - {source: west, target: east, topics: {include: ["orders"]}}', extra="prune: {topics: true}"
    )
    plan = w.plan(only_topics)
    assert not [a for a in plan.actions if a.KIND is K.DELETE_TOPIC]
    assert [f.subject for f in plan.findings if f.kind.value == "unmanaged"] == ["east.stuff"]
    both = topology(
        'flows:\n  - {source: west, target: east, topics: {include: ["orders"]}}',
        extra="prune: {topics: true, flows: true}",
    )
    assert [(a.cluster, a.subject) for a in w.plan(both).actions if a.KIND is K.DELETE_TOPIC] == [
        ("west", "east.stuff")
    ]
