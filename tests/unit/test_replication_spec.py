"""Job spec, offset-sync planning, partition planning and status helpers: pure, no broker."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from reconciler.contract.spec import (
    HOT_RELOADABLE,
    ClusterSpec,
    JobSpec,
    RuntimeSettings,
    job_group,
    offset_syncs_topic_name,
)
from reconciler.contract.status import LatencyWindow, RateWindow, percentiles
from reconciler.engine.sync_plan import plan_run, state_from_list, state_to_list
from reconciler.engine.topics import TopicInfo, explicit_configs, internal_topics, plan_partitions
from reconciler.mirror.offset_syncs import PartitionOffsetSyncState
from reconciler.state.configs import MARKER_KEYS
from reconciler.topology.build import load_topology_text
from reconciler.topology.choices import OnRefusedRecord
from reconciler.topology.model import FlowSettings, HeartbeatsLocation
from tests.spec_helpers import respec

TOPOLOGY = """
apiVersion: reconciler/v1
kind: Topology
clusters:
  west: {bootstrap_servers: "127.0.0.1:1", config: {sasl.password: "${WEST_PASSWORD}", security.protocol: SASL_PLAINTEXT}}
  east: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - source: west
    target: east
    topics: {include: ["orders", "pay.*"], exclude: ["pay-secret"]}
    groups: {include: ["billing-.*"]}
    delivery: exactly-once
    offset_syncs: {topic_location: target, lag_max: 50}
    job: {parallelism: 3, spark_conf: {spark.executor.memory: 1g}}
"""


def test_a_flow_sets_its_task_length_and_record_budget():
    """`job.max_batch_ms` and `job.max_records_per_partition` reach the job's engine; unset, the defaults."""
    text = TOPOLOGY.replace(
        "job: {parallelism: 3,", "job: {parallelism: 3, max_batch_ms: 30000, max_records_per_partition: 2000000,"
    )
    topo = load_topology_text(text)
    engine = JobSpec.from_flow(topo, topo.flow("west->east")).engine
    assert (engine.max_batch_ms, engine.max_records_per_partition) == (30_000, 2_000_000)
    default = load_topology_text(TOPOLOGY)
    engine = JobSpec.from_flow(default, default.flow("west->east")).engine
    assert (engine.max_batch_ms, engine.max_records_per_partition) == (10_000, 5_000_000)


@pytest.fixture
def spec() -> JobSpec:
    topo = load_topology_text(TOPOLOGY)
    return JobSpec.from_flow(topo, topo.flow("west->east"), git_revision="abc123")


def test_from_flow_keeps_settings_and_secret_references(spec):
    assert spec.flow == "west->east" and spec.exactly_once and spec.engine.parallelism == 3
    assert spec.settings.topics.include == ("orders", "pay.*") and spec.settings.groups.include == ("billing-.*",)
    assert spec.source.config["sasl.password"] == "${WEST_PASSWORD}"  # never resolved in a spec
    assert "${WEST_PASSWORD}" in spec.to_json()
    assert spec.source.client_config({"WEST_PASSWORD": "s3cret"})["sasl.password"] == "s3cret"
    assert spec.settings.offset_lag_max == 50 and not spec.offset_syncs_on_source
    assert spec.engine.spark_conf == {"spark.executor.memory": "1g"}


def test_json_round_trip_and_hash(spec):
    again = JobSpec.from_json(spec.to_json())
    assert again == spec and again.spec_hash() == spec.spec_hash()
    assert len(spec.spec_hash()) == 64
    # Provenance is not behaviour.
    assert spec.with_(git_revision="other").spec_hash() == spec.spec_hash()
    assert respec(spec, topics_exclude=()).spec_hash() != spec.spec_hash()
    with pytest.raises(ValueError, match="unknown job spec fields"):
        JobSpec.from_dict({**json.loads(spec.to_json()), "surprise": 1})


