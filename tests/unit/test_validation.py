"""Every error class is reported as FILE:LINE:COL with a message, all in one run."""

import os
import threading
from pathlib import Path

import pytest

from reconciler.cli.main import main
from reconciler.topology import environments
from reconciler.topology.build import load_topology
from reconciler.topology.diagnostics import Diagnostics
from reconciler.topology.loader import load_paths
from tests.helpers import MINIMAL, diagnose, rendered_errors, write

ROOT = Path(__file__).resolve().parents[2]


def test_minimal_document_from_the_issue_is_valid(tmp_path):
    diags = diagnose(write(tmp_path, "t.yaml", MINIMAL))
    assert diags.ok, diags.render()


def test_minimal_document_model(tmp_path):
    topology, _ = load_topology([write(tmp_path, "t.yaml", MINIMAL)])
    flow = topology.flows[0]
    assert flow.name == "west->east"
    assert flow.topics.matches("orders.eu") and not flow.topics.matches("orders.tmp")
    assert flow.policy.format_remote_topic("west", "orders") == "west.orders"
    assert flow.delivery.value == "at-least-once"
    assert flow.groups.include == (".*",), "MM2 default: all groups"


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "topologies").iterdir() if p.is_dir()))
def test_example_topologies_validate(example):
    """Each example, in every environment it declares (topologies/environments: docs/environments.md)."""
    docs = load_paths([ROOT / "topologies" / example], Diagnostics())
    for env in environments.names(docs) or (None,):
        topology, diags = load_topology([ROOT / "topologies" / example], env=env)
        assert diags.ok and topology is not None, diags.render()


def test_schema_errors_have_positions_and_hints(tmp_path):
    f = write(
        tmp_path,
        "t.yaml",
        """\
        apiVersion: reconciler/v1
        kind: Topology
        clusters:
          west: {bootstrap_servers: "127.0.0.1:1"}
          east: {}
        flows:
          - source: west
            target: east
            delivery: exactly-onse
            topicz: {include: [a]}
        """,
    )
    diags = diagnose(f)
    lines = rendered_errors(diags)
    assert f"{f}:5:9: error: clusters.east is missing required key 'bootstrap_servers'" in lines
    assert f"{f}:9:15: error: flows[0].delivery: 'exactly-onse' is not one of 'at-least-once', 'exactly-once'" in lines
    assert f"{f}:10:5: error: unknown key 'topicz' in flows[0]" in lines
    hints = [d.hint for d in diags.errors]
    assert "did you mean 'exactly-once'?" in hints and "did you mean 'topics'?" in hints


def test_all_semantic_errors_in_one_run(tmp_path):
    f = write(
        tmp_path,
        "t.yaml",
        """\
        apiVersion: reconciler/v1
        kind: Topology
        clusters:
          west:
            bootstrap_servers: 127.0.0.1:1
            config: {sasl.password: hunter2}
          east: {bootstrap_servers: "127.0.0.1:2"}
        flows:
          - {source: west, target: eastt}
          - {source: west, target: west}
          - {source: west, target: east, topics: {include: ["pay(ments"]}}
          - {source: west, target: east}
        """,
    )
    lines = rendered_errors(diagnose(f))
    assert lines == [
        f"{f}:6:29: error: cluster 'west': sasl.password is a literal secret",
        f"{f}:9:28: error: flow target 'eastt' is not a defined cluster",
        f"{f}:10:5: error: flow west->west replicates a cluster to itself",
        f"{f}:11:53: error: pattern 'pay(ments' does not compile: missing ), unterminated subpattern",
        f"{f}:12:5: error: duplicate flow west->east",
    ]


def test_literal_secret_never_echoed_in_hint(tmp_path):
    f = write(
        tmp_path, "t.yaml", MINIMAL.replace("127.0.0.1:19092", "127.0.0.1:19092\n    config: {sasl.password: hunter2}")
    )
    diags = diagnose(f)
    assert "hunter2" not in diags.render()
    assert "${WEST_SASL_PASSWORD}" in diags.errors[0].hint


def test_env_reference_secret_is_valid(tmp_path):
    f = write(
        tmp_path,
        "t.yaml",
        MINIMAL.replace("127.0.0.1:19092", "127.0.0.1:19092\n    config: {sasl.password: '${WEST_PW}'}"),
    )
    assert diagnose(f).ok


