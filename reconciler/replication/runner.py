"""Run a replication job locally with spark-submit, as a subprocess tests can SIGKILL.

    job = LocalJob.start(spec, workdir)    # writes the spec, runs spark-submit jobs/mirror_job.py
    job.kill()                             # SIGKILL the whole process group (JVM + Python driver + workers)
    job.stop()                             # SIGTERM: clean stop, final status published
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from reconciler.replication.session import REPO_ROOT
from reconciler.replication.spec import JobSpec

JOB_SCRIPT = REPO_ROOT / "jobs" / "mirror_job.py"


def spark_submit() -> Path:
    import pyspark

    path = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    if not path.exists():
        raise FileNotFoundError(f"spark-submit not found at {path}")
    return path


def job_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    env = dict(os.environ)
    env.update({
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", python),
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p),
        "SPARK_HOME": str(spark_submit().parent.parent),
    })
    env.update(extra or {})
    return env


def command(spec_path: Path, master: str | None = None, max_seconds: float | None = None) -> list[str]:
    cmd = [str(spark_submit())]
    if master:
        cmd += ["--master", master]
    cmd += ["--conf", "spark.ui.enabled=false", str(JOB_SCRIPT), "--spec", str(spec_path)]
    if master:
        cmd += ["--master", master]
    if max_seconds is not None:
        cmd += ["--max-seconds", str(max_seconds)]
    return cmd


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text().split()
            out += [int(x) for x in text]
    except OSError:
        return out
    return out


@dataclass
class LocalJob:
    process: subprocess.Popen
    spec_path: Path
    log_path: Path

    @classmethod
    def start(cls, spec: JobSpec, workdir: Path, *, master: str | None = None, max_seconds: float | None = None,
              env: Mapping[str, str] | None = None, name: str | None = None) -> "LocalJob":
        workdir.mkdir(parents=True, exist_ok=True)
        stem = name or spec.flow.replace("->", "-")
        spec_path = spec.write(workdir / f"{stem}.json")
        log_path = workdir / f"{stem}.log"
        log = open(log_path, "ab")
        proc = subprocess.Popen(command(spec_path, master, max_seconds), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=job_env(env), start_new_session=True, cwd=str(workdir))
        return cls(proc, spec_path, log_path)

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL everything the job started (a crash: nothing is flushed or closed)."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(30)

    def driver_pids(self) -> list[int]:
        """The Python driver process(es) spark-submit started (children of its JVM running our script)."""
        found = []
        for child in _children(self.process.pid):
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(part.endswith(b"mirror_job.py") for part in cmdline):
                found.append(child)
        return found

    def stop(self, timeout: float = 60.0) -> int | None:
        """Clean stop: SIGTERM the Python driver, which finishes its batch, publishes a final status
        and stops Spark; SIGKILL the rest if it does not exit within `timeout`."""
        pids = self.driver_pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        if not pids:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                return self.process.poll()
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return self.process.returncode
            time.sleep(0.2)
        return None


@dataclass
class StandaloneCluster:
    """A Spark standalone master and one worker from the pyspark wheel, on loopback (tests, demos)."""

    master_url: str
    processes: list[subprocess.Popen]

    @classmethod
    def start(cls, workdir: Path, cores: int = 2, memory: str = "2g", timeout: float = 90.0) -> "StandaloneCluster":
        from reconciler.dev.brokers import free_port

        workdir.mkdir(parents=True, exist_ok=True)
        spark_class = str(spark_submit().parent / "spark-class")
        env = job_env({"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_WORKER_DIR": str(workdir / "work")})
        port = free_port()
        url = f"spark://127.0.0.1:{port}"
        procs = []

        def launch(name: str, args: list[str]) -> Path:
            log = workdir / f"{name}.log"
            procs.append(subprocess.Popen([spark_class, *args], stdout=open(log, "ab"), stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, env=env, start_new_session=True))
            return log

        cluster = cls(url, procs)
        try:
            master_log = launch("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                           "--port", str(port), "--webui-port", str(free_port())])
            _wait_for_line(master_log, "I have been elected leader", timeout)
            worker_log = launch("worker", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                           "--cores", str(cores), "--memory", memory, "--webui-port", str(free_port()),
                                           url])
            _wait_for_line(worker_log, "Successfully registered with master", timeout)
        except Exception:
            cluster.stop()
            raise
        return cluster

    def stop(self) -> None:
        for proc in reversed(self.processes):
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def _wait_for_line(log: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if text in log.read_text(errors="replace"):
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"no {text!r} in {log} within {timeout:.0f}s")
