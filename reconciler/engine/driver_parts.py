"""The typed parts of a replication driver (driver.py's `ReplicationDriver`): what it holds, grouped by what it is.

Connections  the clients and emitters the driver opens at start (`Connections.open`), closed at its end
Progress     what the job has done: counts, errors, findings, losses, latency and rate
Partitions   the partitions copied and where each stands: plan, positions, slots, sync state, lag, halted
StuckWatch   the partitions that do not progress while their source is ahead
ReachWatch   the clusters whose calls fail, since when: the partitions behind them do not progress (unreachable)
Timers       when the loop next does each periodic action
Pacing       the idle gate's state (engine/idle_gate.py), shared with the batch parts (engine/batches.py)
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

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
from reconciler.engine.lag import LagPosition, SourceEndReader, SourceEnds
from reconciler.engine.offsets import OffsetStore
from reconciler.engine.tails import CopiedTails
from reconciler.engine.tasks import TP, CopyTask, PartitionResult, PartitionTask
from reconciler.engine.topics import PartitionPlan, TopicManager
from reconciler.topology import secrets

T = TypeVar("T")

MAX_FINDINGS = 20  # findings and out-of-range events kept for the status record


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


@dataclass
class Partitions:
    """The source partitions the job copies and where each stands. `plan` is the last refresh's partition plan
    (which partitions are copied, to which remote topic); `positions` the next offset to copy of each (-2: none
    committed, from the beginning); `slots` the task slot each runs in (sticky: a partition keeps its slot, so an
    exactly-once partition keeps its transactional id); `sync_states` the offset-sync state the workers hand
    back, `delayed_syncs` the mapping of each partition published at the next flush; `lag` what the tasks last
    reported and `source_ends` the side channel's last read (replaced whole, never mutated); `halted` the
    partitions the job stopped copying and why (out of range under `offset_reset: halt`, a refused record under
    `on_refused_record: fail`); `record_limits` the largest record each remote topic takes (its `max.message.bytes`
    less a batch's overhead, read at each refresh); `dead_letters` the records of each partition written to the
    dead-letter topic (`on_refused_record: skip`). `last_owner` (the process each slot last ran in) and
    `consumer_epoch` (bumped to make the workers drop their cached consumers) go with each task."""

    plan: PartitionPlan = field(default_factory=PartitionPlan)
    positions: dict[TP, int] = field(default_factory=dict)
    slots: dict[TP, int] = field(default_factory=dict)
    sync_states: dict[TP, list[int]] = field(default_factory=dict)
    delayed_syncs: dict[TP, tuple[int, int]] = field(default_factory=dict)
    lag: dict[TP, LagPosition] = field(default_factory=dict)
    source_ends: SourceEnds | None = None
    halted: dict[TP, PartitionFault] = field(default_factory=dict)
    record_limits: dict[str, int] = field(default_factory=dict)
    dead_letters: dict[TP, int] = field(default_factory=dict)
    known_topics: set[str] = field(default_factory=set)
    topic_ids: dict[str, str] = field(default_factory=dict)  # the source topics' ids, where the broker gives them
    #: what was copied last of each partition, and the partitions whose tail is to be read back (engine/tails.py)
    tails: CopiedTails = field(default_factory=CopiedTails)
    last_owner: dict[int, str | None] = field(default_factory=dict)
    consumer_epoch: int = 0

    def assign_slots(self, tps: list[TP], parallelism: int) -> None:
        """Slots for `tps`: a partition with a valid slot keeps it, the others go to the least loaded slot."""
        load = {s: 0 for s in range(parallelism)}
        for tp, s in self.slots.items():
            if s in load and tp in self.positions:
                load[s] += 1
        for tp in sorted(tps):
            if tp in self.slots and self.slots[tp] in load:
                continue
            slot = min(load, key=lambda s: (load[s], s))
            self.slots[tp] = slot
            load[slot] += 1

    def forget(self, tp: TP) -> None:
        """A partition no longer copied (topic deleted or no longer matching): its position reloads if it returns."""
        self.positions.pop(tp, None)
        self.slots.pop(tp, None)
        self.lag.pop(tp, None)
        self.tails.forget(tp)

    def copied(self) -> list[TP]:
        """The partitions a batch copies: planned, not halted, with a position, and no tail to read back first
        (`tails.suspects`: engine/tails.py)."""
        held = self.tails.suspects
        return [
            tp for tp in sorted(self.plan.copy) if tp not in self.halted and tp in self.positions and tp not in held
        ]

    def backlog(self, ends: Mapping[TP, int]) -> int | None:
        """Records between the positions and `ends` over the partitions copied; None when it is not known (a
        partition without an end, or copied from its beginning: no offset yet)."""
        total = 0
        for tp in self.copied():
            position = self.positions[tp]
            if tp not in ends or position < 0:
                return None
            total += max(0, ends[tp] - position)
        return total

    def tasks(self, batch: int, one_task: bool = False) -> list[CopyTask]:
        """One task per slot: its partitions (not halted, with a position) and the offset each starts from. With
        `one_task`, a single task for all of them (in the lowest of their slots): one consumer, one fetch loop."""
        by_slot: dict[int, list[PartitionTask]] = {}
        for tp in self.copied():
            by_slot.setdefault(self.slots.get(tp, 0), []).append(
                PartitionTask(
                    tp[0],
                    tp[1],
                    self.plan.copy[tp],
                    self.positions[tp],
                    self.sync_states.get(tp),
                    max_record_bytes=self.record_limits.get(self.plan.copy[tp]),
                )
            )
        if one_task and len(by_slot) > 1:
            by_slot = {min(by_slot): sorted((p for parts in by_slot.values() for p in parts), key=lambda p: p.tp)}
        return [
            CopyTask(s, batch, tuple(parts), self.last_owner.get(s), self.consumer_epoch)
            for s, parts in sorted(by_slot.items())
        ]


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
    topics (`refresh`), emit a heartbeat (`heartbeat`), publish the delayed offset syncs (`delayed_syncs`). Set at
    start (`ReplicationDriver.start`); 0.0 before. The status has a thread of its own (driver.py `Threads.status`)."""

    refresh: float = 0.0
    heartbeat: float = 0.0
    delayed_syncs: float = 0.0


@dataclass
class Pacing:
    """The idle gate's state (engine/idle_gate.py `IdleGate`), which the batch parts read and update too:
    `ends_before`, the source's ends read before the last batch; `caught_up`, the partitions caught up as of such an
    end; `ends_answered`, each partition's end as the source last answered it (kept across failed reads);
    `moved_back`, the ends read below those (before, now); `idle_steps`, the steps in a row the gate
    found nothing to copy (`idle_wait` backs off by it); `wake`, set to end an idle wait early (a record arrived at
    the arrival watch, or the flow stopped); and the gate's own timers (monotonic seconds): `gate_recheck`, when a
    caught-up flow runs a batch all the same, and `heartbeats_copy`, when the driver next copies heartbeats."""

    ends_before: dict[TP, int] = field(default_factory=dict)
    ends_read_at_ms: int = 0  # when `ends_before` was read (epoch ms)
    # each partition's end as the source last answered it, kept across reads that failed: where a lost tail shows
    ends_answered: dict[TP, int] = field(default_factory=dict)
    moved_back: dict[TP, tuple[int, int]] = field(default_factory=dict)  # ends below the last read: (before, now)
    caught_up: dict[TP, int] = field(default_factory=dict)
    idle_steps: int = 0
    gate_recheck: float = 0.0
    heartbeats_copy: float = 0.0
    wake: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    def idle_ends(self, copy: Mapping[TP, str], positions: Mapping[TP, int], max_age_ms: int) -> SourceEnds | None:
        """The gate's last read as the lag side channel's, while the flow is idle: every partition copied caught
        up at an end read at most `max_age_ms` ago, at a known position (nothing lags, nothing is committed
        beyond the positions). None otherwise: the side channel reads for itself. One read of the ends a second
        then serves both (an idle flow saved a ListOffsets and an OffsetFetch every half status interval)."""
        if self.idle_steps < 2 or not copy or int(time.time() * 1000) - self.ends_read_at_ms > max_age_ms:
            return None
        ends, caught = self.ends_before, self.caught_up
        if any(tp not in ends or caught.get(tp) != ends[tp] or positions.get(tp, -1) < 0 for tp in copy):
            return None
        return SourceEnds({tp: ends[tp] for tp in copy}, self.ends_read_at_ms, committed=dict(positions))

    def mark_caught_up(self, p: PartitionResult) -> None:
        """After a task: `p.tp` is caught up (at the end its task saw) as of the end read before the batch."""
        at_end = p.eof and p.hw is not None and 0 <= p.hw <= p.next and not p.error and not p.out_of_range
        end = self.ends_before.get(p.tp)
        if at_end and end is not None:
            self.caught_up[p.tp] = end
        else:
            self.caught_up.pop(p.tp, None)
