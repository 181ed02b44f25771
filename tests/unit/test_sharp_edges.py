"""Issue 12, parts 2 and 3: bad input and awkward command lines end in one located line, exit 1,
nothing changed; output a person reads (plurals, plans with errors, `plan --out`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler import settings
from reconciler.cli.main import main
from reconciler.render import plan_text
from reconciler.textutil import plural
from reconciler.topology.loader import MAX_DEPTH, MAX_VALUES
from tests.helpers import MINIMAL, write
from tests.plan_helpers import World, topology

ROOT = Path(__file__).resolve().parents[2]


def _validate(tmp_path, capsys, text: str) -> tuple[int, str, Path]:
    f = tmp_path / "t.yaml"
    f.write_text(text, encoding="utf-8")
    rc = main(["validate", str(f)])
    return rc, capsys.readouterr().err, f


def test_self_referencing_anchor_is_a_located_error(tmp_path, capsys):
    rc, err, f = _validate(tmp_path, capsys, "a: &a\n  b: *a\n")
    assert rc == 1 and f"{f}:1:4: error: an alias refers to the anchor that contains it" in err


def test_deep_nesting_names_the_limit(tmp_path, capsys):
    rc, err, f = _validate(tmp_path, capsys, "x: " + "[" * 10000 + "]" * 10000 + "\n")
    assert rc == 1 and f"{f}:1:" in err and f"nesting deeper than {MAX_DEPTH} levels (limit)" in err


def test_alias_bomb_is_refused_at_the_limit(tmp_path, capsys):
    text = (
        "\n".join(
            ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
            + [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 10)]
        )
        + "\n"
    )
    rc, err, f = _validate(tmp_path, capsys, text)
    assert rc == 1 and f"{f}:" in err and f"more than {MAX_VALUES:,} values (limit" in err


@pytest.mark.parametrize("value", ["99999999999999999999999", "1e999", "'" + "x" * 200 + "'"])
def test_huge_numbers_are_refused_with_the_limit(tmp_path, capsys, value):
    text = MINIMAL + f"    replication_factor: {value}\n"
    rc, err, f = _validate(tmp_path, capsys, text)
    assert rc == 1 and f"{f}:" in err and "Traceback" not in err


def test_huge_integer_names_the_java_long_limit(tmp_path, capsys):
    rc, err, f = _validate(tmp_path, capsys, MINIMAL + "    replication_factor: 99999999999999999999999\n")
    assert f"{f}:14:25: error: number too large" in err and "9,223,372,036,854,775,807" in err


@pytest.mark.parametrize(
    "pattern,words",
    [
        ("(?=orders).*", "lookahead `(?=` is not supported by the linear-time matcher"),
        ("orders++", "possessive quantifier `++`"),
        ("pay(ments", "does not compile"),
        ("x" * 1001, "limit 1,000"),
    ],
)
def test_patterns_that_would_fail_later_are_refused_now(tmp_path, capsys, pattern, words):
    text = MINIMAL.replace('include: ["orders.*", "payments"]', f'include: ["{pattern}"]')
    rc, err, f = _validate(tmp_path, capsys, text)
    assert rc == 1 and f"{f}:12:17: error: " in err and words in err


@pytest.mark.parametrize("text", ["", "# nothing here\n", "apiVersion"])
def test_empty_or_truncated_file_is_named(tmp_path, capsys, text):
    rc, err, f = _validate(tmp_path, capsys, text)
    assert rc == 1 and f"{f}:1:" in err


def test_empty_file_next_to_a_topology_is_a_warning(tmp_path, capsys):
    write(tmp_path, "t/a.yaml", MINIMAL)
    write(tmp_path, "t/empty.yaml", "")
    assert main(["validate", str(tmp_path / "t")]) == 0
    assert "empty.yaml:1:1: warning: no topology document in this file" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name",
    ["RECONCILER_ADMIN_TIMEOUT", "RECONCILER_LEASE_TTL", "RECONCILER_JOB_START_GRACE", "RECONCILER_MAX_REMOTE_TOPICS"],
)
def test_non_numeric_environment_variables_are_one_line(tmp_path, name):
    f = write(tmp_path, "t.yaml", MINIMAL)
    env = {**os.environ, name: "abc", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "reconciler", "validate", str(f)], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == proc.stderr.strip().splitlines()[0]
    assert proc.stderr.startswith(f"error: {name}=abc is not a ")


def test_settings_parse_in_one_place():
    assert settings.seconds("X_T", 5, "test", environ={"X_T": "2.5"}) == 2.5
    assert settings.seconds("X_T", 5, "test", environ={"X_T": "nan"}) == 5
    assert settings.count("X_N", 7, "test", environ={"X_N": "0"}) == 7
    assert settings.max_remote_topics({"RECONCILER_MAX_REMOTE_TOPICS": "20"}) == 20
    assert not any(e.startswith("X_") for e in settings.errors())  # only the process environment is recorded


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "{topo}", "--out", "{dir}"],
        ["drift", "{topo}", "--out", "{dir}/"],
        ["export", "mm2", "{topo}", "--out", "{dir}"],
    ],
)
def test_out_pointing_at_a_directory_is_one_line_and_writes_nothing(tmp_path, capsys, argv):
    topo = write(tmp_path, "t.yaml", MINIMAL)
    d = tmp_path / "outdir"
    d.mkdir()
    rc = main([a.format(topo=topo, dir=d) for a in argv])
    err = capsys.readouterr().err
    assert rc == 1 and f"error: {d}" in err and "is a directory" in err
    assert list(d.iterdir()) == []


def test_plural_is_one_rule():
    assert plural(1, "flow") == "1 flow" and plural(2, "flow") == "2 flows" and plural(0, "action") == "0 actions"
    assert plural(3, "policy") == "3 policies" and plural(1_957, "copy", "copies") == "1,957 copies"


FLOW = """flows:
  - source: west
    target: east
    topics: {include: ["orders"]}
