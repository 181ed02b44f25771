"""diff_topologies: which flows, clusters and settings changed between two models (pure)."""

from __future__ import annotations

from reconciler.gitops.topology_diff import ChangeKind, ClusterChange, FlowChange, changed_settings, diff_topologies
from reconciler.topology.build import load_topology_text

BASE = """\
apiVersion: reconciler/v1
kind: Topology
clusters:
  west: {bootstrap_servers: "127.0.0.1:1", config: {sasl.username: a}}
  east: {bootstrap_servers: "127.0.0.1:2"}
  north: {bootstrap_servers: "127.0.0.1:3"}
flows:
  - {source: west, target: east, topics: {include: ["orders"]}}
  - {source: east, target: west, topics: {include: ["orders"]}}
  - {source: west, target: north}
"""


def topo(text: str):
    return load_topology_text(text)


def test_identical_topologies_have_no_changes():
    changes = diff_topologies(topo(BASE), topo(BASE))
    assert changes.empty and changes.affected_flows == ()


def test_flows_added_removed_and_changed_with_the_settings_that_changed():
    new = BASE.replace(
        '{source: west, target: east, topics: {include: ["orders"]}}',
        '{source: west, target: east, topics: {include: ["orders", "payments"]}, job: {parallelism: 4}}',
    )
    new = new.replace("  - {source: west, target: north}\n", "  - {source: north, target: east}\n")
    changes = diff_topologies(topo(BASE), topo(new))
    assert changes.flows == (
        FlowChange("north->east", ChangeKind.ADDED),
        FlowChange("west->east", ChangeKind.CHANGED, ("topics.include", "job.parallelism")),
        FlowChange("west->north", ChangeKind.REMOVED),
    )
    assert changes.clusters == () and changes.settings == ()
    assert changes.affected_flows == ("north->east", "west->east", "west->north")
    assert changes.to_dict()["flows"][1] == {
        "flow": "west->east",
        "change": "changed",
        "settings": ["topics.include", "job.parallelism"],
    }


def test_a_changed_cluster_affects_every_flow_that_touches_it():
    new = BASE.replace(
        'west: {bootstrap_servers: "127.0.0.1:1", config: {sasl.username: a}}',
        'west: {bootstrap_servers: "127.0.0.1:9", config: {sasl.username: b}, tags: {region: eu}}',
    )
    new = new.replace("clusters:\n", 'clusters:\n  south: {bootstrap_servers: "127.0.0.1:4"}\n')
    changes = diff_topologies(topo(BASE), topo(new))
    assert changes.clusters == (
        ClusterChange("south", ChangeKind.ADDED),
        ClusterChange("west", ChangeKind.CHANGED, ("bootstrap_servers", "config.sasl.username", "tags.region")),
    )
    assert changes.flows == ()
    assert changes.affected_flows == ("east->west", "west->east", "west->north")


def test_plan_wide_settings_affect_all_flows_but_slo_does_not():
    pruned = diff_topologies(topo(BASE), topo(BASE + "prune: {topics: true}\n"))
    assert pruned.settings == ("prune.topics",)
    assert pruned.affected_flows == ("east->west", "west->east", "west->north")
    slo = diff_topologies(topo(BASE), topo(BASE + "slo: {max_lag_records: 5}\n"))
    assert slo.settings == ("slo.max_lag_records",) and slo.affected_flows == ()


def test_values_are_compared_after_defaults_are_merged():
    explicit = BASE.replace("{source: west, target: north}", "{source: west, target: north, replication_factor: 3}")
    via_defaults = BASE.replace("flows:\n", "defaults: {replication_factor: 3}\nflows:\n")
    changes = diff_topologies(topo(explicit), topo(via_defaults))
    # only the flows that did not already say 3 changed
    assert [(f.name, f.settings) for f in changes.flows] == [
        ("east->west", ("replication_factor",)),
        ("west->east", ("replication_factor",)),
    ]


def test_changed_settings_on_plain_values_and_mappings():
    assert changed_settings(1, 1) == ()
    assert changed_settings(1, 2, "x") == ("x",)
    assert changed_settings({"a": 1, "b": 2}, {"a": 1, "c": 2}) == ("b", "c")
