"""Runs generated inputs through the CLI in the persistent worker (tests/property/worker.py) and
checks the property every input must have:

  exit 0 or 1; no traceback (nothing escapes main(), no 'Traceback' printed); on exit 1 the error
  names the file (`FILE:`); within the time bound and the memory bound; stderr of bounded size
  (long values are cut in messages).

`problems()` returns what was broken, one short line each; `signature()` is what makes two failures
the same finding (the kind of problem and where in reconciler/ it happened).
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SECONDS = 10.0  # time bound of one run, in CPU seconds (the worker's: the machine is shared)
MEMORY_MIB = 1024  # memory bound of one run (peak resident growth; the address space is capped above it)
# stderr may have this many characters, plus STDERR_PER_LINE for each line of the input: a message per
# input line is fine, a message that quotes a 100 KB value whole is a finding (long values are cut).
STDERR_LIMIT = 64 * 1024
STDERR_PER_LINE = 512
WALL = 6  # the parent kills a worker that has not answered in WALL x the bound + 20 s of wall-clock time


@dataclass
class Result:
    rc: object
    out: str
    err: str
    out_len: int
    err_len: int
    seconds: float
    peak_mib: float
    exception: str | None
    exception_type: str | None
    traceback_in_output: bool
    killed: bool = False

    @classmethod
    def from_answer(cls, a: dict) -> Result:
        return cls(
            a["rc"],
            a["out"],
            a["err"],
            a["out_len"],
            a["err_len"],
            a["seconds"],
            a["peak_mib"],
            a["exception"],
            a["exception_type"],
            a["traceback_in_output"],
        )


class CliWorker:
    """One `python -m tests.property.worker`, restarted after a kill, a MemoryError or a time bound."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None
        self.log = workdir / "worker.log"
        self.starts = 0

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RECONCILER_FUZZ")}
        env["FUZZ_WORKER_MEMORY_MIB"] = str(MEMORY_MIB + 512)  # the hard cap; the bound itself is checked
        env["RECONCILER_STATE_DIR"] = str(self.workdir / "state")
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        env.pop("PYTHONWARNINGS", None)
        return env

    def start(self) -> None:
        self.stop()
        self.starts += 1
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.property.worker"],
                cwd=self.workdir,
                env=self._env(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                encoding="utf-8",
            )
        line = self._readline(60.0)
        if line is None or not json.loads(line).get("ready"):
            raise RuntimeError(f"the fuzz worker did not start; see {self.log}")

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    stream.close()
            self.proc = None

    def _readline(self, timeout: float) -> str | None:
        assert self.proc is not None and self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        return line or None

    def run(self, argv: list[str], seconds: float = SECONDS) -> Result:
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        start = time.monotonic()
        self.proc.stdin.write(json.dumps({"argv": argv, "seconds": seconds}) + "\n")
        self.proc.stdin.flush()
        line = self._readline(seconds * WALL + 20)
        if line is None:  # hung where the interval timer cannot reach (C code), or died
            died = self.proc.poll() is not None
            self.stop()
            what = "the worker died" if died else f"no answer in {seconds * WALL + 20:.0f} s: killed"
            return Result(None, "", "", 0, 0, time.monotonic() - start, 0.0, what, "Killed", False, killed=True)
        answer = json.loads(line)
        if answer.get("restart"):
            self.stop()
        return Result.from_answer(answer)


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def where(exception: str | None) -> str:
    """The innermost frame of the traceback inside the project (reconciler/ or jobs/), as path:line (function)."""
    if not exception:
        return ""
    frames = [m for m in _FRAME.finditer(exception) if "/reconciler/" in m.group(1) and "site-packages" not in m[1]]
    if not frames:
        frames = list(_FRAME.finditer(exception))
    if not frames:
        return ""
    m = frames[-1]
    path = m.group(1)
    if str(ROOT) in path:
        path = os.path.relpath(path, ROOT)
    return f"{path}:{m.group(2)} ({m.group(3)})"


def last_line(exception: str | None) -> str:
    lines = [x for x in (exception or "").strip().splitlines() if x.strip()]
    return lines[-1][:200] if lines else ""


def stderr_bound(data: bytes) -> int:
    return STDERR_LIMIT + STDERR_PER_LINE * data.count(b"\n")


def problems(r: Result, path: Path, data: bytes = b"") -> list[tuple[str, str]]:
    """What the run broke of the property, as (finding, detail) pairs; empty: it holds. The finding
    part is the same for two inputs that hit the same hole (it names the place, not the input)."""
    out: list[tuple[str, str]] = []
    if r.killed:
        return [("killed", str(r.exception))]
    if r.exception_type == "TimeBound":
        out.append((f"time bound ({SECONDS:g} CPU seconds) reached at {where(r.exception)}", ""))
    elif r.exception_type == "MemoryError":
        out.append((f"MemoryError at {where(r.exception)}", ""))
    elif r.exception is not None:
        out.append((f"raised {r.exception_type} at {where(r.exception)}", last_line(r.exception)))
    if r.exception is None and r.rc not in (0, 1):
        out.append((f"exit {r.rc!r} (want 0 or 1)", ""))
    if r.traceback_in_output:
        out.append(("'Traceback' in the output", ""))
    if r.exception is None and r.rc == 1 and f"{path}:" not in r.err:
        first = r.err.strip().splitlines()[0][:160] if r.err.strip() else "(nothing on stderr)"
        out.append(("exit 1 without naming the file", repr(first)))
    if r.exception is None and r.seconds > SECONDS:
        out.append((f"more than {SECONDS:g} CPU seconds", f"{r.seconds:.1f} s"))
    if r.peak_mib > MEMORY_MIB:
        out.append((f"more than {MEMORY_MIB} MiB", f"peak +{r.peak_mib:.0f} MiB"))
    if r.err_len > stderr_bound(data):
        out.append(("stderr too long (a long value not cut?)", f"{r.err_len} characters, bound {stderr_bound(data)}"))
    return out


def signature(kind: str, found: list[tuple[str, str]]) -> str:
    return f"{kind}: " + "; ".join(key for key, _ in found)


def describe(found: list[tuple[str, str]]) -> str:
    return "; ".join(f"{key}: {detail}" if detail else key for key, detail in found)
