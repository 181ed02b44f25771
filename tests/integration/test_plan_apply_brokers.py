"""plan/apply end to end through the CLI against two embedded Tansu brokers (west -> east)."""

from __future__ import annotations

import json
import re
import time

import pytest

from reconciler.adapters.base import NewTopicSpec
from reconciler.adapters.kafka_admin import KafkaAdmin
from reconciler.apply.lock import Lease
from reconciler.cli.main import main
from reconciler.dev.brokers import Engine
from reconciler.state.configs import detect_mode, explicit_configs
from reconciler.topology.model import Cluster

pytestmark = pytest.mark.kafka

TOPOLOGY = """apiVersion: reconciler/v1
kind: Topology
metadata: {{name: it}}
clusters:
  west: {{bootstrap_servers: "{west}", replication_principal: "User:mirror"}}
  east:
    bootstrap_servers: "{east}"
    replication_principal: "User:mirror"
    config: {{sasl.password: "${{EAST_IT_PASSWORD}}"}}
flows:
  - source: west
    target: east
    topics: {{include: ["orders", "pay.*"]}}
{extra}
"""

SECRET = "s3cr3t-value-that-must-not-leak"


class Env:
    def __init__(self, clusters, tmp_path, monkeypatch, capsys):
        west, east = clusters
        monkeypatch.setenv("EAST_IT_PASSWORD", SECRET)
        self.tmp, self.capsys = tmp_path, capsys
        self.topo = tmp_path / "topology.yaml"
        self.bootstrap = {"west": west.bootstrap, "east": east.bootstrap}
        self.write()
        self.admin = {a: KafkaAdmin(Cluster(a, b)) for a, b in self.bootstrap.items()}
        self.outputs: list[str] = []

    def write(self, extra: str = "") -> None:
        self.topo.write_text(TOPOLOGY.format(extra=extra, **self.bootstrap))

    def run(self, *args) -> tuple[int, str, str]:
        code = main([a if a != "TOPO" else str(self.topo) for a in args])
        out, err = self.capsys.readouterr()
        self.outputs += [out, err]
        return code, out, err

    def plan_json(self) -> tuple[int, dict]:
        code, out, _ = self.run("plan", "TOPO", "--format", "json", "--detailed-exitcode")
        return code, json.loads(out)

    def configs(self, alias: str, topic: str) -> dict:
        described = self.admin[alias].describe_topic_configs([topic])
        return explicit_configs(described.get(topic, []), detect_mode(described))

    def create(self, alias: str, name: str, partitions: int = 1, configs: dict | None = None) -> None:
        assert self.admin[alias].create_topics([NewTopicSpec(name, partitions, -1, configs or {})])[name].ok

    def close(self) -> None:
        for a in self.admin.values():
            a.close()


@pytest.fixture
def env(fresh_clusters, tmp_path, monkeypatch, capsys):
    e = Env(fresh_clusters, tmp_path, monkeypatch, capsys)
    yield e
    e.close()
    joined = "\n".join(e.outputs) + "".join(p.read_text() for p in tmp_path.glob("*.json"))
    assert SECRET not in joined


@pytest.fixture(params=[Engine.TANSU, Engine.NOIDA], ids=["tansu", "noida"])
def engine_env(request, broker_factory, tmp_path, monkeypatch, capsys):
    """The same Env on each broker engine (docs/brokers.md: the matrix)."""
    clusters = (broker_factory.start(request.param), broker_factory.start(request.param))
    e = Env(clusters, tmp_path, monkeypatch, capsys)
    yield e
    e.close()


