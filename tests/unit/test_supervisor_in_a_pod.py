"""The supervisor as the job image's driver pod runs it (deploy/image/entrypoint.sh: `tini -s -- python -m
reconciler.deployers.supervisor -- spark-submit ...`), with stand-ins for Spark: a "JVM" that, like spark-submit's,
dies of SIGTERM without passing it on, and a Python driver (a script named mirror_job.py) that stops cleanly on
SIGTERM. The engine itself under tini and spark-submit: tests/integration/test_k8s_stop.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from reconciler.deployers.instance import new_instance_id
from reconciler.settings import INSTANCE_ENV, JOB_DIR_ENV

ROOT = Path(__file__).resolve().parents[2]
#: spark-submit's JVM (`... org.apache.spark.deploy.SparkSubmit ... mirror_job.py ...`): runs the driver, dies of
#: SIGTERM (exit 143) without passing it on.
JVM = (
    "import signal, subprocess, sys; signal.signal(signal.SIGTERM, lambda *_: sys.exit(143)); "
    "sys.exit(subprocess.call(sys.argv[2:]))"
)
#: the Python driver: says it is ready, stops cleanly on SIGTERM (exit 0) saying so.
DRIVER = """import pathlib, signal, sys, time
def stop(*_):
    pathlib.Path(sys.argv[1]).write_text("stopped")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
pathlib.Path(sys.argv[2]).write_text("ready")
while True:
    time.sleep(0.05)
"""
#: an init the supervisor runs under (tini): the same environment, the supervisor's module in its argv.
INIT = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (INSTANCE_ENV, JOB_DIR_ENV)}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def _supervised(*command: str) -> list[str]:
    return [sys.executable, "-m", "reconciler.deployers.supervisor", "--", *command]


def test_a_pods_sigterm_reaches_the_driver_even_without_an_instance_id(tmp_path):
    """No $RECONCILER_JOB_INSTANCE (a pod without the operator's webhook): the supervisor makes one up and hands it
    to spark-submit, so the stop request finds the driver, which stops cleanly; the JVM is never signalled."""
    driver = tmp_path / "mirror_job.py"
    driver.write_text(DRIVER)
    stopped, ready = tmp_path / "stopped", tmp_path / "ready"
    proc = subprocess.Popen(
        _supervised(
            sys.executable,
            "-c",
            JVM,
            "org.apache.spark.deploy.SparkSubmit",
            sys.executable,
            str(driver),
            str(stopped),
            str(ready),
        ),
        env=_env(),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), proc.stderr.read() if proc.poll() is not None else "the driver never started"
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read()
    assert code == 0 and stopped.read_text() == "stopped", err
    assert "asking the driver to stop (1 found)" in err


def test_the_supervisor_never_ends_the_init_it_runs_under():
    """tini carries the instance and names the supervisor in its argv: when spark-submit ends, the supervisor ends
    the rest of the instance, but not tini (which would take the pod down with SIGKILL's 137 instead of the job's
    exit code)."""
    cmd = [sys.executable, "-c", INIT, *_supervised(sys.executable, "-c", "pass")]
    r = subprocess.run(cmd, env=_env(**{INSTANCE_ENV: new_instance_id()}), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "ending the rest" not in r.stderr, r.stderr
