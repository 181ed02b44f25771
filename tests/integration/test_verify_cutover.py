"""`reconciler verify` and `reconciler cutover` on the embedded brokers, with a flow's driver run in process
(tasks in this process, no Spark) doing the replication."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer

from reconciler import logs
from reconciler.cli.main import main
from reconciler.contract.status import StatusState
from reconciler.engine.driver import LocalExecutor, ReplicationDriver
from reconciler.mirror import mirror_client as mc
from reconciler.mirror.offset_translation import OffsetSyncStore
from reconciler.mirror.records import OffsetSync
from tests.helpers import write
from tests.integration.mirror_helpers import create_topic, read_topic, spec_for, wait_for

pytestmark = [pytest.mark.kafka]

SYNCS = "mm2-offset-syncs.east.internal"  # the flow west->east writes its offset syncs on west (the default)


def produce(bootstrap: str, topic: str, records, partition: int = 0) -> None:
    """records: (key, value, headers, timestamp ms or None)."""
    p = Producer(logs.client_config({"bootstrap.servers": bootstrap, "linger.ms": 2}))
    for key, value, headers, ts in records:
        kw = {"timestamp": ts} if ts is not None else {}
        p.produce(topic, value, key, partition=partition, headers=headers or None, **kw)
    assert p.flush(10) == 0


def replicate(source, target, topics: tuple[str, ...], done, **spec) -> None:
    """Run the flow west->east of `topics` in this process until `done()`, then stop it."""
    spec = spec_for(source, target, topics_include=topics, heartbeats_enabled=False, **spec)
    driver = ReplicationDriver(spec, LocalExecutor())
    driver.start()
    try:

        def stepped() -> bool:
            driver.step()
            return done()

        wait_for(stepped, 90, interval=0.05, what="the flow to copy the records")
        driver.absorber.flush_delayed_syncs()
    finally:
        driver.stop_event.set()
        driver.close()


def topology(tmp_path, name: str, source, target, topics: list[str], groups: str = "[]") -> str:
    return str(
        write(
            tmp_path,
            name,
            f"""\
            apiVersion: reconciler/v1
            kind: Topology
            clusters:
              west: {{bootstrap_servers: "{source.bootstrap}"}}
              east: {{bootstrap_servers: "{target.bootstrap}"}}
            flows:
              - {{source: west, target: east, topics: {{include: {json.dumps(topics)}}}, groups: {{include: {groups}}}}}
            """,
        )
    )


def copy(rec) -> tuple:
    return (rec.key, rec.value, rec.headers, rec.timestamp[1])


def test_verify_finds_missing_extra_and_changed_records_and_nothing_in_a_clean_topic(fresh_clusters, tmp_path, capsys):
    source, target = fresh_clusters
    create_topic(source.bootstrap, "steady", 2)
    create_topic(source.bootstrap, "ledger", 1)
    for p in range(2):
        produce(
            source.bootstrap,
            "steady",
            [(b"k%d" % i, b"s%d-%d" % (p, i), [("h", b"%d" % i)], None) for i in range(30)],
            partition=p,
        )
    produce(source.bootstrap, "ledger", [(b"k%d" % i, b"v%d" % i, [("seq", b"%d" % i)], None) for i in range(10)])

    def copied() -> bool:
        try:
            return (
                len(read_topic(target.bootstrap, "west.ledger", 1, timeout=5)[0]) >= 10
                and sum(len(r) for r in read_topic(target.bootstrap, "west.steady", 2, timeout=5).values()) >= 60
            )
        except AssertionError:
            return False

    replicate(source, target, ("steady", "ledger"), copied)

    clean = topology(tmp_path, "clean.yaml", source, target, ["steady"])
    assert main(["verify", clean, "--flow", "west->east"]) == 0
    out = capsys.readouterr().out
    assert "clean: the target holds every source record compared" in out
    assert main(["verify", clean, "--flow", "west->east", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["clean"] and data["records_compared"] == 60
    assert [(p["topic"], p["partition"], p["matched"], p["differences"]) for p in data["partitions"]] == [
        ("steady", 0, 30, []),
        ("steady", 1, 30, []),
    ]

    # While the flow is stopped, four more source records; the target gets what a faulty copy would leave:
    # 10 never copied, 11 copied, 12 changed, an extra record, 13 copied twice (at-least-once).
    produce(source.bootstrap, "ledger", [(b"k%d" % i, b"v%d" % i, [("seq", b"%d" % i)], None) for i in range(10, 14)])
    src = read_topic(source.bootstrap, "ledger", 1)[0]
    assert [r.offset for r in src[10:]] == [10, 11, 12, 13]
    s11, s12, s13 = (copy(r) for r in src[11:14])
    changed = (s12[0], b"v12-changed", s12[2], s12[3])
    produce(target.bootstrap, "west.ledger", [s11, changed, (b"stray", b"x", None, None), s13, s13])
    tgt = read_topic(target.bootstrap, "west.ledger", 1)[0]
    t11, t12, t_extra, t13, t_dup = (r.offset for r in tgt[-5:])
    # the offset sync the flow would have written for 13 (so 10..13 count as replicated, not as lag)
    sync = OffsetSync("ledger", 0, 13, t13)
    produce(source.bootstrap, SYNCS, [(sync.record_key(), sync.record_value(), None, None)])

    dirty = topology(tmp_path, "all.yaml", source, target, ["steady", "ledger"])
    assert main(["verify", dirty, "--flow", "west->east", "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert not data["clean"]
    by = {(p["topic"], p["partition"]): p for p in data["partitions"]}
    assert by[("steady", 0)]["differences"] == [] and by[("steady", 1)]["differences"] == []
    ledger = by[("ledger", 0)]
    assert ledger["differences"] == [
        {"kind": "missing", "source_offsets": [10, 10], "target_offsets": None, "count": 1},
        {"kind": "changed", "source_offsets": [12, 12], "target_offsets": [t12, t12], "count": 1},
        {"kind": "extra", "source_offsets": None, "target_offsets": [t_extra, t_extra], "count": 1},
    ]
    assert ledger["duplicates"] == [
        {"kind": "duplicate", "source_offsets": [13, 13], "target_offsets": [t_dup, t_dup], "count": 1}
    ]
    assert ledger["matched"] == 12 and ledger["pending"] == 0 and t11 == t12 - 1

    assert main(["verify", dirty, "--flow", "west->east"]) == 1
    out = capsys.readouterr().out
    assert "3 record(s) differ" in out
    assert ["ledger-0", "missing", "10", "-", "1"] in [line.split() for line in out.splitlines()]

    # a window from after the fabricated records: only what follows is compared
    assert main(["verify", clean, "--flow", "west->east", "--since", "2999-01-01T00:00:00Z", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["records_compared"] == 0


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap}))
    tps = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])[group].result(10)


def test_status_shows_each_group_s_last_checkpoint_or_why_it_is_not_synced(fresh_clusters, tmp_path, capsys):
    source, target = fresh_clusters
    create_topic(source.bootstrap, "orders", 2)
    create_topic(source.bootstrap, "private", 1)
    produce(source.bootstrap, "orders", [(None, b"o%d" % i, None, None) for i in range(10)], partition=0)
    produce(source.bootstrap, "private", [(None, b"p", None, None)])
    commit(source.bootstrap, "app-synced", {("orders", 0): 5})
    commit(source.bootstrap, "app-empty", {("orders", 1): 0})  # partition 1 has no record: no offset sync
    commit(source.bootstrap, "app-private", {("private", 0): 1})  # a topic the flow does not replicate
    spec = spec_for(source, target, topics_include=("orders",), groups_include=("app-.*",), heartbeats_enabled=False)
    driver = ReplicationDriver(spec, LocalExecutor())
    driver.start()
    try:
        assert driver.checkpoints is not None

        def judged() -> bool:
            driver.step()
            by = {g.group: g for g in driver.checkpoints.group_syncs}
            return len(by) == 3 and by["app-synced"].last_checkpoint_ms is not None

        wait_for(judged, 90, interval=0.05, what="a checkpoint round judging the three groups")
        driver.reporter.publish_status()
    finally:
        driver.stop_event.set()
        driver.close()
    path = topology(tmp_path, "t.yaml", source, target, ["orders"], groups='["app-.*"]')
    assert main(["status", path, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["jobs"]
    groups = {g["group"]: g for g in rows[0]["groups"]}
    assert groups["app-synced"]["reason"] is None and groups["app-synced"]["last_checkpoint_ms"] > 0
    assert (groups["app-empty"]["reason"], groups["app-empty"]["partition"]) == ("partition_empty", "orders-1")
    assert (groups["app-private"]["reason"], groups["app-private"]["last_checkpoint_ms"]) == ("topic_filtered", None)
    assert main(["status", path]) == 0
    out = capsys.readouterr().out
    assert "groups that read only topics the flow does not copy (1): app-private" in out
    assert "group app-private" not in out  # one line per flow for those, not one per group
    assert "group app-empty: not synced: partition empty (orders-1)" in out
    assert "group app-synced: last checkpoint" in out


def target_committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap}))
    req = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])]
    result = admin.list_consumer_group_offsets(req)[group].result(10)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def test_cutover_of_a_live_flow_moves_three_groups_without_skipping_a_record(
    fresh_clusters, tmp_path, capsys, driver_runs
):
    source, target = fresh_clusters
    create_topic(source.bootstrap, "orders", 2)
    spec = spec_for(source, target, topics_include=("orders",), groups_include=("app-.*",), heartbeats_enabled=False)
    driver = ReplicationDriver(spec, LocalExecutor())
    runner = driver_runs.run(driver, max_seconds=240)  # `run` starts the driver (and closes it when it stops)
    try:
        for p in range(2):
            produce(source.bootstrap, "orders", [(None, b"p%d-%d" % (p, i), None, None) for i in range(400)], p)
        positions = {"app-a": {0: 400, 1: 400}, "app-b": {0: 250, 1: 120}, "app-c": {0: 7, 1: 0}}
        for group, at in positions.items():  # the consumers stopped there on the source
            commit(source.bootstrap, group, {("orders", p): o for p, o in at.items()})
        path = topology(tmp_path, "t.yaml", source, target, ["orders"], groups='["app-.*"]')
        record = tmp_path / "cutover.json"
        args = ["cutover", path, "--flow", "west->east", "--wait", "120", "--record", str(record)]
        assert main(args + ["--group", "app-a", "--group", "app-b", "--group", "app-c"]) == 0, capsys.readouterr().err
    finally:
        runner.stop(60)
    err = capsys.readouterr().err
    assert "every partition caught up (lag 0)" in err and "committed" in err
    saved = json.loads(record.read_text())
    assert [g["group"] for g in saved["groups"]] == ["app-a", "app-b", "app-c"]
    assert {(e["partition"], e["offset"]) for e in saved["source_ends"]} == {(0, 400), (1, 400)}
    copied = read_topic(target.bootstrap, "west.orders", 2)
    # MM2's translation of the same offset syncs (OffsetSyncStore): the bound a re-read is held to
    syncs = OffsetSyncStore()
    for m in read_topic(source.bootstrap, SYNCS, 1)[0]:
        syncs.add(OffsetSync.deserialize(m.key, m.value))
    for group, at in positions.items():
        moved = target_committed(target.bootstrap, group, "west.orders", 2)
        for p, upstream in at.items():
            values = [r.value for r in copied[p]]
            # where the record the group would read next on the source is on the target
            resume = copied[p][0].offset + (values.index(b"p%d-%d" % (p, upstream)) if upstream < 400 else len(values))
            assert moved[p] <= resume, f"{group} would skip records on partition {p}"
            assert moved[p] == syncs.translate_downstream("orders", p, upstream), "MM2 translates the same"
            if group == "app-a":  # caught up at the end: within offset_lag_max (here exact, the syncs flushed)
                assert resume - moved[p] <= 100

    # a group still consuming on the source is refused
    from confluent_kafka import Consumer

    c = Consumer(
        logs.client_config({"bootstrap.servers": source.bootstrap, "group.id": "app-live", "session.timeout.ms": 6000})
    )
    c.subscribe(["orders"])
    try:
        wait_for(lambda: c.poll(0.5) is not None or c.assignment(), 60, what="app-live joined")
        assert main(["cutover", path, "--flow", "west->east", "--group", "app-live", "--wait", "5"]) == 1
        assert "group 'app-live' is active on 'west'" in capsys.readouterr().err
    finally:
        c.close()


def round_trip_topology(tmp_path, name: str, source, target, policy: str, forward_enabled: bool = False) -> str:
    return str(
        write(
            tmp_path,
            name,
            f"""\
            apiVersion: reconciler/v1
            kind: Topology
            clusters:
              west: {{bootstrap_servers: "{source.bootstrap}"}}
              east: {{bootstrap_servers: "{target.bootstrap}"}}
            flows:
              - {{source: west, target: east, topics: {{include: ["orders"]}}, policy: {policy},
                  enabled: {str(forward_enabled).lower()}}}
              - {{source: east, target: west, topics: {{include: ["orders"]}}, policy: {policy}}}
            """,
        )
    )


def run_flow(spec, done) -> None:
    driver = ReplicationDriver(spec, LocalExecutor())
    driver.start()
    try:

        def stepped() -> bool:
            driver.step()
            return done()

        wait_for(stepped, 90, interval=0.05, what="the flow to copy the records")
        driver.absorber.flush_delayed_syncs()
        driver.state = StatusState.STOPPED  # as `run` ends: its last status record says the job stopped
        driver.reporter.publish_status()
    finally:
        driver.stop_event.set()
        driver.close()


def counted(bootstrap: str, topic: str, partitions: int, want: dict[int, int]):
    def done() -> bool:
        try:
            got = read_topic(bootstrap, topic, partitions, timeout=5)
        except AssertionError:
            return False
        return all(len(got[p]) >= n for p, n in want.items())

    return done


def test_failover_then_failback_with_the_identity_policy_copies_nothing_back_twice(fresh_clusters, tmp_path, capsys):
    from reconciler.operations.cutover import CutoverOutcome

    west, east = fresh_clusters
    create_topic(west.bootstrap, "orders", 2)
    for p in range(2):
        produce(west.bootstrap, "orders", [(None, b"w%d-%d" % (p, i), None, None) for i in range(20)], p)
    # west->east with the identity policy: east's copy is named `orders` too
    run_flow(
        spec_for(west, east, topics_include=("orders",), heartbeats_enabled=False, policy="identity"),
        counted(east.bootstrap, "orders", 2, {0: 20, 1: 20}),
    )
    # the cutover record of that moment (each partition's end: 20)
    record = tmp_path / "cutover.json"
    ends = {mc.TopicPartition("orders", p): 20 for p in range(2)}
    record.write_text(json.dumps(CutoverOutcome("west->east", "west", "east", False, 0, ends, ()).to_dict()))
    # after the failover: west still accepts three records on partition 0 (never copied: the flow is off), east
    # takes its own producers' records
    produce(west.bootstrap, "orders", [(None, b"w0-late%d" % i, None, None) for i in range(3)], 0)
    for p in range(2):
        produce(east.bootstrap, "orders", [(None, b"e%d-%d" % (p, i), None, None) for i in range(5)], p)

    path = round_trip_topology(tmp_path, "t.yaml", west, east, "identity")
    args = ["failback", path, "--from", "east", "--to", "west", "--record", str(record), "--format", "json"]
    assert main(args + ["--dry-run"]) == 0, capsys.readouterr().err
    dry = json.loads(capsys.readouterr().out)
    assert not dry["applied"] and [s["action"] for s in dry["reverse_starts"]] == ["commit", "commit"]
    assert main(args) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    by = {p["partition"]: p for p in out["partitions"]}
    # exactly the three records west accepted after the cutover, by offset
    assert out["divergent_records"] == 3
    assert (by[0]["divergent"], by[0]["divergent_offsets"], by[0]["cutover_end"], by[0]["end"]) == (
        3,
        [[20, 22]],
        20,
        23,
    )
    assert (by[1]["divergent"], by[1]["divergent_offsets"]) == (0, [])
    # the reverse flow starts on east past the last record east holds from west (20 records: position 20)
    assert out["applied"] and out["reverse_group"] == "__reconciler.mirror.east->west"
    assert [(s["topic"], s["partition"], s["position"]) for s in out["reverse_starts"]] == [
        ("orders", 0, 20),
        ("orders", 1, 20),
    ]

    # the reverse flow, started from there, copies east's own records only
    run_flow(
        spec_for(
            east,
            west,
            source_alias="east",
            target_alias="west",
            topics_include=("orders",),
            heartbeats_enabled=False,
            policy="identity",
        ),
        counted(west.bootstrap, "orders", 2, {0: 28, 1: 25}),
    )
    back = read_topic(west.bootstrap, "orders", 2)
    for p in range(2):
        values = [r.value for r in back[p]]
        assert len(values) == len(set(values)), f"a record of west copied back into orders-{p} twice"
        assert values[-5:] == [b"e%d-%d" % (p, i) for i in range(5)]
    assert len(back[0]) == 28 and len(back[1]) == 25


def test_failback_with_the_default_policy_writes_apart_and_counts_without_a_record(fresh_clusters, tmp_path, capsys):
    west, east = fresh_clusters
    create_topic(west.bootstrap, "orders", 1)
    produce(west.bootstrap, "orders", [(None, b"w%d" % i, None, None) for i in range(30)])
    run_flow(
        spec_for(west, east, topics_include=("orders",), heartbeats_enabled=False),
        counted(east.bootstrap, "west.orders", 1, {0: 30}),
    )
    produce(west.bootstrap, "orders", [(None, b"late%d" % i, None, None) for i in range(4)])  # never reached east
    create_topic(east.bootstrap, "orders", 1)
    produce(east.bootstrap, "orders", [(None, b"e%d" % i, None, None) for i in range(6)])

    enabled = round_trip_topology(tmp_path, "on.yaml", west, east, "default", forward_enabled=True)
    assert main(["failback", enabled, "--from", "east", "--to", "west"]) == 1
    assert "flow west->east is still enabled in the topology" in capsys.readouterr().err
    path = round_trip_topology(tmp_path, "t.yaml", west, east, "default")
    assert main(["failback", path, "--from", "east", "--to", "west", "--truncate", "--format", "json"]) in (0, 1)
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    part = out["partitions"][0]
    assert (out["divergent_records"], part["divergent_offsets"], part["cutover_end"]) == (4, [[30, 33]], 30)
    assert out["reverse_starts"] == []  # east's copy of west's orders is never copied back (KIP-382)
    if part["truncated"]:
        lo = read_topic(west.bootstrap, "orders", 1)[0]
        assert lo == []
    else:  # a broker without DeleteRecords: said, exit 1
        assert part["truncate_error"] and "error: not truncated: orders-0:" in captured.err

    run_flow(
        spec_for(
            east, west, source_alias="east", target_alias="west", topics_include=("orders",), heartbeats_enabled=False
        ),
        counted(west.bootstrap, "east.orders", 1, {0: 6}),
    )
    assert [r.value for r in read_topic(west.bootstrap, "east.orders", 1)[0]] == [b"e%d" % i for i in range(6)]
    if not part["truncated"]:
        assert len(read_topic(west.bootstrap, "orders", 1)[0]) == 34  # west's originals: nothing came back
