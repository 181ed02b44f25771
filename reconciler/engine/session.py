"""Building the SparkContext of a replication job.

The job runs RDD jobs only (one Spark partition per copy task, engine/driver.py SparkExecutor): it needs a
SparkContext, not a SparkSession. A SparkSession's JVM side (the SQL engine's classes, its session state) cost
~3.5 s of a deployed job's start on a 2-core machine, before the first record could be copied (issue 39).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

from reconciler import settings
from reconciler.contract.engine import INHERIT_MASTER, WORKER_DAEMON_MODULE
from reconciler.contract.spec import JobSpec
from reconciler.resources import import_root
from reconciler.topology import secrets

__all__ = [
    "INHERIT_MASTER",
    "WORKER_DAEMON_MODULE",
    "PendingContext",
    "application_conf",
    "build_context",
    "context_of",
    "engine_conf",
    "spark_conf",
    "start_workers",
]

log = logging.getLogger(__name__)


def spark_conf(spec: JobSpec, master: str | None = None) -> dict[str, str]:
    """Spark settings for a one-flow job (`--spec`): `application_conf` with the flow's settings."""
    return application_conf(f"mirror {spec.flow}", master or spec.engine.master, spec.engine.spark_conf)


def application_conf(
    name: str, master: str, own: Mapping[str, str], extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Spark settings for a job or an engine: worker reuse (clients are cached per Python worker), no UI by
    default, the project importable by Python workers, `extra`, and the topology's own `spark_conf` last.
    No `spark.sql.*` setting: the job runs no SQL."""
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    pythonpath = os.pathsep.join(p for p in (str(import_root()), os.environ.get("PYTHONPATH", "")) if p)
    conf = {
        "spark.master": master,
        "spark.app.name": name,
        "spark.python.worker.reuse": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.task.maxFailures": "1",  # the worker never raises; a crash is re-planned by the driver
        "spark.pyspark.python": python,
        "spark.executorEnv.PYTHONPATH": pythonpath,
        "spark.executorEnv.PYSPARK_PYTHON": python,
        "spark.driver.memory": "512m",
        "spark.executor.memory": "512m",
    }
    if not master.startswith("spark://"):
        # The workers forked with the copy code imported (engine/daemon.py). Not on a standalone cluster, whose
        # machines may get the project only as `--py-files`, which a task puts on its path but a daemon never sees.
        conf["spark.python.daemon.module"] = WORKER_DAEMON_MODULE
    secrets_dir = settings.secrets_dir()
    if secrets_dir is not None:  # the Python workers read `${NAME}` from there too (a shared mount on a cluster)
        conf[f"spark.executorEnv.{settings.SECRETS_DIR_ENV}"] = str(secrets_dir)
    conf.update(extra or {})
    # `${NAME}` in spark_conf (validated by topology/secrets.py spark_conf_problems) is resolved here, in the
    # engine's own process: never on spark-submit's command line nor in a rendered file.
    conf.update(secrets.resolve_config({str(k): str(v) for k, v in own.items()}))
    if conf["spark.master"] == INHERIT_MASTER:  # keep the master spark-submit was given (Kubernetes operator)
        del conf["spark.master"]
    return conf


def build_context(spec: JobSpec, master: str | None = None, extra: Mapping[str, str] | None = None) -> Any:
    return context_of({**spark_conf(spec, master), **(extra or {})})


def engine_conf(name: str, master: str, own: Mapping[str, str]) -> dict[str, str]:
    """An engine's application: its flows' micro-batches are Spark jobs submitted side by side, shared fairly."""
    return application_conf(f"mirror engine {name}", master, own, extra={"spark.scheduler.mode": "FAIR"})


def context_of(conf: Mapping[str, str]) -> Any:
    """The application's SparkContext with `conf` over what spark-submit was given (the running one, if any)."""
    from pyspark import SparkConf, SparkContext

    sc = SparkContext.getOrCreate(SparkConf().setAll(list(conf.items())))
    sc.setLogLevel("WARN")
    return sc


def _nothing(_: Any) -> None:
    return None


def start_workers(sc: Any) -> threading.Thread:
    """Start Spark's Python daemon and workers in the background, a job of one empty task per core, while the
    flows connect to their clusters and plan their first batch: the first batch then finds them up instead of
    starting them (the daemon's start, its imports, the JVM's first Python job: ~1-3 s on a 2-core machine, issue
    39). A failure here is only logged: the first batch starts the workers itself and reports its own failure."""

    def run() -> None:
        try:
            n = max(1, sc.defaultParallelism)
            sc.parallelize(range(n), n).foreach(_nothing)
        except Exception as exc:  # noqa: BLE001 - see above
            log.debug("starting the Python workers ahead of the first batch failed: %s", exc)

    thread = threading.Thread(target=run, name="start-workers", daemon=True)
    thread.start()
    return thread


class PendingContext:
    """The application's SparkContext, made in a thread of its own (`start`) while the flows start: an engine's
    flows connect to their clusters, create the internal and remote topics, load their positions and replay their
    offset syncs (engine/driver.py `ReplicationDriver.start`) while the JVM builds the SparkContext, instead of after
    it (issue 47: apply -> first record). Whoever needs the context (the flows' first batch: `SparkExecutor`) waits
    for it (`get`). `make` builds it (`context_of`; tests give a fake); `on_ready` is called with it once made (the
    Python workers' start, the runtime record's application id), `on_error` with the exception when it cannot be
    made (the engine stops: a job without Spark copies nothing)."""

    def __init__(
        self,
        make: Callable[[], Any],
        on_ready: Callable[[Any], None] = lambda _sc: None,
        on_error: Callable[[BaseException], None] = lambda _exc: None,
    ):
        self._make, self._on_ready, self._on_error = make, on_ready, on_error
        self._done = threading.Event()
        self._context: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="spark-context", daemon=True)
        self._started = False

    def start(self) -> PendingContext:
        self._started = True
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self._context = self._make()
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits, and to on_error
            self._error = exc
            self._done.set()
            self._on_error(exc)
            return
        self._done.set()
        try:
            self._on_ready(self._context)
        except Exception as exc:  # noqa: BLE001 - the context is there; what follows it is best effort
            log.warning("after the SparkContext started: %s: %s", type(exc).__name__, exc)

    @property
    def ready(self) -> bool:
        """Whether the context is made (False while it is being made, and if it failed)."""
        return self._done.is_set() and self._error is None

    @property
    def failed(self) -> BaseException | None:
        """Why the context could not be made (None: made, or being made)."""
        return self._error if self._done.is_set() else None

    def get(self, timeout: float | None = None) -> Any:
        """The context, once made (waits up to `timeout`, None: as long as it takes); raises if it could not be
        made (RuntimeError, from the cause; or never started: a start-up that failed before it) or is not made
        within `timeout` (TimeoutError)."""
        if not self._started:
            raise RuntimeError("the SparkContext was never started")
        if not self._done.wait(timeout):
            raise TimeoutError(f"the SparkContext was not started within {timeout} s")
        if self._error is not None:
            raise RuntimeError(f"the SparkContext could not be started: {self._error}") from self._error
        return self._context

    def application_id(self) -> str | None:
        """The Spark application's id once the context is made, else None."""
        return self._context.applicationId if self.ready else None
