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
    inst = settings.job_instance()
    if args.exit_code_file is not None:
        args.exit_code_file.unlink(missing_ok=True)

    def stop_request(signum: int, _frame: object) -> None:
        drivers = [p for p in instance.scan(instance=inst) if p.role is instance.Role.DRIVER] if inst else []
        _say(f"signal {signal.Signals(signum).name}: asking the driver to stop ({len(drivers)} found)")
        for p in drivers:
            os.kill(p.pid, signal.SIGTERM)
        if not drivers and child is not None:
            child.send_signal(signal.SIGTERM)

    child: subprocess.Popen | None = None
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop_request)
    child = subprocess.Popen(cmd, preexec_fn=_die_with_parent, stdin=subprocess.DEVNULL)
    while True:
        try:
            status = child.wait()
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for clarity
            continue
    code = 128 - status if status < 0 else status
    left = [p for p in instance.scan(instance=inst) if p.pid != os.getpid()] if inst else []
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
