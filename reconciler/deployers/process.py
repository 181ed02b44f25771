"""Run a replication job locally with spark-submit, as one job instance tests and deployers can end whole.

    job = LocalJob.start(spec, workdir)    # writes the spec, runs the supervisor -> spark-submit jobs/mirror_job.py
    job.processes()                        # every process of the instance (supervisor, JVM, driver, workers)
    job.kill()                             # SIGKILL every process of the instance (a crash: nothing flushed)
    job.stop()                             # SIGTERM to the driver: clean stop, final status published
    LocalJob.attach(pid, spec_path, log)   # a job started by an earlier process (the local deployer)
    recorded_job(job_dir, "engine.json")   # a job directory's record (job.json) and the job attached to it

An instance has one id (`instance_id`, in every process's environment with the job directory, see
`reconciler.deployers.instance`) and starts as `python -m reconciler.deployers.supervisor`, the leader of a session of
its own (so it outlives the process that started it and a Ctrl-C in that terminal does not reach it). The
supervisor makes the instance live and die as one: any of its processes dying ends the rest, and it writes
spark-submit's exit code to `exit_code_path` (0 stopped, 1 failed, 3 restart required, 128+N killed by signal N).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import reconciler.deployers.instance as instance
from reconciler.contract.spec import JobSpec
from reconciler.deployers.instance import JobProcess, Role
from reconciler.resources import import_root, job_script
from reconciler.settings import INSTANCE_ENV, JOB_DIR_ENV
from reconciler.topology.flow_id import FlowId, flow_ends


def spark_submit() -> Path:
    try:
        import pyspark
    except ImportError as exc:
        raise FileNotFoundError(
            "the replication job needs Spark, which is not installed here: install the "
            "[spark] extra (pip install 'kafka-replication-reconciler[spark]')"
        ) from exc

    path = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    if not path.exists():
        raise FileNotFoundError(f"spark-submit not found at {path}")
    return path


def job_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    env = dict(os.environ)
    env.update(
        {
            "PYSPARK_PYTHON": python,
            "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", python),
            "PYTHONPATH": os.pathsep.join(p for p in (str(import_root()), os.environ.get("PYTHONPATH", "")) if p),
            "SPARK_HOME": str(spark_submit().parent.parent),
        }
    )
    env.update(extra or {})
    return env


#: The driver JVM's options (the JVM spark-submit starts, the Python driver's parent). `-XX:-UsePerfData`: no
#: hsperfdata file, whose counters the JVM samples every 50 ms; an idle engine's JVM spent ~25 % of its CPU on it
#: (210-270 against 180-195 ms a minute, one idle SparkContext each, 3 windows of 40 s; docs/benchmarks.md, "Idle
#: cost"). What it costs: `jps` and `jstat` do not list the JVM (`jcmd PID` still answers).
DRIVER_JAVA_OPTIONS = "-XX:-UsePerfData"


def command(
    spec_path: Path | None, master: str | None = None, max_seconds: float | None = None, engine_dir: Path | None = None
) -> list[str]:
    """spark-submit of the job's entry point: one flow (`spec_path`) or an engine (`engine_dir`)."""
    cmd = [str(spark_submit()), "--driver-java-options", DRIVER_JAVA_OPTIONS]
    if master:
        cmd += ["--master", master]
    what = ["--engine-dir", str(engine_dir)] if engine_dir is not None else ["--spec", str(spec_path)]
    cmd += ["--conf", "spark.ui.enabled=false", str(job_script()), *what]
    if master:
        cmd += ["--master", master]
    if max_seconds is not None:
        cmd += ["--max-seconds", str(max_seconds)]
    return cmd


def proc_start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot, /proc/PID/stat field 22): with the pid it
    identifies a process across pid reuse. None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text.rpartition(")")[2].split()[19])


#: Exit codes of our own children reaped by `process_alive` (pid -> code).
REAPED: dict[int, int] = {}


