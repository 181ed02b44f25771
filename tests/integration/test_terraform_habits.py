"""Terraform habits: `show PLANFILE` (offline), a saved plan is its own approval, `apply --lock-timeout`,
`force-unlock` of a lease left by a killed apply."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from reconciler.adapters.kafka_admin import KafkaAdmin
from reconciler.apply.lock import Lease
from reconciler.cli.main import main
from reconciler.dev.brokers import stop_pid
from reconciler.operations.backend import Backend
from reconciler.topology.model import Cluster
from tests.integration.mirror_helpers import create_topic

pytestmark = [pytest.mark.kafka]

TOPOLOGY = """apiVersion: reconciler/v1
kind: Topology
clusters:
  west: {{bootstrap_servers: "{west}"}}
  east: {{bootstrap_servers: "{east}"}}
flows:
  - {{source: west, target: east, topics: {{include: [orders]}}, sync: {{acls: false}}}}
"""


def test_show_renders_the_saved_plan_offline(fresh_clusters, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RECONCILER_PLAN_KEY", "test-plan-key-0123456789abcdef")
    west, east = fresh_clusters
    create_topic(west.bootstrap, "orders", 2)
    topo = tmp_path / "topology.yaml"
    topo.write_text(TOPOLOGY.format(west=west.bootstrap, east=east.bootstrap))
    plan_file = tmp_path / "plan.json"
    assert main(["plan", str(topo), "--out", str(plan_file)]) == 0
    capsys.readouterr()

    for broker in fresh_clusters:  # show never contacts a cluster
        stop_pid(broker.pid)
    assert main(["show", str(plan_file)]) == 0
    out = capsys.readouterr().out
    assert "+ create topic west.orders" in out and f"reconciler apply {plan_file} TOPOLOGY" in out
    assert "(verified)" in out
    assert main(["show", str(plan_file), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert any(a["kind"] == "create_topic" and "west.orders" in json.dumps(a) for a in doc["actions"])
    assert doc["saved"]["clusters"] == ["east", "west"]

    assert main(["show", str(topo)]) == 1
    assert "not a saved plan" in capsys.readouterr().err


def test_saved_plan_needs_no_confirmation(fresh_clusters, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RECONCILER_PLAN_KEY", "test-plan-key-0123456789abcdef")
    west, east = fresh_clusters
    create_topic(west.bootstrap, "orders", 1)
    topo = tmp_path / "topology.yaml"
    topo.write_text(TOPOLOGY.format(west=west.bootstrap, east=east.bootstrap))
    plan_file = tmp_path / "plan.json"
    assert main(["plan", str(topo), "--out", str(plan_file)]) == 0
    nobody = replace(Backend.default(), ask=lambda question: None)  # no terminal: a topology apply refuses to ask
    assert main(["apply", str(topo)], nobody) == 1
    assert "refusing to ask for confirmation" in capsys.readouterr().err
    assert main(["apply", str(plan_file), str(topo)], nobody) == 0  # the plan file is the approval
    assert "Apply complete" in capsys.readouterr().out


def test_lock_timeout_and_force_unlock(fresh_clusters, tmp_path, capsys):
    west, east = fresh_clusters
    create_topic(west.bootstrap, "orders", 1)
    topo = tmp_path / "topology.yaml"
    topo.write_text(TOPOLOGY.format(west=west.bootstrap, east=east.bootstrap))
    admin = KafkaAdmin(Cluster("east", east.bootstrap))
    stuck = Lease(admin, ttl=600, who="killed@other-host pid 9")  # an apply killed on another host
    stuck.acquire()
    try:
        assert main(["apply", str(topo), "--auto-approve", "--lock-timeout", "1s"]) == 1
        err = capsys.readouterr().err
        assert "waiting for the lease on east: held by killed@other-host pid 9" in err
        assert f"force-unlock PATH... --cluster east {stuck.owner}" in err

        assert main(["force-unlock", str(topo), "--cluster", "east", "no-such-lock", "--force"]) == 1
        assert f"live leases: {stuck.owner} by killed@other-host pid 9" in capsys.readouterr().err
        declined = replace(Backend.default(), ask=lambda question: "no")
        assert main(["force-unlock", str(topo), "--cluster", "east", stuck.owner], declined) == 1
        assert "Force-unlock cancelled." in capsys.readouterr().err
        assert main(["force-unlock", str(topo), "--cluster", "east", stuck.owner, "--force"]) == 0
        assert f"Removed the lease {stuck.owner} on east" in capsys.readouterr().out
        assert main(["apply", str(topo), "--auto-approve"]) == 0
    finally:
        admin.close()
