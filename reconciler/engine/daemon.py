"""Spark's Python daemon for the job (`spark.python.daemon.module`, engine/session.py): pyspark's own daemon, with
the tasks' modules imported before it forks the Python workers.

Spark starts one daemon per executor at the first task and forks every Python worker from it. With pyspark's
daemon each forked worker imported the copy code (reconciler.engine.worker: the spec, the topology's schema,
confluent_kafka) when it unpickled its first task, each worker on its own, while the first batch waited: on a
2-core machine ~0.5-2 s of a deployed job's start (issue 39). Imported here once, the workers inherit them.
Nothing here opens a client or starts a thread, so forking after it is safe.
"""

from __future__ import annotations

import importlib

#: Imported by the daemon before it forks a worker: what unpickling a copy task imports (engine/worker.py) and the
#: client library it opens its consumer and producer with.
PRELOADED = ("confluent_kafka", "reconciler.engine.worker")

if __name__ == "__main__":
    for name in PRELOADED:
        importlib.import_module(name)
    from pyspark.daemon import manager

    manager()
