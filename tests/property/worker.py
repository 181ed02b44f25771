"""The process that runs the CLI for the property-based tests (tests/property): one persistent
`python -m tests.property.worker`, so each generated input costs a function call, not an interpreter.

Protocol: one JSON request per line on stdin ({"argv": [...], "seconds": N}), one JSON answer per line
on the original stdout. `main(argv)` runs in this process with sys.stdout/sys.stderr captured, under
  * a time bound in CPU seconds (the machine the suite runs on is shared: wall-clock time would
    measure the neighbours): a profiling interval timer raises `TimeBound` (a BaseException, so no
    `except Exception` in the CLI swallows it) where the command is, and the traceback says where;
  * a memory bound: RLIMIT_AS = what the process had after its imports + the bound, so an allocation
    past it is a MemoryError, never the machine's OOM killer; the peak resident size of each run is
    measured too (VmHWM, reset before each run through /proc/self/clear_refs).
The parent (tests/property/cli.py) kills and restarts the worker if it does not answer in time.
"""

from __future__ import annotations

import io
import json
import os
import resource
import signal
import sys
import time
import traceback

KEEP = 64 * 1024  # characters of stdout/stderr sent back (head and tail); lengths are sent whole


class TimeBound(BaseException):
    """The time bound of one run was reached."""


def _on_alarm(signum, frame):
    raise TimeBound("time bound reached")


def _status(field: str) -> int:
    """A /proc/self/status field in KiB (0 where there is none)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _cut(text: str) -> str:
    return text if len(text) <= 2 * KEEP else text[:KEEP] + "\n[... cut by the fuzz worker ...]\n" + text[-KEEP:]


def _run(main, argv: list[str], seconds: float, can_reset: bool) -> dict:
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    rss_before = _status("VmRSS")
    if can_reset:
        _reset_peak()
    rc: object = None
    exc_text = None
    exc_type = None
    start = time.monotonic()
    cpu_start = time.process_time()
    sys.stdout, sys.stderr = out, err
    try:
        signal.setitimer(signal.ITIMER_PROF, seconds)
        try:
            rc = main(argv)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
        exc_type = "SystemExit"
        exc_text = f"SystemExit({exc.code!r})"
    except BaseException as exc:  # noqa: BLE001 - whatever escapes main() is what the property reports
        exc_type = type(exc).__name__
        exc_text = "".join(traceback.format_exception(exc))
    finally:
        elapsed = time.monotonic() - start
        cpu = time.process_time() - cpu_start
        sys.stdout, sys.stderr = saved
    peak = _status("VmHWM") if can_reset else _status("VmRSS")
    o, e = out.getvalue(), err.getvalue()
    return {
        "rc": rc if isinstance(rc, int) else repr(rc),
        "out": _cut(o),
        "err": _cut(e),
        "out_len": len(o),
        "err_len": len(e),
        "seconds": cpu,
        "wall_seconds": elapsed,
        "peak_mib": max(0, peak - rss_before) / 1024,
        "traceback_in_output": "Traceback" in o or "Traceback" in e,
        "exception": exc_text,
        "exception_type": exc_type,
        "restart": exc_type in ("MemoryError", "TimeBound", "RecursionError"),
    }


def serve() -> None:
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    # stray writes to fd 1 (C libraries) must not break the protocol: fd 1 goes where fd 2 goes
    os.dup2(2, 1)
    limit_mib = float(os.environ.get("FUZZ_WORKER_MEMORY_MIB", "1024"))
    from reconciler.cli.main import main

    signal.signal(signal.SIGPROF, _on_alarm)
    can_reset = _reset_peak()
    vm = _status("VmSize") * 1024
    if vm:
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        soft = vm + int(limit_mib * 1024 * 1024)
        resource.setrlimit(resource.RLIMIT_AS, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
    proto.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    proto.flush()
    for line in sys.stdin:
        request = json.loads(line)
        answer = _run(main, request["argv"], float(request["seconds"]), can_reset)
        proto.write(json.dumps(answer) + "\n")
        proto.flush()


if __name__ == "__main__":
    serve()
