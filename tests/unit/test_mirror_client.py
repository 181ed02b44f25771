"""MirrorClient / RemoteClusterUtils logic on topic names and records, without a broker."""

from __future__ import annotations

import pytest

from reconciler.mirror import mirror_client as mc
from reconciler.mirror.mirror_client import FailoverAction, GroupState, TopicPartition
from reconciler.mirror.policy import PolicyKind, ReplicationPolicy
from reconciler.mirror.records import Checkpoint, Heartbeat
from reconciler.render import failover as render

DEFAULT = ReplicationPolicy()
IDENTITY = ReplicationPolicy(PolicyKind.IDENTITY)
TOPICS_ON_C = [
    "heartbeats",
    "B.heartbeats",
    "B.A.heartbeats",
    "A.heartbeats",
    "orders",
    "B.orders",
    "A.checkpoints.internal",
    "B.checkpoints.internal",
    "mm2-offset-syncs.C.internal",
    "__consumer_offsets",
]


def cp(group, topic, partition, upstream, downstream, metadata=""):
    c = Checkpoint(group, topic, partition, upstream, downstream, metadata)
    return c.record_key(), c.record_value()


def hb(source, target, ts):
    h = Heartbeat(source, target, ts)
    return h.record_key(), h.record_value()


# --- topic names --------------------------------------------------------------------------------


def test_heartbeat_and_checkpoint_topics_are_found_by_name():
    assert mc.heartbeat_topics(TOPICS_ON_C, DEFAULT) == {"heartbeats", "B.heartbeats", "B.A.heartbeats", "A.heartbeats"}
    assert mc.checkpoint_topics(TOPICS_ON_C) == {"A.checkpoints.internal", "B.checkpoints.internal"}
    assert mc.checkpoints_source("A.checkpoints.internal") == "A"
    assert mc.checkpoints_source(".checkpoints.internal") is None
    # as in MirrorClient's code (not its javadoc), replicated heartbeats count as remote topics
    assert mc.remote_topics(TOPICS_ON_C, DEFAULT) == {"B.orders", "B.heartbeats", "B.A.heartbeats", "A.heartbeats"}
    assert mc.remote_topics(TOPICS_ON_C, DEFAULT, source="A") == {"A.heartbeats"}


def test_hops_follow_the_replication_policy_like_mirror_client():
    assert mc.all_sources("B.A.heartbeats", DEFAULT) == ("B", "A")
    assert mc.count_hops("B.A.heartbeats", "A", DEFAULT) == 2
    assert mc.count_hops("B.A.heartbeats", "B", DEFAULT) == 1
    assert mc.count_hops("B.A.heartbeats", "C", DEFAULT) is None
    assert mc.count_hops("heartbeats", "A", DEFAULT) is None
    # A reaches C directly (A.heartbeats) and through B: the shortest path wins
    assert mc.replication_hops(TOPICS_ON_C, "A", DEFAULT) == 1
    assert mc.replication_hops(["B.A.heartbeats"], "A", DEFAULT) == 2
    assert mc.replication_hops(TOPICS_ON_C, "Z", DEFAULT) is None
    assert mc.upstream_clusters(TOPICS_ON_C, DEFAULT) == {"A", "B"}


def test_hops_with_another_separator_and_cycles_stop():
    underscore = ReplicationPolicy(separator="_")
    assert mc.all_sources("B_A_heartbeats", underscore) == ("B", "A")
    assert mc.count_hops("B_A_heartbeats", "A", underscore) == 2
    # a name that revisits an alias (only possible without the cycle rule) stops at the repeat
    assert mc.all_sources("A.B.A.heartbeats", DEFAULT) == ("A", "B")
    # identity policy: heartbeats are still prefixed (KIP-690), so hops remain observable
    assert mc.count_hops("B.A.heartbeats", "A", IDENTITY) == 2


# --- checkpoints --------------------------------------------------------------------------------


def test_latest_checkpoint_per_partition_of_the_group_wins_and_is_keyed_by_the_remote_topic():
    records = [
        cp("g", "A.orders", 0, 10, 8),
        cp("other", "A.orders", 0, 99, 99),
        cp("g", "A.orders", 1, 5, 5),
        (b"garbage", b"\x00\x00"),
        cp("g", "A.orders", 0, 20, 17, "m"),  # later in the log: replaces the first
        cp("g", "payments", 0, 3, 3),  # a topic that came from the target keeps its name
    ]
    scan = mc.latest_checkpoints(records, "g")
    assert scan.skipped == 1
    assert scan.offsets() == {
        TopicPartition("A.orders", 0): 17,
        TopicPartition("A.orders", 1): 5,
        TopicPartition("payments", 0): 3,
    }
    assert scan.checkpoints[TopicPartition("A.orders", 0)].upstream_offset == 20
    assert mc.latest_checkpoints(records, "nobody").offsets() == {}


def test_a_checkpoint_tombstone_removes_the_key():
    key, _ = cp("g", "A.orders", 0, 1, 1)
    scan = mc.latest_checkpoints(
        [cp("g", "A.orders", 0, 1, 1), cp("g", "A.orders", 1, 1, 1), (key, None), (b"bad", None)], "g"
    )
    assert scan.offsets() == {TopicPartition("A.orders", 1): 1}
    assert scan.skipped == 1


def test_upstream_topic_name_inverts_mirror_checkpoint_task_renaming():
    assert mc.upstream_topic_name("A.orders", "A", "B", DEFAULT) == "orders"
    assert mc.upstream_topic_name("orders", "A", "B", DEFAULT) == "B.orders"  # came from B, went back
    assert mc.upstream_topic_name("orders", "A", "B", IDENTITY) == "orders"


