"""What the benchmarks share: printing (`say`, `spread`), filling a topic (`fill`) and watching a remote topic fill
up (`TargetWatch`). One home for each, so every bench times and prints the same way."""

from __future__ import annotations

import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from reconciler import logs

VALUE = b"x" * 100


def say(msg: str) -> None:
    """A progress line, on stderr (stdout holds the report)."""
    print(msg, file=sys.stderr, flush=True)


def spread(values: list[float], fmt: str = "{:,.0f}") -> str:
    """`median [min-max]` of `values`, each formatted with `fmt`."""
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


def produce_all(p: Producer, topic: str, records: int, partitions: int | None = None, value: bytes = VALUE) -> None:
    """`records` records of `value` on `topic` (round-robin over `partitions` when given, else the partitioner's
    choice), waiting for room in the producer's queue; not flushed."""
    for i in range(records):
        while True:
            try:
                if partitions is None:
                    p.produce(topic, value)
                else:
                    p.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)


def backlog_producer(bootstrap: str) -> Producer:
    """The benches' backlog producer: 20-ms linger, 256 KB batches."""
    return Producer(logs.client_config({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 262144}))


class TargetWatch:
    """Watches a topic fill up to `n` records from a thread: when records first appeared (and how many), and when
    the last one landed. Complete only once `n` records have been READ BACK from the topic.

    Every `interval` s it reads the partitions' listed ends (ListOffsets: one request, no records read): cheap, and
    they move with every batch appended, so the first move is the first copied record and the last move the last
    batch. They are not counts: Tansu lists a partition's end as its last batch's base offset + 1 (one batch of 5
    records: 1), transaction markers take offsets too, and in three of twenty runs of bench/ratelimit.py the listed
    ends of a capped flow's topic added up to `n` about 10 s before its records were all there. So they only say
    when to look: once they reach `n`, or have been still for `settle` s, a reader (one consumer of every partition
    from the start, reading on from where it stopped: each record read once over the watch's life) reads to
    end-of-partition and counts the records. `n` read: the copy ended when the listed ends last moved (or, if they
    have not moved since a look found records missing, when the reader read the `n`-th). Listed ends of `n` or more
    with fewer records there: they are not to be trusted for this topic, and from then on the reader reads on every
    `interval` s and the copy ends when it has read the `n`-th record (timed by the read, not by the ends). A copy
    that never pauses is read back once, after its last record, outside the window timed."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        n: int,
        meter: Callable[[], Any] | None = None,
        interval: float = 0.05,
        settle: float = 0.5,
    ):
        self.bootstrap, self.topic = bootstrap, topic
        self.tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.n, self.interval, self.settle = n, interval, settle
        refresh = {"topic.metadata.refresh.interval.ms": 1000}  # the topic appears later: not cached as unknown
        group = f"bench-watch-{time.monotonic_ns()}"
        self.consumer = Consumer(logs.client_config({"bootstrap.servers": bootstrap, "group.id": group, **refresh}))
        self.reader = Consumer(
            logs.client_config(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": f"{group}-read",
                    "enable.partition.eof": True,
                    "enable.auto.commit": False,
                    "fetch.wait.max.ms": 50,
                    **refresh,
                }
            )
        )
        self.reader.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.first: tuple[float, int] | None = None
        self.last: float | None = None
        self.seen = 0  # the listed ends' sum at the last reading
        self.counted = 0  # records read back so far
        self.listed_early = False  # the listed ends said `n` while fewer records were there
        self._at_eof: set[int] = set()
        self._counted_at: float | None = None  # when the reader read the `n`-th record
        self._meter, self._started, self._window = meter, None, None  # the machine's CPU from first to last
        self._stop, self._closed = threading.Event(), False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _listed(self) -> int:
        try:
            return sum(max(self.consumer.get_watermark_offsets(tp, timeout=5)[1], 0) for tp in self.tps)
        except KafkaException:
            return 0

    def read_on(self, timeout: float = 10.0) -> int:
        """Reads on to end-of-partition on every partition (or for `timeout` s); the records read back so far. A
        partition's end is only ever taken from the records themselves, so the count can lag, never run ahead."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self._stop.is_set():
            msgs = self.reader.consume(100_000, self.interval)
            got = 0
            for m in msgs:
                err = m.error()
                if err is None:
                    got += 1
                    self._at_eof.discard(m.partition())
                elif err.code() == KafkaError._PARTITION_EOF:
                    self._at_eof.add(m.partition())
            self.counted += got
            if self.counted >= self.n and self._counted_at is None:
                self._counted_at = time.monotonic()
            if not msgs and len(self._at_eof) == len(self.tps):
                break
        return self.counted

    def _run(self) -> None:
        moved_at, checked_at, failed_at = 0.0, 0.0, -1.0
        while not self._stop.is_set():
            seen, now = self._listed(), time.monotonic()
            if seen != self.seen:
                moved_at, self.seen = now, seen
            if seen and self.first is None:
                self.first = (now, seen)
                self._started = self._meter() if self._meter else None
            look = seen >= self.n or (seen and now - max(moved_at, checked_at) >= self.settle)
            if self.listed_early or look:
                checked_at = now
                if self.read_on() >= self.n:
                    # The ends moved since the last look that found records missing: the last batch landed then.
                    # Else the records came without the ends moving: the read that found the last one times it.
                    trusted = not self.listed_early and moved_at > failed_at
                    self.last = moved_at if trusted else self._counted_at
                    self._window = self._started.window() if self._started is not None else None
                    return
                failed_at = now
                self.listed_early = self.listed_early or seen >= self.n
            self._stop.wait(self.interval)

    def wait(self, timeout: float, alive: Callable[[], bool] = lambda: True) -> None:
        deadline = time.monotonic() + timeout
        while self._thread.is_alive() and time.monotonic() < deadline:
            if not alive():
                raise RuntimeError(f"the job ended with {self.counted:,} of {self.n:,} records read back")
            self._thread.join(0.5)
        if self.last is None:
            raise RuntimeError(f"{self.counted:,} of {self.n:,} records read back after {timeout:.0f} s")

    def rate(self) -> float:
        """Records/s from the first records seen to the last (those seen at the first reading excluded)."""
        assert self.first is not None and self.last is not None
        t0, c0 = self.first
        return (self.n - c0) / max(1e-9, self.last - t0)

    def busy_pct(self) -> float:
        return self._window.busy_pct if self._window is not None else float("nan")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._thread.join(15)
        self.consumer.close()
        self.reader.close()
