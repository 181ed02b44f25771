"""Desired state: remote topics, internal topics, configs and ACLs the topology wants (pure)."""

from reconciler.mirror.filters import ConfigPropertyFilter
from reconciler.plan.desired import TopicRole, desired_state, synced_acls
from reconciler.state.live import (
    AclBinding,
    AclPattern,
    Capabilities,
    ClusterState,
    LiveState,
    TopicState,
)
from reconciler.state.live import (
    AclOperation as Op,
)
from reconciler.state.live import (
    AclPermission as Perm,
)
from tests.plan_helpers import topology


def live(**clusters):
    return LiveState(
        {
            a: ClusterState(a, {t.name: t for t in topics}, acls=(), capabilities=Capabilities.all_supported())
            for a, topics in clusters.items()
        }
    )


FLOW = """flows:
  - source: west
    target: east
    topics: {include: ["orders", "pay.*"]}
"""


def test_remote_topic_copies_partitions_and_filtered_configs():
    topo = topology(FLOW)
    ls = live(
        west=[
            TopicState("orders", 6, 1, {"retention.ms": "1000", "min.insync.replicas": "2"}),
            TopicState("other", 1, 1),
        ],
        east=[],
    )
    d = desired_state(topo, ls)
    t = d.get("east", "west.orders")
    assert t.role is TopicRole.REMOTE and t.partitions == 6
    assert dict(t.configs) == {"retention.ms": "1000"}  # min.insync.replicas is excluded by MM2's filter
    assert t.upstream == ("west", "orders") and "west->east" in t.reason
    assert d.get("east", "west.other") is None
    assert t.owns_config("retention.ms") and not t.owns_config("min.insync.replicas")


def test_internal_topics_follow_mirrormaker2():
    topo = topology(FLOW)
    d = desired_state(topo, live(west=[], east=[]))
    hb, cp, os_ = (
        d.get("west", "heartbeats"),
        d.get("east", "west.checkpoints.internal"),
        d.get("west", "mm2-offset-syncs.east.internal"),
    )
    for t in (hb, cp, os_):
        assert t.partitions == 1 and dict(t.configs) == {"cleanup.policy": "compact"}
        assert t.owns_config("cleanup.policy") and not t.owns_config("retention.ms")
    assert hb.role is TopicRole.HEARTBEATS


def test_offset_syncs_on_target_are_named_after_the_source():
    topo = topology(
        FLOW.replace(
            'topics: {include: ["orders", "pay.*"]}',
            'topics: {include: ["orders"]}\n    offset_syncs: {topic_location: target}',
        )
    )
    d = desired_state(topo, live(west=[], east=[]))
    assert d.get("east", "mm2-offset-syncs.west.internal") is not None
    assert d.get("west", "mm2-offset-syncs.east.internal") is None


def test_disabled_emitters_want_no_topics():
    topo = topology(
        FLOW.replace(
            'topics: {include: ["orders", "pay.*"]}',
            'topics: {include: ["orders"]}\n    heartbeats: {enabled: false}\n    checkpoints: {enabled: false}',
        )
    )
    d = desired_state(topo, live(west=[], east=[]))
    assert d.get("west", "heartbeats") is None and d.get("east", "west.checkpoints.internal") is None


def test_multi_hop_chain_converges_in_one_plan():
    topo = topology(
        """flows:
  - {source: a, target: b, topics: {include: ["orders"]}}
  - {source: b, target: c, topics: {include: [".*orders"]}, config_properties: {exclude: ["segment\\\\.ms"]}}
""",
        clusters={"a": "h:1", "b": "h:2", "c": "h:3"},
    )
    d = desired_state(topo, live(a=[TopicState("orders", 4, 1, {"retention.ms": "5", "segment.ms": "7"})], b=[], c=[]))
    mid, end = d.get("b", "a.orders"), d.get("c", "b.a.orders")
    assert mid.partitions == end.partitions == 4
    assert dict(mid.configs) == {"retention.ms": "5", "segment.ms": "7"}
    assert dict(end.configs) == {"retention.ms": "5"}
    assert end.upstream == ("b", "a.orders") and "a -> b -> c" in end.reason


def test_heartbeats_are_replicated_onward_but_never_back():
    topo = topology("""flows:
  - {source: west, target: east, topics: {include: ["x"]}}
  - {source: east, target: west, topics: {include: ["x"]}}
""")
    d = desired_state(topo, live(west=[], east=[]))
    assert d.get("east", "heartbeats") and d.get("west", "heartbeats")
    assert d.get("east", "west.heartbeats").partitions == 1
    assert d.get("west", "east.heartbeats") is not None
    assert d.get("west", "west.east.heartbeats") is None  # cycle rule


