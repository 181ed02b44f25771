"""RECONCILER_LOG_FORMAT=json: one JSON object per log line with the flow as a field, secrets redacted;
human lines otherwise (also redacted)."""

from __future__ import annotations

import io
import json
import logging

from reconciler import logs
from reconciler.topology.secrets import Redactor


def emit(environ: dict, *records) -> list[str]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.formatter("west->east:payments", Redactor({"s3cr3t-pw"}), environ))
    log = logging.Logger("reconciler.engine.driver")
    log.addHandler(handler)
    for msg, kw in records:
        log.warning(msg, **kw)
    try:
        raise ValueError('login "s3cr3t-pw" refused')
    except ValueError:
        log.exception("batch failed")
    return stream.getvalue().splitlines()


def test_json_lines_carry_the_flow_and_never_a_secret():
    lines = [
        json.loads(line)
        for line in emit(
            {"RECONCILER_LOG_FORMAT": "json"},
            ("cannot connect with password s3cr3t-pw", {}),
            ("copied", {"extra": {"records": 42, "topic": "orders"}}),
        )
        if line.startswith("{")
    ]
    assert [d["message"] for d in lines] == ["cannot connect with password ***", "copied", "batch failed"]
    assert all(d["flow"] == "west->east:payments" and d["logger"] == "reconciler.engine.driver" for d in lines)
    assert lines[0]["level"] == "warning" and lines[0]["ts"].endswith("Z")
    assert lines[1]["records"] == 42 and lines[1]["topic"] == "orders"
    assert "ValueError" in lines[2]["exception"] and "s3cr3t-pw" not in lines[2]["exception"]


def test_human_lines_otherwise():
    lines = emit({}, ("cannot connect with password s3cr3t-pw", {}))
    assert "[west->east:payments] cannot connect with password ***" in lines[0]
    assert not any("s3cr3t-pw" in line for line in lines)
    assert logs.log_format({"RECONCILER_LOG_FORMAT": "JSON"}) == "json" and logs.log_format({}) == "text"


def test_an_engine_log_names_the_flow_of_each_line():
    """An engine's process runs several flows: its formatter has no flow, each driver's lines carry their own."""
    for environ in ({}, {"RECONCILER_LOG_FORMAT": "json"}):
        stream = io.StringIO()
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logs.formatter(None, Redactor(), environ))
        log = logging.Logger("reconciler.engine.driver")
        log.addHandler(handler)
        for flow in ("west->east", "north->east"):
            logging.LoggerAdapter(log, {"flow": flow}).warning("batch failed")
        lines = stream.getvalue().splitlines()
        if environ:
            assert [json.loads(line)["flow"] for line in lines] == ["west->east", "north->east"]
        else:
            assert "[west->east] batch failed" in lines[0] and "[north->east] batch failed" in lines[1], lines


# --- the CLI: RECONCILER_LOG_FORMAT=json makes its stderr one JSON event per line ----------------------


def json_lines(text: str) -> list[dict]:
    lines = text.splitlines()
    assert lines and all(line.startswith("{") for line in lines), lines  # nothing but JSON on stderr
    return [json.loads(line) for line in lines]


def test_cli_stderr_messages_become_json_events_with_their_level(tmp_path, capsys, monkeypatch):
    from reconciler.cli.main import main

    monkeypatch.setenv("RECONCILER_LOG_FORMAT", "json")
    bad = tmp_path / "t.yaml"
    bad.write_text(
        "apiVersion: reconciler/v1\nkind: Topology\nmetadata: {name: t}\nclusters:\n"
        '  west: {bootstrap_servers: "127.0.0.1:1"}\n  east: {bootstrap_servers: "127.0.0.1:2"}\n'
        "flows:\n  - {source: west, target: east, job: {metrics_port: 70000}}\n"
    )
    assert main(["validate", str(bad)]) == 1
    events = json_lines(capsys.readouterr().err)
    errors = [e for e in events if e["level"] == "error"]
    assert errors and all(e["logger"] == "reconciler.cli" and e["ts"].endswith("Z") for e in events)
    assert any(f"{bad}:8:" in e["message"] and "metrics_port" in e["message"] for e in errors), errors
    assert events[-1]["message"].endswith("topology is invalid; nothing was changed") and events[-1]["level"] == "error"


def test_cli_json_lines_are_redacted_and_stderr_is_restored(capsys):
    import sys

    before = sys.stderr
    with logs.cli_logging(0, {"RECONCILER_LOG_FORMAT": "json"}):
        logs.REDACT.add_from({"sasl.password": "${PW}"}, {"PW": "hunter2-secret"})
        print("warning: login with hunter2-secret refused\n  hint: check the password", file=sys.stderr)
        print("done", file=sys.stderr)
        logs.event("deployed", flow="west->east", cluster="east")
    assert sys.stderr is before
    err = capsys.readouterr().err
    events = json_lines(err)
    assert [e["level"] for e in events] == ["warning", "info", "info"]
    assert events[0]["message"] == "warning: login with *** refused\n  hint: check the password"  # one event
    assert events[2]["flow"] == "west->east" and events[2]["cluster"] == "east"
    assert "hunter2-secret" not in err


