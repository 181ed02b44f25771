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
from collections.abc import Mapping
from typing import Any

from reconciler import settings
from reconciler.contract.engine import INHERIT_MASTER, WORKER_DAEMON_MODULE
from reconciler.contract.spec import JobSpec
from reconciler.resources import import_root
from reconciler.topology import secrets

__all__ = [
    "INHERIT_MASTER",
    "WORKER_DAEMON_MODULE",
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
