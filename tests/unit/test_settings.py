"""Issue 24: every RECONCILER_* environment variable is read and checked in one home, reconciler/settings.py;
a malformed value is one line naming it and saying what to set, exit 1, before the command (or the
replication job) does anything."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler import settings
from reconciler.cli.main import main
from tests.helpers import MINIMAL, write

ROOT = Path(__file__).resolve().parents[2]

#: A malformed value of every setting ({file}: a path to an existing file).
BAD = {
    "RECONCILER_ADMIN_TIMEOUT": "abc",
    "RECONCILER_LEASE_TTL": "-1",
    "RECONCILER_JOB_START_GRACE": "nan",
    "RECONCILER_MAX_REMOTE_TOPICS": "0",
    "RECONCILER_MAX_FLOWS": "-5",
    "RECONCILER_DEV_ENGINE": "abc",
    "RECONCILER_JOBS": "abc",
    "RECONCILER_LOG_FORMAT": "abc",
    "RECONCILER_KUBECTL": "no-such-kubectl-abc",
    "RECONCILER_STATE_DIR": "{file}",
    "RECONCILER_METRICS_PORT": "abc",
    "RECONCILER_METRICS_BIND": "abc",
    "RECONCILER_TEST_TXN_DELAY_MS": "abc",
    "RECONCILER_TEST_PLAN_SCHEMA": "maybe",
    "RECONCILER_JOB_DIR": "{file}",
    "RECONCILER_JOB_INSTANCE": None,  # any text is an id
    "RECONCILER_PLAN_KEY": None,  # any text is a key (never printed: its length is checked where it is used)
    "RECONCILER_PLAN_KEY_PREVIOUS": None,
    "RECONCILER_SECRETS_DIR": "{file}",
    "RECONCILER_STATUS_RESOURCE": "no-slash",
    "RECONCILER_KUBE_API": "127.0.0.1:8001",
}


def test_every_setting_has_a_row_in_the_table():
    assert set(BAD) == set(settings.TABLE)
    rows = set(re.findall(r"^\| (RECONCILER_\w+)", settings.__doc__ or "", re.MULTILINE))
    assert rows == set(settings.TABLE)


def test_no_module_reads_a_reconciler_variable_but_settings():
    read = re.compile(r"""(environ(\.get)?\s*[\(\[]|getenv\()\s*["']RECONCILER_""")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for top in ("reconciler", "jobs")
        for path in sorted((ROOT / top).rglob("*.py"))
        if path.name != "settings.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if read.search(line)
    ]
    assert found == []


@pytest.mark.parametrize("name", sorted(n for n, v in BAD.items() if v is not None))
def test_a_malformed_value_is_one_line_naming_it_and_exit_1(tmp_path, capsys, monkeypatch, name):
    afile = write(tmp_path, "afile", "x")
    value = str(BAD[name]).format(file=afile)
    monkeypatch.setenv(name, value)
    topo = write(tmp_path, "t.yaml", MINIMAL)
    assert main(["validate", str(topo)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith(f"error: {name}={value} is not ")
    assert captured.err.rstrip().endswith(" or unset it") and f"set it to e.g. {name}=" in captured.err


def test_an_environment_mapping_is_checked_without_touching_the_process_one(tmp_path):
    env = {"RECONCILER_JOBS": "abc", "RECONCILER_LOG_FORMAT": "JSON", "RECONCILER_STATE_DIR": str(tmp_path / "s")}
    assert settings.jobs_enabled(env) is True  # the default where it is read ...
    assert [line.split("=")[0] for line in settings.errors(env)] == ["RECONCILER_JOBS"]  # ... and refused here
    assert settings.log_format(env) == "json" and settings.state_dir(env) == tmp_path / "s"
    assert settings.jobs_enabled({"RECONCILER_JOBS": " Off "}) is False
    assert settings.kubectl({}) == "kubectl" and settings.metrics_port({"RECONCILER_METRICS_PORT": "0"}) == 0
    assert settings.txn_delay_for_tests({"RECONCILER_TEST_TXN_DELAY_MS": "400"}) == 0.4
    assert settings.errors({}) == []
    assert not any(line.startswith("RECONCILER_JOBS") for line in settings.errors())


def test_a_long_value_is_cut_in_the_message():
    (line,) = settings.errors({"RECONCILER_JOBS": "x" * 100_000})
    assert len(line) < 400 and "(100,000 characters)" in line


def test_the_replication_job_refuses_a_malformed_variable_before_spark_starts(tmp_path):
    env = {**os.environ, "RECONCILER_METRICS_PORT": "abc", "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, str(ROOT / "jobs" / "mirror_job.py"), "--spec", str(tmp_path / "none.json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith("error: RECONCILER_METRICS_PORT=abc is not a port number") and r.stderr.count("\n") == 1
