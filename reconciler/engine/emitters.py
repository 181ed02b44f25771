"""MirrorMaker 2's side channels, run by the driver: heartbeats, offset syncs and checkpoints.

All three use MM2's binary formats (reconciler.mirror.records) so Java tooling reads them.

* Heartbeats: `Heartbeat(source alias, target alias, now)` to `heartbeats` on the SOURCE cluster,
  which the flow replicates like any topic (route() always lets heartbeats through), giving
  `A.heartbeats` on B and `B.A.heartbeats` on C down a chain; or, with `heartbeats.location: target`,
  on the TARGET cluster as Kafka's MirrorHeartbeatConnector does (docs/mm2-differences.md).
* Offset syncs: `OffsetSync(source topic, partition, upstream, downstream)` to
  `mm2-offset-syncs.<alias>.internal`, decided by the workers with MM2's rules.
* Checkpoints: the committed offsets of the source groups the flow's group filter matches,
  translated through the offset syncs (MM2's conservative OffsetSyncStore rule), written to
  `<source>.checkpoints.internal` on the target (named by the flow's ReplicationPolicy), only when they
  move forward or the upstream group rewinds (MirrorCheckpointTask.checkpointIsMoreRecent), with the
  upstream commit metadata; the checkpoints already written are read back at start (CheckpointStore);
  optionally committed to the same group on the
  target while that group has no active members there (sync group offsets).
  As MM2 (MirrorCheckpointTask.checkpointRecord/commitRecord), a checkpoint record's timestamp is the time
  its group's offsets were read on the source, and its latency is acknowledgement - that time
  (`CheckpointAck`, the job's `checkpoint_latency_ms` metrics).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from reconciler.adapters.group_offsets import GroupOffsetsReader, choose_reader
from reconciler.adapters.mirror_kafka import ClusterIOError, MirrorKafka
from reconciler.adapters.read_to_end import read_to_end
from reconciler.analysis.expansion import checkpoint_route
from reconciler.contract.spec import JobSpec, job_group, offset_syncs_topic_name
from reconciler.engine import clients
from reconciler.mirror.checkpoints import CheckpointStore, OffsetAndMetadata
from reconciler.mirror.group_sync import GroupSync, judge_group
from reconciler.mirror.mirror_client import TopicPartition, plan_failover
from reconciler.mirror.offset_translation import OffsetSyncStore
from reconciler.mirror.policy import HEARTBEATS_TOPIC
from reconciler.mirror.records import Checkpoint, Heartbeat, OffsetSync, RecordFormatError

log = logging.getLogger(__name__)

#: Groups whose offsets a checkpoint round syncs to the target at once (`sync.group_offsets`): each takes up to three
#: admin round trips, which the target's admin client carries concurrently.
GROUP_SYNCS_IN_FLIGHT = 32


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class CheckpointAck:
    """A checkpoint the target acknowledged, `latency_ms` after its group's offsets were read on the source."""

    checkpoint: Checkpoint
    latency_ms: int


def fatal_error(exc: BaseException) -> bool:
    """Whether `exc` (or what caused it) is a librdkafka fatal error: the producer is unusable from then on."""
    seen: BaseException | None = exc
    while seen is not None:
        err = seen.args[0] if seen.args else None
        fatal = getattr(err, "fatal", None)
        if callable(fatal) and fatal():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class Renewing:
    """The driver's producer of small records (heartbeats, offset syncs) and how to make a new one (`renew`): an
    idempotent producer whose broker lost its sequence state (noida-db at a restart that lost its tail:
    OUT_OF_ORDER_SEQUENCE_NUMBER) turns fatal and refuses every record after; the job, which stopped there (its
    batch's offset syncs not written), goes on with a new producer (issue 46). The records it had queued are lost:
    an offset sync or a heartbeat, written again at the next one."""

    def __init__(self, producer: Any, renew: Callable[[], Any] | None):
        self.producer, self._renew = producer, renew

    def renewed(self, exc: BaseException) -> bool:
        """After `exc`: a new producer if it was fatal and one can be made (whether so)."""
        if self._renew is None or not fatal_error(exc):
            return False
        log.warning("the producer of %s is unusable (%s): a new one is made", type(self).__name__, exc)
        self.producer = self._renew()
        return True