def test_cli_text_format_shows_no_events(capsys):
    with logs.cli_logging(0, {}):
        logs.event("deployed", flow="west->east")
    assert capsys.readouterr().err == ""


def test_apply_logs_one_event_per_action_with_the_flow(tmp_path, monkeypatch, capsys):
    from tests.unit.test_jobs_plan import Env

    env = Env(tmp_path, monkeypatch, capsys)
    capsys.readouterr()
    monkeypatch.setenv("RECONCILER_LOG_FORMAT", "json")
    from reconciler.cli.main import main

    assert main(["apply", str(env.path), "--auto-approve"], env.cli) == 0
    captured = capsys.readouterr()
    assert "deploy job west->east" in captured.out  # stdout stays the human report
    events = json_lines(captured.err)
    deploys = [e for e in events if e.get("action") == "deploy_job"]
    assert len(deploys) == 1 and deploys[0]["flow"] == "west->east" and deploys[0]["result"] == "ok"
    assert deploys[0]["level"] == "info" and deploys[0]["cluster"]
    assert deploys[0]["flows"] == ["west->east"]  # an engine replacement lists every flow it restarts here


def test_the_job_logs_through_the_same_home():
    """The job's entry point (driver.configure_logging) sets the process up with logs.setup."""
    from reconciler.contract.spec import ClusterSpec, JobSpec
    from reconciler.engine.driver import configure_logging

    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    spec = JobSpec(
        "west->east",
        ClusterSpec("west", "w:1", {"sasl.password": "${PW}"}),
        ClusterSpec("east", "e:1"),
    )
    try:
        configure_logging("INFO", spec, {"RECONCILER_LOG_FORMAT": "json", "PW": "pa55word!"})
        stream = io.StringIO()
        root.handlers[0].setStream(stream)
        logging.getLogger("reconciler.engine.driver").warning("auth failed for pa55word!")
        (line,) = stream.getvalue().splitlines()
        doc = json.loads(line)
        assert doc["flow"] == "west->east" and doc["message"] == "auth failed for ***"
    finally:
        root.handlers[:], root.level = saved


def test_the_job_clients_log_into_the_job_log_when_they_are_served():
    """librdkafka's lines of the job's clients go to the job's log (JSON here, with the flow), served by the
    client's own poll: a client that nobody polls any more (one cached in a worker) prints nothing."""
    import time

    from confluent_kafka import Producer

    from reconciler.contract.spec import ClusterSpec, JobSpec
    from reconciler.engine import clients
    from reconciler.engine.driver import configure_logging

    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    spec = JobSpec("west->east", ClusterSpec("west", "127.0.0.1:1"), ClusterSpec("east", "127.0.0.1:1"))
    try:
        configure_logging("INFO", spec, {"RECONCILER_LOG_FORMAT": "json"})
        stream = io.StringIO()
        root.handlers[0].setStream(stream)
        producer = Producer(clients.producer_config(spec.target, spec))

        def client_lines() -> list[dict]:  # the job's client lines (a thread of an earlier test may log too)
            docs = [json.loads(line) for line in stream.getvalue().splitlines()]
            return [d for d in docs if d["logger"] == "reconciler.job.kafka"]

        time.sleep(1.0)  # librdkafka tries the unreachable broker in its own threads meanwhile
        assert client_lines() == [], "nothing reaches the terminal until the client is served"
        deadline = time.monotonic() + 20
        while not client_lines() and time.monotonic() < deadline:
            producer.poll(0.2)
        first = client_lines()[0]
        assert first["logger"] == "reconciler.job.kafka" and first["flow"] == "west->east"
        assert "127.0.0.1:1" in first["message"]
    finally:
        root.handlers[:], root.level = saved


def test_verbose_text_logs_are_redacted_and_escaped(capsys):
    """`-v` (text format): the Kafka clients' lines go through the redactor and show control characters."""
    import logging

    logs.REDACT.add_from({"sasl.password": "${WEST_PW}"}, {"WEST_PW": "v-secret-123"})
    logs.configure(1)
    try:
        logs.CLIENT_LOGGER.warning("auth failed with v-secret-123 \x1b[2K for principal \u202eevil")
    finally:
        for h in list(logs.CLIENT_LOGGER.handlers):
            if not isinstance(h, logging.NullHandler):
                logs.CLIENT_LOGGER.removeHandler(h)
    err = capsys.readouterr().err
    assert "v-secret-123" not in err and "***" in err
    assert "\x1b" not in err and "\u202e" not in err and "\\x1b[2K" in err
