"""`reconciler show PLANFILE` renders a saved plan without contacting the clusters (Terraform's show)."""

from __future__ import annotations

import json

import pytest

from reconciler.cli.main import main
from reconciler.dev.brokers import stop_pid
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


def test_show_renders_the_saved_plan_offline(fresh_clusters, tmp_path, capsys):
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
    assert "+ create topic west.orders" in out and f"reconciler apply {plan_file}" in out
    assert main(["show", str(plan_file), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert any(a["kind"] == "create_topic" and "west.orders" in json.dumps(a) for a in doc["actions"])
    assert doc["saved"]["clusters"] == ["east", "west"]

    assert main(["show", str(topo)]) == 1
    assert "not a saved plan" in capsys.readouterr().err
