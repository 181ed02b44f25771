"""What a job's SparkContext gives its first batch (engine/session.py, engine/daemon.py; issue 39): the Python workers
forked with the copy code already imported, and a context, not a SparkSession (the job runs no SQL)."""

from __future__ import annotations

import sys

import pytest

from tests.integration.mirror_helpers import spec_for

pytestmark = [pytest.mark.spark]


def test_the_first_tasks_workers_have_the_copy_code_imported_before_any_task_asks():
    from pyspark import SparkContext

    from reconciler.engine.daemon import PRELOADED
    from reconciler.engine.session import build_context, start_workers

    sc = build_context(
        spec_for(type("B", (), {"bootstrap": "x:1"}), type("B", (), {"bootstrap": "x:2"})), master="local[2]"
    )
    try:
        assert type(sc) is SparkContext
        # A lambda is pickled by value: unpickling it imports nothing of the project, so what the worker has
        # imported, its daemon imported before forking it.
        seen = sc.parallelize(range(2), 2).map(lambda _: [m for m in PRELOADED if m in sys.modules]).collect()
        assert PRELOADED == ("confluent_kafka", "reconciler.engine.worker")
        assert seen == [list(PRELOADED)] * 2
        warm_up = start_workers(sc)  # what the entry point starts beside the flows' start: a job that ends
        warm_up.join(120)
        assert not warm_up.is_alive()
    finally:
        sc.stop()
