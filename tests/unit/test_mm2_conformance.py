"""Conformance with Apache Kafka's MirrorMaker 2 (issue 11), each test derived from the Kafka source
(connect/mirror and connect/mirror-client, trunk of late 2024) named in its docstring."""

from dataclasses import replace

from reconciler.analysis.expansion import checkpoint_route, route
from reconciler.contract.spec import ClusterSpec, JobSpec, offset_syncs_topic_name
from reconciler.engine.emitters import CheckpointEmitter
from reconciler.mirror.checkpoints import CheckpointStore, OffsetAndMetadata, checkpoint_is_more_recent
from reconciler.mirror.filters import TopicFilter
from reconciler.mirror.offset_translation import OffsetSyncStore
from reconciler.mirror.policy import (
    Mm2InternalKind,
    PolicyKind,
    ReplicationPolicy,
    is_internal_topic,
    known_policies,
    parse_mm2_internal_topic,
)
from reconciler.mirror.records import Checkpoint, OffsetSync
from tests.spec_helpers import job_spec, respec

DEFAULT = ReplicationPolicy()
IDENTITY = ReplicationPolicy(PolicyKind.IDENTITY)


def _spec(**kw) -> JobSpec:
    return job_spec(
        "source1->target2", ClusterSpec("source1", "127.0.0.1:1"), ClusterSpec("target2", "127.0.0.1:1"), **kw
    )


# --- item 2: checkpoints never move backwards ----------------------------------------------------


def test_checkpoint_emitted_only_when_downstream_advances_or_upstream_rewinds():
    """MirrorCheckpointTask.checkpointIsMoreRecent: first checkpoint, upstream rewind, or downstream advance."""
    last = Checkpoint("g", "source1.t", 0, 13, 6)
    assert checkpoint_is_more_recent(None, last)
    assert not checkpoint_is_more_recent(last, Checkpoint("g", "source1.t", 0, 13, 5)), "downstream rewind"
    assert not checkpoint_is_more_recent(last, Checkpoint("g", "source1.t", 0, 13, 6)), "repeat"
    assert not checkpoint_is_more_recent(last, Checkpoint("g", "source1.t", 0, 14, 6)), "same downstream"
    assert checkpoint_is_more_recent(last, Checkpoint("g", "source1.t", 0, 14, 7)), "downstream advanced"
    assert checkpoint_is_more_recent(last, Checkpoint("g", "source1.t", 0, 2, 1)), "upstream group rewound"


def test_checkpoint_records_monotonic_if_store_rewinds():
    """MirrorCheckpointTaskTest.testCheckpointRecordsMonotonicIfStoreRewinds: when the offset-sync store
    translates the same upstream offset to an earlier downstream offset (13->5 after 13->6, as seen),
    no checkpoint is emitted; only an upstream rewind of the group moves the checkpoint back."""
    store = CheckpointStore()
    first = store.select([Checkpoint("g", "source1.t", 0, 13, 6)])
    assert first == [Checkpoint("g", "source1.t", 0, 13, 6)]
    store.update(first)
    assert store.select([Checkpoint("g", "source1.t", 0, 13, 5)]) == []
    rewound = Checkpoint("g", "source1.t", 0, 3, 2)
    assert store.select([rewound]) == [rewound]
    store.update([rewound])
    assert store.get("g", "source1.t", 0) == rewound


def test_checkpoint_store_seeded_from_written_checkpoints_keeps_monotonic_across_restart():
    """CheckpointStore (KAFKA-15905): the last checkpoint per partition is read back at start, later records
    win, so a restarted task does not re-emit a checkpoint older than one it already wrote."""
    store = CheckpointStore()
    store.load([Checkpoint("g", "source1.t", 0, 10, 4), Checkpoint("g", "source1.t", 0, 13, 6)])
    assert len(store) == 1
    assert store.select([Checkpoint("g", "source1.t", 0, 13, 5)]) == []


# --- item 3: upstream commit metadata --------------------------------------------------------------