def test_config_sync_off_leaves_configs_unmanaged():
    topo = topology(
        FLOW.replace(
            'topics: {include: ["orders", "pay.*"]}', 'topics: {include: ["orders"]}\n    sync: {topic_configs: false}'
        )
    )
    t = desired_state(topo, live(west=[TopicState("orders", 1, 1, {"retention.ms": "1"})], east=[])).get(
        "east", "west.orders"
    )
    assert not t.manage_configs and not t.owns_config("retention.ms")


def test_acl_sync_rules():
    up = [
        AclBinding("orders", "User:alice", "*", Op.READ, Perm.ALLOW),
        AclBinding("orders", "User:bob", "*", Op.ALL, Perm.ALLOW),
        AclBinding("orders", "User:carol", "*", Op.WRITE, Perm.ALLOW),
        AclBinding("orders", "User:eve", "*", Op.READ, Perm.DENY),
        AclBinding("orders", "User:pre", "*", Op.READ, Perm.ALLOW, AclPattern.PREFIXED),
    ]
    got = synced_acls("west.orders", up, "User:mirror")
    assert got == {
        AclBinding("west.orders", "User:alice", "*", Op.READ, Perm.ALLOW),
        AclBinding("west.orders", "User:bob", "*", Op.READ, Perm.ALLOW),
        AclBinding("west.orders", "User:eve", "*", Op.READ, Perm.DENY),
        AclBinding("west.orders", "User:mirror", "*", Op.WRITE, Perm.ALLOW),
    }


def test_unreadable_source_acls_are_a_finding_not_a_guess():
    topo = topology(FLOW)
    ls = LiveState(
        {
            "west": ClusterState("west", {"orders": TopicState("orders", 1, 1)}, acls=None),
            "east": ClusterState("east", {}, acls=(), capabilities=Capabilities.all_supported()),
        }
    )
    d = desired_state(topo, ls)
    assert d.get("east", "west.orders").acls is None
    assert [f.kind.value for f in d.findings] == ["acls-unknown"]


def test_consulted_scope_holds_upstreams_and_desired_names():
    d = desired_state(topology(FLOW), live(west=[TopicState("orders", 1, 1)], east=[]))
    assert "orders" in d.consulted["west"] and "west.orders" in d.consulted["east"]


def test_config_filter_default_excludes_are_mm2s():
    f = ConfigPropertyFilter()
    assert not f.should_replicate("unclean.leader.election.enable") and f.should_replicate("cleanup.policy")


def test_identity_policy_fan_in_is_a_conflict():
    topo = topology(
        """flows:
  - {source: a, target: c, policy: identity, topics: {include: ["orders"]}}
  - {source: b, target: c, policy: identity, topics: {include: ["orders"]}}
""",
        clusters={"a": "h:1", "b": "h:2", "c": "h:3"},
    )
    d = desired_state(topo, live(a=[TopicState("orders", 2, 1)], b=[TopicState("orders", 5, 1)], c=[]))
    t = d.get("c", "orders")
    assert t.partitions == 5 and set(t.flows) == {"a->c", "b->c"}
    assert [f.kind.value for f in d.findings] == ["conflict"]


def test_a_source_taking_larger_records_than_the_target_is_a_warning():
    """A record the source takes and the target refuses (on_refused_record): plan warns, from the live configs."""
    big = TopicState("orders", 1, 1, {"max.message.bytes": "5000000"})
    findings = [
        f for f in desired_state(topology(FLOW), live(west=[big], east=[])).findings if f.kind.value == "record-size"
    ]
    assert len(findings) == 1 and findings[0].subject == "west.orders", findings
    assert "up to 5000000 bytes" in findings[0].message and "producer message.max.bytes 1000000" in findings[0].message
    # The flow does not copy max.message.bytes and the remote topic takes less: that is said too.
    off = FLOW.replace(
        'topics: {include: ["orders", "pay.*"]}', 'topics: {include: ["orders"]}\n    sync: {topic_configs: false}'
    )
    remote = TopicState("west.orders", 1, 1, {"max.message.bytes": "1000000"})
    [finding] = [
        f
        for f in desired_state(topology(off), live(west=[big], east=[remote])).findings
        if f.kind.value == "record-size"
    ]
    assert "the remote topic's max.message.bytes 1000000" in finding.message
    small = TopicState("orders", 1, 1, {"max.message.bytes": "500000"})
    assert not [
        f for f in desired_state(topology(FLOW), live(west=[small], east=[])).findings if f.kind.value == "record-size"
    ]
