"""A flow's batches, before and after they run: their shape (`BatchShaper`: one task per slot, one task for a
small backlog, split tasks ending at the source's ends) and what the driver takes from their results (`Absorber`:
positions, counts, offset syncs, dead letters, commits; a loss or a refused record goes to `SourceFaults`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Protocol

from reconciler.contract.spec import JobSpec, dead_letters_topic_name
from reconciler.engine.delivery import DeliveryMode
from reconciler.engine.driver_parts import Pacing, Partitions, Progress
from reconciler.engine.lag import LagPosition
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


class BatchShaper:
    """The tasks of a batch. It is given the flow's partitions, the idle gate's pacing (the ends read before the
    batch), the progress (the batch's number) and the delivery mode (a getter: it follows the spec)."""

    def __init__(self, parts: Partitions, pacing: Pacing, progress: Progress, mode: Callable[[], DeliveryMode]):
        self.parts, self.pacing, self.progress, self._mode = parts, pacing, progress, mode

    def plan_tasks(self, one_task: bool = False) -> list[CopyTask]:
        return self.parts.tasks(self.progress.batches, one_task)

    def one_task(self) -> bool:
        """Is this batch one task for every partition (ONE_TASK_BACKLOG)? Asked after `work_waiting` found records,
        so the ends are the ones read for this batch."""
        if self._mode().slot_is_identity:
            return False
        backlog = self.parts.backlog(self.pacing.ends_before)
        return backlog is not None and backlog <= ONE_TASK_BACKLOG

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
        if len(tasks) < 2 or self._mode().slot_is_identity:
            return tasks
        ends = self.pacing.ends_before
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


class Absorber:
    """Takes a batch's task results into the flow's state and commits them: positions, counts, lag, latency, offset
    syncs (written now or delayed to the next flush), dead letters; at-least-once, the offset syncs are written
    before the positions are committed. It is given the flow's spec and delivery mode (getters: a reload replaces
    them), its partitions, the idle gate's pacing (what is caught up), its progress, the loss handler
    (`SourceFaults`), its clients (a getter: opened at start) and `error` (count and log an error)."""

    def __init__(
        self,
        spec: Callable[[], JobSpec],
        mode: Callable[[], DeliveryMode],
        parts: Partitions,
        pacing: Pacing,
        progress: Progress,
        faults: SourceFaults,
        clients: Callable[[], BatchClients],
        error: Callable[[str], None],
    ):
        self._spec, self._mode, self.parts, self.pacing, self.progress = spec, mode, parts, pacing, progress
        self.faults, self._clients, self._error = faults, clients, error

    def absorb(self, results: list[TaskResult]) -> int:
        """The results of a batch's tasks; how many records they copied."""
        conn = self._clients()
        parts = self.parts
        moved = 0
        to_commit: dict[TP, int] = {}
        latency: list[float] = []
        silent: list[PartitionResult] = []
        failed: list[TP] = []
        for r in results:
            if r.process:
                parts.last_owner[r.slot] = r.process if not r.fatal else None
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
                    parts.dead_letters[tp] = parts.dead_letters.get(tp, 0) + p.dead_lettered
                    self._error(
                        f"{tp[0]}[{tp[1]}]: {p.dead_lettered} record(s) refused by the target written to the "
                        f"dead-letter topic {dead_letters_topic_name(self._spec())} (on_refused_record: skip)"
                    )
                if p.count == 0 and not p.eof and not r.error and p.start >= 0:
                    silent.append(p)
                if advances and (p.count > 0 or (p.next >= 0 and p.next != parts.positions.get(tp))):
                    parts.positions[tp] = p.next
                    if p.source_committed != p.next:  # at-least-once: the task's own last commit recorded it
                        to_commit[tp] = p.next
                self.progress.records += p.count
                self.progress.bytes += p.bytes
                moved += p.count
                if p.sync_state is not None:
                    parts.sync_states[tp] = p.sync_state
                if p.syncs:
                    conn.syncs.write(tp[0], tp[1], p.syncs)
                    parts.delayed_syncs.pop(tp, None)
                if p.last is not None:
                    if p.syncs and tuple(p.syncs[-1]) == tuple(p.last):
                        parts.delayed_syncs.pop(tp, None)
                    else:
                        parts.delayed_syncs[tp] = (p.last[0], p.last[1])  # published at the next flush
                parts.lag[tp] = LagPosition(p.remote, parts.positions.get(tp, p.next), p.hw)
                if advances:
                    self.pacing.mark_caught_up(p)
                else:
                    self.pacing.caught_up.pop(tp, None)
                if p.refused is not None and advances:
                    self.faults.halt_refused(tp, p)
        if failed:
            self._mode().recover(self.reload_positions, failed)
        conn.syncs.flush()
        conn.offsets.commit(to_commit)
        self.progress.latency.add(latency)
        self.progress.rate.add(moved)
        for p in silent:
            self.faults.check_position(p.tp, p.start)
        return moved

    def flush_delayed_syncs(self, timeout: float = 30.0) -> None:
        """MM2 publishes the latest unsynced mapping of each partition at offset commit time. `timeout`: how long to
        wait for them (the loop's tick waits a status interval: a source that does not answer must not hold the
        status up for 30 s; what is not delivered stays queued in the producer, its errors raised at the next flush)."""
        if not self.parts.delayed_syncs:
            return
        delayed, self.parts.delayed_syncs = self.parts.delayed_syncs, {}
        syncs = self._clients().syncs
        for (topic, partition), pair in delayed.items():
            syncs.write(topic, partition, [pair])
        syncs.flush(timeout)

    def reload_positions(self, tps: list[TP], forward_only: bool = False) -> None:
        """After a failed batch, the positions the job's group holds (delivery.py: which group, and whether a
        position may move back: exactly-once the target group is the truth, it may have committed)."""
        wanted = {tp: self.parts.plan.copy[tp] for tp in tps if tp in self.parts.plan.copy}
        try:
            for tp, (offset, _slot) in self._clients().offsets.load(wanted).items():
                loaded = offset if offset is not None else -2
                if forward_only:
                    loaded = max(loaded, self.parts.positions.get(tp, -2))
                self.parts.positions[tp] = loaded
        except Exception as exc:  # noqa: BLE001
            self._error(f"cannot re-read the job's committed positions: {exc}")