class HeartbeatEmitter(Renewing):
    def __init__(self, spec: JobSpec, source_producer: Any, renew: Callable[[], Any] | None = None):
        super().__init__(source_producer, renew)
        self.spec = spec

    def emit(self) -> None:
        hb = Heartbeat(self.spec.source.alias, self.spec.target.alias, now_ms())
        try:
            self.producer.produce(HEARTBEATS_TOPIC, hb.record_value(), hb.record_key(), partition=0)
            self.producer.poll(0)
        except Exception as exc:
            if not self.renewed(exc):
                raise


class OffsetSyncWriter(Renewing):
    """Writes the syncs the workers decided; `flush()` before source offsets are committed."""

    def __init__(self, spec: JobSpec, producer: Any, renew: Callable[[], Any] | None = None):
        super().__init__(producer, renew)
        self.topic = offset_syncs_topic_name(spec)
        self.errors: list[str] = []
        self._fatal: Any = None  # a fatal error a delivery report told

    def _dr(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
            fatal = getattr(err, "fatal", None)
            if callable(fatal) and fatal():
                self._fatal = err

    def write(self, topic: str, partition: int, pairs: list[tuple[int, int]] | list[list[int]]) -> None:
        for up, down in pairs:
            sync = OffsetSync(topic, partition, up, down)
            try:
                self.producer.produce(
                    self.topic, sync.record_value(), sync.record_key(), partition=0, on_delivery=self._dr
                )
            except Exception as exc:
                if not self.renewed(exc):
                    raise
                self.errors.clear()

    def flush(self, timeout: float = 30.0) -> None:
        try:
            self.producer.flush(timeout)
        except Exception as exc:
            if not self.renewed(exc):
                raise
            self.errors.clear()  # this batch's syncs are lost: the next ones are written by the new producer
            return
        if self.errors:
            errors, self.errors = self.errors, []
            fatal, self._fatal = self._fatal, None
            if fatal is not None and self.renewed(RuntimeError(fatal)):
                return
            raise RuntimeError(f"offset syncs not written: {errors[0]}")


@dataclass(frozen=True)
class SyncsRead:
    """One read of the offset-syncs topic: syncs read, and whether it got to the topic's end."""

    count: int
    reached_end: bool


class CheckpointEmitter:
    """Reads offset syncs as they come, and emits checkpoints for the flow's consumer groups."""

    def __init__(
        self, spec: JobSpec, source_admin: Any, target_producer: Any, environ: Mapping[str, str] | None = None
    ):
        from confluent_kafka import Consumer

        self.spec = spec
        self.flow = spec.mirror_flow
        self.source_admin = source_admin
        self.environ = environ
        self._target_groups: Any = None  # the target's groups (sync.group_offsets), made on first use
        self._group_reader: GroupOffsetsReader | None = None  # the source's group offsets reader, chosen on first use
        self.producer = target_producer
        syncs_cluster = spec.source if spec.offset_syncs_on_source else spec.target
        self._syncs_consumer = Consumer(
            clients.consumer_config(syncs_cluster, spec, group=job_group(spec) + ".syncs", environ=environ)
        )
        self._syncs_topic = offset_syncs_topic_name(spec)
        self._syncs_next = -2  # the next offset sync to read (-2: from the beginning)
        self.store = OffsetSyncStore(read_to_end=False)
        self.checkpoint_store = CheckpointStore()
        self._checkpoints_loaded = False
        self._last_group_sync = 0.0
        self.emitted = 0
        self.read_at: dict[str, int] = {}  # group -> when its committed offsets were last read (epoch ms)
        self.rounds = 0  # checkpoint rounds acknowledged; `last_round` is the latest one's checkpoints
        self.last_round: list[CheckpointAck] = []
        self.checkpointed_at: dict[str, int] = {}  # group -> when its newest checkpoint was written (epoch ms)
        self.active_on_target: set[str] = set()  # groups sync.group_offsets left alone (consumers on the target)
        self.group_syncs: tuple[GroupSync, ...] = ()  # the last round's verdict on every group it read

    def update_spec(self, spec: JobSpec) -> None:
        self.spec = spec
        self.flow = spec.mirror_flow

    @property
    def target_groups(self) -> Any:
        """The target's consumer groups (MirrorKafka: an admin client of its own), made when `sync.group_offsets`
        first syncs a group: a flow that never does (the default) holds no client for it (an idle librdkafka client
        costs ~0.01 % of a core; docs/benchmarks.md, "Idle cost")."""
        if self._target_groups is None:
            self._target_groups = MirrorKafka(self.spec.target.client_config(self.environ), timeout=10.0)
        return self._target_groups

    @target_groups.setter
    def target_groups(self, groups: Any) -> None:
        self._target_groups = groups

    def close(self) -> None:
        if self._group_reader is not None:
            self._group_reader.close()
        try:
            self._syncs_consumer.close()
        except Exception:  # noqa: BLE001
            pass

    # --- offset syncs ---------------------------------------------------------------------
    def read_syncs(self, timeout: float = 5.0) -> SyncsRead:
        """Read new offset syncs up to the end of the topic; the first full read ends the replay.

        The consumer is assigned at the next unread sync on every call (and unassigned after it): librdkafka reports a
        partition's end once per position, so a consumer left at the end would never report it
        again while nothing new is written, and the read would wait its whole timeout (it did: 5 s
        of the driver's thread per checkpoint round, delaying every batch's end by as much)."""
        from confluent_kafka import TopicPartition

        if not self._checkpoints_loaded:  # MirrorCheckpointTask.start: the CheckpointStore first
            self._checkpoints_loaded = True
            self.load_checkpoints()
        self._syncs_consumer.assign([TopicPartition(self._syncs_topic, 0, self._syncs_next)])
        n = 0

        def add(m: Any) -> None:
            nonlocal n
            self._syncs_next = m.offset() + 1
            try:
                self.store.add(OffsetSync.deserialize(m.key(), m.value()))
                n += 1
            except RecordFormatError as exc:
                log.warning("ignoring a malformed offset sync at offset %d: %s", m.offset(), exc)

        def at_end(event: Any) -> None:
            self._syncs_next = max(self._syncs_next, event.offset())  # past any transaction markers

        try:
            pending = read_to_end(
                self._syncs_consumer,
                timeout,
                add,
                partitions=[(self._syncs_topic, 0)],
                on_eof=at_end,
                batch=10_000,
                poll_seconds=0.2,
            )
        finally:
            # Between two rounds nothing fetches: an assigned reader (END_READER: a fetch every 50 ms) cost
            # each idle flow ~20 fetch requests a second.
            self._syncs_consumer.unassign()
        if not pending and not self.store.read_to_end:
            self.store.mark_read_to_end()
        return SyncsRead(n, reached_end=not pending)

    # --- checkpoints ----------------------------------------------------------------------
    def source_group_offsets(self, timeout: float = 10.0) -> dict[str, dict[tuple[str, int], OffsetAndMetadata]]:
        """Every matching group's committed offsets on the source: one ListGroups, then the groups' offsets through
        the group offsets reader (adapters/group_offsets.py: batched where the cluster allows, else one request per
        group). A group that could not be read is left out of this round (logged at info)."""
        # Waited for longer than the request's own timeout: librdkafka then answers with the groups of the brokers
        # that answered and an error for each that did not (one hung broker lost the whole round when it raced it).
        listed = self.source_admin.list_consumer_groups(request_timeout=timeout).result(
            timeout + clients.ANSWER_GRACE_S
        )
        for error in listed.errors or ():
            log.info("a source broker did not list its consumer groups: %s", error)
        own = job_group(self.spec)
        groups = sorted(
            g.group_id for g in listed.valid if self.flow.groups.matches(g.group_id) and not g.group_id.startswith(own)
        )
        out: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
        for group, answer in self.group_reader.read(groups, timeout).items():
            self.read_at[group] = answer.read_at_ms  # MM2 takes the time before listConsumerGroupOffsets
            if answer.error is not None:
                log.info("cannot read offsets of group %r: %s", group, answer.error)
            elif answer.offsets:
                out[group] = dict(answer.offsets)
        return out

    @property
    def group_reader(self) -> GroupOffsetsReader:
        """The source's group offsets reader, chosen on first use (`choose_reader`: one ApiVersions request); a choice
        the probe could not make (the source did not answer it) is made again next round."""
        if self._group_reader is None:
            choice = choose_reader(
                self.spec.source.client_config(self.environ), self.source_admin, grace=clients.ANSWER_GRACE_S
            )
            log.info(
                "source group offsets of %s: %s reader (%s)",
                self.spec.flow,
                "batched" if choice.batched else "per-group",
                choice.why,
            )
            if not choice.settled:
                return choice.reader
            self._group_reader = choice.reader
        return self._group_reader

    @group_reader.setter
    def group_reader(self, reader: GroupOffsetsReader) -> None:
        self._group_reader = reader

    def checkpoints(
        self, group_offsets: Mapping[str, Mapping[tuple[str, int], OffsetAndMetadata | int]]
    ) -> list[Checkpoint]:
        """MirrorCheckpointTask.checkpoint: translated offsets, the upstream commit metadata kept."""
        out = []
        for group, offsets in sorted(group_offsets.items()):
            for (topic, partition), committed in sorted(offsets.items()):
                if isinstance(committed, int):
                    committed = OffsetAndMetadata(committed)
                remote = checkpoint_route(self.flow, topic)
                if remote is None:
                    continue
                downstream = self.store.translate_downstream(topic, partition, committed.offset)
                if downstream is None:
                    continue
                out.append(Checkpoint(group, remote, partition, committed.offset, downstream, committed.metadata))
        return out

    def load_checkpoints(self, timeout: float = 30.0) -> bool:
        """MirrorCheckpointTask.start: read the checkpoints already written (CheckpointStore) before the
        offset syncs; when that works, the sync replay keeps history (offsets older than the last
        replayed sync still translate) and the store keeps checkpoints monotonic across the restart."""
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        topic = self.flow.policy.checkpoints_topic(self.spec.source.alias)
        consumer = Consumer(
            clients.consumer_config(
                self.spec.target, self.spec, group=job_group(self.spec) + ".checkpoints", environ=self.environ
            )
        )
        found: list[Checkpoint] = []
        try:
            meta = consumer.list_topics(timeout=10)  # all topics: never auto-creates the checkpoints topic
            if topic in meta.topics and meta.topics[topic].error is None:
                parts = sorted(meta.topics[topic].partitions)
                consumer.assign([KafkaTopicPartition(topic, p, -2) for p in parts])

                def add(m: Any) -> None:
                    try:
                        cp = Checkpoint.deserialize(m.key(), m.value())
                        found.append(cp)
                        at = m.timestamp()[1]
                        if at > self.checkpointed_at.get(cp.consumer_group_id, 0):
                            self.checkpointed_at[cp.consumer_group_id] = at
                    except RecordFormatError as exc:
                        log.warning("ignoring a malformed checkpoint at offset %d: %s", m.offset(), exc)

                left = read_to_end(
                    consumer, timeout, add, partitions=[(topic, p) for p in parts], batch=10_000, poll_seconds=0.5
                )
                if left:
                    return False
            self.checkpoint_store.load(cp for cp in found if self.flow.groups.matches(cp.consumer_group_id))
            self.store.keep_history_during_replay()
            return True
        except Exception as exc:  # noqa: BLE001 - Kafka falls back to reading the syncs to the end first
            log.warning("cannot read %s; checkpoints start from the offset syncs alone: %s", topic, exc)
            return False
        finally:
            consumer.close()

    def emit(self) -> list[Checkpoint]:
        """One checkpoint round: read syncs, translate, write changed checkpoints; sync groups if due."""
        self.read_syncs()
        if not self.store.read_to_end:
            self.judge_groups(self.source_group_offsets())
            return []
        group_offsets = self.source_group_offsets()
        cps = self.checkpoints(group_offsets)
        topic = self.flow.policy.checkpoints_topic(self.spec.source.alias)
        # MirrorCheckpointTask.checkpointIsMoreRecent: never move a checkpoint backwards unless the
        # upstream group itself rewound; repeats are not re-emitted.
        changed = self.checkpoint_store.select(cps)
        acked: dict[int, int] = {}  # index in `changed` -> when the target acknowledged it (MM2's commitRecord)
        for i, cp in enumerate(changed):
            self.producer.produce(
                topic,
                cp.record_value(),
                cp.record_key(),
                partition=0,
                timestamp=self.read_at.get(cp.consumer_group_id, 0),  # 0: now
                on_delivery=lambda err, _msg, i=i: acked.__setitem__(i, now_ms()) if err is None else None,
            )
        if changed:
            left = self.producer.flush(15)
            if left:
                raise RuntimeError(f"{left} checkpoints not acknowledged")
            done = now_ms()
            for cp in changed:
                self.checkpointed_at[cp.consumer_group_id] = done
            self.emitted += len(changed)
            self.checkpoint_store.update(changed)
            self.last_round = [
                CheckpointAck(cp, max(0, acked.get(i, done) - self.read_at.get(cp.consumer_group_id, done)))
                for i, cp in enumerate(changed)
            ]
            self.rounds += 1
        if (
            self.spec.settings.sync.group_offsets
            and time.monotonic() - self._last_group_sync >= self.spec.settings.sync.group_offsets_interval_seconds
        ):
            self._last_group_sync = time.monotonic()
            self.sync_group_offsets(cps)
        self.judge_groups(group_offsets)
        return changed

    def judge_groups(self, group_offsets: Mapping[str, Mapping[tuple[str, int], OffsetAndMetadata]]) -> None:
        """Why each group read this round is (not) synced (mirror/group_sync.py), for the status record."""
        self.group_syncs = tuple(
            judge_group(
                group,
                {tp: om.offset for tp, om in offsets.items()},
                lambda topic: checkpoint_route(self.flow, topic),
                self.store.translate_downstream,
                lambda topic, partition: bool(self.store.syncs(topic, partition)),
                self.store.read_to_end,
                self.spec.settings.sync.group_offsets and group in self.active_on_target,
                self.checkpointed_at.get(group),
            )
            for group, offsets in sorted(group_offsets.items())
        )

    def sync_group_offsets(self, cps: list[Checkpoint]) -> list[str]:
        """Commit translated offsets to the same groups on the target (MM2's sync.group.offsets).

        The rule is `reconciler failover`'s (`plan_failover`): a group active on the target is left
        to its consumers, and offsets only move forward. Returns the groups whose offsets moved.

        In three steps, each after the one before it for every group: the groups' states (DescribeGroups,
        `GROUP_SYNCS_IN_FLIGHT` at a time), then the committed offsets of the idle ones, read together (the group
        offsets reader: batched where the target allows, adapters/group_offsets.py), then the commits. One group
        after another, up to three round trips each, a round of 10,000 groups took longer than the interval it
        runs in.
        """
        by_group: dict[str, dict[TopicPartition, int]] = {}
        for cp in cps:
            by_group.setdefault(cp.consumer_group_id, {})[TopicPartition(cp.topic, cp.partition)] = cp.downstream_offset
        groups = sorted(by_group)
        idle = [g for g, active in zip(groups, self._each(self._active_on_target, groups)) if not active]
        answers = self.target_groups.read_group_offsets(idle) if idle else {}  # an answer or an error per group
        commits: dict[str, dict[TopicPartition, int]] = {}
        for group in idle:
            answer = answers[group]
            if answer.error is not None:
                log.warning("cannot sync offsets of group %r to the target: %s", group, answer.error)
                continue
            committed = {TopicPartition(t, p): om.offset for (t, p), om in answer.offsets.items()}
            planned = plan_failover(group, by_group[group], committed, partitions_on_target=None).commits
            if planned:
                commits[group] = planned
        moved = self._each(lambda g: self._commit_on_target(g, commits[g]), sorted(commits))
        return [g for g, m in zip(sorted(commits), moved) if m]

    def _each(self, call: Callable[[str], bool], groups: list[str]) -> list[bool]:
        """`call` for each group, `GROUP_SYNCS_IN_FLIGHT` at a time (a round trip each, which the target's admin client
        carries concurrently)."""
        if len(groups) <= 1:
            return [call(g) for g in groups]
        with ThreadPoolExecutor(min(GROUP_SYNCS_IN_FLIGHT, len(groups)), thread_name_prefix="group-sync") as pool:
            return list(pool.map(call, groups))

    def _active_on_target(self, group: str) -> bool:
        """Whether `group` has consumers on the target (then sync.group_offsets leaves it alone; so does a group whose
        state cannot be read this round)."""
        try:
            active = self.target_groups.group_state(group).active
        except ClusterIOError as exc:
            log.warning("cannot sync offsets of group %s to the target: %s", group, exc)
            return True
        (self.active_on_target.add if active else self.active_on_target.discard)(group)
        return active

    def _commit_on_target(self, group: str, commits: Mapping[TopicPartition, int]) -> bool:
        try:
            self.target_groups.commit_offsets(group, commits)
            return True
        except ClusterIOError as exc:
            log.warning("cannot sync offsets of group %s to the target: %s", group, exc)
            return False
