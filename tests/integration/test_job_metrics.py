"""A running replication job's Prometheus endpoint, scraped over HTTP on the embedded clusters (Tansu + Spark):
the metric families, their labels, and record counts that match the records copied and the status record."""

from __future__ import annotations

import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from reconciler import logs
from reconciler.contract.status import StatusState
from reconciler.dev.brokers import free_port
from reconciler.engine.driver import ReplicationDriver, SparkExecutor
from reconciler.engine.metrics import METRICS
from reconciler.jobplan.backend import read_job_status
from tests.integration.mirror_helpers import count_topic, create_topic, spec_for, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]
SRC = "kafka_connect_mirror_source_connector"
CP_LATENCY = "kafka_connect_mirror_checkpoint_connector_checkpoint_latency_ms"


def scrape(port: int) -> dict[str, list]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        out.setdefault(family.name, []).extend(family.samples)
    return out


def total(samples: list, name: str, **labels) -> float:
    return sum(s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def records_copied(families: dict[str, list], topic: str) -> float:
    return total(families.get(f"{SRC}_record_count", []), f"{SRC}_record_count_total", topic=topic)


def scrape_until(port: int, ready, timeout: float, what: str) -> dict[str, list]:
    """Scrape until `ready(families)`; returns those families (an endpoint not up yet reads as empty)."""

    def attempt() -> dict[str, list] | None:
        families = _try_scrape(port)
        return families if families and ready(families) else None

    return wait_for(attempt, timeout, what=what)


def test_a_running_job_serves_mm2_style_metrics(fresh_clusters, driver_runs):
    from reconciler.engine.session import build_context

    source, target = fresh_clusters
    create_topic(source.bootstrap, "orders", 3)
    p = Producer(logs.client_config({"bootstrap.servers": source.bootstrap, "linger.ms": 5}))
    for i in range(600):
        p.produce("orders", f"v{i}".encode(), f"k{i}".encode(), partition=i % 3)
    p.flush(30)
    # a consumer group on the source that has read 150 records of each partition: the job checkpoints it
    c = Consumer(
        logs.client_config(
            {"bootstrap.servers": source.bootstrap, "group.id": "billing-app", "enable.auto.commit": False}
        )
    )
    c.commit(offsets=[TopicPartition("orders", i, 150) for i in range(3)], asynchronous=False)
    c.close()
    spec = spec_for(source, target, topics_include=("orders",), groups_include=("billing-.*",))
    spark = build_context(spec, master="local[2]")
    driver = ReplicationDriver(spec, SparkExecutor(spark))
    port = free_port()
    server = driver.metrics.serve(port, addr="127.0.0.1")
    thread = driver_runs.run(driver)
    try:
        wait_for(lambda: count_topic(target.bootstrap, "west.orders", 3) >= 600, 120, what="orders replicated")
        found = scrape_until(
            port,
            lambda f: records_copied(f, "west.orders") >= 600 and len(f.get(f"{CP_LATENCY}_max", [])) == 3,
            90,
            what="record counts and checkpoint latencies scraped",
        )
        thread.stop(60)
        assert not thread.is_alive()
        final = scrape(port)  # after the last batch: the same moment as the final status record
    finally:
        thread.stop(60)
        server.shutdown()
        spark.stop()
    # every family of the catalog is registered (names are what dashboards and alert rules use)
    assert {m.family for m in METRICS} <= set(found)
    counts = found["kafka_connect_mirror_source_connector_record_count"]
    per_partition = {s.labels["partition"]: s.value for s in counts if s.labels["topic"] == "west.orders"}
    assert per_partition == {"0": 200.0, "1": 200.0, "2": 200.0}
    sample = next(s for s in counts if s.labels["topic"] == "west.orders")
    assert {k: sample.labels[k] for k in ("flow", "family", "source", "target")} == {
        "flow": "west->east",
        "family": "",
        "source": "west",
        "target": "east",
    }
    status = read_job_status({"bootstrap.servers": target.bootstrap}, spec.flow)
    assert status is not None and status.state is StatusState.STOPPED
    assert (
        total(
            final["kafka_connect_mirror_source_connector_record_count"],
            "kafka_connect_mirror_source_connector_record_count_total",
        )
        == status.records
        >= 600
    )
    byte_total = total(
        final["kafka_connect_mirror_source_connector_byte_count"],
        "kafka_connect_mirror_source_connector_byte_count_total",
    )
    assert byte_total == status.bytes > 0
    lat = found["kafka_connect_mirror_source_connector_replication_latency_ms"]
    assert total(lat, "kafka_connect_mirror_source_connector_replication_latency_ms_count") > 0
    lag = {
        s.labels["partition"]: s.value
        for s in found["mirror_partition_lag_records"]
        if s.labels["topic"] == "west.orders"
    }
    assert lag == {"0": 0.0, "1": 0.0, "2": 0.0}
    assert total(found["mirror_job_state"], "mirror_job_state", state="running") == 1
    info = found["mirror_job_info"][0]
    assert info.name == "mirror_job_info" and info.labels["spec_hash"] == spec.spec_hash()
    assert total(found["mirror_offset_syncs"], "mirror_offset_syncs_total", topic="west.orders") > 0
    # MM2's per-partition figures: record age when read and replication latency, min <= avg <= max, per partition
    for what in ("record_age_ms", "replication_latency_ms"):
        stats = {
            stat: {
                s.labels["partition"]: s.value
                for s in found[f"{SRC}_{what}_{stat}"]
                if s.labels["topic"] == "west.orders"
            }
            for stat in ("min", "avg", "max")
        }
        assert set(stats["max"]) == {"0", "1", "2"}, what
        assert all(0 <= stats["min"][p] <= stats["avg"][p] <= stats["max"][p] for p in "012"), (what, stats)
        assert total(found[what_hist := f"{SRC}_{what}"], f"{what_hist}_count", topic="west.orders") > 0
    # record age when read <= latency to the acknowledgement (the same sampled records, read before acked)
    assert total(found[f"{SRC}_record_age_ms"], f"{SRC}_record_age_ms_sum") <= total(
        found[f"{SRC}_replication_latency_ms"], f"{SRC}_replication_latency_ms_sum"
    )
    rates = {s.labels["partition"]: s.value for s in found[f"{SRC}_record_rate"] if s.labels["topic"] == "west.orders"}
    assert set(rates) == {"0", "1", "2"} and all(v > 0 for v in rates.values())
    lag_seconds = {
        s.labels["partition"]: s.value
        for s in found["mirror_partition_lag_seconds"]
        if s.labels["topic"] == "west.orders"
    }
    assert lag_seconds == {"0": 0.0, "1": 0.0, "2": 0.0}  # caught up
    # checkpoint latency per group and target topic-partition (MM2's labels), from the group's committed offsets
    cps = found[f"{CP_LATENCY}_max"]
    assert {(s.labels["group"], s.labels["topic"], s.labels["partition"]) for s in cps} == {
        ("billing-app", "west.orders", str(i)) for i in range(3)
    }
    assert all(0 <= s.value < 60_000 for s in cps)
    assert total(found[CP_LATENCY], f"{CP_LATENCY}_count") >= 3


@pytest.mark.jobs
def test_the_local_deployer_gives_each_job_a_metrics_port_that_status_shows(
    fresh_clusters, tmp_path, capsys, state_dir
):
    from reconciler.deployers.local import LocalDeployer
    from tests.integration.test_jobs_apply import Env, _produce

    env = Env(fresh_clusters, tmp_path, capsys)
    create_topic(env.west, "orders", 2)
    _produce(env.west, "orders", 300)
    env.write(topics='["orders"]')
    try:
        env.apply()
        assert env.record()["metrics_port"] is None, "the job binds a free port itself"
        assert env.record()["metrics_bind"] == "127.0.0.1", "this machine only (issue 45)"
        port = wait_for(lambda: LocalDeployer().metrics_port("west->east"), 60, what="the port the job bound")
        assert isinstance(port, int) and port > 0
        wait_for(lambda: count_topic(env.east, "west.orders", 2) >= 300, 120, what=f"orders replicated ({env.log()})")
        found = scrape_until(
            port, lambda f: records_copied(f, "west.orders") >= 300, 60, what="the job's metrics endpoint"
        )
        assert total(found["mirror_job_state"], "mirror_job_state", state="running", flow="west->east") == 1
        code, out = env.run("status", "TOPO")
        assert f"metrics http://127.0.0.1:{port}/metrics" in out
    finally:
        LocalDeployer().stop_all()


def _try_scrape(port: int) -> dict:
    try:
        return scrape(port)
    except OSError:  # the job is still starting its HTTP server
        return {}