def test_hot_reloadable_fields(spec):
    hot = respec(spec, topics_include=("orders",), heartbeats_interval_seconds=9.0, sync_group_offsets=True)
    assert spec.restart_fields(hot) == set()
    assert spec.changed_fields(hot) == {
        "settings.topics.include",
        "settings.heartbeats.interval_seconds",
        "settings.sync.group_offsets",
    }
    assert spec.changes(hot)["settings.topics.include"] == (["orders", "pay.*"], ["orders"])
    cold = respec(spec, delivery="at-least-once", target=ClusterSpec("east", "127.0.0.1:3"))
    assert spec.restart_fields(cold) == {"settings.delivery", "target"}
    engine = spec.with_engine(parallelism=5, max_batch_ms=2_000)
    assert spec.restart_fields(engine) == {"engine.parallelism"}, "batch size is hot, parallelism is not"
    moved = spec.with_settings(heartbeats=replace(spec.settings.heartbeats, location=HeartbeatsLocation.TARGET))
    assert spec.restart_fields(moved) == {"settings.heartbeats.location"}
    assert spec.restart_fields(respec(spec, separator="_")) == {"settings.policy.separator"}
    for path in HOT_RELOADABLE:  # every hot path names settings the spec has
        assert any(p == path or p.startswith(path + ".") for p in spec.leaves()), path
    # restart_hash (the Kubernetes deployer's pod annotation) moves with restart fields only
    assert hot.restart_hash() == spec.restart_hash() != cold.restart_hash()


def test_the_spec_carries_the_flow_settings_as_they_are(spec):
    """One settings object, the topology model's own types, serialized field by field (version 2)."""
    topo = load_topology_text(TOPOLOGY)
    flow = topo.flow("west->east")
    assert spec.settings == FlowSettings.of(flow) and spec.engine == RuntimeSettings.of(flow.job)
    assert type(spec.settings) is FlowSettings and isinstance(flow, FlowSettings), "a Flow is its settings plus more"
    d = spec.to_dict()
    assert d["version"] == 2 and set(d) == {"version", "flow", "source", "target", "settings", "engine", "git_revision"}
    assert d["settings"]["topics"] == {
        "include": ["orders", "pay.*"],
        "exclude": ["pay-secret"],
        "builtin_exclude": None,
    }
    assert d["settings"]["delivery"] == "exactly-once" and d["engine"]["parallelism"] == 3
    assert JobSpec.from_dict(d) == spec


def test_the_runtime_settings_keep_the_key_earlier_releases_wrote(spec):
    """`RuntimeSettings` (named `EngineSettings` before) is written under `engine`, its choices as their strings: a spec
    an earlier release wrote reads back to the same hash, so an upgrade restarts no job."""
    skipping = respec(spec, on_refused_record="skip")
    d = json.loads(skipping.to_json())
    assert (
        set(d["engine"]) == set(RuntimeSettings.__dataclass_fields__) and d["settings"]["on_refused_record"] == "skip"
    )
    again = JobSpec.from_dict(d)
    assert again.settings.on_refused_record is OnRefusedRecord.SKIP and again.spec_hash() == skipping.spec_hash()


def test_a_version_1_spec_is_read_and_needs_a_restart(spec):
    """A job deployed by an earlier release has a flat (version 1) spec: it is read, and comparing it with the
    desired version-2 spec says `version` changed, which needs a restart (every job restarts once on upgrade)."""
    old = {
        "version": 1,
        "flow": "west->east",
        "source": {"alias": "west", "bootstrap_servers": "127.0.0.1:1", "config": dict(spec.source.config)},
        "target": {"alias": "east", "bootstrap_servers": "127.0.0.1:2", "config": {}},
        "delivery": "exactly-once",
        "topics_include": ["orders", "pay.*"],
        "topics_exclude": ["pay-secret"],
        "groups_include": ["billing-.*"],
        "offset_syncs_location": "target",
        "offset_lag_max": 50,
        "parallelism": 3,
        "spark_conf": {"spark.executor.memory": "1g"},
        "git_revision": "abc123",
    }
    v1 = JobSpec.from_dict(old)
    assert v1.version == 1 and v1.settings.topics.include == ("orders", "pay.*") and v1.engine.parallelism == 3
    assert "version" in v1.restart_fields(spec) and v1.spec_hash() != spec.spec_hash()
    with pytest.raises(ValueError, match="unknown job spec fields"):
        JobSpec.from_dict({**old, "surprise": 1})


