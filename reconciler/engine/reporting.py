"""What a flow's driver reports: its lag (and the side channel that reads the source's ends for it), its state, the
partitions that do not progress, its status record (published to the status topic) and its metrics: after each batch
the reporter hands engine/metrics.py a frozen snapshot of the same figures (`snapshot`, `batch_ended`); the metrics
read nothing of the flow themselves."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Iterable
from typing import Protocol

from reconciler.contract.status import (
    GROUPS_SHOWN,
    Latency,
    PartitionCount,
    PartitionFault,
    PartitionLag,
    StatusRecord,
    StatusState,
    furthest_behind,
)
from reconciler.engine.driver_parts import Cluster, FlowSpec, Partitions, Progress, StuckWatch, UsesClients
from reconciler.engine.emitters import CheckpointEmitter
from reconciler.engine.idle_gate import IdleGate
from reconciler.engine.lag import EARLIEST, JobLag, SourceEndReader, SourceEnds, committed_ahead, job_lag
from reconciler.engine.metrics import FlowSnapshot, JobMetrics
from reconciler.engine.tasks import TaskResult
from reconciler.mirror.group_sync import most_telling, tally

#: A partition whose source is ahead while its position does not move is stuck (FaultKind.STUCK) after this many
#: status intervals, and at least two batch deadlines (`max_batch_ms`: a task's count arrives when it ends).
STUCK_INTERVALS = 5


class StatusSink(Protocol):
    """Where status records go (contract/status.py `StatusPublisher`)."""

    def publish(self, status: StatusRecord) -> int:
        """Publish; how many messages the target had not acknowledged when it returned (0: delivered)."""
        ...


class ReportClients(Protocol):
    """What the reporter reads and writes of the driver's clients (driver_parts.py `Connections`)."""

    @property
    def status(self) -> StatusSink: ...

    @property
    def checkpoints(self) -> CheckpointEmitter: ...

    @property
    def end_reader(self) -> SourceEndReader: ...


class ReportedFlow(FlowSpec, Protocol):
    """The flow as its reporter reads it (the driver): its spec now and its lifecycle state."""

    @property
    def state(self) -> StatusState: ...


