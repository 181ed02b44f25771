"""Batch shaping and absorbing (engine/batches.py), without brokers: the syncs and the job's offsets are fakes behind
`BatchClients`, the loss handler a real `SourceFaults` over fake source offsets. One task for a small backlog, split
tasks ending at the ends read before the batch, exactly-once never merged; absorbing moves and commits positions,
delays a mapping to the next flush, counts dead letters, hands an out-of-range partition to the loss handler and
reloads a failed task's positions."""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.contract.spec import ClusterSpec, JobSpec
from reconciler.engine.batches import LEFT_OUT_BATCH_MS, ONE_TASK_BACKLOG, Absorber, BatchShaper
from reconciler.engine.driver_parts import Partitions, Progress
from reconciler.engine.idle_gate import IdleGate, Pacing, Work
from reconciler.engine.source_faults import SourceFaults
from reconciler.engine.tasks import TP, CopyTask, PartitionResult, PartitionTask, TaskResult
from reconciler.engine.topics import PartitionPlan
from reconciler.topology.model import RateLimit
from tests.spec_helpers import job_spec, respec

SPEC = job_spec("west->east", ClusterSpec("west", "127.0.0.1:1"), ClusterSpec("east", "127.0.0.1:2"))
A0, A1 = ("a", 0), ("a", 1)


@dataclass
class Flow:
    """The flow as the parts read it (the driver's `FlowSpec`)."""

    spec: JobSpec = SPEC


def partitions() -> Partitions:
    return Partitions(
        plan=PartitionPlan(copy={A0: "west.a", A1: "west.a"}), positions={A0: 0, A1: 0}, slots={A0: 0, A1: 1}
    )


def test_a_small_backlog_is_one_task_a_large_one_split_tasks_that_end_at_the_ends_read():
    parts, pacing = partitions(), Pacing()  # the gate's ends read before the batch: seeded
    shaper = BatchShaper(Flow(), parts, IdleGate(Flow(), parts, pacing=pacing), Progress(batches=7))
    assert [t.slot for t in shaper.plan_tasks()] == [0, 1] and shaper.plan_tasks()[0].batch == 7
    pacing.ends_before = {A0: 10, A1: ONE_TASK_BACKLOG - 10}  # the backlog is ONE_TASK_BACKLOG records
    assert shaper.one_task()
    (one,) = shaper.plan_tasks(one_task=True)
    assert [p.tp for p in one.partitions] == [A0, A1]
    pacing.ends_before = {A0: 10, A1: ONE_TASK_BACKLOG + 1}
    assert not shaper.one_task()
    split = shaper.split_tasks(shaper.plan_tasks())
    assert all(t.at_end_only for t in split)
    assert [p.end for t in split for p in t.partitions] == [10, ONE_TASK_BACKLOG + 1]
    pacing.ends_before = {A0: 10}  # an end not known: how far is not known, split
    assert not shaper.one_task()


def test_exactly_once_keeps_a_task_per_slot():
    eos = Flow(respec(SPEC, delivery="exactly-once"))
    parts = partitions()
    gate = IdleGate(eos, parts, pacing=Pacing(ends_before={A0: 1, A1: 1}))
    shaper = BatchShaper(eos, parts, gate, Progress())
    tasks = shaper.plan_tasks()
    assert not shaper.one_task() and shaper.split_tasks(tasks) == tasks


def test_the_batch_follows_the_gates_word():
    parts = partitions()
    gate = IdleGate(Flow(), parts, pacing=Pacing(ends_before={A0: 10, A1: 10}))
    shaper = BatchShaper(Flow(), parts, gate, Progress())
    tasks = shaper.plan_tasks()
    assert shaper.shape(Work.NONE, tasks) == [], "nothing to fetch: no Spark job"
    assert [t.slot for t in shaper.shape(Work.RECORDS, tasks)] == [0], "a small backlog: one task"
    beats = [CopyTask(0, 1, (PartitionTask("heartbeats", 0, "heartbeats", 3), PartitionTask("a", 0, "west.a", 0)))]
    (only,) = shaper.shape(Work.HEARTBEATS, beats)
    assert [p.topic for p in only.partitions] == ["heartbeats"] and only.at_end_only