def test_to_flow_routes_like_the_topology(spec):
    from reconciler.analysis.expansion import route

    topo = load_topology_text(TOPOLOGY)
    model = topo.flow("west->east")
    flow = spec.mirror_flow
    for topic in [
        "orders",
        "payments",
        "pay-secret",
        "heartbeats",
        "east.orders",
        "x.heartbeats",
        "__consumer_offsets",
        "west.checkpoints.internal",
        "other",
    ]:
        assert route(flow, topic) == route(model, topic), topic


def test_names(spec):
    assert job_group(spec).startswith("__")  # never matched by a group filter
    assert offset_syncs_topic_name(spec) == "mm2-offset-syncs.west.internal"  # on the target: named after the source
    assert offset_syncs_topic_name(respec(spec, offset_syncs_location="source")) == "mm2-offset-syncs.east.internal"
    sides = internal_topics(spec)
    assert ("reconciler.status.internal", {"cleanup.policy": "compact"}) in sides["target"]
    assert any(n == "heartbeats" for n, _ in sides["source"])
    assert any(n == "west.checkpoints.internal" for n, _ in sides["target"])


def test_invalid_values_are_refused(spec):
    with pytest.raises(ValueError):
        respec(spec, delivery="at-most-once")
    with pytest.raises(ValueError):
        respec(spec, offset_reset="latest")


# --- offset sync planning --------------------------------------------------------------------
@pytest.mark.parametrize("lag", [0, 1, 3, 100])
def test_plan_run_matches_mm2_record_by_record(lag):
    rng = random.Random(lag)
    fast = PartitionOffsetSyncState(lag)
    slow = PartitionOffsetSyncState(lag)
    up, down = rng.randrange(0, 50), rng.randrange(0, 50)
    for _ in range(200):
        # a run of consecutive records, then a jump (gap, rewind or downstream truncation)
        n = rng.randrange(1, 40)
        expected = [(up + i, down + i) for i in range(n) if slow.update(up + i, down + i)]
        assert plan_run(fast, up, down, n) == expected
        assert state_to_list(fast) == state_to_list(slow)
        up += n + rng.choice([0, 0, 0, 1, 5, -3])
        down += n + rng.choice([0, 0, 0, 2, -10])
        up, down = max(up, 0), max(down, 0)


def test_sync_state_round_trips():
    s = PartitionOffsetSyncState(7)
    s.update(10, 20)
    again = state_from_list(state_to_list(s), 7)
    assert state_to_list(again) == [10, 20, 20] and again.max_offset_lag == 7
    assert state_to_list(state_from_list(None, 7)) == [-1, -1, -1]


# --- partitions --------------------------------------------------------------------------
def test_plan_partitions_creates_grows_and_maps_partition_i_to_i(spec):
    flow = spec.mirror_flow
    source = {
        "orders": TopicInfo("orders", 4),
        "payments": TopicInfo("payments", 2),
        "other": TopicInfo("other", 1),
        "heartbeats": TopicInfo("heartbeats", 1),
        "east.orders": TopicInfo("east.orders", 1),
    }
    target = {"west.orders": TopicInfo("west.orders", 2), "west.heartbeats": TopicInfo("west.heartbeats", 1)}
    plan = plan_partitions(flow, source, target)
    assert [t.remote for t in plan.create] == ["west.payments"]
    assert [(t.remote, t.remote_partitions, t.source_partitions) for t in plan.grow] == [("west.orders", 2, 4)]
    # Added source partitions wait for the remote topic to have them; the rest flows i -> i.
    assert plan.copy == {
        ("heartbeats", 0): "west.heartbeats",
        ("orders", 0): "west.orders",
        ("orders", 1): "west.orders",
    }
    assert any("partitions 2..3 wait" in f for f in plan.findings)
    # Once the remote topic grew, the new partitions are copied.
    target["west.orders"] = TopicInfo("west.orders", 4)
    target["west.payments"] = TopicInfo("west.payments", 2)
    plan = plan_partitions(flow, source, target)
    assert {tp for tp in plan.copy if tp[0] == "orders"} == {("orders", i) for i in range(4)}
    assert ("east.orders", 0) not in plan.copy  # the cycle rule: east's topics never go back to east


