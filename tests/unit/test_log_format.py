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
    log = logging.Logger("reconciler.replication.driver")
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
    assert all(d["flow"] == "west->east:payments" and d["logger"] == "reconciler.replication.driver" for d in lines)
    assert lines[0]["level"] == "warning" and lines[0]["ts"].endswith("Z")
    assert lines[1]["records"] == 42 and lines[1]["topic"] == "orders"
    assert "ValueError" in lines[2]["exception"] and "s3cr3t-pw" not in lines[2]["exception"]


def test_human_lines_otherwise():
    lines = emit({}, ("cannot connect with password s3cr3t-pw", {}))
    assert "[west->east:payments] cannot connect with password ***" in lines[0]
    assert not any("s3cr3t-pw" in line for line in lines)
    assert logs.log_format({"RECONCILER_LOG_FORMAT": "JSON"}) == "json" and logs.log_format({}) == "text"
