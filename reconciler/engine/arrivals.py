"""The idle gate's ear: a consumer at an idle flow's positions that wakes its driver when a record arrives.

An idle flow (every partition caught up, idle_gate.py's `IdleGate.work_waiting`) launches no Spark job and reads the
source's ends once per idle wait (up to `IDLE_WAIT_MAX_S`); a record arriving then would wait up to that wait
for its batch. `ArrivalWatch` closes that gap without reading the ends more often: while the flow is idle it
is assigned to the caught-up partitions at the flow's positions and fetches (the broker holds each fetch up to
clients.py's `WATCH_FETCH_WAIT_MS`); its first record sets the driver's `wake` event and the watch disarms
itself, so it fetches nothing while the flow copies. It never commits and delivers no record anywhere: the
batch reads the record again from the flow's position.

Heartbeats topics are not watched (their records arrive every second and are copied on the heartbeat
interval, idle_gate.py's `Work.HEARTBEATS`). A record the watch misses costs latency, not data: a watch whose thread
ended is no longer `quiet` and the gate reads the ends again within the second; one that stays assigned but
silently receives nothing is overruled by the gate's read of every partition once a `GATE_RECHECK_S`.

While the watch is assigned at a flow's positions and has delivered nothing (`quiet`), nothing has arrived there
as of its last fetch (at most `WATCH_FETCH_WAIT_MS` and a round trip ago): the idle gate and the lag side channel
take that as the source's ends instead of reading them (idle_gate.py's `watch_hears_all`). Any record, error or
change of assignment ends the quiet.

Its clients run in a thread of its own; `arm` and `disarm` only record what the thread should do next.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from reconciler.contract.spec import JobSpec
from reconciler.engine import clients
from reconciler.engine.tasks import TP

log = logging.getLogger(__name__)

#: How long the thread blocks in one consume before it looks at a new assignment or a close.
_CONSUME_S = 0.5


class ArrivalWatch:
    """Wakes `wake` when a record arrives at one of the armed partitions (the module's docstring)."""

    def __init__(
        self,
        spec: JobSpec,
        wake: threading.Event,
        environ: Mapping[str, str] | None = None,
    ):
        self.spec = spec
        self.wake = wake
        self._environ = environ
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._wanted: dict[TP, int] = {}  # what the thread should be assigned to ({}: nothing)
        self._armed_at: dict[TP, int] = {}  # what `arm` last asked for (an unchanged arm does nothing)
        self._closed = False
        self._thread: threading.Thread | None = None
        self._quiet_at: dict[TP, int] | None = None  # assigned at these offsets, nothing delivered since
        self.wakes = 0  # records seen (each a wake-up): for tests and the debug log

    # --- the driver's side --------------------------------------------------------------------
    def arm(self, positions: Mapping[TP, int]) -> None:
        """Watch these partitions from these offsets (the flow's next offsets, where its last tasks ended). The same
        positions as the last arm change nothing; after a wake the watch stays disarmed until a new arm."""
        wanted = {tp: pos for tp, pos in positions.items() if pos >= 0}
        with self._lock:
            if self._closed or wanted == self._armed_at:
                return
            self._armed_at = dict(wanted)
            self._wanted = dict(wanted)
            self._changed.notify()
        if wanted and self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"arrivals-{self.spec.flow}", daemon=True)
            self._thread.start()

    def disarm(self) -> None:
        """Fetch nothing (the flow is copying: its tasks read the records)."""
        with self._lock:
            if not self._armed_at and not self._wanted:
                return
            self._armed_at = {}
            self._wanted = {}
            self._changed.notify()

    def quiet(self, positions: Mapping[TP, int]) -> bool:
        """Whether the watch is assigned at exactly these partitions and offsets and has delivered nothing since:
        nothing arrived there (as of its last fetch)."""
        with self._lock:
            return bool(positions) and self._quiet_at == dict(positions)

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._closed = True
            self._changed.notify()
        if self._thread is not None:
            self._thread.join(timeout)

    # --- the thread ---------------------------------------------------------------------------
    def _consumer(self) -> Any:
        from confluent_kafka import Consumer

        return Consumer(clients.watch_consumer_config(self.spec.source, self.spec, self._environ))

    def _run(self) -> None:
        from confluent_kafka import TopicPartition

        consumer: Any = None
        assigned: dict[TP, int] = {}
        try:
            while True:
                with self._lock:
                    while not self._closed and not self._wanted and not assigned:
                        self._changed.wait()
                    if self._closed:
                        return
                    wanted = self._wanted
                if wanted != assigned:
                    if consumer is None:
                        consumer = self._consumer()
                    if wanted:
                        consumer.assign([TopicPartition(t, p, pos) for (t, p), pos in sorted(wanted.items())])
                    else:
                        consumer.unassign()
                    assigned = wanted
                    with self._lock:
                        self._quiet_at = dict(assigned) if assigned else None
                    if not assigned:
                        continue
                messages = consumer.consume(1, _CONSUME_S)
                if not messages:
                    continue
                m = messages[0]
                if m.error() is not None:  # the gate's read finds out what it is
                    log.debug("[%s] the arrival watch reads an error: %s", self.spec.flow, m.error())
                with self._lock:
                    self._quiet_at = None
                    if self._wanted is wanted:  # not re-armed meanwhile: this arrival is news for the driver
                        self._wanted = {}
                self.wakes += 1
                self.wake.set()
        except Exception as exc:  # noqa: BLE001 - the gate's own reads still find every record, later
            log.warning("[%s] the arrival watch stopped: %s", self.spec.flow, exc)
        finally:
            with self._lock:
                self._quiet_at = None
            if consumer is not None:
                try:
                    consumer.close()
                except Exception:  # noqa: BLE001
                    pass