def test_checkpoint_carries_the_upstream_commit_metadata():
    """MirrorCheckpointTask.checkpoint: `new Checkpoint(group, renameTopicPartition(tp), upstreamOffset,
    downstreamOffset, offsetAndMetadata.metadata())` — the metadata is copied, not emptied."""
    emitter = CheckpointEmitter(_spec(), source_admin=None, target_producer=None, environ={})
    emitter.store = OffsetSyncStore()
    emitter.store.add(OffsetSync("topic3", 0, 10, 20))
    cps = emitter.checkpoints({"app": {("topic3", 0): OffsetAndMetadata(10, "streams-state-v1")}})
    assert cps == [Checkpoint("app", "source1.topic3", 0, 10, 20, "streams-state-v1")]
    assert Checkpoint.deserialize(cps[0].record_key(), cps[0].record_value()).metadata == "streams-state-v1"
    emitter.close()


# --- item 4: topics that came from the target are renamed back ---------------------------------------


def test_downstream_topic_renaming():
    """MirrorCheckpointTaskTest.testDownstreamTopicRenaming (MirrorCheckpointTask.renameTopicPartition)."""
    flow = _spec().mirror_flow
    assert checkpoint_route(flow, "topic3") == "source1.topic3"
    assert checkpoint_route(flow, "target2.topic3") == "topic3"
    assert checkpoint_route(flow, "source6.topic7") == "source1.source6.topic7"
    assert route(flow, "target2.topic3") is None, "the records themselves are still not replicated (isCycle)"


def test_checkpoints_for_a_topic_that_came_from_the_target_are_emitted():
    """MirrorCheckpointTask.checkpointsForGroup filters by the topic filter only (shouldCheckpointTopic),
    not by isCycle: a group reading `target2.topic5` on source1 is checkpointed as `topic5`."""
    emitter = CheckpointEmitter(_spec(), source_admin=None, target_producer=None, environ={})
    emitter.store = OffsetSyncStore()
    emitter.store.add(OffsetSync("target2.topic5", 1, 7, 3))
    assert emitter.checkpoints({"g": {("target2.topic5", 1): 7}}) == [Checkpoint("g", "topic5", 1, 7, 3, "")]
    emitter.close()


# --- item 5: names ending in the separator -----------------------------------------------------------


def test_topic_source_of_a_name_ending_in_the_separator_is_none():
    """DefaultReplicationPolicy.topicSource: `topic.split(separatorPattern)` drops trailing empty strings,
    so `a.` has one part and is a local topic."""
    assert DEFAULT.topic_source("a.") is None
    assert DEFAULT.upstream_topic("a.") is None
    assert DEFAULT.topic_source("a.b.") == "a" and DEFAULT.upstream_topic("a.b.") == "b."
    assert DEFAULT.topic_source(".a") == "" and DEFAULT.topic_source("a..b") == "a"
    assert ReplicationPolicy(separator="__").topic_source("a__") is None


def test_local_topic_named_after_the_target_and_the_separator_is_replicated():
    """MirrorSourceConnector.isCycle with topicSource("target2.") == null: not a cycle, so replicated."""
    flow = _spec().mirror_flow
    assert not DEFAULT.is_cycle("target2.", "target2")
    assert route(flow, "target2.") == "source1.target2."


# --- item 6: small policy differences ----------------------------------------------------------------


def test_replica_topics_are_not_internal_but_excluded_by_the_default_topic_filter():
    """ReplicationPolicy.isInternalTopic knows `__*`, `.*`, `*.internal`, `*-internal` and MM2's own topics;
    `.replica` is only in DefaultTopicFilter's default excludes."""
    assert not DEFAULT.is_internal_topic("x.replica")
    assert not is_internal_topic("x.replica")
    assert not TopicFilter((".*",)).matches("x.replica")


