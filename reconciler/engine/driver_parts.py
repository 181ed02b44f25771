"""The typed parts of a replication driver (driver.py's `ReplicationDriver`): what it holds, grouped by what it is.

Connections  the clients and emitters the driver opens at start (`Connections.open`), closed at its end
Progress     what the job has done: counts, errors, findings, losses, latency and rate
Partitions   the partitions copied and where each stands (plan, positions, slots, lag, halted): their one owner
StuckWatch   the partitions that do not progress while their source is ahead
ReachWatch   the clusters whose calls fail, since when: the partitions behind them do not progress (unreachable)
Timers       when the loop next does each periodic action
FlowSpec     what the driver's parts read the flow's spec through (the driver: a reload replaces the spec)
UsesClients  a part that uses the driver's clients, handed over at start
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from reconciler.contract.spec import EXIT_RESTART_REQUIRED, JobSpec, rotated_sides
from reconciler.contract.status import (
    FaultKind,
    LatencyWindow,
    OutOfRange,
    PartitionFault,
    PartitionLag,
    RateWindow,
    StatusPublisher,
)
from reconciler.engine import clients
from reconciler.engine.arrivals import ArrivalHub, ArrivalWatch, watch_config
from reconciler.engine.delivery import DeliveryMode
from reconciler.engine.emitters import CheckpointEmitter, HeartbeatEmitter, OffsetSyncWriter
from reconciler.engine.ends import KafkaEndRequests, PartitionEnds
from reconciler.engine.lag import LagPosition, SourceEndReader
from reconciler.engine.offsets import OffsetStore
from reconciler.engine.tails import CopiedTails
from reconciler.engine.tasks import TP, CopyTask, PartitionResult, PartitionTask
from reconciler.engine.topics import PartitionPlan, TopicManager
from reconciler.engine.unanswered import Unanswered
from reconciler.topology import secrets

T = TypeVar("T")
C = TypeVar("C")

MAX_FINDINGS = 20  # findings and out-of-range events kept for the status record


class FlowSpec(Protocol):
    """The flow's spec as it is now (the driver, whose reload replaces it): what the driver's parts read it through,
    given the object that holds it rather than a getter."""

    @property
    def spec(self) -> JobSpec: ...


class UsesClients(Generic[C]):
    """A part of the driver that uses its clients (`C`: the part's own protocol of what it uses of `Connections`),
    handed over when the driver opens them at its start (`connect`). The part sets `_clients` in its constructor
    (None, or fakes in a test)."""

    _clients: C | None

    def connect(self, clients: C) -> None:
        """The driver's clients, opened at its start."""
        self._clients = clients

    @property
    def clients(self) -> C:
        """The clients (the methods that use them run after start)."""
        if self._clients is None:
            raise RuntimeError(f"{type(self).__name__}: the driver has not started (no clients)")
        return self._clients


class CredentialWatch:
    """Whether a credential of the flow's clusters changed since its clients were made (`Connections.open`): a file
    of RECONCILER_SECRETS_DIR rewritten, a Kubernetes Secret rotated (clients.Fingerprints, at most
    FINGERPRINT_TTL_S old). Then the driver stops with EXIT_RESTART_REQUIRED (`stops`) and its engine starts it again
    at once, in the same process (engine/host.py): every client of the flow (fencing, emitters, status, lag, admin,
    the arrival watch, its shared clients) is made again with the new credentials, through the path any restart
    takes (an exactly-once flow fences its transactional ids first). Not an error, and not the `restart-required`
    state: nothing for the reconciler to do. `enabled` False (the one-flow entry point, `--spec`, whose exit would end
    its process): the driver keeps its clients (its workers' clients still reconnect, keyed by the fingerprint)."""

    enabled = True

    def __init__(self, spec: JobSpec, environ: Mapping[str, str] | None) -> None:
        self.clusters, self.environ = (spec.source, spec.target), environ
        self.at_start = self.now(fresh=True)  # what the clients made next resolve, not a cached answer

    def now(self, fresh: bool = False) -> dict[str, str]:
        """Each cluster's fingerprint now, by alias."""
        return {c.alias: clients.FINGERPRINTS.of(c, self.environ, fresh) for c in self.clusters}

    def changed(self) -> list[str]:
        """The aliases of the clusters whose credentials changed since start."""
        return sorted(alias for alias, fp in self.now().items() if fp and fp != self.at_start.get(alias))

    def rotated_in(self, driver: Any, new: JobSpec) -> bool:
        """Whether `new` (a spec the driver re-read) changes the credentials of a cluster and nothing that needs a
        restart (contract/spec.py `rotated_sides`): then the flow reconnects the same way, by a restart in place
        (the driver stops with EXIT_RESTART_REQUIRED, without the restart-required state), with the new spec."""
        rotated = rotated_sides(driver.spec.changes(new))
        if rotated:
            driver.log.info(
                "credentials of %s changed in the spec: restarting the flow in place to reconnect",
                ", ".join(
                    f"cluster {alias!r}"
                    for alias in sorted(new.source.alias if s == "source" else new.target.alias for s in rotated)
                ),
            )
        return bool(rotated)

    def stops(self, driver: Any) -> bool:
        """Whether the driver must stop for a restart in place: a credential changed (said in one line, no value);
        then its `exit_code` is EXIT_RESTART_REQUIRED."""
        changed = self.changed() if self.enabled else []
        if changed:
            driver.log.info(
                "credentials of %s changed: restarting the flow in place to reconnect",
                ", ".join(f"cluster {a!r}" for a in changed),
            )
            driver.exit_code = EXIT_RESTART_REQUIRED
        return bool(changed)


@dataclass
class Connections:
    """The clients and emitters a started driver uses, opened together at start (`open`) and closed together at
    its end (`close`). The producers (confluent_kafka `Producer`s) and the admins (`AdminClient`s) are the
    engine's, shared with its other flows of the same clusters (clients.py's `SharedClients`): `close` hands them
    back."""

    source_admin: Any  # also the listed ends' (`ends`: the idle gate's and the lag side channel's ListOffsets)
    target_admin: Any
    topics: TopicManager
    source_producer: Any
    target_producer: Any
    checkpoint_producer: Any  # the checkpoint rounds' own: its flush waits for checkpoints only
    offsets: OffsetStore
    heartbeats: HeartbeatEmitter
    syncs: OffsetSyncWriter
    checkpoints: CheckpointEmitter
    ends: PartitionEnds  # the source partitions' ends (engine/ends.py): the shared source admin, `offsets`' consumer
    end_reader: SourceEndReader  # reads in its own thread: `ends`' listed ends, `offsets`, a probe consumer
    status: StatusPublisher
    arrivals: ArrivalWatch  # wakes the idle driver when a record arrives (a consumer in a thread of its own)
    shared: clients.SharedClients
    credentials: CredentialWatch  # the clusters' credentials these clients were made with

    @classmethod
    def open(
        cls,
        spec: JobSpec,
        mode: DeliveryMode,
        env: Mapping[str, str] | None,
        wake: threading.Event,
        shared: clients.SharedClients | None = None,
    ) -> Connections:
        """`shared`: the engine's clients (None: a pool of this flow's own, as a job of one flow has)."""
        shared = shared if shared is not None else clients.SharedClients()
        credentials = CredentialWatch(spec, env)  # before the clients: a change while they are made is one
        role = clients.Role
        source_admin = shared.acquire(role.ADMIN, clients.admin_config(spec.source, env))
        target_admin = shared.acquire(role.ADMIN, clients.admin_config(spec.target, env))
        topics = TopicManager(spec, source_admin, target_admin)
        source_conf = clients.producer_config(spec.source, spec, environ=env)
        target_conf = clients.producer_config(spec.target, spec, environ=env)
        source_producer = shared.acquire(role.PRODUCER, source_conf)
        target_producer = shared.acquire(role.PRODUCER, target_conf)
        offsets = OffsetStore(spec, mode, env)

        def renew(conf: dict[str, Any]) -> Callable[[], Any]:  # a producer of this flow's own, after a fatal error
            return lambda: shared.factory.producer(conf)

        on_source = (source_producer, renew(source_conf)), (target_producer, renew(target_conf))
        heartbeats = HeartbeatEmitter(spec, *on_source[0 if spec.heartbeats_on_source else 1])
        syncs = OffsetSyncWriter(spec, *on_source[0 if spec.offset_syncs_on_source else 1])
        # The checkpoint rounds' own producer: its flush waits for checkpoints only (MM2's checkpoint task has its
        # own producer too).
        checkpoint_producer = shared.acquire(role.CHECKPOINTS, clients.producer_config(spec.target, spec, environ=env))
        checkpoints = CheckpointEmitter(spec, source_admin, checkpoint_producer, env)
        ends = PartitionEnds(KafkaEndRequests(spec, source_admin, lambda: offsets.source_consumer, env))
        end_reader = SourceEndReader(spec, ends, env, store=offsets)
        status = StatusPublisher(target_producer, spec.flow)
        watch = watch_config(spec, env)
        hub = shared.acquire(role.WATCH, watch, lambda: ArrivalHub(watch, spec.source.alias))
        return cls(
            source_admin=source_admin,
            target_admin=target_admin,
            topics=topics,
            source_producer=source_producer,
            target_producer=target_producer,
            checkpoint_producer=checkpoint_producer,
            offsets=offsets,
            heartbeats=heartbeats,
            syncs=syncs,
            checkpoints=checkpoints,
            ends=ends,
            end_reader=end_reader,
            status=status,
            arrivals=ArrivalWatch(spec, wake, env, hub),
            shared=shared,
            credentials=credentials,
        )

    def update_spec(self, spec: JobSpec) -> None:
        """A reloaded spec (hot reload): the clients that read it as they run take it."""
        self.topics.spec = spec
        self.checkpoints.update_spec(spec)
        self.heartbeats.spec = spec

    def close(self, *, end_reader_idle: bool, checkpoints_idle: bool) -> None:
        """Close the consumers, flush the producers and hand the shared clients back. A side channel's clients
        still in use by its thread (not `..._idle`: its round did not end in time) are left to the process's exit
        (the shared ones stay held)."""
        self.arrivals.close()
        self.shared.release(self.arrivals.hub)
        if end_reader_idle:
            self.end_reader.close()
        self.offsets.close()
        if checkpoints_idle:
            self.checkpoints.close()
        held = [self.target_admin, self.source_producer, self.target_producer]
        if end_reader_idle and checkpoints_idle:
            held.append(self.source_admin)
        if checkpoints_idle:
            held.append(self.checkpoint_producer)
        else:
            self.checkpoint_producer.flush(10)
        for client in held:
            self.shared.release(client)


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Progress:
    """What the job has done since it started (`started_at`, epoch ms), as its status record and metrics report
    it: records and bytes copied, batches run, consecutive failed batches, errors (with the last one, redacted of
    the spec's secrets by `redact`), the findings of the last topic refresh, the last out-of-range events, and
    the latency and rate windows. `error` is called from the side channels' threads too."""

    redact: secrets.Redactor = field(default_factory=secrets.Redactor)
    started_at: int = field(default_factory=_now_ms)
    records: int = 0
    bytes: int = 0
    batches: int = 0
    batch_failures: int = 0  # consecutive failed batches (0 after a good one)
    errors: int = 0
    last_error: str | None = None
    findings: list[str] = field(default_factory=list)
    out_of_range: list[OutOfRange] = field(default_factory=list)
    #: the losses seen at the source since start, per partition and kind (`FaultKind.TRUNCATED`, ...)
    data_loss: dict[tuple[TP, FaultKind], int] = field(default_factory=dict)
    #: of those, the offsets the job had copied that the source lost and gave to new records (lost-tail; issue 46)
    reused: dict[tuple[TP, FaultKind], int] = field(default_factory=dict)
    latency: LatencyWindow = field(default_factory=LatencyWindow)
    rate: RateWindow = field(default_factory=RateWindow)
    _error_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def error(self, text: str) -> str:
        """Count an error; its text, redacted, is the last error and what the caller logs."""
        text = self.redact(text)
        with self._error_lock:
            self.errors += 1
            self.last_error = text
        return text

    def found(self, findings: list[str]) -> None:
        """The findings of a topic refresh (the last MAX_FINDINGS)."""
        self.findings = findings[-MAX_FINDINGS:]

    def add_out_of_range(self, event: OutOfRange) -> None:
        self.out_of_range = (self.out_of_range + [event])[-MAX_FINDINGS:]
        key = ((event.topic, event.partition), event.kind or FaultKind.OUT_OF_RANGE)
        self.data_loss[key] = self.data_loss.get(key, 0) + 1
        if event.reused is not None:
            self.reused[key] = self.reused.get(key, 0) + event.reused


class Partitions:
    """The source partitions the job copies and where each stands. It is the one owner of that state: the driver's
    parts read it and tell it what happened through its methods, none writes its fields.

    Read: `plan`, the last refresh's partition plan (which partitions are copied, to which remote topic);
    `positions`, the next offset to copy of each (-2: none committed, from the beginning); `slots`, the task slot
    each runs in (sticky: a partition keeps its slot, so an exactly-once partition keeps its transactional id);
    `lag`, what the tasks last reported; `halted`, the partitions the job stopped copying and why (a loss under
    `offset_reset: pause` or `fail`, a refused record under `on_refused_record: fail`); `dead_letters`, the records of
    each partition written to the dead-letter topic (`on_refused_record: skip`); `tails`, what was copied last of each
    partition and the partitions whose tail is to be read back (engine/tails.py `CopiedTails`, its own methods);
    `unanswered`, the partitions held out because their leader does not answer (engine/unanswered.py `Unanswered`, its
    own methods: the idle gate and the loss handler hold them, engine/leaders.py's probe lets them go).
    What goes with each task (`tasks`) besides: the offset-sync state the workers hand back, the largest record each
    remote topic takes (its `max.message.bytes` less a batch's overhead, read at each refresh), the process each slot
    last ran in and the consumer epoch (bumped to make the workers drop their cached consumers).

    Told: by the topic refresh (engine/refresh.py) `loaded`, `replanned`, `limits_read`, `renew_consumers`; by the
    batch absorber (engine/batches.py) `task_ran`, `advanced`, `task_reported`, `dead_lettered`, `reloaded`; by the
    loss handler (engine/source_faults.py) `moved`, `halt`, `release`, `renew_consumers`; by the driver
    `batch_failed`. The status thread reads it while the loop's thread tells it (dicts replaced or set per key:
    a copy taken with `dict(...)` is consistent)."""

    def __init__(
        self,
        plan: PartitionPlan | None = None,
        positions: Mapping[TP, int] | None = None,
        slots: Mapping[TP, int] | None = None,
        sync_states: Mapping[TP, list[int]] | None = None,
        halted: Mapping[TP, PartitionFault] | None = None,
        last_owner: Mapping[int, str | None] | None = None,
        consumer_epoch: int = 0,
    ):
        """A job's partitions start empty (the first refresh plans them); the arguments set a state to start from
        (tests)."""
        self._plan = plan if plan is not None else PartitionPlan()
        self._positions: dict[TP, int] = dict(positions or {})
        self._slots: dict[TP, int] = dict(slots or {})
        self._sync_states: dict[TP, list[int]] = dict(sync_states or {})
        self._lag: dict[TP, LagPosition] = {}
        self._halted: dict[TP, PartitionFault] = dict(halted or {})
        self._record_limits: dict[str, int] = {}
        self._dead_letters: dict[TP, int] = {}
        self._last_owner: dict[int, str | None] = dict(last_owner or {})
        self._consumer_epoch = consumer_epoch
        self._unread: set[TP] = set()  # positions to read again from the job's group before copying on
        self.tails = CopiedTails()
        self.unanswered = Unanswered()

    # --- read ------------------------------------------------------------------------------------------------------
    @property
    def plan(self) -> PartitionPlan:
        return self._plan

    @property
    def positions(self) -> Mapping[TP, int]:
        return self._positions

    @property
    def slots(self) -> Mapping[TP, int]:
        return self._slots

    @property
    def lag(self) -> Mapping[TP, LagPosition]:
        return self._lag

    @property
    def halted(self) -> Mapping[TP, PartitionFault]:
        return self._halted

    @property
    def dead_letters(self) -> Mapping[TP, int]:
        return self._dead_letters

    @property
    def consumer_epoch(self) -> int:
        """Bumped to make the workers drop their cached consumers (`renew_consumers`); each task carries it."""
        return self._consumer_epoch

    @property
    def unread(self) -> frozenset[TP]:
        """Partitions whose position is to be read again from the job's group before they are copied on (`unsure`)."""
        return frozenset(self._unread)

    def copied(self) -> list[TP]:
        """The partitions a batch copies: planned, not halted, with a position known (not `unread`), no tail to read
        back first (`tails.suspects`: engine/tails.py) and a leader that answers (`unanswered`: engine/unanswered.py)."""
        held, unread = set(self.tails.suspects) | self.unanswered.held, self._unread
        return [
            tp
            for tp in sorted(self._plan.copy)
            if tp not in self._halted and tp in self._positions and tp not in held and tp not in unread
        ]

    def backlog(self, ends: Mapping[TP, int]) -> int | None:
        """Records between the positions and `ends` over the partitions copied; None when it is not known (a
        partition without an end, or copied from its beginning: no offset yet)."""
        total = 0
        for tp in self.copied():
            position = self._positions[tp]
            if tp not in ends or position < 0:
                return None
            total += max(0, ends[tp] - position)
        return total

    def tasks(self, batch: int, one_task: bool = False) -> list[CopyTask]:
        """One task per slot: its partitions (not halted, with a position) and the offset each starts from. With
        `one_task`, a single task for all of them (in the lowest of their slots): one consumer, one fetch loop."""
        by_slot: dict[int, list[PartitionTask]] = {}
        copy = self._plan.copy
        for tp in self.copied():
            by_slot.setdefault(self._slots.get(tp, 0), []).append(
                PartitionTask(
                    tp[0],
                    tp[1],
                    copy[tp],
                    self._positions[tp],
                    self._sync_states.get(tp),
                    max_record_bytes=self._record_limits.get(copy[tp]),
                )
            )
        if one_task and len(by_slot) > 1:
            by_slot = {min(by_slot): sorted((p for parts in by_slot.values() for p in parts), key=lambda p: p.tp)}
        return [
            CopyTask(s, batch, tuple(parts), self._last_owner.get(s), self._consumer_epoch)
            for s, parts in sorted(by_slot.items())
        ]

    # --- the topic refresh -----------------------------------------------------------------------------------------
    def loaded(self, loaded: Mapping[TP, tuple[int | None, int | None]], parallelism: int) -> None:
        """New partitions' positions and slots as the job's group holds them (None: none committed, from the
        beginning; a slot outside `parallelism`: assigned again); the others go to the least loaded slot."""
        for tp, (offset, slot) in loaded.items():
            self._positions[tp] = offset if offset is not None else -2
            if slot is not None and 0 <= slot < parallelism:
                self._slots[tp] = slot
        self.assign_slots(list(loaded), parallelism)

    def assign_slots(self, tps: list[TP], parallelism: int) -> None:
        """Slots for `tps`: a partition with a valid slot keeps it, the others go to the least loaded slot."""
        load = {s: 0 for s in range(parallelism)}
        for tp, s in self._slots.items():
            if s in load and tp in self._positions:
                load[s] += 1
        for tp in sorted(tps):
            if tp in self._slots and self._slots[tp] in load:
                continue
            slot = min(load, key=lambda s: (load[s], s))
            self._slots[tp] = slot
            load[slot] += 1

    def replanned(self, plan: PartitionPlan) -> None:
        """The refresh's new plan: the partitions it no longer copies are forgotten (`forget`)."""
        for tp in [tp for tp in self._positions if tp not in plan.copy]:
            self.forget(tp)
        self._plan = plan

    def forget(self, tp: TP) -> None:
        """A partition no longer copied (topic deleted or no longer matching): its position reloads if it returns."""
        self._positions.pop(tp, None)
        self._slots.pop(tp, None)
        self._lag.pop(tp, None)
        self.tails.forget(tp)
        self.unanswered.forget(tp)

    def limits_read(self, limits: Mapping[str, int]) -> None:
        """The largest record each remote topic takes, as read at a refresh."""
        self._record_limits = dict(limits)

    def renew_consumers(self) -> None:
        """The workers drop their cached consumers at the next task (a topic vanished, a position moved, a
        partition halted or released)."""
        self._consumer_epoch += 1

    # --- a batch's results -----------------------------------------------------------------------------------------
    def task_ran(self, slot: int, process: str | None) -> None:
        """The slot's task ran in `process` (None: its process must initialise the slot's transactional id again)."""
        self._last_owner[slot] = process

    def advanced(self, tp: TP, offset: int) -> None:
        """A task copied `tp` to `offset` (the next to copy)."""
        self._positions[tp] = offset

    def task_reported(self, p: PartitionResult) -> None:
        """A task's word on `p.tp`: its offset-sync state, and its lag (the position against the end the task saw)."""
        if p.sync_state is not None:
            self._sync_states[p.tp] = p.sync_state
        self._lag[p.tp] = LagPosition(p.remote, self._positions.get(p.tp, p.next), p.hw)

    def dead_lettered(self, tp: TP, count: int) -> None:
        """`count` records of `tp` the target refused went to the dead-letter topic."""
        self._dead_letters[tp] = self._dead_letters.get(tp, 0) + count

    def reloaded(self, tp: TP, offset: int) -> None:
        """After a failed batch: `tp`'s position as the job's group holds it (delivery.py decides which group)."""
        self._positions[tp] = offset
        self._unread.discard(tp)

    def unsure(self, tps: Iterable[TP]) -> None:
        """After a failed batch the job's group could not be read and the driver's position of `tps` may be behind
        what the batch committed (exactly-once: its transaction may have committed): not copied until read."""
        self._unread.update(tps)

    def batch_failed(self) -> None:
        """A batch failed (e.g. a Python worker died): the workers drop their consumers and every slot's process is
        unknown (its transactional id is initialised again)."""
        self._consumer_epoch += 1
        self._last_owner.clear()

    # --- the loss handler ------------------------------------------------------------------------------------------
    def moved(self, tp: TP, offset: int) -> None:
        """`tp` is copied again from `offset` (the source lost records): its offset-sync state starts over and what
        was copied at and after `offset` is not on the source."""
        self._positions[tp] = offset
        self._sync_states.pop(tp, None)
        self.tails.moved_back(tp, offset)

    def halt(self, tp: TP, fault: PartitionFault) -> None:
        """`tp` is no longer copied, for `fault`, until released or the job restarts."""
        self._halted[tp] = fault

    def release(self, kinds: Iterable[FaultKind]) -> list[TP]:
        """The partitions halted for a fault of `kinds` are copied again (a reloaded policy); which they are."""
        wanted = set(kinds)
        released = [tp for tp, f in self._halted.items() if f.kind in wanted]
        for tp in released:
            del self._halted[tp]
        return released


@dataclass
class StuckWatch:
    """The partitions that do not progress while their source is ahead (FaultKind.STUCK: a record the target refuses
    that the worker did not predict, an authorization error, a broker that does not answer): `seen` holds, per
    partition behind its source's end, the position it was seen at and since when (epoch ms). A partition whose
    position has not moved while its end stayed ahead for `bound_ms` is stuck; it clears once it moves or catches
    up. Fed the job's lag (the positions, including what running tasks committed, against the source's ends) at
    each status."""

    seen: dict[TP, tuple[int, int]] = field(default_factory=dict)
    stuck: dict[TP, PartitionFault] = field(default_factory=dict)

    def observe(self, lag: Iterable[PartitionLag], now_ms: int, bound_ms: int, why: str | None) -> None:
        seen: dict[TP, tuple[int, int]] = {}
        stuck: dict[TP, PartitionFault] = {}
        for p in lag:
            tp = (p.topic, p.partition)
            if p.next is None or p.end is None or p.next < 0 or p.end <= p.next:
                continue  # caught up (or not known): not stuck
            position, since = self.seen.get(tp, (p.next, now_ms))
            if position != p.next:
                position, since = p.next, now_ms  # it moved
            seen[tp] = (position, since)
            if now_ms - since >= bound_ms:
                reason = (
                    f"the source's end {p.end} is ahead of the job's position {p.next}, which has not moved for "
                    f"{(now_ms - since) / 1000:.0f} s" + (f" (last error: {why})" if why else "")
                )
                stuck[tp] = PartitionFault(tp[0], tp[1], FaultKind.STUCK, reason, p.next, since)
        self.seen, self.stuck = seen, stuck


class Cluster(str, enum.Enum):
    """Which of the flow's two clusters a call went to (`ReachWatch`), and the fault of the partitions behind it."""

    SOURCE = "source"
    TARGET = "target"

    @property
    def fault(self) -> FaultKind:
        return FaultKind.SOURCE_UNREACHABLE if self is Cluster.SOURCE else FaultKind.TARGET_UNREACHABLE


@dataclass
class ReachWatch:
    """The clusters that do not answer the job: per cluster whose last call failed, since when its calls have failed
    (epoch ms, the start of the first failed call) and the last error; a call that succeeds clears it. Fed by the
    lag side channel's and the idle gate's end-offset reads (the source), the status record's delivery (the target) and the topic
    refresh (both). A partition the job copies is unreachable (FaultKind.SOURCE_UNREACHABLE / TARGET_UNREACHABLE)
    once its cluster has failed for the stuck bound: it cannot progress, and whether its source advances is not
    known (the source's ends cannot be read, so StuckWatch cannot tell). The idle gate's end reads tell it too."""

    failing: dict[Cluster, tuple[int, str]] = field(default_factory=dict)
    answered_at: dict[Cluster, int] = field(default_factory=dict)  # when each cluster last answered (epoch ms)

    def failed(self, cluster: Cluster, at_ms: int, error: str) -> None:
        since = self.failing.get(cluster, (at_ms, error))[0]
        self.failing[cluster] = (since, error)

    def answered(self, cluster: Cluster, at_ms: int) -> None:
        self.failing.pop(cluster, None)
        self.answered_at[cluster] = at_ms

    def answered_within(self, cluster: Cluster, max_age_ms: int, now_ms: int | None = None) -> bool:
        """Whether the cluster answers and last did at most `max_age_ms` ago (the arrival watch's silence stands for
        the source's ends only so long: it hears nothing from a source that does not answer either)."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        return self.answers(cluster) and now_ms - self.answered_at.get(cluster, now_ms - max_age_ms - 1) <= max_age_ms

    def call(self, cluster: Cluster, call: Callable[[], T]) -> T:
        """`call()`, a call to `cluster`, told here: a failure (raised on) or an answer."""
        at_ms = int(time.time() * 1000)
        try:
            out = call()
        except Exception as exc:
            self.failed(cluster, at_ms, f"{type(exc).__name__}: {exc}")
            raise
        self.answered(cluster, int(time.time() * 1000))
        return out

    def answers(self, cluster: Cluster) -> bool:
        """False while the cluster's last call failed (the source: its ends, so the lag, are not known now)."""
        return cluster not in dict(self.failing)

    def faults(
        self, positions: Mapping[TP, int | None], names: Mapping[Cluster, str], now_ms: int, bound_ms: int
    ) -> dict[TP, PartitionFault]:
        """Every partition copied (`positions`: the job's next offset, None or negative: not resolved yet) behind a
        cluster that has failed for `bound_ms`, the source's first (`names`: the clusters' names, for the reason)."""
        down = [(c, *self.failing[c]) for c in (Cluster.TARGET, Cluster.SOURCE) if c in dict(self.failing)]
        out: dict[TP, PartitionFault] = {}
        for cluster, since, error in down:
            if now_ms - since < bound_ms:
                continue
            reason = (
                f"the {cluster.value} cluster {names.get(cluster, '')} has not answered the job for "
                f"{(now_ms - since) / 1000:.0f} s (last error: {error})"
            )
            for tp, pos in positions.items():
                offset = pos if pos is not None and pos >= 0 else None
                out[tp] = PartitionFault(tp[0], tp[1], cluster.fault, reason, offset, since)
        return out


@dataclass
class Timers:
    """When the driver's loop next does each periodic action (monotonic seconds): re-read the spec and refresh the
    topics (`refresh`; a refresh that asks everything again: `full_refresh`, refresh.py `FULL_REFRESH_S`), emit a
    heartbeat (`heartbeat`), publish the delayed offset syncs (`delayed_syncs`). Set at start
    (`ReplicationDriver.start`); 0.0 before. The status has a thread of its own (driver.py `Threads.status`)."""

    refresh: float = 0.0
    full_refresh: float = 0.0
    heartbeat: float = 0.0
    delayed_syncs: float = 0.0

    def next_due(self, now: float, heartbeats: bool) -> float:
        """Seconds from `now` to the first of these rounds due (0 if one is; `heartbeats`: the flow emits them), the
        longest an idle loop may wait without making one later than the step a second did (idle_gate.py
        `IdleGate.idle_wait`)."""
        due = [self.refresh, self.delayed_syncs] + ([self.heartbeat] if heartbeats else [])
        return max(0.0, min(due) - now)
