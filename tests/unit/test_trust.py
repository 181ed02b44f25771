"""`plan --clusters-from REV` (gitops/trust.py): a change is planned with the trusted revision's connection
settings; a cluster the change adds is not connected and its flows are not planned (issue 44)."""

from __future__ import annotations

from reconciler.gitops.trust import pin_clusters
from reconciler.topology.build import load_topology_text

BASE = """\
apiVersion: reconciler/v1
kind: Topology
clusters:
  west: {bootstrap_servers: "10.0.0.1:9092", config: {sasl.password: "${WEST_PW}"}}
  east: {bootstrap_servers: "10.0.0.2:9092"}
flows:
  - {source: west, target: east}
"""


def test_changed_connection_settings_are_replaced_by_the_trusted_ones():
    head = load_topology_text(
        BASE.replace("10.0.0.2:9092", "evil.example:9092").replace(
            "east: {bootstrap_servers", 'east: {config: {sasl.username: "${EAST_USER}"}, bootstrap_servers'
        )
    )
    pinned, pin = pin_clusters(head, load_topology_text(BASE), "origin/main")
    assert pinned.clusters["east"].bootstrap_servers == "10.0.0.2:9092"
    assert dict(pinned.clusters["east"].config) == {}
    assert [(c.alias, c.fields) for c in pin.changed] == [("east", ("bootstrap_servers", "config.sasl.username"))]
    assert pin.new == () and pin.skipped_flows == () and [f.name for f in pinned.flows] == ["west->east"]
    assert "cluster 'east': this change sets bootstrap_servers, config.sasl.username" in pin.lines()[0]


def test_a_new_cluster_is_not_connected_and_its_flows_are_not_planned():
    head = load_topology_text(
        BASE.replace("flows:\n", '  evil: {bootstrap_servers: "evil.example:9092"}\nflows:\n')
        + "  - {source: west, target: evil}\n"
    )
    pinned, pin = pin_clusters(head, load_topology_text(BASE), "origin/main")
    assert "evil" not in pinned.clusters and pin.new == ("evil",)
    assert pin.skipped_flows == ("west->evil",) and [f.name for f in pinned.flows] == ["west->east"]


def test_an_unchanged_topology_is_clean():
    pinned, pin = pin_clusters(load_topology_text(BASE), load_topology_text(BASE), "origin/main")
    assert pin.clean and pin.lines() == [] and pinned.clusters == load_topology_text(BASE).clusters