def test_identity_policy_upstream_topic_and_heartbeat_suffix_match():
    """IdentityReplicationPolicy.upstreamTopic returns the topic itself; looksLikeHeartbeat is
    `topic.endsWith(heartbeatsTopic())`, so `myheartbeats` is formatted like a heartbeat topic."""
    assert IDENTITY.upstream_topic("orders") == "orders"
    assert IDENTITY.original_topic("orders") == "orders"
    assert IDENTITY.format_remote_topic("a", "myheartbeats") == "a.myheartbeats"
    assert not IDENTITY.is_heartbeats_topic("myheartbeats")
    assert IDENTITY.is_heartbeats_topic("b.a.heartbeats")


def test_identity_policy_source_cluster_alias():
    """IdentityReplicationPolicy `source.cluster.alias`: topicSource returns it for non-heartbeat topics,
    so isCycle refuses a flow back into that alias."""
    policy = ReplicationPolicy(PolicyKind.IDENTITY, source_cluster_alias="west")
    assert policy.topic_source("orders") == "west"
    assert policy.is_cycle("orders", "west") and not policy.is_cycle("orders", "east")
    assert IDENTITY.topic_source("orders") is None


# --- item 1: internal topic names use the separator -----------------------------------------------------


def test_internal_topic_names_follow_the_separator_by_default():
    """DefaultReplicationPolicyTest.testOffsetSyncsTopic / testCheckpointsTopic:
    `replication.policy.internal.topic.separator.enabled` defaults to true."""
    sep = ReplicationPolicy(separator="__")
    assert sep.checkpoints_topic("CLUSTER") == "CLUSTER__checkpoints__internal"
    assert sep.offset_syncs_topic("CLUSTER") == "mm2-offset-syncs__CLUSTER__internal"
    dotted = ReplicationPolicy(separator="__", internal_separator=False)
    assert dotted.checkpoints_topic("CLUSTER") == "CLUSTER.checkpoints.internal"
    assert dotted.offset_syncs_topic("CLUSTER") == "mm2-offset-syncs.CLUSTER.internal"
    assert DEFAULT.checkpoints_topic("CLUSTER") == "CLUSTER.checkpoints.internal"
    assert sep.heartbeats_topic() == "heartbeats"


def test_internal_topic_with_separator():
    """DefaultReplicationPolicyTest.testInternalTopic with separator `__`."""
    sep = ReplicationPolicy(separator="__")
    assert sep.is_internal_topic("__consumer_offsets")
    assert sep.is_internal_topic(".hiddentopic")
    assert sep.is_internal_topic("mm2-offsets.CLUSTER.internal")
    assert sep.is_internal_topic("mm2-offsets-CLUSTER-internal")
    assert not sep.is_internal_topic("mm2-offsets_CLUSTER_internal")
    assert sep.is_internal_topic("mm2-offset-syncs__CLUSTER__internal")
    assert sep.is_checkpoints_topic("CLUSTER__checkpoints__internal")
    assert sep.checkpoints_source("CLUSTER__checkpoints__internal") == "CLUSTER"


def test_internal_topics_are_recognised_under_every_policy_of_the_topology():
    flows = [_spec(separator="__").mirror_flow, _spec().mirror_flow]
    policies = known_policies(flows)
    m = parse_mm2_internal_topic("west__checkpoints__internal", policies)
    assert m is not None and m.kind is Mm2InternalKind.CHECKPOINTS and m.alias == "west"
    m = parse_mm2_internal_topic("mm2-offset-syncs.east.internal", policies)
    assert m is not None and m.kind is Mm2InternalKind.OFFSET_SYNCS and m.alias == "east"
    assert parse_mm2_internal_topic("orders", policies) is None


def test_job_spec_carries_the_internal_separator_choice():
    spec = _spec(separator="__")
    assert (
        offset_syncs_topic_name(respec(spec, offset_syncs_location="source")) == "mm2-offset-syncs__target2__internal"
    )
    assert spec.to_dict()["settings"]["policy"]["internal_separator"] is True, "Kafka's default"
    legacy = respec(spec, internal_separator=False)
    assert legacy.to_dict()["settings"]["policy"]["internal_separator"] is False
    assert JobSpec.from_dict(legacy.to_dict()) == legacy
    assert (
        offset_syncs_topic_name(respec(legacy, offset_syncs_location="source")) == "mm2-offset-syncs.target2.internal"
    )