def process_alive(pid: int, start_time: int | None = None) -> bool:
    """True while `pid` runs (zombies count as dead, and are reaped when they are our children) and,
    if given, is still the process that started at `start_time` (not a reused pid)."""
    try:
        done, wstatus = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            code = os.waitstatus_to_exitcode(wstatus)
            REAPED[pid] = 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell says
    except (ChildProcessError, OSError):
        pass
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return False
    if fields[0] == "Z":
        return False
    return start_time is None or int(fields[19]) == start_time


@dataclass
class LocalJob:
    process: subprocess.Popen | None  # None when attached to a job another process started
    spec_path: Path
    log_path: Path
    pid: int = 0  # the supervisor: the session leader of the instance
    start_time: int | None = None
    exit_code_path: Path | None = None
    instance_id: str | None = None

    def __post_init__(self) -> None:
        if self.process is not None and not self.pid:
            self.pid = self.process.pid
        if self.start_time is None:
            self.start_time = proc_start_time(self.pid)

    @classmethod
    def start(
        cls,
        spec: JobSpec,
        workdir: Path,
        *,
        master: str | None = None,
        max_seconds: float | None = None,
        env: Mapping[str, str] | None = None,
        name: str | None = None,
        spec_path: Path | None = None,
        log_path: Path | None = None,
        exit_code_path: Path | None = None,
        instance_id: str | None = None,
    ) -> LocalJob:
        workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
        stem = name or FlowId(*flow_ends(spec.flow)).slug("-")
        spec_path = spec.write(spec_path or workdir / f"{stem}.json")
        log_path = log_path or workdir / f"{stem}.log"
        return cls._launch(
            command(spec_path, master, max_seconds), workdir, spec_path, log_path, env, exit_code_path, instance_id
        )

    @classmethod
    def start_engine(
        cls,
        engine_dir: Path,
        *,
        master: str | None = None,
        max_seconds: float | None = None,
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        exit_code_path: Path | None = None,
        instance_id: str | None = None,
    ) -> LocalJob:
        """An engine (reconciler.engine.host) of the flow files in `engine_dir`."""
        log_path = log_path or engine_dir / "job.log"
        cmd = command(None, master, max_seconds, engine_dir=engine_dir.resolve())
        return cls._launch(cmd, engine_dir, engine_dir, log_path, env, exit_code_path, instance_id)

    @classmethod
    def _launch(
        cls,
        job_command: list[str],
        workdir: Path,
        spec_path: Path,
        log_path: Path,
        env: Mapping[str, str] | None,
        exit_code_path: Path | None,
        instance_id: str | None,
    ) -> LocalJob:
        inst = instance_id or instance.new_instance_id()
        cmd = [sys.executable, "-m", "reconciler.deployers.supervisor"]
        if exit_code_path is not None:
            exit_code_path.unlink(missing_ok=True)
            cmd += ["--exit-code-file", str(exit_code_path)]
        cmd += ["--", *job_command]
        env = {**(env or {}), INSTANCE_ENV: inst, JOB_DIR_ENV: str(workdir.resolve())}
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=job_env(env),
                start_new_session=True,
                cwd=str(workdir),
            )
        return cls(proc, spec_path, log_path, exit_code_path=exit_code_path, instance_id=inst)

    @classmethod
    def attach(
        cls,
        pid: int,
        spec_path: Path,
        log_path: Path,
        start_time: int | None = None,
        exit_code_path: Path | None = None,
        instance_id: str | None = None,
    ) -> LocalJob:
        """A job started earlier (by another process): stop, kill and watch it by pid and instance id."""
        return cls(None, spec_path, log_path, pid, start_time, exit_code_path, instance_id)

    def alive(self) -> bool:
        if not self.pid:  # never started (a deployer killed mid-start recorded no pid)
            return False
        if self.process is not None:
            return self.process.poll() is None
        return process_alive(self.pid, self.start_time)

    def exit_code(self) -> int | None:
        """The exit code, once the job has ended and it is known (our child, or written by the wrapper)."""
        if self.process is not None and self.process.poll() is not None:
            code = self.process.returncode
            return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell says
        if self.exit_code_path is not None:
            try:
                return int(self.exit_code_path.read_text().strip())
            except (OSError, ValueError):
                pass
        return REAPED.get(self.pid)

    def processes(self) -> list[JobProcess]:
        """Every live process of this instance (none once it has ended)."""
        if self.instance_id is None:
            return []
        return instance.scan(instance=self.instance_id)

    def kill(self) -> None:
        """SIGKILL every process of the instance (a crash: nothing is flushed or closed)."""
        procs = self.processes()
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        instance.kill(procs)
        self.wait(30)
        instance.end(self.processes(), 0)  # anything that outlived the supervisor

    def driver_pids(self) -> list[int]:
        """The Python driver process(es) of the instance."""
        return [p.pid for p in self.processes() if p.role is Role.DRIVER]

    def stop(self, timeout: float = 60.0) -> int | None:
        """Clean stop: SIGTERM the Python driver, which finishes its batch, commits, publishes a final
        status and stops Spark (the supervisor then ends the rest); SIGKILL every process of the instance
        that has not ended within `timeout`."""
        if not self.alive():
            instance.end(self.processes(), 0)
            return self.exit_code()
        pids = self.driver_pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        if not pids:  # still starting (no driver yet): the supervisor passes the request on
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                return self.exit_code()
        code = self.wait(timeout)
        if code is None and self.alive():
            self.kill()
            return None
        instance.end(self.processes(), 0)
        return code if code is not None else self.exit_code()

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def wait(self, timeout: float) -> int | None:
        """Wait up to `timeout` for the job to end; its exit code (None if still running or unknown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                if self.process is not None:
                    self.process.wait()
                    return self.exit_code()
                for _ in range(10):  # the wrapper writes the code just before it exits
                    if self.exit_code() is not None:
                        break
                    time.sleep(0.05)
                return self.exit_code()
            time.sleep(0.2)
        return None


def recorded_job(job_dir: Path, spec_file: str) -> tuple[dict, LocalJob] | None:
    """A job directory's deployer record (`job.json`) and the job attached to the instance it records (by pid, with
    its start time against pid reuse, and instance id; log `job.log`, exit code `exit_code`); None: no readable
    record. `spec_file`: the file of `job_dir` the job reads (an engine's `engine.json`, a per-flow job's
    `spec.json` of an earlier release). The process deployers' one way to find what they started."""
    try:
        record = json.loads((job_dir / "job.json").read_text())
    except (OSError, ValueError):
        return None
    job = LocalJob.attach(
        record.get("pid") or 0,
        job_dir / spec_file,
        job_dir / "job.log",
        record.get("pid_start"),
        job_dir / "exit_code",
        record.get("instance_id"),
    )
    return record, job


@dataclass
class StandaloneCluster:
    """A Spark standalone master and one worker from the pyspark wheel, on loopback (tests, demos)."""

    master_url: str
    processes: list[subprocess.Popen]

    @classmethod
    def start(cls, workdir: Path, cores: int = 2, memory: str = "2g", timeout: float = 90.0) -> StandaloneCluster:
        from reconciler.dev.brokers import free_port

        workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
        spark_class = str(spark_submit().parent / "spark-class")
        env = job_env({"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_WORKER_DIR": str(workdir / "work")})
        port = free_port()
        url = f"spark://127.0.0.1:{port}"
        procs = []

        def launch(name: str, args: list[str]) -> Path:
            log = workdir / f"{name}.log"
            procs.append(
                subprocess.Popen(
                    [spark_class, *args],
                    stdout=open(log, "ab"),
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                )
            )
            return log

        cluster = cls(url, procs)
        try:
            master_log = launch(
                "master",
                [
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(free_port()),
                ],
            )
            _wait_for_line(master_log, "I have been elected leader", timeout)
            worker_log = launch(
                "worker",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    str(cores),
                    "--memory",
                    memory,
                    "--webui-port",
                    str(free_port()),
                    url,
                ],
            )
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
