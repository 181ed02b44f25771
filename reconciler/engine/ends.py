"""The ends of a flow's source partitions: one reader (`PartitionEnds`) whose methods name the end they return.

A partition's "end" is three different numbers, and which one a caller gets is its method's name:

    listed_latest(tps)    ListOffsets(latest, read_committed) through the source admin: the end as the broker lists
                          it (the last stable offset on Apache Kafka and noida-db)
    listed_earliest(tps)  ListOffsets(earliest): the log start offset
    watermarks(tp)        (low, high) through the job's source consumer (librdkafka's query_watermark_offsets, asked
                          of the broker each time, never its cache)
    true_end(tp)          read to end-of-partition from just before the listed end: the offset the next record
                          produced will get

The Tansu quirk, explained here once (every other place in the code points here): Tansu answers ListOffsets(latest),
and so the high watermark, with the base offset of the partition's LAST BATCH + 1, not the offset after its last
record. Twenty records produced as two batches of ten list as 11 on Tansu and as 20 on Apache Kafka and noida-db
(docs/brokers.md; `tests/integration/test_partition_ends.py` shows each method's answer on both). So on Tansu:
`listed_latest` and `watermarks`' high are below the true end by less than one producer batch (lag read from them
reads low by that much, never negative), and they move whenever a batch is added (the idle gate's signal is a moved
end for that reason, not an end past the position); only `true_end` is the end on every broker, at the cost of a
consumer and a fetch. The worker's copy loop (engine/worker.py) never takes a listed end as a bound either: it reads
to end-of-partition, and its cached high watermark (`get_watermark_offsets(cached=True)`, the fetch responses') is
only what it reports.

A partition whose leader does not answer while the others do (a hung broker) is told apart (`read_latest`'s
`EndsRead.unanswered`): its flow holds it out of the batches (engine/unanswered.py) instead of waiting for it.

The requests themselves are behind a small protocol (`EndRequests`; `KafkaEndRequests` is the real one, built on
the flow's shared source admin and its OffsetStore's consumer: no client of its own but the short-lived probe of
`true_end`), so the rules above (partial failures, negative answers, where the read to the end starts) are tested
without a broker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciler.adapters.read_to_end import read_to_end
from reconciler.contract.spec import JobSpec, job_group
from reconciler.engine import clients
from reconciler.engine.tails import Fingerprint, fingerprint_of
from reconciler.engine.tasks import TP

log = logging.getLogger(__name__)

#: How long the driver's loop waits for the ends it lists before a batch (`listed_latest`'s default: the idle gate,
#: idle_gate.py's `work_waiting`): a source broker that does not answer holds the loop this long, not the lag side
#: channel's timeout (10 s a read); the gate then launches the batch, which finds out what is wrong.
GATE_TIMEOUT_S = 3.0

#: How long a `watermarks` read waits for the broker.
WATERMARKS_TIMEOUT_S = 10.0

#: The offset librdkafka answers (no error) for a partition whose leader did not answer a ListOffsets in time.
OFFSET_INVALID = -1001


class NoAnswer(TimeoutError):
    """A partition's leader did not answer a request within its timeout (the other partitions' may have)."""


def timed_out(exc: BaseException) -> bool:
    """Whether `exc` says the broker did not answer in time (`NoAnswer`, a future's timeout, librdkafka's _TIMED_OUT),
    rather than answering with an error."""
    if isinstance(exc, TimeoutError):
        return True
    err = exc.args[0] if exc.args else None
    code = getattr(err, "code", None)
    if not callable(code):
        return False
    from confluent_kafka import KafkaError

    return bool(code() in (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT))


@dataclass(frozen=True)
class EndsRead:
    """One read of the source's listed ends: each partition's end that was answered, and the partitions whose leader
    did not answer in time, each with the error (the others' answers are good: engine/unanswered.py)."""

    ends: dict[TP, int] = field(default_factory=dict)
    unanswered: dict[TP, str] = field(default_factory=dict)


class EndRequests(Protocol):
    """The broker requests behind `PartitionEnds` (`KafkaEndRequests`, or a test's fake)."""

    def list_offsets(self, partitions: Sequence[TP], earliest: bool, timeout: float) -> Mapping[TP, int | Exception]:
        """One ListOffsets(latest, or earliest) request per leader, read_committed: each partition's answer, or the
        error it got (`NoAnswer`: its leader did not answer), within `timeout` seconds (and clients.py's `ANSWER_GRACE_S`) in all."""
        ...

    def watermarks(self, tp: TP, timeout: float) -> tuple[int, int]:
        """(low, high) of a partition, asked of the broker."""
        ...

    def read_end(self, tp: TP, start: int, timeout: float) -> int | None:
        """Read the partition from `start` to end-of-partition: the offset after the last record read, or the
        end-of-partition event's offset (past any transaction marker), the larger; None: no end within `timeout`."""
        ...

    def read_ends(self, starts: Mapping[TP, int], timeout: float) -> Mapping[TP, int]:
        """`read_end` of every partition of `starts` (each from its start) in one read, one consumer: each partition's
        end that was reached within `timeout` in all; the others are left out."""
        ...

    def read_at(self, tp: TP, offsets: Sequence[int], timeout: float) -> Mapping[int, Fingerprint | None]:
        """The fingerprint of the record at each of `offsets` (engine/tails.py), each offset between the log start
        and the high watermark; one not answered within `timeout` is left out."""
        ...

    def read_first(self, target: bool, wanted: Mapping[TP, int], timeout: float) -> dict[TP, Fingerprint | None]:
        """The fingerprint of the first record at or after the offset `wanted` names for each partition of the source
        (or, `target`, of the target), one consumer for all (read_committed); None where the broker answers the offset
        is out of range; a partition that answers nothing within `timeout` is left out (Tansu answers a fetch past the
        end with nothing)."""
        ...

    def read_run(
        self, target: bool, topic: str, partition: int, start: int, stop: int | None, count: int, timeout: float
    ) -> list[Fingerprint]:
        """The fingerprints of the records of a partition of the source (or, `target`, of the target: the copies)
        from offset `start` on, in order: at most `count`, and below offset `stop` where given (read_committed)."""
        ...


class PartitionEnds:
    """The source partitions' ends, each method named by the end it returns (see the module's docstring for what
    each means on Tansu and on Apache Kafka / noida-db). `listed_*` are safe from any thread (the admin's futures);
    `watermarks` and `true_end` use the driver's consumer and belong to the driver's loop."""

    def __init__(self, requests: EndRequests):
        self.requests = requests

    def listed_latest(self, partitions: Iterable[TP], timeout: float = GATE_TIMEOUT_S) -> dict[TP, int]:
        """ListOffsets(latest, read_committed), one request per leader, `timeout` seconds in all: the last stable
        offset on Apache Kafka and noida-db; on Tansu its last batch's base offset + 1, below the true end by less
        than a batch, moved by every new batch. A partition that failed is left out (logged); all failed: raises."""
        return self._listed(partitions, False, timeout).ends

    def read_latest(self, partitions: Iterable[TP], timeout: float = GATE_TIMEOUT_S) -> EndsRead:
        """`listed_latest`, and which partitions' leader did not answer within `timeout` (`EndsRead.unanswered`)
        while the others answered. All failed: raises."""
        return self._listed(partitions, False, timeout)

    def listed_earliest(self, partitions: Iterable[TP], timeout: float = GATE_TIMEOUT_S) -> dict[TP, int]:
        """ListOffsets(earliest), as `listed_latest`: the log start offset (the same on every broker)."""
        return self._listed(partitions, True, timeout).ends

    def watermarks(self, tp: TP) -> tuple[int, int]:
        """(low, high) asked of the broker through the consumer (two ListOffsets requests, not librdkafka's cache):
        low is the log start; high the last stable offset on Apache Kafka and noida-db, on Tansu the last batch's
        base offset + 1 (as `listed_latest`)."""
        return self.requests.watermarks(tp, WATERMARKS_TIMEOUT_S)

    def true_end(self, tp: TP, timeout: float = 5.0) -> int | None:
        """The offset the next record produced will get, on every broker: `watermarks`, then a read from just
        before the high watermark to end-of-partition (on Tansu the high watermark is inside the last batch).
        None: the end was not reached within `timeout`."""
        low, high = self.watermarks(tp)
        end = self.requests.read_end(tp, max(low, high - 1), timeout)
        return None if end is None else max(high, end)

    def true_ends(self, listed: Mapping[TP, tuple[int, int]], timeout: float = 5.0) -> dict[TP, int]:
        """`true_end` of many partitions in one read, given each one's listed (log start, end) (`listed_earliest`,
        `listed_latest`): every partition read from just before its listed end to end-of-partition by one consumer,
        `timeout` seconds in all, however many partitions (issue 47: a consumer and two requests each, one partition
        after another, held a flow of 2,500 partitions ~3 minutes). A partition whose end was not reached within
        `timeout` is left out (not known), and so is every one when the read fails (both logged)."""
        if not listed:
            return {}
        starts = {tp: max(low, high - 1) for tp, (low, high) in listed.items()}
        try:
            got = self.requests.read_ends(starts, timeout)
        except Exception as exc:  # noqa: BLE001 - not known: the caller asks another time
            log.info("cannot read the true ends of %d partitions: %s", len(starts), exc)
            return {}
        if len(got) < len(starts):
            log.info(
                "the true ends of %d of %d partitions not read within %g s",
                len(starts) - len(got),
                len(starts),
                timeout,
            )
        return {tp: max(listed[tp][1], end) for tp, end in got.items() if tp in listed}

    def records_at(self, tp: TP, offsets: Iterable[int], timeout: float = 10.0) -> dict[int, Fingerprint | None]:
        """What the source holds now at `offsets` (issue 46: a tail read back): each offset's record's fingerprint
        (engine/tails.py), None where it holds none (outside the log start and the high watermark, or the offset is a
        marker's); an offset not answered within `timeout` is left out (not known)."""
        low, high = self.watermarks(tp)
        wanted = sorted(set(offsets))
        if any(o >= high for o in wanted):  # on Tansu the high watermark is below the end by up to a batch
            end = self.true_end(tp)
            high = max(high, end) if end is not None else high
        out: dict[int, Fingerprint | None] = {o: None for o in wanted if not low <= o < high}
        inside = [o for o in wanted if low <= o < high]
        if inside:
            out.update(self.requests.read_at(tp, inside, timeout))
        return out

    def records_first(self, wanted: Mapping[TP, int], timeout: float = 5.0) -> dict[TP, Fingerprint | None]:
        """What the source holds now at one offset of each partition (`wanted`), read together: each record's
        fingerprint, None where the offset is at or past the partition's end or holds none (a marker's); a
        partition not answered is left out."""
        if not wanted:
            return {}
        got = self.requests.read_first(False, wanted, min(timeout, 2.0))
        out = {tp: (fp if fp is not None and fp.offset == wanted[tp] else None) for tp, fp in got.items()}
        for tp in [tp for tp in wanted if tp not in got]:  # nothing answered: the offset is at or past the end?
            end = self.true_end(tp)  # (not the listed end: on Tansu it is below the end by up to a batch)
            if end is not None and wanted[tp] >= end:
                out[tp] = None
        return out

    def copies_first(self, wanted: Mapping[TP, int], timeout: float = 10.0) -> dict[TP, Fingerprint]:
        """The records of the target at one offset of each remote partition (`wanted`: (remote topic, partition) ->
        offset), read together: each one's fingerprint (its offset the target's); one not there is left out."""
        if not wanted:
            return {}
        got = self.requests.read_first(True, wanted, timeout)
        return {tp: fp for tp, fp in got.items() if fp is not None and fp.offset == wanted[tp]}

    def records_from(self, tp: TP, start: int, stop: int, timeout: float = 10.0) -> list[Fingerprint]:
        """The fingerprints of the source's records of `tp` from offset `start` up to `stop` (excluded) or its high
        watermark, in order (a tail read back record by record, issue 46)."""
        end = self.true_end(tp)
        stop = min(stop, end) if end is not None else stop
        if stop <= start:
            return []
        return self.requests.read_run(False, tp[0], tp[1], start, stop, stop - start, timeout)

    def copies_from(
        self, remote: str, partition: int, start: int, count: int, timeout: float = 10.0
    ) -> list[Fingerprint]:
        """The fingerprints of at most `count` records of the remote topic's partition on the target, from offset
        `start` on, in order (read_committed): the copies a tail read back is compared with (issue 46)."""
        if count <= 0:
            return []
        return self.requests.read_run(True, remote, partition, start, None, count, timeout)

    def _listed(self, partitions: Iterable[TP], earliest: bool, timeout: float) -> EndsRead:
        wanted = sorted(set(partitions))
        if not wanted:
            return EndsRead()
        out: dict[TP, int] = {}
        failed: list[str] = []
        unanswered: dict[TP, str] = {}
        for tp, answer in self.requests.list_offsets(wanted, earliest, timeout).items():
            if isinstance(answer, Exception):
                failed.append(f"{tp[0]}[{tp[1]}]: {answer}")
                if timed_out(answer):
                    unanswered[tp] = str(answer) or f"no answer within {timeout:g} s"
            elif answer >= 0:
                out[tp] = answer
        if failed and not out:
            raise RuntimeError(f"cannot read the source's end offsets: {failed[0]}")
        for f in failed:
            log.info("cannot read the end offset of %s", f)
        return EndsRead(out, unanswered)


class KafkaEndRequests:
    """`EndRequests` over confluent_kafka: ListOffsets through `admin` (the engine's shared source admin), the
    watermarks through `consumer()` (the flow's OffsetStore's source consumer), the read to the end with a probe
    consumer made for each read (group: the job's + ".probe"; it assigns, never joins nor commits)."""

    def __init__(
        self, spec: JobSpec, admin: Any, consumer: Callable[[], Any], environ: Mapping[str, str] | None = None
    ):
        self.spec, self.admin, self.consumer, self.environ = spec, admin, consumer, environ

    def list_offsets(self, partitions: Sequence[TP], earliest: bool, timeout: float) -> dict[TP, int | Exception]:
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        which = OffsetSpec.earliest() if earliest else OffsetSpec.latest()
        futures = self.admin.list_offsets(
            {TopicPartition(t, p): which for t, p in partitions},
            isolation_level=IsolationLevel.READ_COMMITTED,
            request_timeout=timeout,
        )
        deadline = time.monotonic() + timeout + clients.ANSWER_GRACE_S  # librdkafka answers each by `timeout`
        out: dict[TP, int | Exception] = {}
        for tp, future in futures.items():
            try:
                offset = future.result(timeout=max(0.1, deadline - time.monotonic())).offset
            except Exception as exc:  # noqa: BLE001 - e.g. a topic deleted since the last refresh
                out[(tp.topic, tp.partition)] = exc
                continue
            # its leader did not answer in time (librdkafka says so with this offset, not an error)
            no_answer = NoAnswer(f"its leader did not answer within {timeout:g} s")
            out[(tp.topic, tp.partition)] = no_answer if offset == OFFSET_INVALID else offset
        return out

    def watermarks(self, tp: TP, timeout: float) -> tuple[int, int]:
        from confluent_kafka import TopicPartition

        return self.consumer().get_watermark_offsets(TopicPartition(*tp), timeout=timeout)

    def read_end(self, tp: TP, start: int, timeout: float) -> int | None:
        return self.read_ends({tp: start}, timeout).get(tp)

    def read_ends(self, starts: Mapping[TP, int], timeout: float) -> dict[TP, int]:
        from confluent_kafka import Consumer, TopicPartition

        if not starts:
            return {}
        group = job_group(self.spec) + ".probe"
        config = clients.consumer_config(self.spec.source, self.spec, group=group, environ=self.environ)
        probe = Consumer(config)
        ends = dict(starts)

        def reached(tp: TP, offset: int) -> None:
            if tp in ends:
                ends[tp] = max(ends[tp], offset)

        try:
            probe.assign([TopicPartition(t, p, o) for (t, p), o in sorted(starts.items())])
            pending = read_to_end(
                probe,
                timeout,
                lambda m: reached((m.topic(), m.partition()), m.offset() + 1),
                partitions=list(starts),
                on_eof=lambda m: reached((m.topic(), m.partition()), m.offset()),
                batch=500,
            )
            return {tp: end for tp, end in ends.items() if tp not in pending}
        finally:
            probe.close()

    def read_first(self, target: bool, wanted: Mapping[TP, int], timeout: float) -> dict[TP, Fingerprint | None]:
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        cluster = self.spec.target if target else self.spec.source
        config = clients.probe_consumer_config(cluster, self.spec, job_group(self.spec) + ".probe", self.environ)
        probe = Consumer(config)
        out: dict[TP, Fingerprint | None] = {}
        deadline = time.monotonic() + timeout
        out_of_range = (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET)
        try:
            probe.assign([TopicPartition(t, p, o) for (t, p), o in wanted.items()])
            while len(out) < len(wanted) and time.monotonic() < deadline:
                for m in probe.consume(500, min(0.5, max(0.01, deadline - time.monotonic()))):
                    tp = (m.topic() or "", m.partition() or 0)
                    if tp not in wanted or tp in out:
                        continue
                    err = m.error()
                    if err is not None:
                        if err.code() in out_of_range:
                            out[tp] = None  # past the end (the broker lost it): no record there
                    elif (m.offset() or 0) >= wanted[tp]:
                        out[tp] = fingerprint_of(m)
            return out
        finally:
            probe.close()

    def read_run(
        self, target: bool, topic: str, partition: int, start: int, stop: int | None, count: int, timeout: float
    ) -> list[Fingerprint]:
        from confluent_kafka import Consumer, TopicPartition

        cluster = self.spec.target if target else self.spec.source
        config = clients.consumer_config(
            cluster, self.spec, group=job_group(self.spec) + ".probe", environ=self.environ
        )
        probe = Consumer(config)
        out: list[Fingerprint] = []
        deadline = time.monotonic() + timeout
        try:
            probe.assign([TopicPartition(topic, partition, start)])
            while len(out) < count and time.monotonic() < deadline:
                for m in probe.consume(min(500, count - len(out)), min(0.5, max(0.01, deadline - time.monotonic()))):
                    if m.error() is not None or m.topic() != topic or m.partition() != partition:
                        continue
                    off = m.offset() or 0
                    if stop is not None and off >= stop:
                        return out
                    if off >= start and len(out) < count:
                        out.append(fingerprint_of(m))
                if out and stop is not None and out[-1].offset >= stop - 1:
                    break
            return out
        finally:
            probe.close()

    def read_at(self, tp: TP, offsets: Sequence[int], timeout: float) -> dict[int, Fingerprint | None]:
        from confluent_kafka import Consumer, TopicPartition

        # small fetches: one record is wanted at each offset, not the megabytes after it
        config = clients.probe_consumer_config(
            self.spec.source, self.spec, job_group(self.spec) + ".probe", self.environ
        )
        probe = Consumer(config)
        out: dict[int, Fingerprint | None] = {}
        deadline = time.monotonic() + timeout
        try:
            for offset in offsets:
                probe.assign([TopicPartition(tp[0], tp[1], offset)])
                while time.monotonic() < deadline:
                    m = probe.poll(min(0.5, max(0.01, deadline - time.monotonic())))
                    if m is None or m.error() is not None or (m.topic(), m.partition()) != tp:
                        continue
                    off = m.offset() or 0
                    if off >= offset:  # past it: no record there now (a marker's offset)
                        out[offset] = fingerprint_of(m) if off == offset else None
                        break
                probe.unassign()
            return out
        finally:
            probe.close()
