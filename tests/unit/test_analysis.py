"""Replication-graph analysis: identity loops, default-policy cycles, diamonds, residency."""

from reconciler.analysis.expansion import expand
from reconciler.cli.main import main
from reconciler.topology.build import load_topology_text
from tests.helpers import diagnose, rendered_errors, write

HEAD = """\
apiVersion: reconciler/v1
kind: Topology
clusters:
  a: {bootstrap_servers: "127.0.0.1:1", tags: {region: eu}}
  b: {bootstrap_servers: "127.0.0.1:2", tags: {region: eu}}
  c: {bootstrap_servers: "127.0.0.1:3", tags: {region: us}}
  d: {bootstrap_servers: "127.0.0.1:4", tags: {region: eu}}
flows:
"""


def test_identity_cycle_with_overlapping_filters_is_refused(tmp_path, capsys):
    f = write(
        tmp_path,
        "t.yaml",
        HEAD
        + """\
  - {source: a, target: b, policy: identity, topics: {include: ["orders.*"]}}
  - {source: b, target: a, policy: identity, topics: {include: ["orders\\\\.eu"]}}
""",
    )
    assert main(["validate", str(f)]) == 1
    err = capsys.readouterr().err
    assert f"{f}:10:5: error: replication loop a -> b -> a: topic 'orders.eu'" in err
    assert "a->b at" in err and "b->a at" in err


def test_identity_cycle_with_disjoint_filters_is_fine(tmp_path):
    f = write(
        tmp_path,
        "t.yaml",
        HEAD
        + """\
  - {source: a, target: b, policy: identity, topics: {include: ["orders.*"]}}
  - {source: b, target: a, policy: identity, topics: {include: ["payments"]}}
""",
    )
    assert diagnose(f).ok


def test_three_hop_identity_cycle_is_refused(tmp_path):
    f = write(
        tmp_path,
        "t.yaml",
        HEAD
        + """\
  - {source: a, target: b, policy: identity, topics: {include: [".*"]}}
  - {source: b, target: d, policy: identity, topics: {include: [".*"]}}
  - {source: d, target: a, policy: identity, topics: {include: ["orders"]}}
""",
    )
    lines = rendered_errors(diagnose(f))
    assert len(lines) == 1 and "replication loop" in lines[0] and "-> a:" in lines[0]


def test_default_policy_cycle_is_legal_and_expands_with_the_alias_rule():
    topo = load_topology_text(
        HEAD
        + """\
  - {source: a, target: b}
  - {source: b, target: a}
  - {source: b, target: c}
"""
    )
    exp = expand(topo, {"a": ["orders", "heartbeats"], "b": ["orders"]})
    assert not exp.loops
    assert set(exp.topics["a"]) == {"orders", "heartbeats", "b.orders"}
    assert set(exp.topics["b"]) == {"orders", "a.orders", "a.heartbeats"}
    assert set(exp.topics["c"]) == {"b.orders", "b.a.orders", "b.a.heartbeats"}
    hb = exp.topics["c"]["b.a.heartbeats"][0]
    assert hb.hops == 2 and hb.describe_path() == "a -> b -> c"


def test_internal_topics_never_expand():
    topo = load_topology_text(HEAD + "  - {source: a, target: b}\n")
    exp = expand(topo, {"a": ["__consumer_offsets", "x.checkpoints.internal", "mm2-offset-syncs.b.internal"]})
    assert "b" not in exp.topics


def test_diamond_is_a_warning_with_both_paths(tmp_path):
    f = write(
        tmp_path,
        "t.yaml",
        HEAD
        + """\
  - {source: a, target: b, topics: {include: ["clicks"]}}
  - {source: a, target: d, topics: {include: ["clicks"]}}
  - {source: b, target: d, topics: {include: [".*"]}}
""",
    )
    diags = diagnose(f)
    assert diags.ok
    [warning] = diags.warnings
    assert "diamond" in warning.message
    assert "'a.clicks' via a -> d" in warning.message and "'b.a.clicks' via a -> b -> d" in warning.message


def test_residency_violation_names_flow_and_rule(tmp_path):
    f = write(
        tmp_path,
        "t.yaml",
        HEAD
        + """\
  - {source: a, target: b, topics: {include: [".*"]}}
  - {source: b, target: c, topics: {include: ["a\\\\..*"]}}
policies:
  residency:
    - {name: gdpr, topics: ["customers\\\\..*"], tag: region, allowed: [eu]}
""",
    )
    diags = diagnose(f)
    [error] = diags.errors
    assert error.message.startswith("flow b->c violates policy 'gdpr': topic 'customers.")
    assert "via a -> b -> c" in error.message
    assert (error.where.line, error.related[0].line) == (10, 13)


def test_residency_sees_a_topic_named_with_an_unescaped_dot(tmp_path):
    """`customers.eu` (the dot unescaped, as topic patterns are often written) selects the topic customers.eu."""
    f = write(
        tmp_path,
        "t.yaml",
        HEAD
        + """\
  - {source: a, target: c, topics: {include: ["payments", "customers.eu"]}}
policies:
  residency:
    - {name: gdpr, topics: ["customers\\\\..*"], tag: region, allowed: [eu]}
""",
    )
    [error] = diagnose(f).errors
    assert error.message.startswith("flow a->c violates policy 'gdpr': topic 'customers.eu' from a would reach")


def test_residency_respected_when_filter_excludes(tmp_path):
    f = write(
        tmp_path,
        "t.yaml",
        HEAD
        + """\
  - {source: a, target: c, topics: {include: [".*"], exclude: ["customers\\\\..*"]}}
policies:
  residency:
    - {name: gdpr, topics: ["customers\\\\..*"], tag: region, allowed: [eu]}
""",
    )
    assert diagnose(f).ok


def test_graph_outputs(tmp_path, capsys):
    f = write(tmp_path, "t.yaml", HEAD + "  - {source: a, target: b, delivery: exactly-once}\n")
    assert main(["graph", str(f)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("flowchart LR") and 'a -->|".* (default, exactly-once)"| b' in out
    assert main(["graph", str(f), "--format", "dot"]) == 0
    assert '"a" -> "b" [label=".* (default, exactly-once)"];' in capsys.readouterr().out