def test_a_capped_flows_task_leaves_the_partitions_at_rest_out_until_their_end_moves():
    """Issue 47: a capped flow of 2,506 partitions, 5 with records, copied with one task for all of them lost the
    gap between its batches (up to 3.2 s, against the 1 s of tokens it carries across one): 0.65-0.83x its cap."""
    capped = Flow(respec(SPEC, records_per_second=20_000))
    parts = partitions()
    pacing = Pacing(ends_before={A0: 500, A1: 7}, caught_up={A1: 7})  # A1 caught up at the end read: at rest
    gate = IdleGate(capped, parts, pacing=pacing)
    shaper = BatchShaper(capped, parts, gate, Progress())
    assert gate.at_rest() == {A1}
    (task,) = shaper.shape(Work.RECORDS, shaper.plan_tasks())
    assert [p.tp for p in task.partitions] == [A0], "only the partition with records to copy"
    assert task.max_ms == LEFT_OUT_BATCH_MS and task.time_budget_s(10_000) == LEFT_OUT_BATCH_MS / 1000
    assert task.budget is not None and task.budget.rate == RateLimit(20_000), "the whole cap, in one task"
    pacing.ends_before = {A0: 500, A1: 8}  # a record arrived at A1: the gate read its end moved
    (task,) = shaper.shape(Work.RECORDS, shaper.plan_tasks())
    assert [p.tp for p in task.partitions] == [A0, A1] and task.max_ms is None
    pacing.ends_before, pacing.caught_up = {A0: 500, A1: 8}, {A0: 500, A1: 8}  # the gate's batch all the same
    (task,) = shaper.shape(Work.RECORDS, shaper.plan_tasks())
    assert [p.tp for p in task.partitions] == [A0, A1], "all at rest: the batch reads them all"
    pacing.ends_before, pacing.caught_up = {A0: 500, A1: 7}, {A1: 7}
    plain = BatchShaper(Flow(), parts, IdleGate(Flow(), parts, pacing=pacing), Progress())
    (task,) = plain.shape(Work.RECORDS, plain.plan_tasks())
    assert [p.tp for p in task.partitions] == [A0, A1], "a flow without a cap: as before"


@dataclass
class Syncs:
    written: list[tuple[str, int, list]] = field(default_factory=list)
    flushes: int = 0

    def write(self, topic, partition, pairs) -> None:
        self.written.append((topic, partition, [tuple(p) for p in pairs]))

    def flush(self, timeout: float = 30.0) -> None:
        self.flushes += 1


@dataclass
class Offsets:
    committed: dict[TP, int] = field(default_factory=dict)
    commits: list[dict[TP, int]] = field(default_factory=list)

    def load(self, partitions):
        return {tp: (self.committed.get(tp), None) for tp in partitions}

    def commit(self, positions) -> None:
        self.commits.append(dict(positions))

    def watermarks(self, tp):
        return 100, 200

    def true_end(self, tp):
        return 200


@dataclass
class Clients:
    syncs: Syncs = field(default_factory=Syncs)
    offsets: Offsets = field(default_factory=Offsets)

    @property
    def ends(self) -> Offsets:
        return self.offsets


def absorber(spec=SPEC):
    flow, parts, progress, clients, errors = Flow(spec), partitions(), Progress(), Clients(), []
    gate = IdleGate(flow, parts, pacing=Pacing(ends_before={A0: 5}))
    faults = SourceFaults(flow, parts, gate, progress, errors.append, lambda: None, clients=clients)
    a = Absorber(flow, parts, gate, progress, faults, errors.append, clients=clients)
    return a, clients, errors


def result(tp=A0, **kw) -> PartitionResult:
    fields = dict(topic=tp[0], partition=tp[1], remote="west.a", start=0, next=5, count=5, bytes=50, eof=True, hw=5)
    return PartitionResult(**{**fields, **kw})


def test_absorbing_moves_commits_counts_and_marks_caught_up():
    a, clients, errors = absorber()
    moved = a.absorb([TaskResult(0, "p1", partitions=[result(syncs=[(4, 40)], last=(4, 40))], latency_ms=[12])])
    parts = a.parts
    assert moved == 5 and parts.positions[A0] == 5 and clients.offsets.commits == [{A0: 5}]
    assert a.progress.records == 5 and a.progress.bytes == 50
    assert [(t.slot, t.last_owner) for t in parts.tasks(batch=2)] == [(0, "p1"), (1, None)], "each slot's process"
    assert clients.syncs.written == [("a", 0, [(4, 40)])] and a.delayed_syncs == {}
    assert a.gate.caught_up == {A0: 5} and parts.lag[A0].next == 5 and not errors
    a.absorb([TaskResult(0, "p1", partitions=[result(start=5, next=7, count=2, last=(6, 60))])])
    assert a.delayed_syncs == {A0: (6, 60)}, "the mapping waits for the next flush"
    a.flush_delayed_syncs()
    assert clients.syncs.written[-1] == ("a", 0, [(6, 60)]) and a.delayed_syncs == {}


