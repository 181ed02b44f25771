"""`reconciler drift` end to end against two embedded Tansu brokers (west -> east).

Each kind of drift the embedded brokers can show is made by hand, the way an operator or a failing
job would: topics deleted or added, configs changed, partition counts that differ, job status
records (what a job publishes) that are missing, stale, stopped, on an old spec, lagging or slow,
and heartbeats that stop. ACL drift needs ACL APIs, which Tansu lacks: it is covered on the memory
double (tests/unit/test_drift_report.py); here it must show up as a note, never as a crash.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer

from reconciler import logs
from reconciler.adapters.base import ConfigAlteration, NewTopicSpec
from reconciler.adapters.kafka_admin import KafkaAdmin
from reconciler.cli.main import main
from reconciler.contract.spec import STATUS_TOPIC, JobSpec
from reconciler.contract.status import StatusPublisher
from reconciler.mirror.records import Heartbeat
from reconciler.textutil import md_inline
from reconciler.topology.build import load_topology
from reconciler.topology.model import Cluster

pytestmark = pytest.mark.kafka

TOPOLOGY = """apiVersion: reconciler/v1
kind: Topology
metadata: {{name: drift-it}}
clusters:
  west: {{bootstrap_servers: "{west}"}}
  east: {{bootstrap_servers: "{east}"}}
flows:
  - source: west
    target: east
    topics: {{include: ["orders", "pay.*"]}}
    sync: {{acls: false}}
slo: {{max_lag_records: 100, max_heartbeat_age_seconds: 30, max_latency_p99_ms: 1000}}
"""


class Env:
    def __init__(self, clusters, tmp_path, capsys):
        west, east = clusters
        self.boot = {"west": west.bootstrap, "east": east.bootstrap}
        self.path = tmp_path / "topology.yaml"
        self.path.write_text(TOPOLOGY.format(**self.boot))
        self.topology, _ = load_topology([self.path])
        self.capsys = capsys
        self.tmp = tmp_path
        self.admin = {a: KafkaAdmin(Cluster(a, b)) for a, b in self.boot.items()}
        self.producer = Producer(logs.client_config({"bootstrap.servers": east.bootstrap, "linger.ms": 0}))

    def drift(self, *extra: str) -> tuple[int, dict]:
        code = main(["drift", str(self.path), "--format", "json", *extra])
        out, err = self.capsys.readouterr()
        assert out, err
        return code, json.loads(out)

    def create(self, alias: str, name: str, partitions: int = 1, configs: dict | None = None) -> None:
        assert self.admin[alias].create_topics([NewTopicSpec(name, partitions, -1, configs or {})])[name].ok

    def status(self, **fields) -> None:
        """A status record as the flow's job publishes it on the target."""
        spec = JobSpec.from_flow(self.topology, self.topology.flow("west->east"))
        self.create("east", STATUS_TOPIC, 1, {"cleanup.policy": "compact"})
        record = {
            "flow": "west->east",
            "spec_hash": spec.spec_hash(),
            "state": "running",
            "heartbeat_at": int(time.time() * 1000),
            "records": 42,
            "lag_total": 3,
            "latency_ms": {"p50": 4.0, "p95": 8.0, "p99": 12.0, "samples": 40},
            "errors": 0,
            **fields,
        }
        StatusPublisher(self.producer, "west->east").publish(record)

    def heartbeat(self, age_seconds: float) -> None:
        hb = Heartbeat("west", "east", int((time.time() - age_seconds) * 1000))
        self.producer.produce("west.heartbeats", hb.record_value(), hb.record_key(), partition=0)
        assert self.producer.flush(10) == 0

    def close(self) -> None:
        for a in self.admin.values():
            a.close()


@pytest.fixture
def env(fresh_clusters, tmp_path, capsys):
    e = Env(fresh_clusters, tmp_path, capsys)
    yield e
    e.close()


def drift_of(doc: dict) -> set[tuple[str, str]]:
    return {(i["category"], i["subject"]) for i in doc["items"] if i["level"] == "drift"}


