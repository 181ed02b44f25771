from reconciler.mirror.filters import ConfigPropertyFilter, GroupFilter, TopicFilter
from reconciler.mirror.policy import (
    PolicyKind,
    ReplicationPolicy,
    checkpoints_topic,
    is_internal_topic,
    offset_syncs_topic,
)

DEFAULT = ReplicationPolicy()
IDENTITY = ReplicationPolicy(PolicyKind.IDENTITY)


def test_default_policy_names_remote_topics_with_source_alias():
    assert DEFAULT.format_remote_topic("us-west", "topic1") == "us-west.topic1"
    assert ReplicationPolicy(separator="_").format_remote_topic("a", "t") == "a_t"


def test_default_policy_lineage():
    assert DEFAULT.topic_source("us-west.topic1") == "us-west"
    assert DEFAULT.topic_source("topic1") is None
    assert DEFAULT.upstream_topic("b.a.topic1") == "a.topic1"
    assert DEFAULT.original_topic("b.a.topic1") == "topic1"


def test_cycle_rule_refuses_targets_already_in_lineage():
    assert DEFAULT.is_cycle("west.orders", "west")
    assert DEFAULT.is_cycle("east.west.orders", "west")
    assert not DEFAULT.is_cycle("west.orders", "central")
    assert not DEFAULT.is_cycle("orders", "west")


def test_identity_policy_keeps_names_but_prefixes_heartbeats():
    assert IDENTITY.format_remote_topic("a", "orders") == "orders"
    assert IDENTITY.topic_source("orders") is None
    assert IDENTITY.format_remote_topic("a", "heartbeats") == "a.heartbeats"
    assert IDENTITY.is_heartbeats_topic("b.a.heartbeats")


def test_internal_topic_names():
    assert checkpoints_topic("west") == "west.checkpoints.internal"
    assert offset_syncs_topic("east") == "mm2-offset-syncs.east.internal"
    for name in ("__consumer_offsets", "west.checkpoints.internal", "connect-offsets-internal"):
        assert is_internal_topic(name), name
    assert not is_internal_topic("orders")
    assert not is_internal_topic("x.replica"), "Kafka: only DefaultTopicFilter excludes .replica"


def test_topic_filter_full_match_and_internal_excludes():
    f = TopicFilter(("orders.*", "payments"), (r".*\.tmp",))
    assert f.matches("orders") and f.matches("orders.eu") and f.matches("payments")
    assert not f.matches("payments2"), "patterns are full matches"
    assert not f.matches("orders.tmp")
    assert not TopicFilter((".*",)).matches("__consumer_offsets")
    assert not TopicFilter((".*",)).matches("west.checkpoints.internal")


def test_group_and_config_filters():
    assert GroupFilter((".*",)).matches("billing")
    assert not GroupFilter((".*",)).matches("console-consumer-123")
    cfg = ConfigPropertyFilter()
    assert cfg.apply({"retention.ms": "1", "min.insync.replicas": "2"}) == {"retention.ms": "1"}