def test_duplicate_yaml_keys_are_errors(tmp_path):
    f = write(tmp_path, "t.yaml", MINIMAL.replace("    target: east\n", "    target: east\n    target: west\n"))
    lines = rendered_errors(diagnose(f))
    assert lines == [f"{f}:11:5: error: duplicate key 'target' (first defined at line 10)"]


def test_yaml_syntax_error_has_position(tmp_path):
    f = write(tmp_path, "t.yaml", "apiVersion: reconciler/v1\nclusters:\n  west: [unclosed\n")
    lines = rendered_errors(diagnose(f))
    assert len(lines) == 1 and lines[0].startswith(f"{f}:") and "YAML syntax error" in lines[0]


def test_directory_merge_and_definitions_twice_name_both_places(tmp_path):
    write(tmp_path, "d/a.yaml", MINIMAL)
    b = write(
        tmp_path,
        "d/b.yaml",
        """\
        apiVersion: reconciler/v1
        kind: Topology
        clusters:
          east: {bootstrap_servers: "127.0.0.1:3"}
        flows:
          - {source: west, target: east}
        """,
    )
    diags = diagnose(tmp_path / "d")
    errors = {d.message: d for d in diags.errors}
    dup_cluster = errors["cluster 'east' is defined twice"]
    assert (dup_cluster.where.file, dup_cluster.where.line) == (str(b), 4)
    assert dup_cluster.related[0].file.endswith("a.yaml") and dup_cluster.related[0].line == 6
    dup_flow = errors["duplicate flow west->east"]
    assert dup_flow.where.file == str(b) and dup_flow.related[0].file.endswith("a.yaml")


def test_defaults_apply_and_flows_override_key_by_key(tmp_path):
    f = write(
        tmp_path,
        "t.yaml",
        MINIMAL
        + """\
  - source: east
    target: west
    delivery: at-least-once
    job: {parallelism: 7}
defaults:
  delivery: exactly-once
  job: {master: "local[3]"}
""",
    )
    topology, diags = load_topology([f])
    assert diags.ok, diags.render()
    a, b = topology.flows
    assert a.delivery.value == "exactly-once" and b.delivery.value == "at-least-once"
    assert (a.job.master, a.job.parallelism) == ("local[3]", 2)
    assert (b.job.master, b.job.parallelism) == ("local[3]", 7)


def test_cli_validate_exit_codes_and_format(tmp_path, capsys):
    good = write(tmp_path, "good.yaml", MINIMAL)
    assert main(["validate", str(good)]) == 0
    assert "valid: 2 clusters, 1 flow (" in capsys.readouterr().out
    bad = write(tmp_path, "bad.yaml", MINIMAL.replace("target: east", "target: nowhere"))
    assert main(["validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:10:13: error: flow target 'nowhere' is not a defined cluster" in err
    assert "Traceback" not in err


def test_cli_missing_path(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "nope.yaml")]) == 1
    assert "no such file or directory" in capsys.readouterr().err


def test_a_pipe_is_read_once_and_validated(tmp_path, capsys):
    # `reconciler validate <(cat t.yaml)`: a FIFO, read once although the command reads its files twice
    fifo = tmp_path / "topology.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(MINIMAL))
    writer.start()
    try:
        assert main(["validate", str(fifo)]) == 0, capsys.readouterr().err
    finally:
        writer.join(5)
    assert f"({fifo})" in capsys.readouterr().out


def test_a_value_its_yaml_tag_cannot_read_is_an_error_at_its_position(tmp_path, capsys):
    bad = write(tmp_path, "bad.yaml", "apiVersion: reconciler/v1\nkind: Topology\nclusters: !!bool yes}\n")
    assert main(["validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:3:11: error: cannot read value 'yes}}'" in err and "Traceback" not in err


def test_separator_in_alias_is_an_error(tmp_path):
    f = write(tmp_path, "t.yaml", MINIMAL.replace("east", "east_1") + "    separator: _\n")
    lines = rendered_errors(diagnose(f))
    assert any("contains the separator '_'" in line for line in lines)


def test_python_dash_m_entry_point(tmp_path):
    import subprocess
    import sys

    good = write(tmp_path, "good.yaml", MINIMAL)
    proc = subprocess.run([sys.executable, "-m", "reconciler", "validate", str(good)], capture_output=True, text=True)
    assert proc.returncode == 0 and "valid:" in proc.stdout, proc.stderr
