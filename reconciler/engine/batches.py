"""A flow's batches, before and after they run: their shape (`BatchShaper`: one task per slot, one task for a
small backlog, split tasks ending at the source's ends, heartbeats alone; each task's share of the flow's rate limit)
and what the driver takes from their results
(`Absorber`: positions, counts, offset syncs, dead letters, commits; a loss or a refused record goes to
`SourceFaults`). Both tell `Partitions` and the idle gate what happened through their methods; the offset syncs
delayed to the next flush are the absorber's own."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Protocol

from reconciler.contract.spec import dead_letters_topic_name
from reconciler.engine import throttle
from reconciler.engine.delivery import mode_of
from reconciler.engine.driver_parts import FlowSpec, Partitions, Progress, UsesClients
from reconciler.engine.idle_gate import IdleGate, Work
from reconciler.engine.source_faults import SourceFaults
from reconciler.engine.tasks import TP, CopyTask, PartitionResult, TaskResult

#: A flow with at most this many records to copy (the source's ends read before the batch less its positions) is
#: copied by one task for all its partitions, not one per slot, where its delivery allows it
#: (`DeliveryMode.slot_is_identity`): a stream needs one consumer fetching from the source, not `parallelism` of
#: them. Measured through the deployed job at 10,000 records/s on Tansu, whose cost per fetch grows with the
#: partition's length (README, "Measured numbers"), with a plain reader of the source topic beside the job: two task
#: consumers saturated the source broker within 30 s (p99 3.98 s), one did not (0.40 s). One task copies a backlog
#: at 200,000+ records/s, so this is at most ~0.1 s of its work; a stream faster than one task copies leaves more
#: than this at the next batch, which is split again.
ONE_TASK_BACKLOG = 20_000
#: A capped flow's one task leaves out the partitions at rest (`BatchShaper.busy_only`); such a task copies at most
#: this long (its time budget, when `max_batch_ms` is longer), so that a record arriving at a partition it left out
#: waits at most this, plus the gap to the next batch, which carries that partition.
LEFT_OUT_BATCH_MS = 5_000


class BatchShaper:
    """The tasks of a batch. It is given the flow (`FlowSpec`: its delivery and rate limit follow the spec), its
    partitions, the idle gate (the ends read before the batch, the heartbeats' tasks) and the progress (the batch's
    number). It owns the flow's rate-limit tokens between batches (`allowance`: handed to a batch's tasks, given back
    by `batch_ended`)."""

    def __init__(self, flow: FlowSpec, parts: Partitions, gate: IdleGate, progress: Progress):
        self._flow, self.parts, self.gate, self.progress = flow, parts, gate, progress
        self.allowance = throttle.FlowAllowance()  # the flow's rate-limit tokens between its batches: its own
        self._paced = False  # the batch in flight holds them

    def plan_tasks(self, one_task: bool = False) -> list[CopyTask]:
        return self.parts.tasks(self.progress.batches, one_task)

    def shape(self, work: Work, tasks: list[CopyTask], parallel: bool = True) -> list[CopyTask]:
        """The batch for `work` (the idle gate's word) from `tasks` (one per slot): none while there is nothing to
        fetch (no Spark job), the heartbeats partitions alone, one task for a small backlog or a flow whose rate
        limit one task copies, else split tasks; the tasks of records get their shares of the flow's `rate_limit`
        (throttle.py `budgets`: `parallel`, the executor runs them at once)."""
        if work is Work.NONE:
            return []
        if work is Work.HEARTBEATS:
            return self.gate.heartbeat_tasks(tasks)
        limit = self._flow.spec.settings.rate_limit
        if self.one_task():
            shaped = self.plan_tasks(one_task=True)
            if throttle.one_task_copies(limit):
                shaped = self.busy_only(shaped)
        else:
            shaped = self.split_tasks(tasks)
        self._paced = limit.limited and bool(shaped)
        if not self._paced:
            return shaped
        tokens = self.allowance.take(limit)
        return throttle.budgets(limit, shaped, self.gate.ends_before, parallel, tokens, self.allowance.taken_at)

    def batch_ended(self, results: list[TaskResult]) -> None:
        """The batch's results: the tokens its paced tasks left go back to the flow (a failed batch's: none)."""
        if self._paced:
            self._paced = False
            paced = [r for r in results if r.budget_left is not None]
            ends = [r.budget_left_at for r in paced if r.budget_left_at is not None]
            # from the last task's end: a task that ended sooner left its share idle meanwhile, not counted
            self.allowance.give_back([r.budget_left for r in paced if r.budget_left], max(ends) if ends else None)

    def one_task(self) -> bool:
        """Is this batch one task for every partition (ONE_TASK_BACKLOG, or a rate limit one task copies at:
        `throttle.one_task_copies`)? Asked after `work_waiting` found records, so the ends are the ones read for this
        batch."""
        spec = self._flow.spec
        if mode_of(spec).slot_is_identity:
            return False
        if throttle.one_task_copies(spec.settings.rate_limit):
            return True
        backlog = self.parts.backlog(self.gate.ends_before)
        return backlog is not None and backlog <= ONE_TASK_BACKLOG

    def busy_only(self, tasks: list[CopyTask]) -> list[CopyTask]:
        """A capped flow's one task without the partitions at rest (`IdleGate.at_rest`: caught up at the ends read
        before the batch), and then a time budget of at most LEFT_OUT_BATCH_MS; unchanged when none is at rest or all
        are (the gate's batch all the same, GATE_BATCH_S, reads them all). A left-out partition is in the next batch
        once its end moves (the gate reads every partition's end before each batch); its position stays.

        Why (issue 47): the flow carries at most BURST_S (1 s) of its cap across the gap between two batches, so a
        gap longer than that is rate lost. With 2,506 partitions of which 5 had records, one task for all of them made
        that gap 0.5-3.2 s, growing with the machine's load, against 0.25-0.5 s with the 5 alone (bench/ratelimit.py
        --idle-partitions 2500, traced: the task's 2,506 results to Spark's driver 0.16-0.57 s, absorbed 0.05-0.23
        s, the batch planned 0.16 s, its Spark job started 0.4-0.6 s, the consumer's first record 0.4-0.5 s after its
        assign), and the flow copied 0.72-0.96x its cap at load averages 3-7 (bench/scale.py at full size: 0.65x)."""
        rest = self.gate.at_rest()
        if not rest:
            return tasks
        out = []
        for t in tasks:
            busy = tuple(p for p in t.partitions if p.tp not in rest)
            if not busy or len(busy) == len(t.partitions):
                out.append(t)
                continue
            budget = LEFT_OUT_BATCH_MS if t.max_ms is None else min(t.max_ms, LEFT_OUT_BATCH_MS)
            out.append(dataclasses.replace(t, partitions=busy, max_ms=budget))
        return out

    def split_tasks(self, tasks: list[CopyTask]) -> list[CopyTask]:
        """A backlog split over the slots (more than ONE_TASK_BACKLOG records, or positions not yet known). Where the
        delivery allows one task, its tasks end once their partitions reached their ends (`CopyTask.at_end_only`)
        instead of staying on while a stream flows: the tasks of a batch end together (one Spark job), so when one
        task's partitions fall silent and it ends while another streams on, the first one's partitions are not read
        until the batch's deadline (`max_batch_ms`). Seen through the deployed job (bench/deployed.py latency on
        Tansu, 1 repetition in 3 to 8): a new flow's first batch (positions not known: split) had one task end after
        the warm-up's records while the other streamed on into the load, half the partitions 6.6-7.2 s late. Ended
        at their ends (the ends read before the batch: under a stream no end-of-partition event need come), the
        split tasks leave the stream to the next batch: one task (`one_task`)."""
        if len(tasks) < 2 or mode_of(self._flow.spec).slot_is_identity:
            return tasks
        ends = self.gate.ends_before
        return [
            dataclasses.replace(
                t, at_end_only=True, partitions=tuple(dataclasses.replace(p, end=ends.get(p.tp)) for p in t.partitions)
            )
            for t in tasks
        ]


class SyncWrites(Protocol):
    """Where offset syncs go (emitters.py `OffsetSyncWriter`)."""

    def write(self, topic: str, partition: int, pairs: list[tuple[int, int]] | list[list[int]]) -> None: ...

    def flush(self, timeout: float = ...) -> None: ...


class JobOffsets(Protocol):
    """The job's committed positions (offsets.py `OffsetStore`)."""

    def load(self, partitions: Mapping[TP, str]) -> Mapping[TP, tuple[int | None, int | None]]: ...

    def commit(self, positions: Mapping[TP, int]) -> None: ...


