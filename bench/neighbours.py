"""A flow beside its neighbours in one engine (issue 47): what bench/blast.py, bench/ratelimit.py and bench/scale.py
share to time it, one home each.

  PartitionWatch        partitions of remote topics filling up, each timed from its first records to its last
  poisoned_figures      records/s per partition of a flow with a poisoned partition against a healthy flow's, as
                        blast.py's stalled and refused scenarios and scale.py's poison phase print them
  fill, produce_on      a new topic and its backlog; a backlog on given partitions
  cap_verdicts          a rate-limited flow against its cap and its unlimited sibling against its solo rate, with
                        issue 47's targets (CAP_TOLERANCE, SIBLING_SHARE)

The targets: POISON_RATIO (the poisoned flow's other partitions at least 0.9x the healthy flow's records/s per
partition), CAP_TOLERANCE (the capped flow within 15 % of its cap) and SIBLING_SHARE (its sibling at least 0.8x its
rate alone). Nothing here asserts a time: the benches print the figures and the targets met or missed.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.common import VALUE, backlog_producer, produce_all, spread, tuned_producer
from reconciler import logs

POISON_RATIO = 0.9  # records/s per partition, the poisoned flow's other partitions / a healthy flow's: at least
CAP_TOLERANCE = 0.15  # a capped flow's records/s within this share of its cap
SIBLING_SHARE = 0.8  # an unlimited flow beside a capped one: at least this share of its records/s alone

Key = tuple[str, int]  # (topic, partition)


class PartitionWatch:
    """Watches partitions of remote topics fill up, each to its own end, from a thread: per partition, when its
    records were first seen (and its listed end then) and when its last one landed. As bench/deployed.py's
    TargetWatch, per partition: its high watermark every `interval` s (on Tansu the base offset of its last batch +
    1, so it moves with every batch but may stay below the end); once still for `settle` s, its true end is read
    (once per listed end).

    `expected`: (topic, partition) -> the end offset that says every record is there (the records, from offset 0,
    of a partition written by an at-least-once flow). `start`: the listed ends before the backlog (a partition
    that already holds records: its first records are those past this); none: 0 (a new remote topic)."""

    def __init__(
        self,
        bootstrap: str,
        expected: dict[Key, int],
        interval: float = 0.05,
        start: dict[Key, int] | None = None,
    ):
        self.bootstrap, self.expected, self.interval = bootstrap, dict(expected), interval
        self.start = {k: (start or {}).get(k, 0) for k in self.expected}
        self.settle = 0.5
        self.first: dict[Key, tuple[float, int]] = {}
        self.last: dict[Key, float] = {}
        self.seen: dict[Key, int] = dict(self.start)
        self.samples: list[tuple[float, int]] = []  # (monotonic time, listed ends of all partitions) each reading
        self.consumer = Consumer(
            logs.client_config(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": f"bench-watch-{time.monotonic_ns()}",
                    "topic.metadata.refresh.interval.ms": 1000,
                }
            )
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _true_end(self, key: Key, reported: int) -> int:
        c = Consumer(
            logs.client_config(
                {
                    "bootstrap.servers": self.bootstrap,
                    "group.id": f"bench-end-{time.monotonic_ns()}",
                    "enable.partition.eof": True,
                    "enable.auto.commit": False,
                }
            )
        )
        end, deadline = reported, time.monotonic() + 10
        try:
            c.assign([TopicPartition(key[0], key[1], max(reported - 1, 0))])
            while time.monotonic() < deadline:
                for m in c.consume(10_000, 0.5):
                    if m.error():
                        if m.error().code() == KafkaError._PARTITION_EOF:
                            return max(end, m.offset())
                    else:
                        end = max(end, m.offset() + 1)
            return end
        finally:
            c.close()

    def _run(self) -> None:
        moved_at: dict[Key, float] = {}
        checked: dict[Key, int] = {}  # the listed end at which a partition's true end was read short
        while not self._stop.is_set() and len(self.last) < len(self.expected):
            for key, n in self.expected.items():
                if key in self.last:
                    continue
                try:
                    seen = max(self.consumer.get_watermark_offsets(TopicPartition(*key), timeout=5)[1], 0)
                except KafkaException:
                    continue
                now = time.monotonic()
                if seen != self.seen.get(key, 0):
                    moved_at[key], self.seen[key] = now, seen
                if seen > self.start[key] and key not in self.first:
                    self.first[key] = (now, seen)
                # still, and not read short at this listed end already: its true end is read (once per still
                # spell: reading every partition's each round would slow the round and so every partition's times)
                still = seen > self.start[key] and now - moved_at.get(key, now) >= self.settle
                if still and seen < n and checked.get(key) != seen:
                    checked[key] = seen
                    still = self._true_end(key, seen) >= n
                else:
                    still = False
                if seen >= n or still:
                    self.last[key] = now if seen >= n else moved_at[key]
            self.samples.append((time.monotonic(), sum(self.seen.values())))
            self._stop.wait(self.interval)

    def copied_at(self, t: float) -> int:
        """The listed ends' sum at the last reading before monotonic time `t` (below the records by less than a
        producer batch per partition on Tansu): differences of it are records copied."""
        before = [n for at, n in self.samples if at <= t]
        return before[-1] if before else sum(self.start.values())

    def wait(self, timeout: float, alive: Callable[[], bool] = lambda: True) -> None:
        deadline = time.monotonic() + timeout
        while self._thread.is_alive() and time.monotonic() < deadline:
            if not alive():
                raise RuntimeError(f"the engine ended with {self._progress()}")
            self._thread.join(0.5)
        if len(self.last) < len(self.expected):
            raise RuntimeError(f"not complete after {timeout:.0f} s: {self._progress()}")

    def _progress(self) -> str:
        copied = sum(self.seen[k] - self.start[k] for k in self.expected)
        wanted = sum(n - self.start[k] for k, n in self.expected.items())
        done = f"{len(self.last)} of {len(self.expected)} partitions complete"
        return f"{copied:,} of {wanted:,} records copied (listed ends), {done}"

    def rates(self) -> dict[Key, float]:
        """Records/s of each partition, from its first records seen to its last (those first seen excluded)."""
        return {
            k: (self.expected[k] - self.first[k][1]) / max(1e-9, self.last[k] - self.first[k][0]) for k in self.expected
        }

    def rate(self) -> float:
        """Records/s of all the partitions together, from the first records seen on any to the last landed on any:
        the records landed after the reading that first saw records (those it saw excluded). Not each partition's
        own first records: a partition first seen later, most of its records there by then, would leave them out
        of a window that starts earlier (bench/scale.py, whose flows copy a partition's backlog in one burst)."""
        t0 = min(t for t, _ in self.first.values())
        seen = next((n for at, n in self.samples if at >= t0), sum(c for _, c in self.first.values()))
        total = sum(self.expected.values()) - seen
        return total / max(1e-9, max(self.last.values()) - t0)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(15)
        self.consumer.close()


def poisoned_figures(healthy: PartitionWatch, poisoned: PartitionWatch) -> dict[str, float]:
    """Records/s per partition of the poisoned flow's other partitions against the healthy flow's, each over its own
    time (from its first copied record to its last landed: the issue's harness, and bench/deployed.py's), and beside
    it the window both copy in (from the later's first record to the earlier's last), which moves with where each
    flow's batches fall: a second look, not the figure; and each flow's slowest partition. NaN where the flows did
    not overlap."""
    watches = {"healthy": healthy, "poisoned": poisoned}
    r: dict[str, float] = {}
    t0 = max(min(t for t, _ in w.first.values()) for w in watches.values())
    t1 = min(max(w.last.values()) for w in watches.values())
    r["overlap_s"] = t1 - t0
    for run, w in watches.items():
        n = len(w.expected)
        r[f"{run}_per_partition"] = w.rate() / n
        r[f"{run}_while_both_copy"] = (w.copied_at(t1) - w.copied_at(t0)) / (t1 - t0) / n if t1 > t0 else float("nan")
        r[f"{run}_slowest_partition"] = min(w.rates().values())
    r["ratio_per_partition"] = r["poisoned_per_partition"] / r["healthy_per_partition"]
    r["ratio_while_both_copy"] = r["poisoned_while_both_copy"] / (r["healthy_while_both_copy"] or float("nan"))
    r["ratio_slowest_partition"] = r["poisoned_slowest_partition"] / r["healthy_slowest_partition"]
    return r


def poisoned_line(r: dict[str, float]) -> str:
    """One repetition's figures of `poisoned_figures`, as a progress line."""
    return (
        f"records/s per partition: healthy flow {r['healthy_per_partition']:,.0f}, poisoned flow's other "
        f"partitions {r['poisoned_per_partition']:,.0f}: {r['ratio_per_partition']:.2f}x (while both copy, "
        f"{r['overlap_s']:.1f} s: {r['ratio_while_both_copy']:.2f}x; slowest partition "
        f"{r['ratio_slowest_partition']:.2f}x)"
    )


def fill(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    """A new topic of `partitions` and `records` 100-byte records round-robin over them, every one acknowledged."""
    admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap}))
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(60)
    p = backlog_producer(bootstrap)
    produce_all(p, topic, records, partitions)
    if p.flush(300):
        raise RuntimeError(f"records of {topic} not acknowledged")


