"""The job's group-offset sync (MM2 sync.group.offsets) follows `reconciler failover`'s rule."""

from reconciler.adapters.group_offsets import GroupError, GroupOffsets
from reconciler.contract.spec import ClusterSpec, JobSpec
from reconciler.engine.emitters import CheckpointEmitter
from reconciler.mirror.checkpoints import OffsetAndMetadata
from reconciler.mirror.mirror_client import GroupState, TopicPartition
from reconciler.mirror.records import Checkpoint


class FakeTargetGroups:
    def __init__(self, states: dict[str, tuple[str, int]], committed: dict[str, dict[TopicPartition, int]]):
        self.states, self.committed, self.commits = states, committed, []

    def group_state(self, group):
        state, members = self.states.get(group, ("DEAD", 0))
        return GroupState(group, state, members)

    def read_group_offsets(self, groups):
        return {
            g: GroupOffsets(
                g, 0, {(tp.topic, tp.partition): OffsetAndMetadata(o) for tp, o in self.committed.get(g, {}).items()}
            )
            for g in groups
        }

    def commit_offsets(self, group, offsets):
        self.commits.append((group, dict(offsets)))


def test_sync_skips_active_groups_and_never_moves_offsets_backwards():
    spec = JobSpec(flow="w->e", source=ClusterSpec("w", "127.0.0.1:1"), target=ClusterSpec("e", "127.0.0.1:1"))
    emitter = CheckpointEmitter(spec, source_admin=None, target_producer=None, environ={})
    t0, t1 = TopicPartition("w.orders", 0), TopicPartition("w.orders", 1)
    emitter.target_groups = FakeTargetGroups(
        states={
            "busy": ("STABLE", 0),  # Tansu: an active group with an empty member list
            "idle": ("EMPTY", 0),
        },
        committed={"idle": {t0: 5}},
    )
    cps = [
        Checkpoint("busy", "w.orders", 0, 10, 9, ""),
        Checkpoint("idle", "w.orders", 0, 4, 3, ""),  # behind what the group has on the target: kept
        Checkpoint("idle", "w.orders", 1, 8, 7, ""),  # no offset on the target yet: committed
        Checkpoint("new", "w.orders", 1, 2, 2, ""),
    ]  # unknown on the target (DEAD): committed
    assert emitter.sync_group_offsets(cps) == ["idle", "new"]
    assert emitter.target_groups.commits == [("idle", {t1: 7}), ("new", {t1: 2})]


class TargetWithAnUnreadableGroup(FakeTargetGroups):
    def read_group_offsets(self, groups):
        answers = super().read_group_offsets(groups)
        return answers | {"moved": GroupOffsets("moved", 0, error=GroupError.of_code(16, "OffsetFetch"))}


def test_a_group_whose_offsets_on_the_target_cannot_be_read_is_not_committed():
    """NOT_COORDINATOR for one group's read on the target: that group waits for the next round, the others sync."""
    spec = JobSpec(flow="w->e", source=ClusterSpec("w", "127.0.0.1:1"), target=ClusterSpec("e", "127.0.0.1:1"))
    emitter = CheckpointEmitter(spec, source_admin=None, target_producer=None, environ={})
    emitter.target_groups = TargetWithAnUnreadableGroup(states={}, committed={})
    cps = [Checkpoint("moved", "w.orders", 0, 4, 3, ""), Checkpoint("fine", "w.orders", 0, 8, 7, "")]
    assert emitter.sync_group_offsets(cps) == ["fine"]
    assert emitter.target_groups.commits == [("fine", {TopicPartition("w.orders", 0): 7})]
