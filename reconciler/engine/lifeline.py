"""The driver's lifeline: a job's Python driver ends when the JVM that started it is gone.

spark-submit's JVM starts the driver; if the JVM dies (killed, crashed) the driver would be re-parented and keep
running, able to reach the clusters but not Spark. `watch_parent` notices the re-parenting within `interval`
seconds and calls `on_orphan` (the entry point logs and exits at once). Together with the supervisor
(`reconciler.deployers.supervisor`) this makes every process of a job instance die with it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable


def watch_parent(on_orphan: Callable[[int], None], interval: float = 1.0) -> threading.Thread:
    parent = os.getppid()

    def run() -> None:
        stop = threading.Event()
        while not stop.wait(interval):
            if os.getppid() != parent:
                on_orphan(parent)
                return

    thread = threading.Thread(target=run, name="lifeline", daemon=True)
    thread.start()
    return thread