def cap_verdicts(a_to_cap: list[float], b_to_solo: list[float]) -> list[str]:
    """The rate-limit figures' two ratios, each median [min-max], against issue 47's targets: the capped flow within
    CAP_TOLERANCE of its cap, its unlimited sibling at least SIBLING_SHARE of its rate alone."""
    a_ok = abs(statistics.median(a_to_cap) - 1) <= CAP_TOLERANCE
    b_ok = statistics.median(b_to_solo) >= SIBLING_SHARE
    lo, hi = 1 - CAP_TOLERANCE, 1 + CAP_TOLERANCE
    return [
        f"A / its cap:    {spread(a_to_cap, '{:.3f}')}  (target {lo:.2f}-{hi:.2f}: {'MET' if a_ok else 'MISSED'})",
        f"B beside / alone: {spread(b_to_solo, '{:.3f}')}  (target >= {SIBLING_SHARE:.2f}: "
        f"{'MET' if b_ok else 'MISSED'})",
    ]


def produce_on(bootstrap: str, keys: list[Key], n: int) -> None:
    """`n` 100-byte records on each of `keys` (topic, partition), round-robin, every one acknowledged."""
    p = tuned_producer(bootstrap)
    for _ in range(n):
        for topic, part in keys:
            while True:
                try:
                    p.produce(topic, VALUE, None, part)
                    break
                except BufferError:
                    p.poll(0.05)
    if p.flush(300):
        raise RuntimeError(f"records on {len(keys)} partitions not acknowledged")