class Reporter(UsesClients[ReportClients]):
    """The flow's reports. It is given the flow (`ReportedFlow`: its spec and lifecycle state now), its partitions
    and progress, the idle gate (its reach watch: the clusters that do not answer; its idle read of the source's
    ends), its metrics, its instance id, and its clients when the driver opens them (`connect`). It owns the stuck
    watch and the source's ends the lag side channel last read (`source_ends`, `read_source_ends`)."""

    def __init__(
        self,
        flow: ReportedFlow,
        parts: Partitions,
        progress: Progress,
        gate: IdleGate,
        metrics: JobMetrics,
        instance_id: str | None,
        *,
        clients: ReportClients | None = None,
    ):
        self._flow, self.parts, self.progress, self.gate, self.metrics = flow, parts, progress, gate, metrics
        self.reach = gate.reach  # told by the gate, the lag side channel, the status and the topic refresh
        self.stuck = StuckWatch()
        self._clients, self.instance_id = clients, instance_id
        self._source_ends: SourceEnds | None = None  # the side channel's last read (replaced whole, never mutated)
        # Two threads publish (the status thread, and the loop's at start and at the end; a test's own call): each
        # round takes a number before it reads the flow, and a round numbered below one already published is not
        # produced (issue 49: a status round that had read the flow before a checkpoint round judged the groups was
        # produced after the record that held the verdicts, and `status` read that older record).
        self._numbering = threading.Lock()
        self._producing = threading.Lock()  # the number check and the produce, as one
        self._rounds = 0  # rounds numbered
        self._published = 0  # the number of the newest round produced
        self.last_record: StatusRecord | None = None  # the record produced last (the engine's status resource reads it)
        self._idle_observe_due = 0.0  # when a step that ran no task next hands the metrics a snapshot (monotonic s)

    @property
    def checkpoints(self) -> CheckpointEmitter | None:
        """The checkpoint emitter (None before start)."""
        clients = self._clients
        return clients.checkpoints if clients is not None else None

    @property
    def checkpoints_emitted(self) -> int:
        checkpoints = self.checkpoints
        return checkpoints.emitted if checkpoints is not None else 0

    def current_lag(self) -> JobLag:
        """Lag now: the driver's positions against the larger of the ends its tasks saw and the side channel read;
        unknown while the source does not answer (`ReachWatch`): the ends read before are not its ends now."""
        parts = self.parts
        now_ms, ends_known = int(time.time() * 1000), self.reach.answers(Cluster.SOURCE)
        # Copies (atomic): the status thread reads what the loop's thread changes.
        copy, positions, lag = dict(parts.plan.copy), dict(parts.positions), dict(parts.lag)
        source, held = self._source_ends, parts.unanswered.held
        if held:  # their leader does not answer: their end now is not known (not the last one seen)
            lag = {tp: p for tp, p in lag.items() if tp not in held}
            if source is not None:
                source = dataclasses.replace(source, ends={tp: e for tp, e in source.ends.items() if tp not in held})
        return job_lag(copy, positions, lag, source, now_ms, ends_known)

    @property
    def source_ends(self) -> SourceEnds | None:
        """The source's ends as last read (`read_source_ends`; None: not yet)."""
        return self._source_ends

    def ends_read(self, ends: SourceEnds) -> None:
        """The source's ends were read (the side channel's round; a test's)."""
        self._source_ends = ends

    def lag_interval(self) -> float:
        """Seconds between two rounds of the lag side channel: half a status interval."""
        return max(0.1, self._flow.spec.engine.status_interval_seconds / 2)

    def read_source_ends(self) -> None:
        """The lag side channel's round (a thread of its own, every `lag_interval`): the current end of every
        partition copied (and the oldest unreplicated record's timestamp of those that lag most), for the next status
        record and metrics; while the flow is idle, the idle gate's word for them instead of a read."""
        clients = self._clients
        if clients is None:
            return
        # Copies taken at once (the loop's thread replaces `plan` and moves `positions`; a dict copy is atomic). The
        # partitions held out because their leader does not answer are not asked (each read would wait for it).
        held = self.parts.unanswered.held
        copy = {tp: remote for tp, remote in dict(self.parts.plan.copy).items() if tp not in held}
        positions = {tp: pos for tp, pos in dict(self.parts.positions).items() if tp in copy}
        idle = self.gate.idle_source_ends(copy, positions, int(1000 * self.lag_interval()), self.heard())
        if idle is not None:
            self._source_ends = idle
            return
        seen = {tp: lp.end for tp, lp in dict(self.parts.lag).items() if lp.end is not None}
        last, reader = self._source_ends, clients.end_reader
        self._source_ends = self.reach.call(
            Cluster.SOURCE, lambda: reader.read(copy, positions, seen, last.oldest if last is not None else None)
        )

    def reported_state(self, faults: tuple[PartitionFault, ...] | None = None) -> StatusState:
        """The state the status record and the metrics report: running with partitions that do not progress (halted,
        stuck or unreachable: `faults`, computed when not given) is degraded."""
        state = self._flow.state
        if state is not StatusState.RUNNING:
            return state
        return StatusState.DEGRADED if (self.faults() if faults is None else faults) else state

    def faults(self) -> tuple[PartitionFault, ...]:
        """The partitions that do not progress: the halted ones, those held out because their leader does not answer
        (engine/unanswered.py), those stuck (`StuckWatch`) and those behind a cluster that has not answered for the
        stuck bound (`ReachWatch`), one fault each: halted first, then held, then stuck (seen directly: its source
        advances; its reason carries the last error), then unreachable."""
        spec, parts = self._flow.spec, self.parts
        positions = {tp: parts.positions.get(tp) for tp in dict(parts.plan.copy) if tp not in parts.halted}
        names = {Cluster.SOURCE: spec.source.alias, Cluster.TARGET: spec.target.alias}
        bound_ms = int(1000 * self.stuck_after_seconds())
        unreachable = self.reach.faults(positions, names, int(time.time() * 1000), bound_ms)
        faults = {**unreachable, **self.stuck.stuck, **parts.unanswered.faults(), **parts.halted}
        return tuple(faults[tp] for tp in sorted(faults))

    def heard(self) -> bool:
        """Whether the source answered a read within half the stuck bound: the arrival watch's silence stands for its
        ends only so long (a source that does not answer is silent too; idle_gate.py `idle_source_ends`)."""
        return self.reach.answered_within(Cluster.SOURCE, int(500 * self.stuck_after_seconds()))

    def stuck_after_seconds(self) -> float:
        """How long a partition behind its source may not move before it is stuck, and a cluster may not answer before
        the partitions behind it are unreachable (STUCK_INTERVALS)."""
        engine = self._flow.spec.engine
        return max(STUCK_INTERVALS * engine.status_interval_seconds, 2 * engine.max_batch_ms / 1000)

    def watched_for_stuck(self, lag: JobLag) -> list[PartitionLag]:
        """The partitions of `lag` the stuck watch observes: not halted nor held out (faults of their own), and until
        the flow's first step ended (its first batch: a Spark job, slow to start on a loaded machine) none nothing has
        been copied of yet (position EARLIEST; their lag counts from the earliest offset, lag.py)."""
        halted = set(self.parts.halted) | self.parts.unanswered.held
        positions, started = dict(self.parts.positions), self.progress.batches > 0
        return [
            p
            for p in lag.partitions
            if (tp := (p.topic, p.partition)) not in halted and (started or positions.get(tp, EARLIEST) != EARLIEST)
        ]

    def status_record(self, lag: JobLag | None = None) -> StatusRecord:
        lag = lag if lag is not None else self.current_lag()
        spec, progress, parts = self._flow.spec, self.progress, self.parts
        checkpoints = self.checkpoints
        syncs = checkpoints.group_syncs if checkpoints is not None else ()
        faults = self.faults()
        return StatusRecord(
            flow=spec.flow,
            spec_hash=spec.spec_hash(),
            git_revision=spec.git_revision,
            delivery=spec.delivery,
            state=self.reported_state(faults),
            started_at=progress.started_at,
            heartbeat_at=int(time.time() * 1000),
            # what tasks reported, and what a running task has committed since (a kill loses no count but its last
            # second's: the worker commits every round)
            records=progress.records + committed_ahead(dict(parts.positions), self._source_ends),
            bytes=progress.bytes,
            records_per_second=round(progress.rate.rate(), 1),
            batches=progress.batches,
            partitions=len(parts.plan.copy),
            lag_total=lag.total,
            lag=furthest_behind(lag.partitions),
            lag_seconds=lag.seconds,
            lag_read_at=lag.read_at,
            latency_ms=Latency.from_dict(progress.latency.snapshot()),
            errors=progress.errors,
            last_error=progress.last_error,
            findings=tuple(progress.findings),
            out_of_range=tuple(progress.out_of_range),
            halted=tuple(f"{t}:{p}" for t, p in sorted(parts.halted)),
            faults=faults,
            dead_letters=tuple(PartitionCount(t, p, n) for (t, p), n in sorted(parts.dead_letters.items())),
            data_loss=tuple(
                PartitionCount(t, p, n, kind, progress.reused.get(((t, p), kind)))
                for ((t, p), kind), n in sorted(progress.data_loss.items(), key=lambda kv: (kv[0][0], kv[0][1].value))
            ),
            checkpoints_emitted=self.checkpoints_emitted,
            instance_id=self.instance_id,
            pid=os.getpid(),
            metrics_port=self.metrics.port,
            groups=most_telling(syncs, GROUPS_SHOWN),
            group_tally=tally(syncs) if syncs else None,
        )

    def publish_status(self) -> None:
        """The status record, and the lag metrics from the same figures (also between batches: a batch whose
        tasks are held up must not hold up the lag the job reports). Safe from several threads: the record produced
        last read the flow after every record produced before it (a round overtaken by a later one is dropped), so
        a call made after an event publishes a record that shows it, or is superseded by one that does."""
        with self._numbering:
            self._rounds += 1
            number = self._rounds
        lag = self.current_lag()
        self.stuck.observe(
            self.watched_for_stuck(lag),
            int(time.time() * 1000),
            int(1000 * self.stuck_after_seconds()),
            self.progress.last_error,
        )
        record = self.status_record(lag)
        with self._producing:
            # The record produced last is the one read back (the status topic keeps the latest per flow): a round that
            # read the flow before a round already produced is older than what the topic holds, and is dropped.
            if number < self._published:
                return
            self._published = number
            self.last_record = record
            self.metrics.observe_lag(lag)
            clients = self._clients
            if clients is None:
                return
            at_ms = int(time.time() * 1000)
            try:
                waiting = clients.status.publish(record)
            except Exception as exc:
                self.reach.failed(Cluster.TARGET, at_ms, f"status record: {type(exc).__name__}: {exc}")
                raise
            if waiting:
                self.reach.failed(Cluster.TARGET, at_ms, f"the status record was not acknowledged ({waiting} waiting)")
            else:
                self.reach.answered(Cluster.TARGET, at_ms)

    def snapshot(self) -> FlowSnapshot:
        """The flow's figures as the metrics read them (metrics.py `FlowSnapshot`), taken at once: the ones its status
        record shows."""
        progress, checkpoints, faults = self.progress, self.checkpoints, self.faults()
        return FlowSnapshot(
            spec=self._flow.spec,
            state=self.reported_state(faults),
            lag=self.current_lag(),
            remotes=dict(self.parts.plan.copy),
            faults=faults,
            dead_letters=dict(self.parts.dead_letters),
            out_of_range=tuple(progress.out_of_range),
            errors=progress.errors,
            batch_failures=progress.batch_failures,
            checkpoints_emitted=checkpoints.emitted if checkpoints is not None else 0,
            checkpoint_rounds=checkpoints.rounds if checkpoints is not None else 0,
            checkpoint_acks=tuple(checkpoints.last_round) if checkpoints is not None else (),
            group_syncs=checkpoints.group_syncs if checkpoints is not None else (),
        )

    def step_ended(self, results: Iterable[TaskResult], ran: bool) -> None:
        """After each step of the driver's loop (`ran`: it ran tasks, whose `results` these are): the metrics of the
        batch (`batch_ended`). A step that ran no task (a caught-up flow steps once a second) hands them a snapshot at
        most once a status interval, as the status round does (issue 47: a snapshot costs work per partition, and an
        idle engine of 5,000 partitions spent a third of its CPU on them)."""
        now = time.monotonic()
        if not ran and now < self._idle_observe_due:
            return
        self._idle_observe_due = now + self._flow.spec.engine.status_interval_seconds
        self.batch_ended(results)

    def batch_ended(self, results: Iterable[TaskResult]) -> None:
        """After each batch (the driver's step): the metrics of its task results, with the flow's snapshot."""
        self.metrics.observe(self.snapshot(), results)
