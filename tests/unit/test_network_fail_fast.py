"""Issue 24: a network command whose cluster refuses connections says so in one line naming the cluster
and its bootstrap servers, exit 1, without the Kafka client's log lines (those only with -v) and
without waiting out its timeout; a timeout that is negative, zero or NaN is a usage error.

The commands run as processes: librdkafka writes its lines to file descriptor 2, which is what a person sees.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.cli.main import main
from tests.helpers import MINIMAL, write

ROOT = Path(__file__).resolve().parents[2]


def _refused_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: connections are refused
    return port


def _topology(tmp_path: Path) -> tuple[Path, str]:
    bootstrap = f"127.0.0.1:{_refused_port()}"
    text = MINIMAL.replace("127.0.0.1:19092", bootstrap).replace("127.0.0.1:19093", bootstrap)
    return write(tmp_path, "t.yaml", text), bootstrap


def _reconciler(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RECONCILER_STATE_DIR": str(tmp_path / "state")}
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


GROUP = ["--group", "g", "--source", "west", "--target", "east"]


@pytest.mark.parametrize(
    "command",
    [["offsets", "translate", *GROUP], ["failover", *GROUP], ["failover", *GROUP, "--apply"], ["reachability"]],
    ids=["translate", "failover", "failover-apply", "reachability"],
)
def test_a_refused_connection_is_one_line_naming_the_cluster_and_exit_1(tmp_path, command):
    topo, bootstrap = _topology(tmp_path)
    argv = [*command, "--cluster", "east"] if command == ["reachability"] else command
    r = _reconciler(tmp_path, *argv, str(topo))
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr[:2000]
    assert lines[0].startswith(f"error: cannot connect to cluster 'east' at {bootstrap}: ")
    assert "Connection refused" in lines[0] and "check that it is running" in lines[0]
    assert len(r.stderr) < 2048 and "Traceback" not in r.stderr and "%3|" not in r.stderr
    assert r.stdout == ""


def test_force_unlock_of_a_cluster_that_refuses_is_one_line_and_exit_1(tmp_path):
    topo, bootstrap = _topology(tmp_path)
    r = _reconciler(tmp_path, "force-unlock", "--cluster", "east", "--force", str(topo), "some-lock")
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: cluster 'east' unreachable at ")
    assert bootstrap in r.stderr and "Traceback" not in r.stderr and len(r.stderr) < 2048


@pytest.mark.parametrize("timeout", ["-1", "nan", "0", "-inf", "inf", "abc"])
@pytest.mark.parametrize("command", [["offsets", "translate", *GROUP], ["failover", *GROUP], ["reachability"]])
def test_a_timeout_that_is_not_a_positive_number_is_a_usage_error(tmp_path, capsys, command, timeout):
    topo, _ = _topology(tmp_path)
    argv = [*command, "--cluster", "east"] if command == ["reachability"] else command
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--timeout", timeout, str(topo)])
    assert stop.value.code == 2
    assert "argument --timeout:" in capsys.readouterr().err


def test_other_commands_refuse_a_negative_or_nan_wait(tmp_path, capsys):
    topo, _ = _topology(tmp_path)
    for argv in (["drift", "--job-stale-seconds", "-5", str(topo)], ["demo", "--timeout", "nan"]):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 2
        assert "is not a" in capsys.readouterr().err


def test_the_kafka_clients_lines_show_with_v_only(tmp_path):
    """A broker that takes connections and drops them passes the probe's TCP test: the command's real call
    fails after its timeout, with one line; the client's own lines (why) only with -v (these are
    librdkafka's informational `Disconnected` lines: -vv)."""
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    bootstrap = f"127.0.0.1:{server.getsockname()[1]}"

    def drop() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=drop, daemon=True).start()
    topo = write(tmp_path, "t.yaml", MINIMAL.replace("127.0.0.1:19093", bootstrap))
    try:
        quiet = _reconciler(tmp_path, "reachability", "--cluster", "east", "--timeout", "1", str(topo))
        loud = _reconciler(tmp_path, "-vv", "reachability", "--cluster", "east", "--timeout", "1", str(topo))
    finally:
        server.close()
    assert quiet.returncode == loud.returncode == 1
    assert quiet.stderr == "error: cannot list topics: Failed to get metadata: Local: Broker transport failure\n"
    assert "rdkafka" in loud.stderr and "Disconnected" in loud.stderr and loud.stderr.endswith(quiet.stderr)
