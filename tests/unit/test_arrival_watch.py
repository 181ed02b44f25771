"""An arrival watch whose consumer's thread ends (engine/arrivals.py `ArrivalHub`) wakes its driver: while the watch
was quiet the driver's idle wait may last to its next round due (idle_gate.py `QUIET_WAIT_MAX_S`), and the gate must
read the source's ends at once, not at the end of that wait. A fake consumer whose fetch fails (no broker)."""

from __future__ import annotations

import threading

from reconciler.contract.spec import ClusterSpec
from reconciler.engine.arrivals import ArrivalHub, ArrivalWatch, watch_config
from tests.spec_helpers import job_spec

SPEC = job_spec("west->east", ClusterSpec("west", "127.0.0.1:1"), ClusterSpec("east", "127.0.0.1:2"))


class Failing:
    """A consumer that assigns, then fails its first fetch (as a consumer turned fatal does)."""

    def __init__(self) -> None:
        self.fetched = threading.Event()

    def assign(self, parts) -> None:
        pass

    def unassign(self) -> None:
        pass

    def consume(self, n, timeout):
        self.fetched.set()
        raise RuntimeError("the consumer failed")

    def close(self) -> None:
        pass


def test_a_watch_whose_thread_ends_wakes_its_driver_and_is_never_quiet_again():
    consumer = Failing()
    hub = ArrivalHub(watch_config(SPEC), "west", lambda conf: consumer)
    wake = threading.Event()
    watch = ArrivalWatch(SPEC, wake, None, hub)
    try:
        watch.arm({("orders", 0): 3})
        assert wake.wait(30), "the driver is woken: its gate reads the ends now"
        assert consumer.fetched.is_set() and not watch.quiet({("orders", 0): 3})
    finally:
        watch.close()
        hub.close()
