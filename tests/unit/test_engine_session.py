"""The Spark settings a job and an engine start with (engine/session.py): what the start-up cuts of issue 39 rest on."""

from __future__ import annotations

import importlib.util

from reconciler.deployers.instance import Role, classify
from reconciler.engine.session import WORKER_DAEMON_MODULE, application_conf, engine_conf


def test_the_workers_are_forked_from_the_jobs_daemon_which_python_can_run():
    conf = engine_conf("east", "local[2]", {})
    assert conf["spark.python.daemon.module"] == WORKER_DAEMON_MODULE == "reconciler.engine.daemon"
    assert importlib.util.find_spec(WORKER_DAEMON_MODULE) is not None  # `python -m reconciler.engine.daemon`
    # the daemon and the workers it forks keep its command line: a deployer counts them as the job's workers
    assert classify(["/venv/bin/python", "-m", WORKER_DAEMON_MODULE]) is Role.WORKER
    assert engine_conf("east", "inherit", {})["spark.python.daemon.module"] == WORKER_DAEMON_MODULE  # the image's
    # a standalone cluster's machines may have the project only as --py-files, which the daemon would not see
    assert "spark.python.daemon.module" not in engine_conf("east", "spark://m:7077", {})


def test_no_sql_settings_and_the_topologys_own_spark_conf_wins():
    conf = application_conf("mirror a->b", "local[2]", {"spark.python.daemon.module": "pyspark.daemon"})
    assert not [k for k in conf if k.startswith("spark.sql.")]  # the job runs no SQL: no SparkSession
    assert conf["spark.python.daemon.module"] == "pyspark.daemon"  # a topology can go back to pyspark's own
