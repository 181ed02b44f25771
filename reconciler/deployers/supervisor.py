"""The first process of a job instance: runs spark-submit and makes the instance live and die as one.

    python -m reconciler.deployers.supervisor [--exit-code-file F] -- spark-submit ... mirror_job.py --spec S

* It is the session leader the deployer starts; spark-submit (the JVM) is its child and gets SIGKILL the
  moment the supervisor dies, however it dies (Linux's parent-death signal, PR_SET_PDEATHSIG).
* The Python driver watches its parent, the JVM, and ends when the JVM is gone
  (`reconciler.engine.lifeline`); Spark's Python workers end when the JVM closes their pipe.
* When spark-submit ends, for whatever reason (a clean stop, a failure, the driver or the JVM killed), the
  supervisor ends every other process of the instance (found by `$RECONCILER_JOB_INSTANCE`, see
  `reconciler.deployers.instance`), writes spark-submit's exit code to F (128 + N when a signal N killed it, as a
  shell says) and exits with it.
* SIGTERM/SIGINT to the supervisor are a request for a clean stop: it passes SIGTERM to the driver.

So no process of a job keeps copying unseen: killing any one of them ends the instance.

The job image's driver pod runs it too (deploy/image/entrypoint.sh: `tini -s -- python -m
reconciler.deployers.supervisor -- spark-submit ...`), so the SIGTERM the kubelet sends PID 1 when the pod is
deleted reaches the Python driver (Spark does not pass a signal to it), which finishes its batch, commits and
publishes its final status. There the instance is the pod's (`metadata.uid`); without the variable the
supervisor makes up an id and hands it to spark-submit. The processes it runs under (tini) carry the same
instance and are never ended by it.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import reconciler.deployers.instance as instance
from reconciler import settings
from reconciler.settings import INSTANCE_ENV

PR_SET_PDEATHSIG = 1
GRACE_SECONDS = 10.0


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the driver's lifeline still ends the job
        pass


def _say(text: str) -> None:
    print(f"[supervisor {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def _write_code(path: Path, code: int) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(f"{code}\n")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reconciler.deployers.supervisor")
    ap.add_argument("--exit-code-file", type=Path)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("no command to run")
    # The instance's processes are found by their $RECONCILER_JOB_INSTANCE: one is made up if nobody set it (a
    # pod whose environment lacks it), or a stop request could not find the driver.
    inst = settings.job_instance() or instance.new_instance_id()
    if args.exit_code_file is not None:
        args.exit_code_file.unlink(missing_ok=True)

    def stop_request(signum: int, _frame: object) -> None:
        drivers = [p for p in instance.scan(instance=inst) if p.role is instance.Role.DRIVER]
        _say(f"signal {signal.Signals(signum).name}: asking the driver to stop ({len(drivers)} found)")
        for p in drivers:
            os.kill(p.pid, signal.SIGTERM)
        if not drivers and child is not None:
            child.send_signal(signal.SIGTERM)

    child: subprocess.Popen | None = None
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop_request)
    child = subprocess.Popen(
        cmd, preexec_fn=_die_with_parent, stdin=subprocess.DEVNULL, env={**os.environ, INSTANCE_ENV: inst}
    )
    while True:
        try:
            status = child.wait()
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for clarity
            continue
    code = 128 - status if status < 0 else status
    above = instance.ancestors(os.getpid())  # tini, in the job image: it ends when this process does
    left = [p for p in instance.scan(instance=inst) if p.pid != os.getpid() and p.pid not in above]
    if left:
        _say(f"spark-submit exited with code {code}; ending the rest of the instance: {instance.summary(left)}")
        instance.end(left, GRACE_SECONDS)
    else:
        _say(f"spark-submit exited with code {code}")
    if args.exit_code_file is not None:
        _write_code(args.exit_code_file, code)
    return code


if __name__ == "__main__":
    sys.exit(main())