"""


def test_plan_with_a_cluster_down_leads_with_the_error_and_lists_no_actions():
    w = World(topology(FLOW))
    w["west"].add_topic("orders", 3)
    w["east"].reachable = False
    text = plan_text.render(w.plan())
    first = text.splitlines()[0]
    assert "Plan incomplete" in first
    assert "Errors:" in text and "east" in text.split("Errors:")[1].splitlines()[1]
    assert "+ create" not in text and "not shown" in text


def test_plan_summary_counts_per_cluster():
    w = World(topology(FLOW))
    w["west"].add_topic("orders", 3)
    text = plan_text.summary(w.plan())
    assert "east: + 1" not in text and "  east: " in text and "+ create" not in text
    assert text.rstrip().splitlines()[-1].startswith("Plan: ")


def _closed_port() -> int:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: connections are refused
    return port


def test_status_with_clusters_down_says_so_exits_1_and_prints_no_client_logs(tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("RECONCILER_STATE_DIR", str(tmp_path / "state"))
    topo = write(
        tmp_path, "t.yaml", MINIMAL.replace("19092", str(_closed_port())).replace("19093", str(_closed_port()))
    )
    assert main(["status", str(topo)]) == 1
    out, err = capfd.readouterr()
    assert "error: cannot read job statuses on cluster east: Unreachable: cannot connect to" in err
    assert "%3|" not in err and "rdkafka" not in err
    assert "never" not in out and "unknown" in out


def test_client_logs_go_to_the_reconciler_logger_not_the_terminal(capfd):
    import logging

    from confluent_kafka import Consumer

    from reconciler import logs

    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record)

    handler = Keep()
    logs.CLIENT_LOGGER.addHandler(handler)
    try:
        c = Consumer(logs.client_config({"bootstrap.servers": f"127.0.0.1:{_closed_port()}", "group.id": "g"}))
        for _ in range(20):
            c.poll(0.1)
            if seen:
                break
        c.close()
    finally:
        logs.CLIENT_LOGGER.removeHandler(handler)
    assert seen and any("Connect" in r.getMessage() or "refused" in r.getMessage() for r in seen)
    assert "%3|" not in capfd.readouterr().err


def test_validate_several_roots_says_they_are_merged_and_each_validates_them_apart(capsys):
    # topologies/environments needs --env (docs/environments.md): every other example is a topology of its own
    roots = sorted(str(p) for p in (ROOT / "topologies").iterdir() if p.is_dir() and p.name != "environments")
    assert main(["validate", *roots]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"note: {len(roots)} paths merged into ONE topology") and "reconciler validate --each" in err
    assert main(["validate", "--each", *roots]) == 0
    out = capsys.readouterr().out
    assert out.count("valid: ") == len(roots) and "1 flow (" in out


def test_validate_of_one_topology_split_in_files_is_not_called_merged(capsys):
    files = sorted(str(p) for p in (ROOT / "topologies" / "demo").glob("*.yaml"))
    assert main(["validate", *files]) == 0
    assert "merged" not in capsys.readouterr().err


def test_demo_wait_shows_records_seen_elapsed_and_the_limit():
    import io

    from reconciler.cli.demo import wait_progress
    from reconciler.textutil import LiveLine

    text = wait_progress((1234, 16000), ["records", "checkpoints"], 14.2, 300)
    assert (
        "waiting for records, checkpoints: 1,234 of 16,000 records seen downstream, 14s elapsed (time limit 300s)"
        in text
    )
    ticks = iter([0.0, 3.0, 11.0])
    out = io.StringIO()
    line = LiveLine(out, every=10.0, clock=lambda: next(ticks))
    for t in ("a", "b", "c"):
        line.show(t)
    assert out.getvalue() == "a\nc\n"  # not a terminal: one line every 10 s, not one per poll


def test_docs_failover_examples_use_a_group_the_demo_checkpoints():
    import re

    from reconciler.cli.demo import GROUP
    from reconciler.topology.build import load_topology

    topo, _ = load_topology([ROOT / "topologies" / "demo"])
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    commands = [
        line
        for page in pages
        for line in page.read_text().splitlines()
        if "--group" in line and "topologies/demo" in line
    ]
    assert commands
    for line in commands:
        group = re.search(r"--group (\S+)", line).group(1)
        assert group == GROUP, line
        assert any(f.groups.matches(group) for f in topo.flows), line


def test_status_of_a_stopped_job_from_an_earlier_run_does_not_say_never():
    from reconciler.cli.commands_status import render_text

    row = {
        "flow": "west->east",
        "wanted": True,
        "deployer": "local",
        "where": "-",
        "state": "stopped",
        "job_state": None,
        "why": "process 4242 exited",
        "desired_hash": "a" * 12,
        "deployed_hash": "a" * 12,
        "running_hash": None,
        "in_sync": False,
        "lag_total": None,
        "lag_seconds": None,
        "latency_ms": None,
        "records_per_second": None,
        "records": None,
        "errors": None,
        "last_error": None,
        "heartbeat_at": None,
        "last_seen": None,
        "unreadable": None,
    }
    text = render_text([row], 0)
    assert "never" not in text and "no status" in text and "0 of 1 job run" in text
    assert "unknown" in render_text([{**row, "unreadable": "Unreachable: cannot connect"}], 0)


def test_status_shows_the_topics_a_running_job_routes_but_does_not_copy():
    # The job's topic refresh's findings were in its status record only (`status --format json`): a topic listed
    # without its partitions, or whose remote topic has fewer, was not copied with nothing in `status` to say so.
    from reconciler.cli.commands_status import render_text

    finding = (
        "source topic a00009 is listed without its partitions (LEADER_NOT_AVAILABLE): not copied until it is listed"
    )
    row = {
        "flow": "a->hub",
        "wanted": True,
        "deployer": "local",
        "where": "pid 1",
        "state": "running",
        "job_state": "running",
        "why": "",
        "desired_hash": "a" * 12,
        "deployed_hash": "a" * 12,
        "running_hash": "a" * 12,
        "in_sync": True,
        "lag_total": 3,
        "lag_seconds": 0.0,
        "latency_ms": None,
        "records_per_second": 0.0,
        "records": 12_260,
        "records_stale": False,
        "errors": 0,
        "last_error": None,
        "heartbeat_at": None,
        "last_seen": None,
        "unreadable": None,
        "findings": [finding],
    }
    assert f"  a->hub: {finding}" in render_text([row], 0).splitlines()
