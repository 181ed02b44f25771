"""The Kafka reads and writes MirrorClient needs on one cluster, and nothing else.

Kept thin so that `reconciler.mirror.mirror_client` stays pure: list topics, read a topic (all of
it, or its tail), describe a consumer group, read and commit its offsets.

Reading "to the end" stops at the end-of-partition event of a fetch rather than at the high
watermark from ListOffsets, which some brokers list below the true end (Tansu: engine/ends.py explains it,
docs/brokers.md), which would cut a read short.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from reconciler.adapters.connect_errors import ConnectionFailed, ErrorCollector, explain, list_topics, message
from reconciler.adapters.group_offsets import BatchedReader, GroupError, GroupOffsets, GroupOffsetsReader, choose_reader
from reconciler.adapters.read_to_end import read_to_end, reader_config
from reconciler.mirror.mirror_client import GroupState, RawRecord, TopicPartition
from reconciler.mirror.verify import PartitionDigests, record_digest

#: librdkafka's OFFSET_INVALID: the group has no committed offset for the partition.
_NO_OFFSET = -1001


class ClusterIOError(Exception):
    """A cluster could not be read or written; the message says which and why."""


def _reason(exc: KafkaException) -> str:
    err = exc.args[0] if exc.args else None
    return err.str() if isinstance(err, KafkaError) else str(exc)


class MirrorKafka:
    """One cluster, reached with librdkafka settings that already have secrets resolved."""

    def __init__(self, config: Mapping[str, str], timeout: float = 30.0, alias: str | None = None) -> None:
        self._config: dict[str, str | int | float | bool] = dict(config)
        self._timeout = timeout
        self._alias = alias
        self._errors = ErrorCollector()  # librdkafka's error callbacks: why a connection failed (TLS, SASL)
        admin_config: dict[str, Any] = {**self._config, "error_cb": self._errors}
        self._admin = AdminClient(admin_config)  # held for as long as its futures are awaited
        self._group_reader: GroupOffsetsReader | None = (
            None  # many groups' offsets (read_group_offsets), chosen on first use
        )

    def _failed(self, text: str) -> ClusterIOError:
        """The error of a failed admin call, after handing the client's queued log lines (why it failed) to its
        `logger` (shown with -v): an admin client's lines wait in its queue until it is polled. When librdkafka
        said why the cluster cannot be talked to (TLS, SASL), that is the error, naming the cluster."""
        cause = explain(self._errors, self._admin, self._protocol)
        if cause is not None:
            name = self._alias or "?"
            return ClusterIOError(message(name, str(self._config.get("bootstrap.servers", "")), cause))
        return ClusterIOError(text)

    @property
    def _protocol(self) -> str:
        return str(self._config.get("security.protocol", "PLAINTEXT"))

    # --- topics ---------------------------------------------------------------------------
    def topics(self) -> dict[str, int]:
        """Topic name -> partition count."""
        try:
            metadata = list_topics(self._admin, self._errors, self._timeout, self._protocol)
        except ConnectionFailed as exc:
            bootstrap = str(self._config.get("bootstrap.servers"))
            raise ClusterIOError(message(self._alias or "?", bootstrap, exc.cause)) from None
        except KafkaException as exc:
            raise self._failed(f"cannot list topics: {_reason(exc)}") from None
        return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}

    def read_all(self, topic: str, partitions: int) -> list[RawRecord]:
        """Every record of `topic`, partition by partition, each in log order."""
        return self._read(topic, self._starts(topic, partitions, tail=None))

    def read_tail(self, topic: str, partitions: int, per_partition: int) -> list[RawRecord]:
        """At least the last `per_partition` records of each partition, in log order."""
        return self._read(topic, self._starts(topic, partitions, tail=per_partition))

    def _consumer(self) -> Consumer:
        return Consumer(reader_config(self._config, f"reconciler-mirror-client-{uuid.uuid4().hex[:8]}"))

    def _starts(self, topic: str, partitions: int, tail: int | None) -> dict[int, int]:
        """Explicit start offsets (a logical 'beginning' costs librdkafka an extra half second)."""
        consumer = self._consumer()
        try:
            starts = {}
            for p in range(partitions):
                low, high = consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=self._timeout)
                starts[p] = low if tail is None else max(low, high - tail)
            return starts
        except KafkaException as exc:
            raise ClusterIOError(f"cannot read offsets of {topic}: {_reason(exc)}") from None
        finally:
            consumer.close()

    def _read(self, topic: str, starts: Mapping[int, int]) -> list[RawRecord]:
        if not starts:
            return []
        consumer = self._consumer()
        by_partition: dict[int, list[RawRecord]] = {p: [] for p in starts}

        def fail(err) -> None:
            raise ClusterIOError(f"cannot read {topic}: {err.str()}")

        try:
            consumer.assign([KafkaTopicPartition(topic, p, start) for p, start in starts.items()])
            pending = read_to_end(
                consumer,
                self._timeout,
                lambda msg: by_partition[msg.partition()].append((msg.key(), msg.value())),
                partitions=[(topic, p) for p in starts],
                on_error=fail,
            )
            if pending:
                raise ClusterIOError(
                    f"timed out after {self._timeout:.0f}s reading {topic} "
                    f"(partitions {sorted(p for _, p in pending)} did not reach their end)"
                )
        finally:
            consumer.close()
        return [r for p in sorted(by_partition) for r in by_partition[p]]

    # --- verify: one partition as digests, watermarks, an offset by time --------------------
    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(low, high) of a partition (high is a hint: below the true end on Tansu, engine/ends.py)."""
        consumer = self._consumer()
        try:
            return consumer.get_watermark_offsets(KafkaTopicPartition(topic, partition), timeout=self._timeout)
        except KafkaException as exc:
            raise ClusterIOError(f"cannot read offsets of {topic}-{partition}: {_reason(exc)}") from None
        finally:
            consumer.close()

    def log_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        """(log start, log end) of each partition as ListOffsets lists them: two admin requests per leader broker
        whatever the number of partitions (the end is a hint on Tansu, below the true end: engine/ends.py). A
        partition the broker answers with an error is left out."""
        from confluent_kafka.admin import OffsetSpec

        wanted = [KafkaTopicPartition(tp.topic, tp.partition) for tp in partitions]
        if not wanted:
            return {}
        listed: list[dict[TopicPartition, int]] = []
        for which in (OffsetSpec.earliest(), OffsetSpec.latest()):
            try:
                futures = self._admin.list_offsets({k: which for k in wanted}, request_timeout=self._timeout)
            except KafkaException as exc:
                raise self._failed(f"cannot list offsets: {_reason(exc)}") from None
            answers: dict[TopicPartition, int] = {}
            for k, future in futures.items():
                try:
                    answers[TopicPartition(k.topic, k.partition)] = future.result(self._timeout).offset
                except KafkaException:
                    continue  # e.g. a topic deleted since it was listed
            listed.append(answers)
        low, high = listed
        return {tp: (low[tp], high[tp]) for tp in low if tp in high}

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        """The first offset whose timestamp is at or after `timestamp_ms` (ListOffsets); None: none is."""
        consumer = self._consumer()
        try:
            found = consumer.offsets_for_times([KafkaTopicPartition(topic, partition, timestamp_ms)], self._timeout)
        except KafkaException as exc:
            raise ClusterIOError(f"cannot look up {topic}-{partition} by time: {_reason(exc)}") from None
        finally:
            consumer.close()
        offset = found[0].offset if found else -1
        return offset if offset >= 0 else None

    def read_digests(
        self, topic: str, partition: int, start: int, timeout: float, since_ms: int | None = None
    ) -> PartitionDigests:
        """Every record of one partition from `start` to its end, as (offset, digest) only; with `since_ms`, also
        the first offset whose timestamp is at or after it (ListOffsets by time, from the records themselves:
        Tansu answers that request with offset 0)."""
        out = PartitionDigests()
        offsets, digests = out.offsets, out.digests

        def visit(m) -> None:
            ts = m.timestamp()[1]
            offsets.append(m.offset())
            digests.append(record_digest(m.key(), m.value(), m.headers(), ts))
            if since_ms is not None and out.first_since is None and ts >= since_ms:
                out.first_since = m.offset()

        def fail(err) -> None:
            raise ClusterIOError(f"cannot read {topic}-{partition}: {err.str()}")

        consumer = self._consumer()
        try:
            consumer.assign([KafkaTopicPartition(topic, partition, start)])
            pending = read_to_end(
                consumer, timeout, visit, partitions=[(topic, partition)], on_error=fail, batch=10_000
            )
            if pending:
                raise ClusterIOError(f"timed out after {timeout:.0f}s reading {topic}-{partition} to its end")
        finally:
            consumer.close()
        return out

    # --- consumer groups ------------------------------------------------------------------
    def group_state(self, group: str) -> GroupState:
        try:
            description = self._admin.describe_consumer_groups([group])[group].result(self._timeout)
        except KafkaException as exc:
            if isinstance(exc.args[0], KafkaError) and exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                return GroupState(group, "DEAD", 0)
            raise self._failed(f"cannot describe consumer group {group!r}: {_reason(exc)}") from None
        return GroupState(group, description.state.name, len(description.members or ()))

    def group_states(self, groups: Sequence[str], in_flight: int = 32) -> dict[str, GroupState | GroupError]:
        """Many groups' states, each group's or why it could not be read: DescribeGroups in batches where the group
        offsets reader is the batched one and the cluster speaks DescribeGroups v5 (adapters/group_offsets.py), else
        `group_state` for each, `in_flight` at a time. A group DescribeGroups calls DEAD is asked again with
        `group_state` (librdkafka describes a KIP-848 group with ConsumerGroupDescribe, to which DescribeGroups says
        DEAD): a group the target does not know yet, rare once its offsets were synced."""
        reader = self._reader()
        if isinstance(reader, BatchedReader) and reader.describes:
            answers = reader.states(list(groups), self._timeout)
            again = [g for g in groups if isinstance(a := answers.get(g), GroupState) and a.state == "DEAD"]
        else:
            answers, again = {}, list(groups)
        if len(again) > 1:
            with ThreadPoolExecutor(min(in_flight, len(again)), thread_name_prefix="group-state") as pool:
                answers.update(zip(again, pool.map(self._state_or_error, again)))
        else:
            answers.update((g, self._state_or_error(g)) for g in again)
        return {g: answers.get(g, GroupError("not described")) for g in groups}

    def _state_or_error(self, group: str) -> GroupState | GroupError:
        try:
            return self.group_state(group)
        except ClusterIOError as exc:
            return GroupError(str(exc))

    def committed_offsets(self, group: str, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The group's committed offsets for `partitions` (absent where it has none)."""
        wanted = [KafkaTopicPartition(tp.topic, tp.partition) for tp in partitions]
        if not wanted:
            return {}
        failing = f"cannot read committed offsets of group {group!r}"
        result = self._offsets_call(self._admin.list_consumer_group_offsets, group, wanted, failing, failing)
        return {TopicPartition(tp.topic, tp.partition): tp.offset for tp in result if tp.offset != _NO_OFFSET}

    def read_group_offsets(self, groups: Sequence[str]) -> dict[str, GroupOffsets]:
        """Many groups' committed offsets, each group's answer or its error (adapters/group_offsets.py: batched where
        the cluster speaks OffsetFetch v8 and FindCoordinator v4, else one request per group; chosen on first use)."""
        return self._reader().read(list(groups), self._timeout)

    def _reader(self) -> GroupOffsetsReader:
        """The group offsets reader, chosen on first use (made again next time when the probe failed)."""
        reader = self._group_reader
        if reader is None:
            settings = {k: str(v) for k, v in self._config.items()}  # the librdkafka settings, as the probe reads them
            choice = choose_reader(settings, self._admin, timeout=min(self._timeout, 5.0))
            reader = choice.reader
            if choice.settled:
                self._group_reader = reader
        return reader

    def committed_offsets_of(
        self, groups: Sequence[str], partitions: Iterable[TopicPartition]
    ) -> dict[str, dict[TopicPartition, int]]:
        """Each group's committed offsets for `partitions` (absent where it has none), read together
        (`read_group_offsets`); raises ClusterIOError naming the groups that could not be read."""
        wanted = set(partitions)
        answers = self.read_group_offsets(groups)
        failed = [f"{g!r}: {a.error}" for g, a in sorted(answers.items()) if a.error is not None]
        if failed:
            raise ClusterIOError(f"cannot read committed offsets of group {'; '.join(failed)}")
        return {
            g: {tp: om.offset for (t, p), om in a.offsets.items() if (tp := TopicPartition(t, p)) in wanted}
            for g, a in answers.items()
        }

    def commit_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """AlterConsumerGroupOffsets; raises naming every partition the broker refused."""
        if not offsets:
            return
        wanted = [KafkaTopicPartition(tp.topic, tp.partition, offset) for tp, offset in sorted(offsets.items())]
        self._offsets_call(
            self._admin.alter_consumer_group_offsets,
            group,
            wanted,
            f"cannot commit offsets of group {group!r}",
            f"the broker refused offsets of group {group!r}",
        )

    # --- `reconciler failback --truncate` ---------------------------------------------------
    def delete_records(self, before: Mapping[TopicPartition, int]) -> dict[TopicPartition, str | None]:
        """DeleteRecords: every record of each partition before its offset (Kafka can only move a partition's
        start, never cut its tail). Per partition, None when done, else the broker's error (a broker without the
        request answers with one, e.g. UNSUPPORTED_VERSION)."""
        if not before:
            return {}
        wanted = [KafkaTopicPartition(tp.topic, tp.partition, o) for tp, o in sorted(before.items())]
        out: dict[TopicPartition, str | None] = {}
        try:
            futures = self._admin.delete_records(wanted, request_timeout=self._timeout)
        except (KafkaException, NotImplementedError, ValueError) as exc:
            return {tp: f"DeleteRecords not available: {exc}" for tp in before}
        for ktp, future in futures.items():
            tp = TopicPartition(ktp.topic, ktp.partition)
            try:
                future.result(self._timeout)
                out[tp] = None
            except KafkaException as exc:
                code = exc.args[0].code() if exc.args and hasattr(exc.args[0], "code") else None
                unsupported = code in (KafkaError._TRANSPORT, KafkaError.UNSUPPORTED_VERSION)
                out[tp] = _reason(exc) + (" (the broker does not take DeleteRecords)" if unsupported else "")
        return out

    def _offsets_call(self, call, group: str, partitions: list, failing: str, refused: str) -> list:
        """One group-offsets admin call; raises ClusterIOError for the request or for any refused partition."""
        try:
            result = call([ConsumerGroupTopicPartitions(group, partitions)])[group].result(self._timeout)
        except KafkaException as exc:
            raise self._failed(f"{failing}: {_reason(exc)}") from None
        failed = [f"{tp.topic}-{tp.partition}: {tp.error.str()}" for tp in result.topic_partitions if tp.error]
        if failed:
            raise ClusterIOError(f"{refused}: {'; '.join(failed)}")
        return result.topic_partitions
