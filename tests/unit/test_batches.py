"""Batch shaping and absorbing (engine/batches.py), without brokers: the syncs and the job's offsets are fakes behind
`BatchClients`, the loss handler a real `SourceFaults` over fake source offsets. One task for a small backlog, split
tasks ending at the ends read before the batch, exactly-once never merged; absorbing moves and commits positions,
delays a mapping to the next flush, counts dead letters, hands an out-of-range partition to the loss handler and
reloads a failed task's positions."""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.contract.spec import ClusterSpec
from reconciler.engine.batches import ONE_TASK_BACKLOG, Absorber, BatchShaper
from reconciler.engine.delivery import mode_of
from reconciler.engine.driver_parts import Pacing, Partitions, Progress
from reconciler.engine.source_faults import SourceFaults
from reconciler.engine.tasks import TP, PartitionResult, TaskResult
from reconciler.engine.topics import PartitionPlan
from tests.spec_helpers import job_spec, respec

SPEC = job_spec("west->east", ClusterSpec("west", "127.0.0.1:1"), ClusterSpec("east", "127.0.0.1:2"))
A0, A1 = ("a", 0), ("a", 1)


def partitions() -> Partitions:
    return Partitions(
        plan=PartitionPlan(copy={A0: "west.a", A1: "west.a"}), positions={A0: 0, A1: 0}, slots={A0: 0, A1: 1}
    )


def test_a_small_backlog_is_one_task_a_large_one_split_tasks_that_end_at_the_ends_read():
    parts, pacing = partitions(), Pacing()
    shaper = BatchShaper(parts, pacing, Progress(batches=7), lambda: mode_of(SPEC))
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
    eos = respec(SPEC, delivery="exactly-once")
    parts, pacing = partitions(), Pacing(ends_before={A0: 1, A1: 1})
    shaper = BatchShaper(parts, pacing, Progress(), lambda: mode_of(eos))
    tasks = shaper.plan_tasks()
    assert not shaper.one_task() and shaper.split_tasks(tasks) == tasks


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
    parts, pacing, progress, clients, errors = partitions(), Pacing(ends_before={A0: 5}), Progress(), Clients(), []
    faults = SourceFaults(lambda: spec, parts, pacing, progress, lambda: clients, errors.append, lambda: None)
    a = Absorber(lambda: spec, lambda: mode_of(spec), parts, pacing, progress, faults, lambda: clients, errors.append)
    return a, clients, errors


def result(tp=A0, **kw) -> PartitionResult:
    fields = dict(topic=tp[0], partition=tp[1], remote="west.a", start=0, next=5, count=5, bytes=50, eof=True, hw=5)
    return PartitionResult(**{**fields, **kw})


def test_absorbing_moves_commits_counts_and_marks_caught_up():
    a, clients, errors = absorber()
    moved = a.absorb([TaskResult(0, "p1", partitions=[result(syncs=[(4, 40)], last=(4, 40))], latency_ms=[12])])
    parts = a.parts
    assert moved == 5 and parts.positions[A0] == 5 and clients.offsets.commits == [{A0: 5}]
    assert a.progress.records == 5 and a.progress.bytes == 50 and parts.last_owner == {0: "p1"}
    assert clients.syncs.written == [("a", 0, [(4, 40)])] and parts.delayed_syncs == {}
    assert a.pacing.caught_up == {A0: 5} and parts.lag[A0].next == 5 and not errors
    a.absorb([TaskResult(0, "p1", partitions=[result(start=5, next=7, count=2, last=(6, 60))])])
    assert parts.delayed_syncs == {A0: (6, 60)}, "the mapping waits for the next flush"
    a.flush_delayed_syncs()
    assert clients.syncs.written[-1] == ("a", 0, [(6, 60)]) and parts.delayed_syncs == {}


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
    a.parts.positions[A0] = 3
    clients.offsets.committed[A0] = 2
    a.absorb([TaskResult(0, "p1", error="boom", partitions=[result(start=3, next=5, count=2)])])
    assert a.parts.positions[A0] == 3, "at-least-once: reloaded forward only, never behind its own position"
    assert clients.offsets.commits == [{}] and errors == ["slot 0: boom"] and A0 not in a.pacing.caught_up


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