# --- item 7/8: heartbeats options ---------------------------------------------------------------------


def test_heartbeats_replication_disabled_leaves_heartbeat_topics_to_the_topic_filter():
    """MirrorSourceConnector.shouldReplicateTopic: `(topicFilter.shouldReplicateTopic(topic) ||
    (heartbeatsReplicationEnabled && replicationPolicy.isHeartbeatsTopic(topic))) && !isInternalTopic && !isCycle`."""
    only_orders = _spec(topics_include=("orders",))
    assert route(only_orders.mirror_flow, "heartbeats") == "source1.heartbeats"
    off = respec(only_orders, heartbeats_replication_enabled=False)
    assert route(off.mirror_flow, "heartbeats") is None
    assert route(_spec(heartbeats_replication_enabled=False).mirror_flow, "heartbeats") == "source1.heartbeats", (
        "the default filter `.*` still matches `heartbeats`, as in Kafka"
    )
    assert off.to_dict()["settings"]["heartbeats"]["replicate"] is False and JobSpec.from_dict(off.to_dict()) == off


def test_heartbeats_location_target_is_kafkas_placement():
    """MirrorHeartbeatTask.poll produces `heartbeats` records through the connector's producer, which
    MirrorMakerConfig points at the target cluster: with `location: target` the job writes them there."""
    from reconciler.engine.topics import internal_topics as internal_topic_specs
    from reconciler.plan.desired import internal_topics
    from reconciler.topology.build import default_flow
    from reconciler.topology.model import HeartbeatsLocation

    kafka = _spec(heartbeats_location="target")
    assert not kafka.heartbeats_on_source and _spec().heartbeats_on_source
    assert kafka.mirror_flow.heartbeats.location is HeartbeatsLocation.TARGET
    flow = default_flow("source1", "target2")
    kafka_flow = replace(flow, heartbeats=kafka.settings.heartbeats)
    wanted = {(cluster, name) for cluster, name, *_ in internal_topics(kafka_flow)}
    assert ("target2", "heartbeats") in wanted and ("source1", "heartbeats") not in wanted
    assert ("source1", "heartbeats") in {(c, n) for c, n, *_ in internal_topics(flow)}
    specs = internal_topic_specs(kafka)
    assert "heartbeats" in [t for t, _ in specs["target"]] and "heartbeats" not in [t for t, _ in specs["source"]]
    assert _spec().to_dict()["settings"]["heartbeats"]["location"] == "source"


def test_topology_options_reach_the_model_the_desired_state_and_the_job_spec(tmp_path):
    """Schema, defaults, model, desired state and job spec agree on the issue-11 options."""
    from reconciler.plan.desired import internal_topics
    from reconciler.topology.build import load_topology
    from tests.helpers import MINIMAL, write

    text = (
        MINIMAL
        + """\
    separator: "__"
    internal_separator: false
    heartbeats: {location: target, replicate: false}
"""
    )
    topology, diags = load_topology([write(tmp_path, "t.yaml", text)])
    assert not diags.errors, diags.errors
    flow = topology.flows[0]
    assert flow.policy == ReplicationPolicy(separator="__", internal_separator=False)
    wanted = {(c, n) for c, n, *_ in internal_topics(flow)}
    assert wanted == {
        ("east", "heartbeats"),
        ("east", "west.checkpoints.internal"),
        ("west", "mm2-offset-syncs.east.internal"),
    }
    spec = JobSpec.from_flow(topology, flow)
    assert spec.settings.policy.internal_separator is False and not spec.heartbeats_on_source
    assert spec.settings.heartbeats.replicate is False
    default, _ = load_topology([write(tmp_path, "d.yaml", MINIMAL + '    separator: "__"\n')])
    assert {n for _, n, *_ in internal_topics(default.flows[0])} == {
        "heartbeats",
        "west__checkpoints__internal",
        "mm2-offset-syncs__east__internal",
    }


