"""`offsets translate`, `failover` and `reachability` against real brokers holding real MM2 records.

The replication itself is simulated: the tests write the remote topic, MM2 Checkpoint records and
Heartbeat records (reconciler.mirror.records) where MirrorMaker 2 would, then run the commands
through the CLI entry point and check what a consumer of the group sees afterwards.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from reconciler import logs
from reconciler.cli.main import main
from reconciler.mirror.records import Checkpoint, Heartbeat
from tests.helpers import write

pytestmark = pytest.mark.kafka

#: Tansu completes a group join after about half the session timeout (23 s with the default 45 s).
FAST_GROUP = {"session.timeout.ms": 2000, "heartbeat.interval.ms": 500}
SKIP = 3  # replication started at upstream offset 3: downstream offset = upstream offset - 3
RECORDS = 20


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap}))
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes | None, bytes | None]]) -> None:
    producer = Producer(logs.client_config({"bootstrap.servers": bootstrap}))
    for partition, key, value in records:
        producer.produce(topic, key=key, value=value, partition=partition)
    assert producer.flush(10) == 0


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap}))
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])]
    result = admin.list_consumer_group_offsets(request)[group].result(10)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def value(partition: int, i: int) -> bytes:
    return f"p{partition}-r{i}".encode()


@pytest.fixture
def replicated(two_clusters, tmp_path):
    """A->B with `orders` (2 partitions) replicated from upstream offset SKIP, and checkpoints of a group.

    The group consumed A up to offset 12 on partition 0 and 7 on partition 1; MM2 checkpointed
    that (after an older checkpoint, and next to another group's) into A.checkpoints.internal on B.
    """
    west, east = two_clusters
    uid = uuid.uuid4().hex[:6]
    a, b, group = f"a{uid}", f"b{uid}", f"billing-{uid}"
    remote = f"{a}.orders"
    create_topic(west.bootstrap, "orders-" + uid, 2)  # upstream, for the record: not read by the commands
    create_topic(east.bootstrap, remote, 2)
    produce(east.bootstrap, remote, [(p, None, value(p, i)) for p in range(2) for i in range(SKIP, RECORDS)])
    upstream = {0: 12, 1: 7}
    checkpoints = f"{a}.checkpoints.internal"
    create_topic(east.bootstrap, checkpoints, 1)
    records = [Checkpoint(group, remote, 0, 6, 6 - SKIP), Checkpoint("other", remote, 0, 19, 16)]
    records += [Checkpoint(group, remote, p, u, u - SKIP, "meta") for p, u in upstream.items()]
    produce(east.bootstrap, checkpoints, [(0, c.record_key(), c.record_value()) for c in records])
    topology = write(
        tmp_path,
        "t.yaml",
        f"""\
        apiVersion: reconciler/v1
        kind: Topology
        clusters:
          {a}: {{bootstrap_servers: "{west.bootstrap}"}}
          {b}: {{bootstrap_servers: "{east.bootstrap}"}}
        flows:
          - {{source: {a}, target: {b}, groups: {{include: ["billing-.*"]}}}}
        """,
    )
    return dict(a=a, b=b, group=group, remote=remote, upstream=upstream, east=east.bootstrap, topology=str(topology))


def test_translate_prints_the_latest_checkpoint_per_partition(replicated, capsys):
    r = replicated
    args = ["offsets", "translate", "--group", r["group"], "--source", r["a"], "--target", r["b"], r["topology"]]
    assert main(args) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert rows == [[r["remote"], "0", "9", "orders", "12"], [r["remote"], "1", "4", "orders", "7"]]

    assert main(args + ["--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["checkpoints_topic"] == f"{r['a']}.checkpoints.internal"
    assert [
        (o["topic"], o["partition"], o["offset"], o["upstream_topic"], o["upstream_offset"], o["metadata"])
        for o in data["offsets"]
    ] == [(r["remote"], 0, 9, "orders", 12, "meta"), (r["remote"], 1, 4, "orders", 7, "meta")]


def test_translate_explains_missing_checkpoints(replicated, capsys):
    r = replicated
    base = ["offsets", "translate", "--source", r["a"], "--target", r["b"], r["topology"]]
    assert main(base + ["--group", "billing-nobody"]) == 1
    assert "no checkpoints for group 'billing-nobody'" in capsys.readouterr().err
    # the other direction has no checkpoints topic at all
    assert (
        main(["offsets", "translate", "--group", r["group"], "--source", r["b"], "--target", r["a"], r["topology"]])
        == 1
    )
    err = capsys.readouterr().err
    assert f"has no topic {r['b']}.checkpoints.internal" in err and f"no flow {r['b']}->{r['a']}" in err
    assert main(base + ["--group", r["group"], "--target", "nowhere"]) == 1
    assert "cluster 'nowhere' is not in the topology" in capsys.readouterr().err


def test_failover_commits_translated_offsets_and_the_group_resumes_without_skipping(replicated, capsys):
    r = replicated
    args = ["failover", "--group", r["group"], "--source", r["a"], "--target", r["b"], r["topology"]]

    assert main(args) == 0, "a dry run"
    captured = capsys.readouterr()
    assert "commit" in captured.out and "dry run: 2 offset(s) would be committed" in captured.err
    assert committed(r["east"], r["group"], r["remote"], 2) == {}, "a dry run changes nothing"

    assert main(args + ["--apply", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["applied"] is True and data["group_active"] is False
    translated = {p: u - SKIP for p, u in r["upstream"].items()}
    assert committed(r["east"], r["group"], r["remote"], 2) == translated

    # the migrated consumer starts on B exactly where the checkpoint put it: it sees every record
    # the group had not yet consumed on A (offsets >= the upstream offsets), none skipped
    consumer = Consumer(
        logs.client_config(
            {
                "bootstrap.servers": r["east"],
                "group.id": r["group"],
                "enable.auto.commit": False,
                "auto.offset.reset": "latest",
                **FAST_GROUP,
            }
        )
    )
    consumer.subscribe([r["remote"]])
    seen: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}
    expected = {p: [value(p, i) for i in range(u, RECORDS)] for p, u in r["upstream"].items()}
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and any(len(seen[p]) < len(expected[p]) for p in seen):
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen[msg.partition()].append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    for p in seen:
        assert seen[p][0][0] == translated[p], "resumes at the translated offset"
        assert [v for _, v in seen[p]] == expected[p], "no record skipped, none before the checkpoint"

    # again: nothing left to move, and offsets committed further on B are never rewound by default
    assert main(args + ["--apply"]) == 0
    assert "nothing to commit" in capsys.readouterr().err


def test_failover_refuses_while_the_group_is_active_on_the_target(replicated, capsys):
    r = replicated
    consumer = Consumer(
        logs.client_config(
            {
                "bootstrap.servers": r["east"],
                "group.id": r["group"],
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                **FAST_GROUP,
            }
        )
    )
    assigned: list = []
    consumer.subscribe([r["remote"]], on_assign=lambda c, ps: assigned.extend(ps))
    try:
        deadline = time.monotonic() + 15
        while not assigned and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert assigned, "the consumer joined the group on B"
        args = ["failover", "--group", r["group"], "--source", r["a"], "--target", r["b"], r["topology"]]
        assert main(args + ["--apply"]) == 1
        captured = capsys.readouterr()
        assert f"refusing to fail over: group '{r['group']}' is active on '{r['b']}'" in captured.err
        assert "nothing was changed" in captured.err and "ACTIVE" in captured.out
        assert committed(r["east"], r["group"], r["remote"], 2) == {}
        assert main(args) == 0, "a dry run still shows the plan"
        assert "--apply would be refused" in capsys.readouterr().err
    finally:
        consumer.close()


def test_commands_need_the_target_clusters_variables(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("B_NOWHERE_BOOTSTRAP", raising=False)
    topology = write(
        tmp_path,
        "t.yaml",
        """\
        apiVersion: reconciler/v1
        kind: Topology
        clusters:
          a: {bootstrap_servers: "127.0.0.1:1"}
          b: {bootstrap_servers: "${B_NOWHERE_BOOTSTRAP}"}
        flows:
          - {source: a, target: b}
        """,
    )
    assert main(["offsets", "translate", "--group", "g", "--source", "a", "--target", "b", str(topology)]) == 1
    assert "B_NOWHERE_BOOTSTRAP" in capsys.readouterr().err


def test_reachability_shows_upstream_clusters_hops_and_heartbeat_age(broker_factory, tmp_path, capsys):
    c = broker_factory.start()  # its own broker: heartbeat topic names are fixed
    uid = uuid.uuid4().hex[:4]
    a, b, cc = f"a{uid}", f"b{uid}", f"c{uid}"
    now = int(time.time() * 1000)
    topics = {
        "heartbeats": [Heartbeat(b, cc, now - 1_000)],
        f"{b}.heartbeats": [Heartbeat(a, b, now - 60_000), Heartbeat(a, b, now - 2_000)],
        f"{b}.{a}.heartbeats": [Heartbeat("x", a, now - 3_000)],
        f"z{uid}.heartbeats": [],  # a flow whose heartbeats never arrived
    }
    for topic, heartbeats in topics.items():
        create_topic(c.bootstrap, topic, 1)
        produce(c.bootstrap, topic, [(0, h.record_key(), h.record_value()) for h in heartbeats])
    topology = write(
        tmp_path,
        "t.yaml",
        f"""\
        apiVersion: reconciler/v1
        kind: Topology
        clusters:
          {a}: {{bootstrap_servers: "127.0.0.1:1"}}
          {b}: {{bootstrap_servers: "127.0.0.1:2"}}
          {cc}: {{bootstrap_servers: "{c.bootstrap}"}}
        flows:
          - {{source: {a}, target: {b}}}
          - {{source: {b}, target: {cc}}}
        slo: {{max_heartbeat_age_seconds: 2.5}}
        """,
    )
    assert main(["reachability", "--cluster", cc, str(topology), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    up = {u["cluster"]: u for u in data["upstream"]}
    assert (up[b]["hops"], up[b]["via"]) == (1, f"{b}.heartbeats")
    assert (up[a]["hops"], up[a]["via"]) == (2, f"{b}.{a}.heartbeats")
    assert 2.0 <= up[b]["age_seconds"] < 30 and 3.0 <= up[a]["age_seconds"] < 30
    assert (up[f"z{uid}"]["hops"], up[f"z{uid}"]["age_seconds"]) == (1, None)
    local = next(t for t in data["heartbeat_topics"] if t["topic"] == "heartbeats")
    assert local["sources"] == [] and local["heartbeat"] == f"{b}->{cc}"

    assert main(["reachability", "--cluster", cc, str(topology)]) == 0
    out = capsys.readouterr().out
    assert f"{a} -> {b} -> {cc}" in out and "STALE" in out  # A's heartbeat is older than the 2.5 s SLO
    assert "no heartbeat" in out


def test_an_unreachable_target_is_an_error_not_a_crash(tmp_path, capsys):
    topology = write(
        tmp_path,
        "t.yaml",
        """\
        apiVersion: reconciler/v1
        kind: Topology
        clusters:
          a: {bootstrap_servers: "127.0.0.1:1"}
          b: {bootstrap_servers: "127.0.0.1:1"}
        flows:
          - {source: a, target: b}
        """,
    )
    assert main(["reachability", "--cluster", "b", "--timeout", "1", str(topology)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot connect to cluster 'b' at 127.0.0.1:1") and err.count("\n") == 1, err
