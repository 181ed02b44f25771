"""The processes of a job instance, found and ended by what they carry, not by who their parent was.

A job instance is one start of a flow's job: a supervisor (`reconciler.deployers.supervisor`, the session
leader), spark-submit's JVM, the Python driver (`mirror_job.py`) and Spark's Python workers (`pyspark.daemon`,
which puts itself in a process group of its own, so signalling the job's process group misses it). Every one of
them carries `$RECONCILER_JOB_INSTANCE` and `$RECONCILER_JOB_DIR` in its environment (the deployer sets them;
the JVM hands its environment to the processes it starts), so:

    scan(job_dir=d)            every process of any instance of the job kept in `d` (leftovers included)
    scan(instance="ab12...")   every process of one instance
    end(procs, grace)          SIGTERM the drivers (a clean stop), SIGKILL whatever is left after `grace`

`classify` (pure) names a process's role from its command line.
"""

from __future__ import annotations

import enum
import os
import signal
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from reconciler.contract.engine import WORKER_DAEMON_MODULE
from reconciler.settings import INSTANCE_ENV, JOB_DIR_ENV


class Role(str, enum.Enum):
    SUPERVISOR = "supervisor"
    JVM = "jvm"
    DRIVER = "driver"
    WORKER = "worker"
    OTHER = "other"


def new_instance_id() -> str:
    return uuid.uuid4().hex[:12]


def classify(argv: list[str]) -> Role:
    """A job process's role from its command line (argv)."""
    if any(a == "reconciler.deployers.supervisor" for a in argv):
        return Role.SUPERVISOR
    if any(a.endswith("SparkSubmit") for a in argv) or (argv and argv[0].endswith("/java")):
        return Role.JVM
    if any(a.endswith("mirror_job.py") for a in argv):
        return Role.DRIVER
    if any(
        a in ("pyspark.daemon", "pyspark.worker", WORKER_DAEMON_MODULE)
        or a.endswith(("pyspark/daemon.py", "pyspark/worker.py"))
        for a in argv
    ):
        return Role.WORKER
    return Role.OTHER


@dataclass(frozen=True)
class JobProcess:
    pid: int
    start_time: int  # clock ticks since boot: with the pid, identifies the process across pid reuse
    role: Role
    instance_id: str
    job_dir: str

    def describe(self) -> str:
        return f"{self.role.value} {self.pid}"


def _environ(pid: int) -> dict[str, str] | None:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key in (INSTANCE_ENV.encode(), JOB_DIR_ENV.encode()):
            out[key.decode()] = value.decode(errors="replace")
    return out


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def scan(
    *, job_dir: Path | str | None = None, instance: str | None = None, under: Path | str | None = None
) -> list[JobProcess]:
    """Live (not zombie) processes of job instances: of one job directory, of one instance, or of every job
    directory below `under` (a state directory)."""
    want_dir = str(job_dir) if job_dir is not None else None
    prefix = str(under).rstrip("/") + "/" if under is not None else None
    me = os.getpid()
    found: list[JobProcess] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        env = _environ(pid)
        if not env or INSTANCE_ENV not in env:
            continue
        inst, jdir = env[INSTANCE_ENV], env.get(JOB_DIR_ENV, "")
        if instance is not None and inst != instance:
            continue
        if want_dir is not None and jdir != want_dir:
            continue
        if prefix is not None and not jdir.startswith(prefix):
            continue
        stat = _stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            continue
        try:
            argv = [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
        except OSError:
            continue
        found.append(JobProcess(pid, int(stat[19]), classify(argv), inst, jdir))
    return sorted(found, key=lambda p: (p.instance_id, list(Role).index(p.role), p.pid))


def ancestors(pid: int) -> set[int]:
    """The processes `pid` runs under (parent, grandparent, ... up to pid 1): a process started under an init
    (tini in the job image: it carries the instance's environment and names the supervisor in its argv) never
    ends them."""
    out: set[int] = set()
    while pid > 1:
        stat = _stat(pid)
        if stat is None:
            break
        pid = int(stat[1])
        out.add(pid)
    return out


def alive(p: JobProcess) -> bool:
    stat = _stat(p.pid)
    return stat is not None and stat[0] not in ("Z", "X") and int(stat[19]) == p.start_time


def _signal(p: JobProcess, sig: int) -> None:
    if alive(p):
        try:
            os.kill(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill(procs: Iterable[JobProcess]) -> None:
    for p in procs:
        _signal(p, signal.SIGKILL)


def end(procs: list[JobProcess], grace: float) -> list[JobProcess]:
    """End these processes: SIGTERM each driver (it finishes its batch, commits and publishes a final status;
    the supervisor then ends the rest), or the supervisors if there is no driver; SIGKILL what is left after
    `grace` seconds. Returns the processes that had to be SIGKILLed."""
    drivers = [p for p in procs if p.role is Role.DRIVER]
    for p in drivers or [p for p in procs if p.role is Role.SUPERVISOR]:
        _signal(p, signal.SIGTERM)
    deadline = time.monotonic() + (grace if drivers or any(p.role is Role.SUPERVISOR for p in procs) else 0)
    while time.monotonic() < deadline and any(alive(p) for p in procs):
        time.sleep(0.1)
    left = [p for p in procs if alive(p)]
    kill(left)
    for _ in range(50):  # SIGKILL is asynchronous: wait until they are gone
        if not any(alive(p) for p in left):
            break
        time.sleep(0.1)
    return left


def summary(procs: list[JobProcess]) -> str:
    """'instance ab12cd: driver 123, jvm 120, 2 workers' (one line per instance)."""
    by: dict[str, list[JobProcess]] = {}
    for p in procs:
        by.setdefault(p.instance_id, []).append(p)
    parts = []
    for inst, ps in by.items():
        named = [p.describe() for p in ps if p.role is not Role.WORKER]
        workers = sum(p.role is Role.WORKER for p in ps)
        if workers:
            named.append(f"{workers} worker{'s' if workers != 1 else ''}")
        parts.append(f"instance {inst}: {', '.join(named)}")
    return "; ".join(parts)
