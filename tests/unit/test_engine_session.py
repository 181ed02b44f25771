"""The Spark settings a job and an engine start with (engine/session.py): what the start-up cuts of issue 39 rest on."""

from __future__ import annotations

import importlib.util
import threading

import pytest

from reconciler.deployers.instance import Role, classify
from reconciler.engine.driver import SparkExecutor
from reconciler.engine.session import WORKER_DAEMON_MODULE, PendingContext, application_conf, engine_conf


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


class _Context:
    """A SparkContext's part the executor and the engine use."""

    applicationId = "local-1"

    def __init__(self) -> None:
        self.pools: list[str] = []

    def setLocalProperty(self, key: str, value: str) -> None:  # noqa: N802 - pyspark's name
        self.pools.append(value)


def test_the_flows_start_while_the_context_is_made_and_their_first_batch_waits_for_it():
    """Issue 47 (apply -> first record): the engine's SparkContext is made in a thread while the flows start; an
    executor given the pending context asks for it only at the first batch, which waits until it is there."""
    release, ready = threading.Event(), []
    made = _Context()

    def make() -> _Context:
        release.wait(30)  # the JVM is still making it
        return made

    spark = PendingContext(make, on_ready=ready.append).start()
    executor = SparkExecutor(pending=spark)  # built, and a flow's driver with it, before the context exists
    assert not spark.ready and spark.application_id() is None and spark.failed is None
    with pytest.raises(TimeoutError):
        spark.get(timeout=0.01)
    assert executor.run(None, [], None) == []  # a batch of nothing needs no context
    release.set()
    assert executor.sc is made  # the first batch's wait
    assert spark.ready and spark.application_id() == "local-1" and spark.failed is None
    spark._thread.join(10)
    assert ready == [made]  # the workers' start and the runtime record follow the context


def test_a_context_that_cannot_be_made_fails_the_batch_that_waits_and_tells_the_engine():
    stopped: list[BaseException] = []

    def make() -> _Context:
        raise OSError("no java")

    spark = PendingContext(make, on_error=stopped.append).start()
    executor = SparkExecutor(pending=spark)
    with pytest.raises(RuntimeError, match="no java"):
        executor.sc  # noqa: B018 - the first batch's wait raises: the batch fails
    assert isinstance(spark.failed, OSError) and not spark.ready and spark.application_id() is None
    assert len(stopped) == 1  # the engine stops (jobs/mirror_job.py: exit code 1)


def test_an_engine_that_failed_before_starting_its_context_does_not_wait_for_it_at_its_end():
    spark = PendingContext(lambda: _Context())  # never started: jobs/mirror_job.py failed before `start`
    with pytest.raises(RuntimeError, match="never started"):
        spark.get(timeout=None)  # at once, not after the timeout
    assert not spark.ready and spark.failed is None


def test_an_executor_is_given_a_context_or_a_pending_one():
    sc = _Context()
    assert SparkExecutor(sc).sc is sc
    with pytest.raises(ValueError):
        SparkExecutor()
    with pytest.raises(ValueError):
        SparkExecutor(sc, pending=PendingContext(lambda: sc))