class BatchClients(Protocol):
    """What absorbing a batch writes to (driver_parts.py `Connections`)."""

    @property
    def syncs(self) -> SyncWrites: ...

    @property
    def offsets(self) -> JobOffsets: ...


class Absorber(UsesClients[BatchClients]):
    """Takes a batch's task results into the flow's state and commits them: positions, counts, lag, latency, offset
    syncs (written now or delayed to the next flush: `delayed_syncs`, its own), dead letters; at-least-once, the
    offset syncs are written before the positions are committed. It is given the flow (`FlowSpec`: its spec and
    delivery follow a reload), its partitions, the idle gate (what is caught up), its progress, the loss handler
    (`SourceFaults`), `error` (count and log an error) and its clients when the driver opens them (`connect`)."""

    def __init__(
        self,
        flow: FlowSpec,
        parts: Partitions,
        gate: IdleGate,
        progress: Progress,
        faults: SourceFaults,
        error: Callable[[str], None],
        *,
        clients: BatchClients | None = None,
    ):
        self._flow, self.parts, self.gate, self.progress = flow, parts, gate, progress
        self.faults, self._error, self._clients = faults, error, clients
        self._delayed: dict[TP, tuple[int, int]] = {}  # each partition's last mapping not written yet

    @property
    def delayed_syncs(self) -> Mapping[TP, tuple[int, int]]:
        """The mapping of each partition published at the next flush."""
        return self._delayed

    def absorb(self, results: list[TaskResult]) -> int:
        """The results of a batch's tasks; how many records they copied."""
        conn = self.clients
        parts = self.parts
        moved = 0
        to_commit: dict[TP, int] = {}
        latency: list[float] = []
        silent: list[PartitionResult] = []
        failed: list[TP] = []
        for r in results:
            if r.process:
                parts.task_ran(r.slot, r.process if not r.fatal else None)
            if r.error:
                self._error(f"slot {r.slot}: {r.error}")
                failed += [p.tp for p in r.partitions]
            latency += r.latency_ms
            advances = not r.error  # a failed task rolled back (or aborted) its partitions
            for p in r.partitions:
                tp = p.tp
                if advances and p.copied:
                    parts.tails.copied(tp, p.copied)
                if p.source_reconnected:
                    parts.tails.suspect([tp], "the task's consumer lost the source broker")
                elif r.error:
                    parts.tails.suspect([tp], "the task failed")
                if p.error and not r.error:
                    self._error(f"{tp[0]}[{tp[1]}]: {p.error}")
                if p.out_of_range:
                    self.faults.out_of_range(tp, p.start, p.out_of_range)
                    continue
                if p.dead_lettered and advances:
                    parts.dead_lettered(tp, p.dead_lettered)
                    self._error(
                        f"{tp[0]}[{tp[1]}]: {p.dead_lettered} record(s) refused by the target written to the "
                        f"dead-letter topic {dead_letters_topic_name(self._flow.spec)} (on_refused_record: skip)"
                    )
                if p.count == 0 and not p.eof and not r.error and p.start >= 0:
                    silent.append(p)
                if advances and (p.count > 0 or (p.next >= 0 and p.next != parts.positions.get(tp))):
                    parts.advanced(tp, p.next)
                    if p.source_committed != p.next:  # at-least-once: the task's own last commit recorded it
                        to_commit[tp] = p.next
                self.progress.records += p.count
                self.progress.bytes += p.bytes
                moved += p.count
                if p.syncs:
                    conn.syncs.write(tp[0], tp[1], p.syncs)
                    self._delayed.pop(tp, None)
                if p.last is not None:
                    if p.syncs and tuple(p.syncs[-1]) == tuple(p.last):
                        self._delayed.pop(tp, None)
                    else:
                        self._delayed[tp] = (p.last[0], p.last[1])  # published at the next flush
                parts.task_reported(p)
                self.gate.task_ended(p, advances)
                if p.refused is not None and advances:
                    self.faults.halt_refused(tp, p)
        if failed:
            mode_of(self._flow.spec).recover(self.reload_positions, failed)
        conn.syncs.flush()
        conn.offsets.commit(to_commit)
        self.progress.latency.add(latency)
        self.progress.rate.add(moved)
        self.faults.check_positions({p.tp: p.start for p in silent})
        return moved

    def batch_failed(self) -> None:
        """The batch failed as a whole (e.g. a Python worker died): nothing was committed. The workers drop their
        consumers, nothing is caught up, and the positions are brought back to what is durable (delivery.py
        `recover`)."""
        self.parts.batch_failed()
        self.gate.batch_failed()
        mode_of(self._flow.spec).recover(self.reload_positions, list(self.parts.plan.copy))

    def flush_delayed_syncs(self, timeout: float = 30.0) -> None:
        """MM2 publishes the latest unsynced mapping of each partition at offset commit time. `timeout`: how long to
        wait for them (the loop's tick waits a status interval: a source that does not answer must not hold the
        status up for 30 s; what is not delivered stays queued in the producer, its errors raised at the next flush)."""
        if not self._delayed:
            return
        delayed, self._delayed = self._delayed, {}
        syncs = self.clients.syncs
        for (topic, partition), pair in delayed.items():
            syncs.write(topic, partition, [pair])
        syncs.flush(timeout)

    def reload_positions(self, tps: list[TP], forward_only: bool = False) -> None:
        """After a failed batch, the positions the job's group holds (delivery.py: which group, and whether a
        position may move back: exactly-once the target group is the truth, it may have committed)."""
        wanted = {tp: self.parts.plan.copy[tp] for tp in tps if tp in self.parts.plan.copy}
        try:
            for tp, (offset, _slot) in self.clients.offsets.load(wanted).items():
                loaded = offset if offset is not None else -2
                if forward_only:
                    loaded = max(loaded, self.parts.positions.get(tp, -2))
                self.parts.reloaded(tp, loaded)
        except Exception as exc:  # noqa: BLE001
            if forward_only:  # the driver's own positions are durable (never ahead of what was committed)
                self._error(f"cannot re-read the job's committed positions: {exc}")
                return
            # exactly-once: the failed transaction may have committed past the driver's positions; copying from them
            # would copy its records twice, so the partitions wait until the group is read (`reload_unread`)
            self.parts.unsure(wanted)
            self._error(
                f"cannot re-read the job's committed positions ({len(wanted)} partitions held until read): {exc}"
            )

    def reload_unread(self) -> bool:
        """Read again the positions a failed reload left unknown (`Partitions.unread`); whether any became known."""
        unread = self.parts.unread
        if not unread:
            return False
        self.reload_positions(sorted(unread))
        return len(self.parts.unread) < len(unread)
