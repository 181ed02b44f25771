"""A checkpoint round reuses what the last round worked out for a group whose inputs did not change (its committed
offsets, the offset syncs, its activity on the target, its last checkpoint): the checkpoints and the verdicts are
always the ones a round worked out from scratch gives (engine/emitters.py, `checkpoints`, `judge_groups`)."""

from __future__ import annotations

import random

from reconciler.contract.spec import ClusterSpec, JobSpec
from reconciler.engine.emitters import CheckpointEmitter
from reconciler.mirror.checkpoints import OffsetAndMetadata
from reconciler.mirror.records import OffsetSync


def emitter() -> CheckpointEmitter:
    spec = JobSpec(flow="w->e", source=ClusterSpec("w", "127.0.0.1:1"), target=ClusterSpec("e", "127.0.0.1:1"))
    return CheckpointEmitter(spec, source_admin=None, target_producer=None, environ={})


def from_scratch(reused: CheckpointEmitter, offsets):
    """What a round without memory gives: a new emitter on the same offset syncs and the same groups' facts."""
    fresh = emitter()
    fresh.store, fresh.active_on_target, fresh.checkpointed_at = (
        reused.store,
        set(reused.active_on_target),
        dict(reused.checkpointed_at),
    )
    fresh.judge_groups(offsets)
    return fresh.checkpoints(offsets), fresh.group_syncs


def test_every_round_gives_what_a_round_from_scratch_gives():
    rng = random.Random(47)
    e = emitter()
    topics = ["orders", "payments", "w.heartbeats", "e.back"]  # e.back: came from the target, renamed back
    groups = [f"g{i}" for i in range(40)]
    offsets = {g: {(rng.choice(topics), rng.randrange(2)): OffsetAndMetadata(rng.randrange(30))} for g in groups}
    reused_rounds = 0
    for round_ in range(60):
        change = rng.randrange(6)
        if change == 0:  # a group commits
            g = rng.choice(groups)
            offsets = offsets | {g: {(rng.choice(topics), rng.randrange(2)): OffsetAndMetadata(rng.randrange(30), "m")}}
        elif change == 1:  # an offset sync comes
            e.store.add(OffsetSync(rng.choice(topics), rng.randrange(2), rng.randrange(30), rng.randrange(100)))
        elif change == 2:
            (e.active_on_target.add if rng.random() < 0.5 else e.active_on_target.discard)(rng.choice(groups))
        elif change == 3:
            e.checkpointed_at[rng.choice(groups)] = round_
        elif change == 4 and not e.store.read_to_end:
            e.store.mark_read_to_end()
        else:
            reused_rounds += 1  # nothing changed
        e.judge_groups(offsets)
        got = e.checkpoints(offsets), e.group_syncs
        assert got == from_scratch(e, offsets), f"round {round_}, change {change}"
    assert reused_rounds > 5


def test_an_unchanged_group_is_not_translated_again_and_a_new_sync_translates_it_again():
    e = emitter()
    e.store.mark_read_to_end()
    e.store.add(OffsetSync("orders", 0, 0, 0))
    offsets = {"g": {("orders", 0): OffsetAndMetadata(5)}}
    first = e.checkpoints(offsets)
    assert [cp.downstream_offset for cp in first] == [1]
    assert e.checkpoints({"g": {("orders", 0): OffsetAndMetadata(5)}})[0] is first[0]  # reused, not made again
    e.store.add(OffsetSync("orders", 0, 5, 9))
    assert [cp.downstream_offset for cp in e.checkpoints(offsets)] == [9]