def test_plan_apply_converge_and_drift(engine_env):
    env = engine_env
    env.create("west", "orders", 3, {"retention.ms": "3600000", "min.insync.replicas": "1"})
    env.create("west", "payments", 2)
    env.create("west", "unrelated", 1)

    code, plan = env.plan_json()
    assert code == 2
    creates = {(a["cluster"], a["topic"]) for a in plan["actions"] if a["kind"] == "create_topic"}
    assert creates == {
        ("east", "west.orders"),
        ("east", "west.payments"),
        ("west", "heartbeats"),
        ("east", "west.heartbeats"),
        ("east", "west.checkpoints.internal"),
        ("west", "mm2-offset-syncs.east.internal"),
    }
    orders = next(a for a in plan["actions"] if a.get("topic") == "west.orders")
    assert orders["partitions"] == 3 and orders["configs"] == {"retention.ms": "3600000"}
    kinds = {f["kind"] for f in plan["findings"]}
    assert "acls-unknown" in kinds  # no ACL APIs (Tansu), no authorizer (noida): a finding, not a crash

    code, out, err = env.run("apply", "TOPO")  # stdin is not a terminal: refuses to ask
    assert code == 1 and "--auto-approve" in err
    code, out, _ = env.run("apply", "TOPO", "--auto-approve")
    assert code == 0 and "Apply complete: 6 created" in out
    assert env.configs("east", "west.orders") == {"retention.ms": "3600000"}
    assert env.configs("west", "heartbeats") == {"cleanup.policy": "compact"}
    assert env.configs("east", "west.heartbeats") == {"cleanup.policy": "compact"}, "replicated with its configs"

    code, plan = env.plan_json()
    assert code == 0 and plan["actions"] == []

    # a config changed by hand on a remote topic shows up and is put back
    env.admin["east"].alter_configs(
        [
            __import__("reconciler.adapters.base", fromlist=["x"]).ConfigAlteration(
                "west.orders", {"retention.ms": "60000"}
            )
        ]
    )
    code, plan = env.plan_json()
    assert code == 2 and [(a["kind"], a["key"], a["current"], a["value"]) for a in plan["actions"]] == [
        ("set_config", "retention.ms", "60000", "3600000")
    ]
    assert env.run("apply", "TOPO", "--auto-approve")[0] == 0
    assert env.configs("east", "west.orders") == {"retention.ms": "3600000"}

    # a new source topic that matches a filter becomes a new remote topic; others do not
    env.create("west", "payments-eu", 4)
    env.create("west", "not-matching", 1)
    code, plan = env.plan_json()
    assert code == 2 and [(a["kind"], a["topic"], a["partitions"]) for a in plan["actions"]] == [
        ("create_topic", "west.payments-eu", 4)
    ]
    assert env.run("apply", "TOPO", "--auto-approve")[0] == 0

    # pruning off: an unwanted remote-looking topic is reported, never deleted
    env.create("east", "west.legacy", 1)
    code, plan = env.plan_json()
    assert code == 0 and [f["subject"] for f in plan["findings"] if f["kind"] == "unmanaged"] == ["west.legacy"]
    assert env.run("apply", "TOPO", "--auto-approve")[0] == 0
    assert "west.legacy" in env.admin["east"].list_topics()

    # pruning on: deleted, loudly
    env.write("prune: {topics: true}")
    code, out, _ = env.run("plan", "TOPO")
    assert "- DELETE topic west.legacy" in out and "WARNING: this plan DELETES 1 thing" in out
    assert env.run("apply", "TOPO", "--auto-approve")[0] == 0
    assert "west.legacy" not in env.admin["east"].list_topics()
    assert {"orders", "payments", "unrelated", "not-matching"} <= set(env.admin["west"].list_topics())


