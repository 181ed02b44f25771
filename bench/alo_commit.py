"""What an at-least-once progress commit costs the task that makes it (issue 21).

    python bench/alo_commit.py [--commits 300] [--partitions 4 64]

Starts a fresh Tansu broker on loopback, creates a topic per partition count, and from a consumer
set up as the job's worker consumer (assign, group.id, no subscription) commits next offsets for
every partition: synchronously (what the task waits for: one OffsetCommit round trip) and
asynchronously (the call alone, then the wait for all of them to be answered). Prints p50/p95/p99
in milliseconds and what a commit every round would cost a task at ROUND_S (0.1 s) and at 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from reconciler import logs  # noqa: E402
from reconciler.dev.brokers import free_port, start_broker, stop_pid  # noqa: E402


def pct(samples: list[float], q: int) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * q / 100))]


def measure(bootstrap: str, partitions: int, commits: int) -> dict[str, float]:
    topic = f"commit-{partitions}"
    admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap}))
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(15)
    answered: list[int] = []
    c = Consumer(
        logs.client_config(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-{topic}",
                "enable.auto.commit": False,
                "on_commit": lambda err, tps: answered.append(1),
            }
        )
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    sync_ms: list[float] = []
    for i in range(commits):
        offsets = [TopicPartition(topic, p, i + 1) for p in range(partitions)]
        t = time.perf_counter()
        c.commit(offsets=offsets, asynchronous=False)
        sync_ms.append((time.perf_counter() - t) * 1000)
    answered.clear()
    call_ms: list[float] = []
    t0 = time.perf_counter()
    for i in range(commits):
        offsets = [TopicPartition(topic, p, commits + i + 1) for p in range(partitions)]
        t = time.perf_counter()
        c.commit(offsets=offsets, asynchronous=True)
        call_ms.append((time.perf_counter() - t) * 1000)
    while len(answered) < commits and time.perf_counter() - t0 < 60:
        c.poll(0.01)
    all_async_ms = (time.perf_counter() - t0) * 1000
    got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    c.close()
    assert all(tp.offset == 2 * commits for tp in got), got
    return {
        "sync_p50_ms": statistics.median(sync_ms),
        "sync_p95_ms": pct(sync_ms, 95),
        "sync_p99_ms": pct(sync_ms, 99),
        "async_call_p50_ms": statistics.median(call_ms),
        "async_call_p99_ms": pct(call_ms, 99),
        "async_all_answered_per_commit_ms": all_async_ms / commits,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commits", type=int, default=300)
    ap.add_argument("--partitions", type=int, nargs="+", default=[4, 64])
    args = ap.parse_args()
    port = free_port()
    broker = start_broker("127.0.0.1", port, log_path=Path(tempfile.mkdtemp()) / "tansu.log")
    try:
        for n in args.partitions:
            r = measure(broker.bootstrap, n, args.commits)
            share_01 = r["sync_p50_ms"] / 100 * 100
            share_1 = r["sync_p50_ms"] / 1000 * 100
            print(
                f"{n} partitions, {args.commits} commits: sync p50 {r['sync_p50_ms']:.2f} ms, "
                f"p95 {r['sync_p95_ms']:.2f}, p99 {r['sync_p99_ms']:.2f}; async call p50 "
                f"{r['async_call_p50_ms']:.3f} ms, p99 {r['async_call_p99_ms']:.3f}, answered "
                f"{r['async_all_answered_per_commit_ms']:.2f} ms per commit; a sync commit every "
                f"0.1-s round costs the task {share_01:.1f}% of its time, every 1 s {share_1:.2f}%"
            )
    finally:
        if broker.pid:
            stop_pid(broker.pid)


if __name__ == "__main__":
    main()