def test_drift_of_each_kind_on_embedded_clusters(env):
    env.create("west", "orders", 3, {"retention.ms": "3600000"})
    env.create("west", "payments", 2)
    env.create("west", "pay-small", 1)
    env.create("west", "pay-wide", 3)
    env.create("east", "west.pay-small", 2)  # made by hand, with more partitions than its source
    env.create("east", "west.pay-wide", 1)  # made by hand, with fewer (Tansu cannot add partitions)

    code, doc = env.drift()
    assert code == 2 and doc["status"] == "drift"
    drifted = drift_of(doc)
    assert {
        ("missing-topic", "west.orders"),
        ("missing-topic", "west.payments"),
        ("missing-topic", "heartbeats"),
        ("partitions", "west.pay-small"),
        ("partitions", "west.pay-wide"),
        ("job", "west->east"),
    } <= drifted
    assert next(c for c in doc["clusters"] if c["cluster"] == "east")["applied"] is None

    assert main(["apply", str(env.path), "--auto-approve"]) == 0
    env.capsys.readouterr()

    # the job reports and heartbeats flow, but the newest heartbeat is old
    env.status()
    env.heartbeat(age_seconds=120)
    code, doc = env.drift()
    assert code == 2
    assert drift_of(doc) == {
        ("partitions", "west.pay-small"),
        ("partitions", "west.pay-wide"),
        ("heartbeat", "west->east"),
    }
    flow = doc["flows"][0]
    assert flow["job"]["running"] and flow["job"]["spec_current"] and flow["heartbeat"]["age_seconds"] > 100
    applied = next(c for c in doc["clusters"] if c["cluster"] == "east")["applied"]
    assert applied["applied_at"] and applied["who"] and applied["clusters"] == ["east", "west"]
    notes = {i["category"] for i in doc["items"] if i["level"] == "note"}
    assert "acl" not in drift_of(doc) and "revision" in notes

    # fix what can be fixed: the hand-made topics go, a fresh heartbeat arrives -> in sync
    assert all(r.ok for r in env.admin["east"].delete_topics(["west.pay-small", "west.pay-wide"]).values())
    env.admin["west"].delete_topics(["pay-small", "pay-wide"])
    env.heartbeat(age_seconds=0)
    deadline = time.monotonic() + 30
    while True:
        code, doc = env.drift()
        if code == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)  # topic deletion is asynchronous
    assert code == 0, drift_of(doc)
    assert doc["summary"]["drift"] == 0 and doc["flows"][0]["status"] == "ok"

    # hand changes on the target: a config, a deleted remote topic, a topic nobody manages
    env.admin["east"].alter_configs([ConfigAlteration("west.orders", {"retention.ms": "60000"})])
    assert env.admin["east"].delete_topics(["west.payments"])["west.payments"].ok
    env.create("east", "west.legacy", 1)
    env.create("east", "north.checkpoints.internal", 1)
    time.sleep(1)
    code, doc = env.drift()
    assert code == 2
    assert drift_of(doc) == {
        ("config", "west.orders"),
        ("missing-topic", "west.payments"),
        ("unmanaged", "west.legacy"),
        ("unmanaged", "north.checkpoints.internal"),
    }
    config = next(i for i in doc["items"] if i["category"] == "config")
    assert config["action"]["current"] == "60000" and config["action"]["value"] == "3600000"
    assert config["flows"] == ["west->east"]

    # the job: lagging and slow, then on an old spec, then stopped, then silent
    checks = [
        ({"lag_total": 500, "latency_ms": {"p99": 5000.0}}, {("lag", "west->east"), ("latency", "west->east")}),
        ({"spec_hash": "0" * 64}, {("job", "west->east")}),
        ({"state": "failed", "last_error": "broker gone"}, {("job", "west->east")}),
        ({"heartbeat_at": int(time.time() * 1000) - 600_000}, {("job", "west->east")}),
    ]
    for fields, expected in checks:
        env.status(**fields)
        code, doc = env.drift()
        jobs = {
            (i["category"], i["subject"])
            for i in doc["items"]
            if i["level"] == "drift" and i["category"] in ("job", "lag", "latency")
        }
        assert code == 2 and jobs == expected, (fields, jobs)

    # text and HTML of the same state, to files; stdout is the text summary
    html, md = env.tmp / "drift.html", env.tmp / "drift.md"
    assert main(["drift", str(env.path), "--out", str(html), "--out", str(md)]) == 2
    out = env.capsys.readouterr().out
    assert "cluster east: DRIFT" in out and "west.legacy" in out
    assert "<svg" in html.read_text() and md_inline("west.legacy") in md.read_text()  # Markdown-escaped (issue 44)

    # a cluster that cannot be read is an error, not "no drift"
    env.path.write_text(TOPOLOGY.format(west=env.boot["west"], east="127.0.0.1:1"))
    code, doc = env.drift("--no-jobs")
    assert code == 1 and doc["status"] == "error"
