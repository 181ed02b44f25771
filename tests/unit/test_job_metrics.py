"""JobMetrics.observe on the typed task results the driver absorbs (driver state injected as a plain object):
counts per target partition, exactly-once aborts, out-of-range events counted once, family labels, the port."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.replication.metrics import METRICS, JobMetrics, exported_series, metrics_port
from reconciler.replication.tasks import PartitionResult, TaskResult


def driver(exactly_once=False, **kw):
    spec = SimpleNamespace(
        exactly_once=exactly_once,
        spec_hash=lambda: "abc",
        git_revision="deadbeef",
        delivery="exactly-once" if exactly_once else "at-least-once",
    )
    base = dict(
        spec=spec,
        lag={},
        out_of_range=[],
        errors=0,
        checkpoints=SimpleNamespace(emitted=0),
        state="running",
        halted=set(),
        plan=SimpleNamespace(copy={("orders", 0): "west.orders"}),
        _failures=0,
    )
    return SimpleNamespace(**{**base, **kw})


def part(count, nbytes=10, **kw):
    return PartitionResult(
        topic="orders",
        partition=0,
        remote="west.orders",
        start=0,
        next=count,
        count=count,
        bytes=nbytes,
        syncs=[(0, 0)] if count else [],
        **kw,
    )


def samples(m: JobMetrics) -> dict[str, float]:
    out = {}
    for fam in text_string_to_metric_families(generate_latest(m.registry).decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(m, name, **labels):
    hits = [
        v for (n, ls), v in samples(m).items() if n == name and all(dict(ls).get(k) == x for k, x in labels.items())
    ]
    assert len(hits) == 1, (name, labels)
    return hits[0]


def test_counts_syncs_checkpoints_and_state():
    m = JobMetrics("west->east:payments")
    d = driver(lag={("orders", 0): SimpleNamespace(remote="west.orders", next=5, end=12)})
    m.observe(d, [TaskResult(slot=0, process="p", partitions=[part(5, 50)], latency_ms=[10, 30])])
    d.checkpoints.emitted, d.errors = 4, 1
    m.observe(d, [TaskResult(slot=0, process="p", partitions=[part(3, 30)], latency_ms=[20])])
    labels = dict(flow="west->east:payments", family="payments", source="west", target="east")
    assert (
        value(
            m, "kafka_connect_mirror_source_connector_record_count_total", topic="west.orders", partition="0", **labels
        )
        == 8
    )
    assert value(m, "kafka_connect_mirror_source_connector_byte_count_total", topic="west.orders") == 80
    assert value(m, "kafka_connect_mirror_source_connector_replication_latency_ms_count") == 3
    assert value(m, "kafka_connect_mirror_source_connector_record_age_ms", stat="max") == 20
    assert value(m, "mirror_partition_lag_records", topic="west.orders", partition="0") == 7
    assert value(m, "mirror_offset_syncs_total", topic="west.orders") == 2
    assert value(m, "kafka_connect_mirror_checkpoint_connector_checkpoints_total") == 4
    assert value(m, "mirror_errors_total") == 1 and value(m, "mirror_batches_total") == 2
    assert value(m, "mirror_job_state", state="running") == 1 and value(m, "mirror_job_state", state="failed") == 0
    assert value(m, "mirror_job_info", spec_hash="abc", git_revision="deadbeef") == 1


def test_aborted_transactions_and_out_of_range_count_once():
    m = JobMetrics("west->east")
    event = {"topic": "orders", "partition": 0, "position": 9}
    d = driver(exactly_once=True, out_of_range=[event], halted={("orders", 0)}, _failures=1)
    m.observe(d, [TaskResult(slot=0, process="p", error="KafkaException: boom", partitions=[part(0)])])
    m.observe(d, [])  # the same event is still listed: not counted again
    assert value(m, "mirror_transaction_aborts_total") == 1
    assert value(m, "mirror_out_of_range_total", topic="west.orders", partition="0") == 1
    assert value(m, "mirror_batch_failures_total") == 2
    assert value(m, "mirror_job_state", state="degraded") == 1
    assert not any(n == "kafka_connect_mirror_source_connector_record_count_total" for n, _ in samples(m))


def test_catalog_and_port_setting():
    m = JobMetrics("a->b")
    names = {fam.name for fam in text_string_to_metric_families(generate_latest(m.registry).decode())}
    assert names == {d.family for d in METRICS}  # every family is registered, even before the first batch
    assert "kafka_connect_mirror_source_connector_record_count_total" in exported_series()
    assert metrics_port({}) == 0 and metrics_port({"RECONCILER_METRICS_PORT": "9404"}) == 9404
    with pytest.raises(SystemExit, match="RECONCILER_METRICS_PORT=x is not a port number"):
        metrics_port({"RECONCILER_METRICS_PORT": "x"})


def test_metrics_port_is_a_job_setting_handed_to_the_deployer(tmp_path):
    from reconciler.cli.main import main
    from reconciler.deploy.base import deployment_options
    from tests.plan_helpers import topology

    topo = topology(
        "flows:\n  - {source: west, target: east, job: {metrics_port: 9500}}\n  - {source: east, target: west}"
    )
    assert deployment_options(topo.flows[0].job) == {"metrics_port": 9500}
    assert deployment_options(topo.flows[1].job) == {"metrics_port": None}  # the deployer picks
    bad = tmp_path / "t.yaml"
    bad.write_text(
        "apiVersion: reconciler/v1\nkind: Topology\nmetadata: {name: t}\nclusters:\n"
        '  west: {bootstrap_servers: "127.0.0.1:1"}\n  east: {bootstrap_servers: "127.0.0.1:2"}\n'
        "flows:\n  - {source: west, target: east, job: {metrics_port: 70000}}\n"
    )
    assert main(["validate", str(bad)]) == 1
