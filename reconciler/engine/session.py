"""Building the SparkSession of a replication job."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from reconciler.contract.engine import INHERIT_MASTER
from reconciler.contract.spec import JobSpec
from reconciler.resources import import_root

__all__ = ["INHERIT_MASTER", "application_conf", "build_session", "engine_conf", "session_of", "spark_conf"]


def spark_conf(spec: JobSpec, master: str | None = None) -> dict[str, str]:
    """Spark settings for a one-flow job (`--spec`): `application_conf` with the flow's settings."""
    return application_conf(
        f"mirror {spec.flow}", master or spec.engine.master, spec.engine.spark_conf, spec.engine.parallelism
    )


def application_conf(
    name: str, master: str, own: Mapping[str, str], parallelism: int = 2, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Spark settings for a job or an engine: worker reuse (clients are cached per Python worker), no UI by
    default, the project importable by Python workers, `extra`, and the topology's own `spark_conf` last."""
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
        "spark.sql.shuffle.partitions": str(max(1, parallelism)),
        "spark.driver.memory": "512m",
        "spark.executor.memory": "512m",
    }
    conf.update(extra or {})
    conf.update({str(k): str(v) for k, v in own.items()})
    if conf["spark.master"] == INHERIT_MASTER:  # keep the master spark-submit was given (Kubernetes operator)
        del conf["spark.master"]
    return conf


def build_session(spec: JobSpec, master: str | None = None, extra: Mapping[str, str] | None = None) -> Any:
    return session_of({**spark_conf(spec, master), **(extra or {})})


def engine_conf(name: str, master: str, own: Mapping[str, str]) -> dict[str, str]:
    """An engine's application: its flows' micro-batches are Spark jobs submitted side by side, shared fairly."""
    return application_conf(f"mirror engine {name}", master, own, extra={"spark.scheduler.mode": "FAIR"})


def session_of(conf: Mapping[str, str]) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for k, v in conf.items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
