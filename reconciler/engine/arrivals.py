"""The idle gate's ear: a consumer at an idle flow's positions that wakes its driver when a record arrives.

An idle flow (every partition caught up, idle_gate.py's `IdleGate.work_waiting`) launches no Spark job and reads the
source's ends once per idle wait (up to `IDLE_WAIT_MAX_S`; none while this watch is quiet); a record arriving then
would wait up to that wait for its batch. `ArrivalWatch` closes that gap without reading the ends more often: while the flow is idle it
is assigned to the caught-up partitions at the flow's positions and fetches (the broker holds each fetch up to
clients.py's `WATCH_FETCH_WAIT_MS`); its first record sets the driver's `wake` event and the watch disarms
itself, so it fetches nothing while the flow copies. It never commits and delivers no record anywhere: the
batch reads the record again from the flow's position.

Heartbeats topics are not watched (their records arrive every second and are copied on the heartbeat
interval, idle_gate.py's `Work.HEARTBEATS`). A record the watch misses costs latency, not data: a watch whose thread
ended is no longer `quiet` and wakes its driver, whose gate reads the ends again at once; one that stays assigned but
silently receives nothing is overruled by the gate's read of every partition once a `GATE_RECHECK_S`.

After `WATCH_DEEP_QUIET_S` assigned without a record anywhere it listens, the hub fetches with the broker holding each fetch
`WATCH_DEEP_FETCH_WAIT_MS` (a consumer made anew, assigned at the same positions), and back with the short wait at
the first record: a source idle for minutes costs about half the fetches (issue 47's idle mesh). What that costs:
Apache Kafka answers a held fetch as soon as a record arrives, so nothing; Tansu, which looks for records at its own
pace, answers later than with the short wait (clients.py's figures).

While the watch is assigned at a flow's positions and has delivered nothing (`quiet`), nothing has arrived there
as of its last fetch (at most the fetch wait and a round trip ago): the idle gate and the lag side channel
take that as the source's ends instead of reading them (idle_gate.py's `watch_hears_all`). Any record, error or
change of assignment ends the quiet.

Its consumer runs in a thread of its own (`ArrivalHub`), shared by the watches of an engine's flows that read the
same source cluster; `arm` and `disarm` only record what the thread should do next.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from reconciler.contract.spec import JobSpec
from reconciler.engine import clients
from reconciler.engine.tasks import TP

log = logging.getLogger(__name__)

#: How long the thread blocks in one consume before it looks at a new assignment or a close (with the long fetch
#: wait: `_CONSUME_DEEP_S`, a wake a second; a flow armed meanwhile reads the ends itself until it is assigned).
_CONSUME_S = 0.5
_CONSUME_DEEP_S = 1.0

#: How long a hub hears nothing before it fetches with the long wait (`clients.WATCH_DEEP_FETCH_WAIT_MS`): a flow
#: whose records come in bursts a minute apart keeps the short one.
WATCH_DEEP_QUIET_S = 60.0


class ArrivalHub:
    """One consumer, in a thread of its own, listening for the watches of every flow of an engine that reads the
    same source cluster (engine/clients.py's `SharedClients.watch_hub`): each idle consumer fetches every
    `WATCH_FETCH_WAIT_MS`, so twelve idle flows of one source cost one consumer's fetches, not twelve. It is
    assigned to the union of the armed partitions (a partition two flows watch: from the lower position); a record
    wakes each watch armed at that partition at or below its offset."""

    def __init__(
        self, conf: Mapping[str, Any], name: str, consumer_factory: Any = None, deep_quiet_s: float = WATCH_DEEP_QUIET_S
    ):
        self._conf = dict(conf)
        self._name = name
        self._factory = consumer_factory
        self._deep_quiet_s = deep_quiet_s
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._watches: list[ArrivalWatch] = []
        self._closed = False
        self._thread: threading.Thread | None = None

    # --- the watches' side (called with nothing locked) --------------------------------------------------------
    def join(self, watch: ArrivalWatch) -> None:
        with self._lock:
            self._watches.append(watch)

    def leave(self, watch: ArrivalWatch) -> None:
        with self._lock:
            if watch in self._watches:
                self._watches.remove(watch)
            self._changed.notify()

    def changed(self) -> None:
        """A watch's wanted partitions changed: the thread assigns again (started on the first arm)."""
        with self._lock:
            if self._closed:
                return
            self._changed.notify()
            start = self._thread is None
            if start:
                self._thread = threading.Thread(target=self._run, name=f"arrivals-{self._name}", daemon=True)
        if start:
            assert self._thread is not None
            self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._closed = True
            self._changed.notify()
        if self._thread is not None:
            self._thread.join(timeout)

    # --- the thread ---------------------------------------------------------------------------
    def _union(self) -> dict[TP, int]:
        """Lock held: the partitions any watch wants, each from the lowest position wanted."""
        out: dict[TP, int] = {}
        for w in self._watches:
            for tp, pos in w._wanted.items():
                out[tp] = min(pos, out.get(tp, pos))
        return out

    def _consumer(self, deep: bool = False) -> Any:
        """A consumer of the hub's settings; `deep`: the broker holds its fetches the long wait."""
        conf = {**self._conf, "fetch.wait.max.ms": clients.WATCH_DEEP_FETCH_WAIT_MS} if deep else self._conf
        if self._factory is not None:
            return self._factory(conf)
        from confluent_kafka import Consumer

        return Consumer(conf)

    def _paced(self, consumer: Any, deep: bool, assigned: Mapping[TP, int], heard_at: float) -> tuple[Any, bool]:
        """The consumer to fetch with and whether it holds fetches the long wait: after `deep_quiet_s` without news
        one that does, from the first news one that does not, assigned where the last one was."""
        from confluent_kafka import TopicPartition

        want = time.monotonic() - heard_at >= self._deep_quiet_s
        if want == deep:
            return consumer, deep
        consumer.close()
        consumer = self._consumer(want)
        consumer.assign([TopicPartition(t, p, pos) for (t, p), pos in sorted(assigned.items())])
        return consumer, want

    def _run(self) -> None:
        from confluent_kafka import TopicPartition

        consumer: Any = None
        assigned: dict[TP, int] = {}
        deep, heard_at = False, time.monotonic()  # the long fetch wait; when the hub last heard news
        try:
            while True:
                with self._lock:
                    while not self._closed and not self._union() and not assigned:
                        self._changed.wait()
                    if self._closed:
                        return
                    wanted = self._union()
                if wanted != assigned:
                    if wanted and not assigned:  # listening again (a flow idle again): news counts from now
                        heard_at = time.monotonic()
                    if consumer is None:
                        consumer = self._consumer(deep)
                    if wanted:
                        consumer.assign([TopicPartition(t, p, pos) for (t, p), pos in sorted(wanted.items())])
                    else:
                        consumer.unassign()
                    assigned = wanted
                    with self._lock:
                        for w in self._watches:  # assigned at (or below) every wanted position: quiet from now
                            w._quiet_at = dict(w._wanted) if w._wanted else None
                    if not assigned:
                        continue
                consumer, deep = self._paced(consumer, deep, assigned, heard_at)
                messages = consumer.consume(1, _CONSUME_DEEP_S if deep else _CONSUME_S)
                if not messages:
                    continue
                heard_at = time.monotonic()
                m = messages[0]
                err = m.error()
                if err is not None:  # the gate's read finds out what it is
                    log.debug("[%s] the arrival watch reads an error: %s", self._name, err)
                tp = (m.topic(), m.partition()) if m.topic() is not None else None
                offset = m.offset() if err is None else None
                woken = []
                with self._lock:
                    for w in self._watches:
                        pos = w._wanted.get(tp) if tp is not None else None
                        if tp is not None and pos is None and (w._quiet_at is None or tp not in w._quiet_at):
                            continue  # not this watch's partition
                        if offset is not None and pos is not None and offset < pos:
                            continue  # below this watch's position (read for a neighbour watching from lower)
                        w._quiet_at = None
                        if err is None or tp is None or pos is not None:
                            w._wanted = {}  # this arrival is news for its driver: disarmed until a new arm
                            woken.append(w)
                    if offset is not None and tp is not None and tp in assigned:
                        # read past it: the consumer moved on from this record; a later reassign starts there
                        assigned = {**assigned, tp: max(assigned[tp], offset + 1)}
                for w in woken:
                    w.wakes += 1
                    w.wake.set()
        except Exception as exc:  # noqa: BLE001 - the gate's own reads still find every record, later
            log.warning("[%s] the arrival watch stopped: %s", self._name, exc)
        finally:
            with self._lock:
                self._closed = True  # a watch whose thread ended is never quiet again (the gate reads the ends)
                ended = list(self._watches)
                for w in ended:
                    w._quiet_at = None
            for w in ended:  # their drivers read the ends now, not at the end of an idle wait (QUIET_WAIT_MAX_S)
                w.wake.set()
            if consumer is not None:
                try:
                    consumer.close()
                except Exception:  # noqa: BLE001
                    pass


class ArrivalWatch:
    """Wakes `wake` when a record arrives at one of the armed partitions (the module's docstring); its fetches are
    `hub`'s, shared with the engine's other flows of the same source (None: a hub of its own)."""

    def __init__(
        self,
        spec: JobSpec,
        wake: threading.Event,
        environ: Mapping[str, str] | None = None,
        hub: ArrivalHub | None = None,
    ):
        self.spec = spec
        self.wake = wake
        self._own_hub = hub is None
        self.hub = hub if hub is not None else ArrivalHub(watch_config(spec, environ), spec.flow)
        self._lock = self.hub._lock  # the hub's thread reads and writes the fields below under it
        self._wanted: dict[TP, int] = {}  # what the hub should listen to for this watch ({}: nothing)
        self._armed_at: dict[TP, int] = {}  # what `arm` last asked for (an unchanged arm does nothing)
        self._closed = False
        self._quiet_at: dict[TP, int] | None = None  # assigned at these offsets, nothing delivered since
        self.wakes = 0  # records seen (each a wake-up): for tests and the debug log
        self.hub.join(self)

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
            self._quiet_at = None  # quiet again once the hub has assigned these
        self.hub.changed()

    def disarm(self) -> None:
        """Fetch nothing (the flow is copying: its tasks read the records)."""
        with self._lock:
            if not self._armed_at and not self._wanted:
                return
            self._armed_at = {}
            self._wanted = {}
            self._quiet_at = None
        self.hub.changed()

    def quiet(self, positions: Mapping[TP, int]) -> bool:
        """Whether the watch is assigned at exactly these partitions and offsets and has delivered nothing since:
        nothing arrived there (as of its last fetch)."""
        with self._lock:
            return bool(positions) and self._quiet_at == dict(positions)

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._closed = True
            self._wanted = {}
            self._quiet_at = None
        self.hub.leave(self)
        if self._own_hub:
            self.hub.close(timeout)


def watch_config(spec: JobSpec, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The watch consumer's settings for `spec`'s source (clients.py's `watch_consumer_config`)."""
    return clients.watch_consumer_config(spec.source, spec, environ)