class _Entry:
    def __init__(self, value, source):
        self.value, self.source, self.is_sensitive = value, source, False


def test_explicit_configs_on_kafka_and_tansu():
    """The job copies configs with planning's rule (reconciler.state.configs), on one topic's answer."""
    defaults = {k: _Entry("x", 5) for k in sorted(MARKER_KEYS)} | {f"c{i}": _Entry("x", 5) for i in range(26)}
    kafka = {**defaults, "retention.ms": _Entry("1000", 1)}  # DYNAMIC_TOPIC_CONFIG among ~30 defaults
    assert explicit_configs(kafka) == {"retention.ms": "1000"}
    assert explicit_configs(defaults) == {}, "real Kafka, nothing set on the topic"
    assert explicit_configs({**defaults, "x": _Entry("1", 4)}) == {}, "a static broker config is not the topic's"
    tansu = {"retention.ms": _Entry("1000", 5), "cleanup.policy": _Entry("compact", 5)}
    assert explicit_configs(tansu) == {"retention.ms": "1000", "cleanup.policy": "compact"}


def test_percentiles():
    assert percentiles([]) == {"p50": None, "p95": None, "p99": None}
    p = percentiles(range(1, 101))
    assert p == {"p50": 50.0, "p95": 95.0, "p99": 99.0}
    w = LatencyWindow(seconds=10)
    w.add([5, 1, 3], now=100.0)
    w.add([1000], now=105.0)
    assert w.snapshot(now=108.0)["p50"] == 3.0
    assert w.snapshot(now=112.0) == {"p50": 1000.0, "p95": 1000.0, "p99": 1000.0, "samples": 1}


def test_job_spec_defaults_are_the_flow_defaults():
    """topology/defaults.py is the one home of flow defaults: a spec built from a flow that sets nothing
    equals a spec that states nothing (so the same hash)."""
    from reconciler.contract.spec import ClusterSpec as CS
    from reconciler.contract.spec import JobSpec as JS
    from tests.plan_helpers import topology

    topo = topology("flows:\n  - {source: west, target: east}")
    built = JS.from_flow(topo, topo.flows[0])
    bare = JS(built.flow, CS.from_cluster(topo.clusters["west"]), CS.from_cluster(topo.clusters["east"]))
    assert built == bare and built.spec_hash() == bare.spec_hash()


def test_the_windows_are_read_while_the_driver_adds_to_them():
    """The driver's thread adds to a flow's latency and rate windows while the status thread reads them: a read that
    iterated while an add extended raised "deque mutated during iteration", and that status record was lost (seen in
    bench/scale.py's engine log). Thread switches forced as often as the interpreter allows, for 2 s."""
    import sys
    import threading
    import time

    latency, rate = LatencyWindow(seconds=0.05), RateWindow(seconds=0.05)
    errors: list[BaseException] = []
    stop = threading.Event()

    def adding() -> None:
        while not stop.is_set():
            latency.add([1.0] * 50)
            rate.add(5, 10)

    def reading() -> None:
        try:
            while not stop.is_set():
                latency.snapshot()
                rate.rates()
        except RuntimeError as exc:
            errors.append(exc)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    threads = [threading.Thread(target=adding), threading.Thread(target=reading)]
    try:
        for t in threads:
            t.start()
        time.sleep(2)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        sys.setswitchinterval(switch)
    assert errors == []