class FakeCluster:
    """A ClusterReader over in-memory topics: {topic: [partition records]}."""

    def __init__(self, topics: dict[str, list[list[mc.RawRecord]]]):
        self._topics = topics
        self.tails: list[tuple[str, int]] = []

    def topics(self):
        return {t: len(ps) for t, ps in self._topics.items()}

    def read_all(self, topic, partitions):
        return [r for p in self._topics[topic][:partitions] for r in p]

    def read_tail(self, topic, partitions, per_partition):
        self.tails.append((topic, per_partition))
        return [r for p in self._topics[topic][:partitions] for r in p[-per_partition:]]


def test_translate_offsets_reads_the_source_checkpoints_topic_on_the_target():
    target = FakeCluster(
        {
            "A.checkpoints.internal": [[cp("g", "A.orders", 0, 10, 8)], [cp("g", "A.orders", 1, 4, 4)]],
            "Z.checkpoints.internal": [[cp("g", "Z.orders", 0, 1, 1)]],
        }
    )
    assert mc.translate_offsets(target, "A", "g").offsets() == {
        TopicPartition("A.orders", 0): 8,
        TopicPartition("A.orders", 1): 4,
    }
    with pytest.raises(mc.NoCheckpointsTopic):
        mc.translate_offsets(target, "B", "g")


# --- heartbeats -> reachability ------------------------------------------------------------------


def test_reachability_reports_shortest_hops_and_the_freshest_heartbeat_on_any_path():
    now = 1_000_000
    cluster = FakeCluster(
        {
            "heartbeats": [[hb("B", "C", now - 1000)]],
            "B.heartbeats": [[hb("A", "B", now - 9000), hb("A", "B", now - 2000)]],
            "B.A.heartbeats": [[hb("X", "A", now - 5000)], [hb("X", "A", now - 4000)]],
            "A.heartbeats": [[]],
            "orders": [[]],
        }
    )
    latest = mc.latest_heartbeats(cluster, DEFAULT)
    assert set(latest) == {"heartbeats", "B.heartbeats", "B.A.heartbeats", "A.heartbeats"}
    assert latest["A.heartbeats"] is None and latest["B.heartbeats"].timestamp == now - 2000
    assert {t for t, _ in cluster.tails} == set(latest)
    report = mc.reachability("C", latest, DEFAULT, now)
    up = {u.alias: u for u in report.upstream}
    assert (up["B"].hops, up["B"].via, up["B"].age_seconds) == (1, "B.heartbeats", 2.0)
    # A is one hop away (A.heartbeats) but that topic is silent; B.A.heartbeats still carries A's heartbeats
    assert (up["A"].hops, up["A"].via, up["A"].age_seconds) == (1, "A.heartbeats", 4.0)
    local = next(t for t in report.topics if t.topic == "heartbeats")
    assert local.sources == () and local.age_seconds == 1.0
    text = render.reachability_text(report, max_age_seconds=3)
    assert "A         1     A.heartbeats" in text and "STALE" in text
    assert "X -> A -> B -> C" not in text and "A -> B -> C" in text
    assert render.reachability_json(report)["upstream"][0]["cluster"] in {"A", "B"}


def test_latest_heartbeat_ignores_garbage_and_picks_the_newest_timestamp():
    newest, skipped = mc.latest_heartbeat([hb("A", "B", 5), (b"x", b"y"), hb("A", "B", 3)])
    assert newest == Heartbeat("A", "B", 5) and skipped == 1
    assert mc.latest_heartbeat([]) == (None, 0)


# --- failover -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "state,members,active",
    [
        ("EMPTY", 0, False),
        ("DEAD", 0, False),
        ("STABLE", 0, True),
        ("EMPTY", 1, True),
        ("PREPARING_REBALANCE", 0, True),
        ("UNKNOWN", 0, True),
    ],
)
def test_group_is_active_unless_provably_empty(state, members, active):
    assert GroupState("g", state, members).active is active


def test_failover_plan_moves_forward_never_backwards_unless_allowed():
    t = {
        TopicPartition("A.o", 0): 10,
        TopicPartition("A.o", 1): 20,
        TopicPartition("A.o", 2): 30,
        TopicPartition("A.o", 3): 40,
        TopicPartition("A.gone", 0): 1,
    }
    committed = {TopicPartition("A.o", 1): 15, TopicPartition("A.o", 2): 30, TopicPartition("A.o", 3): 45}
    plan = mc.plan_failover("g", t, committed, {"A.o": 4})
    actions = {p.partition: p.action for p in plan.partitions}
    assert actions == {
        TopicPartition("A.o", 0): FailoverAction.COMMIT,
        TopicPartition("A.o", 1): FailoverAction.COMMIT,
        TopicPartition("A.o", 2): FailoverAction.UNCHANGED,
        TopicPartition("A.o", 3): FailoverAction.KEEP_AHEAD,
        TopicPartition("A.gone", 0): FailoverAction.MISSING,
    }
    assert plan.commits == {TopicPartition("A.o", 0): 10, TopicPartition("A.o", 1): 20}
    assert plan.missing == (TopicPartition("A.gone", 0),)
    rewind = mc.plan_failover("g", t, committed, {"A.o": 4, "A.gone": 1}, allow_rewind=True)
    assert rewind.commits[TopicPartition("A.o", 3)] == 40 and not rewind.missing


def test_policy_between_flows():
    assert mc.policy_between([]) == DEFAULT
    assert mc.policy_between([IDENTITY, IDENTITY]) == IDENTITY
    assert mc.policy_between([IDENTITY, DEFAULT]) == DEFAULT


def test_table_aligns_columns_and_shows_none_as_dash():
    assert render.table(["A", "LONGER"], [("x", None), ("yyyy", 1)]) == "A     LONGER\nx     -\nyyyy  1\n"