def test_past_offset_translation_after_a_restart_that_read_its_checkpoints():
    """OffsetSyncStore.start(initializationMustReadToEnd) (KAFKA-15905, OffsetSyncStoreTest
    testPastOffsetTranslationWithoutInitializationReadToEnd): without the checkpoints, the replay keeps
    only the last sync per partition, so an older offset cannot be translated; with them, it can."""
    syncs = [OffsetSync("t", 0, up, up + 100) for up in (0, 10, 20, 30, 40)]
    conservative = OffsetSyncStore(read_to_end=False)
    conservative.add_all(syncs)
    conservative.mark_read_to_end()
    assert conservative.translate_downstream("t", 0, 15) is None
    restarted = OffsetSyncStore(read_to_end=False)
    restarted.keep_history_during_replay()
    restarted.add_all(syncs)
    restarted.mark_read_to_end()
    assert restarted.translate_downstream("t", 0, 15) is not None
    assert restarted.translate_downstream("t", 0, 40) == 140


def test_builtin_excludes_are_replaceable_like_kafkas_topics_exclude_default(tmp_path):
    """DefaultTopicFilter / DefaultGroupFilter: `topics.exclude` defaults to `.*[\\-\\.]internal, .*\\.replica, __.*`
    and `groups.exclude` to `console-consumer-.*, connect-.*, __.*`; a user value replaces the default."""
    from reconciler.mirror.filters import GroupFilter
    from reconciler.topology.build import load_topology
    from tests.helpers import MINIMAL, write

    assert not TopicFilter((".*",)).matches("x.replica")
    assert TopicFilter((".*",), (), ()).matches("x.replica")
    assert GroupFilter((".*",), (), ("__.*",)).matches("connect-app")
    text = MINIMAL.replace('include: ["orders.*", "payments"]', 'include: [".*"]\n      builtin_exclude: ["__.*"]')
    topology, diags = load_topology([write(tmp_path, "t.yaml", text)])
    assert not diags.errors, diags.errors
    flow = topology.flows[0]
    assert flow.topics.matches("orders.replica") and not flow.topics.matches("__x")
    spec = JobSpec.from_flow(topology, flow)
    assert JobSpec.from_dict(spec.to_dict()) == spec and spec.mirror_flow.topics == flow.topics
    assert route(flow, "west.checkpoints.internal") is None, "internal topics stay out (isInternalTopic)"
    assert "topics_builtin_exclude" not in _spec().to_dict()


def test_mm2_properties_import_and_export_carry_the_new_keys():
    """`replication.policy.internal.topic.separator.enabled` (DefaultReplicationPolicy) and
    `heartbeats.replication.enabled` (MirrorSourceConfig) map to `internal_separator` / `heartbeats.replicate`."""
    from reconciler.interop.draft import to_yaml, validate
    from reconciler.interop.mm2_export import flow_settings
    from reconciler.interop.mm2_import import import_mm2_text

    text = (
        "clusters = a, b\na.bootstrap.servers = a:9092\nb.bootstrap.servers = b:9092\na->b.enabled = true\n"
        "replication.policy.separator = __\nreplication.policy.internal.topic.separator.enabled = false\n"
        "a->b.heartbeats.replication.enabled = false\n"
    )
    draft = import_mm2_text(text, "mm2.properties")
    topology, diags = validate(to_yaml(draft, "mm2.properties"), "imported.yaml")
    assert topology is not None, diags.render()
    [flow] = topology.flows
    assert flow.policy.checkpoints_topic("a") == "a.checkpoints.internal" and not flow.heartbeats.replicate
    settings = flow_settings(flow)
    assert settings[("internal_separator",)] is False and settings[("heartbeats", "replicate")] is False
