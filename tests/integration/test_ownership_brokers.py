"""Two teams' topologies, each with its `owner:` and its environments, applied alternately to the same two real
brokers with prune on: neither ever deletes the other's remote topics; an owner's own prune still deletes its own
(issue 48; the memory-double twin is tests/unit/test_ownership.py)."""

from __future__ import annotations

import json

import pytest

from reconciler.adapters.base import NewTopicSpec
from reconciler.adapters.kafka_admin import KafkaAdmin
from reconciler.cli.main import main
from reconciler.state.ownership import LEASE_TOPIC, parse_claims
from reconciler.topology.model import Cluster

pytestmark = pytest.mark.kafka

TEAM = """apiVersion: reconciler/v1
kind: Topology
metadata: {{name: {owner}}}
owner: {owner}
clusters:
  west: {{}}
  east: {{}}
flows:
  - source: west
    target: east
    name: {family}
    topics: {{include: ["{include}"]}}
prune: {{topics: true, flows: true}}
environments:
  it:
    clusters:
      west: {{bootstrap_servers: "{west}"}}
      east: {{bootstrap_servers: "{east}"}}
  prod:
    clusters:
      west: {{bootstrap_servers: "west.prod.example.com:9093"}}
      east: {{bootstrap_servers: "east.prod.example.com:9093"}}
    prune: {{topics: false}}
"""


def test_two_owners_applied_alternately_to_one_cluster_keep_each_others_topics(fresh_clusters, tmp_path, capsys):
    west, east = fresh_clusters
    admins = {a: KafkaAdmin(Cluster(a, b.bootstrap)) for a, b in (("west", west), ("east", east))}
    try:
        for name in ("orders.eu", "orders.us", "payments.eu"):
            assert admins["west"].create_topics([NewTopicSpec(name, 2, -1, {})])[name].ok

        def write(name: str, owner: str, family: str, include: str) -> str:
            path = tmp_path / name
            path.write_text(
                TEAM.format(owner=owner, family=family, include=include, west=west.bootstrap, east=east.bootstrap)
            )
            return str(path)

        def run(*args: str) -> tuple[int, str]:
            code = main(list(args))
            out, err = capsys.readouterr()
            return code, out + err

        def remote() -> set[str]:
            return {t for t in admins["east"].list_topics() if t.startswith("west.") and "internal" not in t}

        a = write("a.yaml", "team-a", "orders", "orders\\\\..*")
        b = write("b.yaml", "team-b", "payments", "payments\\\\..*")
        for path in (a, b, a, b):
            code, out = run("apply", "--auto-approve", "--env", "it", path)
            assert code == 0 and "DELETE" not in out, out
        assert remote() == {"west.orders.eu", "west.orders.us", "west.payments.eu", "west.heartbeats"}
        claims = parse_claims(admins["east"].read_to_end(LEASE_TOPIC))
        assert claims == {
            "west.orders.eu": {"team-a"},
            "west.orders.us": {"team-a"},
            "west.payments.eu": {"team-b"},
        }

        code, out = run("plan", "--env", "it", "--format", "json", b)
        plan = json.loads(out[: out.rindex("}") + 1])
        assert code == 0 and plan["actions"] == [] and plan["environment"] == "it"
        retained = {f["subject"] for f in plan["findings"] if f["kind"] == "retained"}
        assert {"west.orders.eu", "west.orders.us"} <= retained

        # team a narrows its topics: its own prune deletes its own topic and withdraws the claim, nothing of b's
        a = write("a.yaml", "team-a", "orders", "orders\\\\.eu")
        code, out = run("apply", "--auto-approve", "--env", "it", a)
        assert code == 0 and "DELETE topic west.orders.us" in out and "payments" not in out.split("Applying")[1]
        assert remote() == {"west.orders.eu", "west.payments.eu", "west.heartbeats"}
        assert "west.orders.us" not in parse_claims(admins["east"].read_to_end(LEASE_TOPIC))
        code, out = run("apply", "--auto-approve", "--env", "it", b)
        assert code == 0 and remote() == {"west.orders.eu", "west.payments.eu", "west.heartbeats"}
    finally:
        for admin in admins.values():
            admin.close()