def test_saved_plan_applies_once_and_stale_plans_are_refused(env, monkeypatch):
    monkeypatch.setenv("RECONCILER_PLAN_KEY", "test-plan-key-0123456789abcdef")
    env.create("west", "orders", 2, {"retention.ms": "3600000"})
    plan_file = env.tmp / "plan.json"
    code, _, err = env.run("plan", "TOPO", "--out", str(plan_file), "--detailed-exitcode")
    assert code == 2 and "reconciler apply" in err

    env.admin["west"].alter_configs(
        [__import__("reconciler.adapters.base", fromlist=["x"]).ConfigAlteration("orders", {"retention.ms": "7200000"})]
    )
    code, _, err = env.run("apply", str(plan_file), "TOPO", "--auto-approve")
    # the topology planned again wants the new retention: the saved action is not among it
    assert code == 1 and "would not create topic" in err and "plan again" in err
    assert "west.orders" not in env.admin["east"].list_topics()

    env.run("plan", "TOPO", "--out", str(plan_file))
    code, out, _ = env.run("apply", str(plan_file), "TOPO", "--auto-approve")
    assert code == 0 and "Apply complete" in out
    assert env.configs("east", "west.orders") == {"retention.ms": "7200000"}
    code, _, err = env.run("apply", str(plan_file), "TOPO", "--auto-approve")  # the clusters moved on
    assert code == 1 and "would not create topic" in err


def test_unsupported_partition_increase_is_a_finding(env):
    env.create("west", "orders", 2)
    assert env.run("apply", "TOPO", "--auto-approve")[0] == 0
    env.admin["west"].delete_topics(["orders"])  # recreated with more partitions (Tansu cannot add them)
    deadline = time.monotonic() + 10
    while "orders" in env.admin["west"].list_topics() and time.monotonic() < deadline:
        time.sleep(0.1)
    env.create("west", "orders", 5)
    code, plan = env.plan_json()
    assert code == 0 and plan["actions"] == []
    [f] = [f for f in plan["findings"] if f["kind"] == "unsupported"]
    assert f["subject"] == "west.orders" and "CreatePartitions" in f["message"]


def test_concurrent_apply_is_refused_while_the_lease_is_held(env):
    env.create("west", "orders", 1)
    holder = Lease(KafkaAdmin(Cluster("east", env.bootstrap["east"])), ttl=60, who="other-run@ci pid 42")
    holder.acquire()
    try:
        code, _, err = env.run("apply", "TOPO", "--auto-approve")
        assert code == 1 and "locked by another apply: other-run@ci pid 42" in err
        assert "west.orders" not in env.admin["east"].list_topics()
    finally:
        holder.release()
        holder.admin.close()
    assert env.run("apply", "TOPO", "--auto-approve")[0] == 0


def test_unreachable_cluster_and_missing_secret_are_errors(env, monkeypatch):
    code, out, _ = env.run("plan", "TOPO", "--detailed-exitcode")
    assert code == 2
    monkeypatch.delenv("EAST_IT_PASSWORD")
    code, out, _ = env.run("plan", "TOPO", "--detailed-exitcode")
    assert code == 1 and "EAST_IT_PASSWORD not set" in out
    monkeypatch.setenv("EAST_IT_PASSWORD", SECRET)
    env.bootstrap["west"] = "127.0.0.1:1"
    env.write()
    code, out, _ = env.run("plan", "TOPO", "--detailed-exitcode")
    assert code == 1 and "cluster west could not be read" in out


def test_apply_killed_half_way_converges_when_run_again(env):
    import os
    import signal
    import subprocess
    import sys

    for i in range(0, 700, 350):
        res = env.admin["west"].create_topics([NewTopicSpec(f"pay{j}", 1) for j in range(i, i + 350)])
        assert all(r.ok for r in res.values())
    proc = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "apply", str(env.topo), "--auto-approve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ},
    )
    for line in proc.stdout:
        if line.startswith("[2/"):
            proc.send_signal(signal.SIGKILL)  # killed after the first batch: no release, lease left behind
            break
    proc.wait()
    proc.stdout.close()
    code, out, err = env.run("apply", "TOPO", "--auto-approve")  # a dead local holder's lease does not block
    assert code == 0, err
    created = int(re.search(r"Apply complete: (\d+) created", out).group(1))
    assert 0 < created < 704, "the killed run created some (at least its first batch of 500), this one the rest"
    code, plan = env.plan_json()
    assert code == 0 and plan["actions"] == []
    assert sum(t.startswith("west.pay") for t in env.admin["east"].list_topics()) == 700