def test_positions_the_task_committed_itself_are_not_committed_again():
    """At-least-once: a task's synchronous commit at its end recorded its positions (`source_committed`); the
    driver commits only those it did not (a failed or missing commit, a position that moved on past it)."""
    a, clients, _ = absorber()
    a.absorb([TaskResult(0, "p1", partitions=[result(source_committed=5), result(A1, next=4, count=4)])])
    assert a.parts.positions == {A0: 5, A1: 4} and clients.offsets.commits == [{A1: 4}]
    a.absorb([TaskResult(0, "p1", partitions=[result(start=5, next=9, count=4, source_committed=7)])])
    assert a.parts.positions[A0] == 9 and clients.offsets.commits[-1] == {A0: 9}


def test_a_failed_task_does_not_advance_and_its_positions_are_reloaded():
    a, clients, errors = absorber()
    a.parts.advanced(A0, 3)
    clients.offsets.committed[A0] = 2
    a.absorb([TaskResult(0, "p1", error="boom", partitions=[result(start=3, next=5, count=2)])])
    assert a.parts.positions[A0] == 3, "at-least-once: reloaded forward only, never behind its own position"
    assert clients.offsets.commits == [{}] and errors == ["slot 0: boom"] and A0 not in a.gate.caught_up


def test_a_failed_batch_leaves_nothing_caught_up_and_reloads_the_positions():
    a, clients, errors = absorber()
    a.absorb([TaskResult(0, "p1", partitions=[result()])])
    tasks = a.parts.tasks(batch=1)
    assert a.gate.caught_up == {A0: 5} and tasks[0].last_owner == "p1"
    clients.offsets.committed[A0] = 9  # the job's group is ahead (at-least-once: forward only)
    a.batch_failed()
    (task, _) = a.parts.tasks(batch=2)
    assert a.gate.caught_up == {} and task.last_owner is None and task.consumer_epoch == tasks[0].consumer_epoch + 1
    assert a.parts.positions[A0] == 9 and not errors


def test_exactly_once_positions_a_failed_batch_leaves_unknown_are_held_until_read():
    """Exactly-once the target group is the truth after a failed batch (its transaction may have committed): when it
    cannot be read, the driver's own (older) positions would copy the committed records twice; the partitions wait."""
    a, clients, errors = absorber(respec(SPEC, delivery="exactly-once"))
    a.absorb([TaskResult(0, "p1", partitions=[result()])])
    answers = clients.offsets.load

    def down(partitions):
        raise RuntimeError("committed offsets not read: west.a[0]: COORDINATOR_LOAD_IN_PROGRESS")

    clients.offsets.load = down  # type: ignore[method-assign]
    a.batch_failed()
    assert a.parts.unread == {A0, A1} and a.parts.copied() == [] and a.parts.tasks(batch=2) == []
    assert "2 partitions held until read" in errors[-1]
    assert not a.reload_unread() and a.parts.copied() == []
    clients.offsets.load = answers  # type: ignore[method-assign]
    clients.offsets.committed[A0] = 8  # the failed batch's transaction had committed
    assert a.reload_unread() and a.parts.positions[A0] == 8 and a.parts.copied() == [A0, A1]
    assert not a.parts.unread


def test_out_of_range_goes_to_the_loss_handler_and_dead_letters_are_counted():
    a, clients, errors = absorber()
    a.absorb([TaskResult(0, "p1", partitions=[result(out_of_range="offset 0 below the log start", count=0)])])
    assert a.parts.positions[A0] == 100 and a.progress.out_of_range[0].reason == "offset 0 below the log start"
    assert a.progress.records == 0, "an out-of-range partition copied nothing"
    a.absorb([TaskResult(0, "p1", partitions=[result(start=100, next=105, dead_lettered=2)])])
    assert a.parts.dead_letters == {A0: 2} and "dead-letter topic" in errors[-1]


def test_a_silent_partition_has_its_position_checked():
    a, _, _ = absorber()
    a.absorb([TaskResult(0, "p1", partitions=[result(start=300, next=300, count=0, eof=False, hw=None)])])
    assert a.parts.positions[A0] == 100 and "past the log end" in a.progress.out_of_range[0].reason
