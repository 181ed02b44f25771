"""What one target costs at an organization's size: thousands of topics and partitions, tens of thousands of groups.

    python bench/scale.py                               # 1,000 topics, 5,000 partitions, 20,000 groups, 2 sources
    python bench/scale.py --topics 100 --partitions 5 --groups 2000 --repeat 3   # a smaller run

Starts three fresh Tansu brokers on loopback (sources `a` and `b`, target `hub`), each behind a counting relay
(bench/kafka_wire.py: the broker advertises the relay, so every request of every client crosses it). Behind `a`'s
relay, from the start, a `LeaderRelay` gives partition --partitions - 1 of its first topic a leader of its own (a
second node, itself behind a counting relay: its requests count too), which answers like the broker until the
poison phase. Half the topics (`a00000`..., `b00000`...) on each source, --partitions each, --records-per-partition
records each, and --groups consumer groups (half on each source), each with a committed offset on one partition of
one topic. The topology: two flows, `a -> hub` and `b -> hub`, each its source's generated topics (full-match
includes, so the phases' staged topics wait until released) and every group, the local deployer (one engine).

Then, as a user runs them (the CLI in a new process each time), --repeat times each:

  validate   `reconciler validate DIR`: seconds
  plan       `reconciler plan DIR` against the live clusters: seconds, and the requests it sent to the three
             brokers, by kind (the relays' counts)
  apply      once: `reconciler apply DIR --auto-approve`, then the seconds until every record is on the target
             (the target's record count, read back in full) and until every group has a translated offset there
  checkpoint once caught up: --checkpoint-sample groups spread over all move (a few new records on their
             partitions, copied; then each group committed at its partition's end on its source): the seconds from
             each commit to the round of reads (the target's group offsets, 500 in flight) that saw it moved on the
             target, median/p95/max, against checkpoints.interval_seconds and sync.group_offsets_interval_seconds
  idle       once caught up, --windows windows of --idle-seconds: the engine's CPU (all its processes, JVM and
             Python workers, those that start or end inside a window included: /proc of every process whose
             environment names the engine) as % of one core, and its proportional set size (PSS)
  drift      once caught up, `reconciler drift DIR` and `reconciler status DIR` (the control plane on the running
  status    engine, issue 47: "drift and status likewise"), --repeat times each: seconds, requests on the wire
             (less the engine's own over as long right after) and drift's exit code

and after the idle windows (a stalled leader would weigh on them), on the same engine, each on by default:

  poison     (--no-poison to skip) the poisoned partition's leader stops answering (its connections stay open,
             nothing comes back; --poison-records records written to it wait in their producer, as a hung leader
             takes none). Then --repeat times, a backlog of --poison-records records lands at once on every
             partition of the first --poison-topics topics of `a` but the poisoned one (its topic's others among
             them) and on as many of `b`'s: records/s per partition of `a`'s healthy partitions against `b`'s (the
             healthy flow, same engine, same moment), each flow from its first copied record to its last landed
             (bench/neighbours.py `PartitionWatch`, as bench/blast.py times partitions), the ratio (target >= 0.9),
             the same while both copy and for each flow's slowest partition, and the seconds the backlog took to
             write (the engine copies as it lands: a write slower than the copy would time the producer). Then
             the leader answers again: the seconds until the poisoned partition's records are all on the target.
  ratelimit  (--no-ratelimit to skip) flow `a` gets `rate_limit: {records_per_second: --cap}` by `reconciler
             apply` (its output printed: the spec handed to the running flow, no restart). Then --repeat times: a
             new topic of `b` with --sibling-backlog records, released to its flow by an apply (its topic added to
             the includes; hot): `b`'s records/s alone; then a new topic of `a` with --cap x --cap-seconds records,
             released, and once `a` copies it another of `b` with --sibling-backlog, released (each flow finds a new
             topic at its own next refresh: released at once, `b`'s copy could end before `a`'s began): `a`'s
             records/s against its cap (target within 15 %) and `b`'s against its own alone (target >= 0.8x), each
             timed by bench/common.py `TargetWatch` (every record read back), and the share of `b`'s copy made
             while `a` copied (1.0: all of it). The backlogs are written before their release, so the copy is timed
             on records all there, not on their producer. The cap stays (no later phase copies on `a`).
  every record: each partition of every source topic read back on its source and on the target; the partitions
             short printed, else that every record is there.

The brokers hold every record in memory (Tansu's memory storage): at the defaults the phases add about 5 million
records to `a`, 9 million to `b` and their 14 million copies to `hub` (--poison-records, --sibling-backlog and
--cap-seconds size them).

Prints each figure's median and spread (min-max), with the load average at each repetition of a phase.
Memory per partition and per group: bench/curves.py. The phases at small size, alone: bench/blast.py (poison,
refused, fairness) and bench/ratelimit.py.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # noqa: E402

import reconciler.deployers.instance as instance  # noqa: E402
from bench.common import TargetWatch, pss_mb, say, spread, stop_engines, tuned_producer  # noqa: E402
from bench.deployed import deployer_alive  # noqa: E402
from bench.kafka_wire import LeaderRelay, RequestCounter, api_name  # noqa: E402
from bench.neighbours import (  # noqa: E402
    POISON_RATIO,
    PartitionWatch,
    cap_verdicts,
    fill,
    poisoned_figures,
    poisoned_line,
    produce_on,
)
from reconciler import logs  # noqa: E402
from reconciler.dev.brokers import Broker, free_port, start_broker, stop_pid  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
Alive = Callable[[], bool]  # is the engine still running
SOURCES = ("a", "b")
TARGET = "hub"


@dataclass
class Cluster:
    """A broker behind a counting relay (`relay`, its bootstrap). With `leader`: a `LeaderRelay` between the two,
    whose second node (the poisoned partition's leader) has a counting relay of its own in front (`more`)."""

    alias: str
    broker: Broker
    relay: RequestCounter
    leader: LeaderRelay | None = None
    more: tuple[RequestCounter, ...] = ()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.relay.port}"

    def counts(self) -> Counter[int]:
        total: Counter[int] = Counter()
        for r in (self.relay, *self.more):
            total.update(r.counts())
        return total

    def reset(self) -> None:
        for r in (self.relay, *self.more):
            r.reset()

    def close(self) -> None:
        for r in (self.relay, *self.more):
            r.close()
        if self.leader is not None:
            self.leader.close()


def start_cluster(alias: str, work: Path, poisoned: frozenset[tuple[str, int]] = frozenset()) -> Cluster:
    """A Tansu broker advertising a counting relay in front of it. `poisoned`: partitions led by a node of their own
    that can be made to stop answering (a `LeaderRelay` behind the counting relay, there from the start: while it
    answers, the clients see nothing but that partition's connection; its requests are counted too)."""
    relay_port, broker_port = free_port(), free_port()
    if not poisoned:
        relay = RequestCounter(relay_port, ("127.0.0.1", broker_port))
        broker = start_broker("127.0.0.1", broker_port, work / f"{alias}.log", advertised=("127.0.0.1", relay.port))
        return Cluster(alias, broker, relay)
    leader = LeaderRelay(("127.0.0.1", broker_port), set(poisoned))
    relay = RequestCounter(relay_port, ("127.0.0.1", leader.port))
    second = RequestCounter(0, ("127.0.0.1", leader.leader_port))
    leader.advertised_leader_port = second.port
    broker = start_broker("127.0.0.1", broker_port, work / f"{alias}.log", advertised=("127.0.0.1", relay.port))
    return Cluster(alias, broker, relay, leader, (second,))


def admin(c: Cluster) -> AdminClient:
    return AdminClient(logs.client_config({"bootstrap.servers": c.bootstrap}))


def topic_names(source: str, n: int) -> list[str]:
    return [f"{source}{i:05d}" for i in range(n)]


def create_topics(c: Cluster, topics: list[str], partitions: int) -> None:
    a = admin(c)
    for i in range(0, len(topics), 100):
        fs = a.create_topics([NewTopic(t, partitions, 1) for t in topics[i : i + 100]])
        for f in fs.values():
            f.result()


def populate(c: Cluster, topics: list[str], partitions: int, per_partition: int, groups: list[str]) -> None:
    a = admin(c)
    create_topics(c, topics, partitions)
    say(f"  {c.alias}: {len(topics)} topics x {partitions} partitions created")
    p = Producer(logs.client_config({"bootstrap.servers": c.bootstrap, "linger.ms": 50}))
    failed: list[str] = []

    def delivered(err, msg) -> None:
        if err is not None:
            failed.append(f"{msg.topic()}[{msg.partition()}]: {err}")

    for t in topics:
        for part in range(partitions):
            for r in range(per_partition):
                p.produce(t, value=b"x" * 100, key=str(r).encode(), partition=part, on_delivery=delivered)
        p.poll(0)
    left = p.flush(120)
    if failed or left:
        # the figures count on every record being on the source: a record not written would read as one the engine
        # did not copy (a 2,500-partition run once missed 50 partitions' records this way, unchecked)
        raise RuntimeError(f"{c.alias}: {len(failed)} records not written ({left} still queued): {failed[:3]}")
    say(f"  {c.alias}: {len(topics) * partitions * per_partition:,} records produced")
    for i in range(0, len(groups), 500):  # one group per request (the admin API's rule), 500 in flight
        futures = [
            f
            for j, g in enumerate(groups[i : i + 500])
            for f in a.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(g, [TopicPartition(topics[(i + j) % len(topics)], 0, 1)])]
            ).values()
        ]
        for f in futures:
            f.result()
        if i and i % 5000 == 0:
            say(f"  {c.alias}: {i:,} groups committed")
    say(f"  {c.alias}: {len(groups):,} groups committed")


@dataclass(frozen=True)
class FlowDecl:
    """One flow of a generated topology: its source alias, and the topics and groups it takes (regexes)."""

    source: str
    topics: str = ".*"
    groups: str = ".*"
    rate_limit: int | None = None  # records/s


def topology_yaml(bootstraps: dict[str, str], flows: list[FlowDecl], name: str = "scale") -> str:
    """A topology of `flows` into TARGET, every cluster by its bootstrap, group offsets synced, local deployer."""
    lines = ["apiVersion: reconciler/v1", "kind: Topology", f"metadata: {{name: {name}}}", "clusters:"]
    lines += [f'  {a}: {{bootstrap_servers: "{b}"}}' for a, b in bootstraps.items()]
    lines += [
        "defaults:",
        "  replication_factor: 1",
        "  sync: {group_offsets: true}",
        "  job: {deployer: local}",
        "flows:",
    ]
    lines += [
        f"  - {{source: {f.source}, target: {TARGET}, topics: {{include: ['{f.topics}']}}, "
        f"groups: {{include: ['{f.groups}']}}"
        + (f", rate_limit: {{records_per_second: {f.rate_limit}}}" if f.rate_limit else "")
        + "}"
        for f in flows
    ]
    return "\n".join(lines) + "\n"


def topology(clusters: dict[str, Cluster], staged: dict[str, list[str]] | None = None, cap: int | None = None) -> str:
    """Both flows, each taking its source's generated topics and its staged topics released so far (`staged`: source
    -> a phase's backlog topics, written before its flow may copy them: releasing one changes its own flow's spec
    only); `cap`: flow `a`'s rate_limit (records/s)."""
    staged = staged or {}
    return topology_yaml(
        {a: c.bootstrap for a, c in clusters.items()},
        [
            FlowDecl(s, "|".join((f"{s}[0-9]+", *staged.get(s, ()))), rate_limit=cap if s == "a" else None)
            for s in SOURCES
        ],
    )


def cli(args: list[str], env: dict[str, str], timeout: float = 900) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    return time.monotonic() - t0, done


def requests_of(clusters: dict[str, Cluster]) -> Counter[str]:
    total: Counter[str] = Counter()
    for c in clusters.values():
        for key, n in c.counts().items():
            total[api_name(key)] += n
    return total


def target_records(c: Cluster, topics: list[str], partitions: int) -> int:
    """Every record of the remote topics, read back (ends alone are not exact on Tansu)."""
    return sum(partition_records(c, [(t, p) for t in topics for p in range(partitions)]).values())


def partition_records(
    c: Cluster, partitions: list[tuple[str, int]], timeout: float = 300
) -> dict[tuple[str, int], int]:
    """Every record of `partitions` on `c`, counted per partition, read to end-of-partition (or for `timeout` s)."""
    cons = Consumer(
        logs.client_config(
            {
                "bootstrap.servers": c.bootstrap,
                "group.id": f"scale-count-{time.monotonic_ns()}",
                "enable.partition.eof": True,
            }
        )
    )
    cons.assign([TopicPartition(t, p, 0) for t, p in partitions])
    ended: set[tuple[str, int]] = set()  # librdkafka reports a partition's end again after each new record
    counts: Counter[tuple[str, int]] = Counter({tp: 0 for tp in partitions})
    deadline = time.monotonic() + timeout
    while len(ended) < len(partitions) and time.monotonic() < deadline:
        for m in cons.consume(10000, 1.0):
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    ended.add((m.topic(), m.partition()))
                continue
            counts[(m.topic(), m.partition())] += 1
    cons.close()
    return dict(counts)


def target_ends(c: Cluster, topics: list[str], partitions: int) -> int:
    """The sum of the remote topics' reported ends: one ListOffsets per broker. On Tansu a partition's reported end
    is its last batch's base offset + 1, so the sum moves with every batch but does not reach the record count."""
    a = admin(c)
    futures = a.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t in topics for p in range(partitions)})
    total = 0
    for f in futures.values():
        try:
            total += max(f.result().offset, 0)
        except KafkaException:
            pass
    return total


def all_copied(
    c: Cluster,
    topics: list[str],
    partitions: int,
    expected: int,
    t0: float,
    short: Callable[[dict[tuple[str, int], int]], None] | None = None,
) -> float:
    """When the last record landed: the time the target's ends last moved, once they have been still for 10 s
    and a full read-back counts every record. `short`: told once the records read back per partition when a
    read-back first falls short (which partitions, and what their sources hold: the caller's)."""
    deadline = time.monotonic() + 1800
    last_sum, last_move = -1, time.monotonic()
    while time.monotonic() < deadline:
        ends = target_ends(c, topics, partitions)
        if ends != last_sum:
            last_sum, last_move = ends, time.monotonic()
            say(f"  target ends moved ({ends:,}) {last_move - t0:.0f} s after apply")
        elif ends > 0 and time.monotonic() - last_move > 10:
            counts = partition_records(c, [(t, p) for t in topics for p in range(partitions)])
            n = sum(counts.values())
            say(f"  {n:,} of {expected:,} records read back on the target")
            if n >= expected:
                return last_move
            if short is not None:
                short(counts)
                short = None
            last_sum = -1  # not all there: wait for the ends to move again
        time.sleep(1)
    raise RuntimeError(f"not every record reached the target within 30 minutes ({expected:,} expected)")


def synced_groups(tdir: Path, env: dict[str, str]) -> tuple[int, list[int]]:
    """How many groups `reconciler status` says are synced (a checkpoint written; every group counted), and the
    last checkpoint times (ms) of those it lists: what a user reads."""
    _, done = cli(["status", str(tdir), "--format", "json"], env, timeout=300)
    if done.returncode != 0:
        return 0, []
    jobs = json.loads(done.stdout)["jobs"]
    synced = sum((job.get("group_tally") or {}).get("synced", 0) for job in jobs)
    # the record lists at most a few hundred groups per flow (the oldest checkpoints among them): their ages
    last = [g["last_checkpoint_ms"] for job in jobs for g in job.get("groups") or () if g.get("last_checkpoint_ms")]
    return synced, last


@dataclass(frozen=True)
class SampledGroup:
    """A group whose offset the checkpoint measurement moves: on `source`, committed on partition 0 of `topic`."""

    group: str
    source: Cluster
    alias: str
    topic: str

    @property
    def remote(self) -> TopicPartition:
        return TopicPartition(f"{self.alias}.{self.topic}", 0)


@dataclass
class CheckpointHeld:
    """From each sampled group's new commit on its source to its translated offset on the target, seconds."""

    sample: int
    lags_s: list[float]
    checkpoint_interval_s: float
    sync_interval_s: float
    poll_round_s: list[float]

    def line(self) -> str:
        lags = sorted(self.lags_s)
        if not lags:
            return f"checkpoint interval held: none of {self.sample} sampled groups reached the target"
        p95 = lags[min(len(lags) - 1, int(0.95 * len(lags)))]
        return (
            f"commit on the source -> translated offset on the target, {len(lags)} of {self.sample} groups: "
            f"median {statistics.median(lags):.1f} s, p95 {p95:.1f} s, max {lags[-1]:.1f} s "
            f"(checkpoints.interval_seconds {self.checkpoint_interval_s:g}, "
            f"sync.group_offsets_interval_seconds {self.sync_interval_s:g}; target read in rounds of "
            f"{statistics.median(self.poll_round_s or [0.0]):.1f} s)"
        )


def sample_groups(groups_of: dict[str, tuple[Cluster, list[str], list[str]]], sample: int) -> list[SampledGroup]:
    """`sample` groups spread evenly over every source's groups and their topics (group k of a source is committed
    on topic k mod n, as populate() commits them)."""
    every = [(alias, c, topics, k, g) for alias, (c, topics, groups) in groups_of.items() for k, g in enumerate(groups)]
    step = max(1, len(every) // max(1, sample))
    # the i-th pick is shifted by i mod step, so that a step that is a multiple of the topic count does not land
    # every pick on one topic
    picks = [every[i * step + i % step] for i in range(min(sample, len(every) // step))]
    return [SampledGroup(g, c, alias, topics[k % len(topics)]) for alias, c, topics, k, g in picks]


def target_group_offsets(target: Cluster, sampled: list[SampledGroup]) -> dict[str, int]:
    """Each sampled group's committed offset on its remote partition on the target (-1: none), 500 requests in
    flight (the admin API takes one group per request)."""
    a, out = admin(target), {}
    for i in range(0, len(sampled), 500):
        futures = {
            s.group: f
            for s in sampled[i : i + 500]
            for f in a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(s.group, [s.remote])]).values()
        }
        for group, f in futures.items():
            try:
                tps = f.result().topic_partitions or []
                out[group] = max([tp.offset for tp in tps if tp.error is None] or [-1])
            except KafkaException:
                out[group] = -1
    return out


def checkpoint_held(target: Cluster, sampled: list[SampledGroup], new_records: int = 3) -> CheckpointHeld:
    """Once caught up: produce `new_records` to partition 0 of each sampled group's topic, wait until they are on
    the target, commit each group at the source's new end, then read the target's offsets of those groups in
    rounds until each has moved: the seconds from its commit to the round that saw it moved."""
    from reconciler.topology.settings_registry import setting

    before = target_group_offsets(target, sampled)
    ends_before = _ends(target, sorted({s.remote for s in sampled}, key=str))
    by_source: dict[str, list[SampledGroup]] = {}
    for s in sampled:
        by_source.setdefault(s.alias, []).append(s)
    for group in by_source.values():
        p = Producer(logs.client_config({"bootstrap.servers": group[0].source.bootstrap, "linger.ms": 5}))
        for topic in sorted({s.topic for s in group}):
            for r in range(new_records):
                p.produce(topic, value=b"y" * 100, key=str(r).encode(), partition=0)
        p.flush(60)
    _wait_moved(target, ends_before, 600)
    committed_at = _commit_at_end(sampled)
    lags, rounds = _poll_moved(target, sampled, before, committed_at)
    return CheckpointHeld(
        len(sampled),
        lags,
        float(setting("checkpoints.interval_seconds").default),
        float(setting("sync.group_offsets_interval_seconds").default),
        rounds,
    )


def _ends(c: Cluster, tps: list[TopicPartition]) -> dict[str, int]:
    a = admin(c)  # held until every future is done: a collected client never completes them
    futures = a.list_offsets({tp: OffsetSpec.latest() for tp in tps})
    out = {}
    for tp, f in futures.items():
        try:
            out[f"{tp.topic}/{tp.partition}"] = f.result().offset
        except KafkaException:
            out[f"{tp.topic}/{tp.partition}"] = -1
    return out


def _wait_moved(target: Cluster, before: dict[str, int], timeout: float) -> None:
    tps = [TopicPartition(k.rpartition("/")[0], int(k.rpartition("/")[2])) for k in before]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = _ends(target, tps)
        if all(now[k] > v for k, v in before.items()):
            say(f"  the new records of {len(tps)} sampled partitions are on the target")
            return
        time.sleep(0.5)
    raise RuntimeError("the sampled partitions' new records did not reach the target")


def _commit_at_end(sampled: list[SampledGroup]) -> dict[str, float]:
    """Commit each sampled group at its partition's end on the source; when each commit was acknowledged."""
    at: dict[str, float] = {}
    for alias in sorted({s.alias for s in sampled}):
        group = [s for s in sampled if s.alias == alias]
        a = admin(group[0].source)
        ends = _ends(group[0].source, sorted({TopicPartition(s.topic, 0) for s in group}, key=str))
        for i in range(0, len(group), 500):
            futures = {
                s.group: f
                for s in group[i : i + 500]
                for f in a.alter_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(s.group, [TopicPartition(s.topic, 0, ends[f"{s.topic}/0"])])]
                ).values()
            }
            for g, f in futures.items():
                f.result()
                at[g] = time.monotonic()
    say(f"  {len(at)} sampled groups committed at their partitions' ends on the sources")
    return at


def _poll_moved(target, sampled, before, committed_at) -> tuple[list[float], list[float]]:
    seen: dict[str, float] = {}
    rounds: list[float] = []
    deadline = time.monotonic() + 600
    while len(seen) < len(sampled) and time.monotonic() < deadline:
        t0 = time.monotonic()
        now = target_group_offsets(target, [s for s in sampled if s.group not in seen])
        t1 = time.monotonic()
        rounds.append(t1 - t0)
        for g, off in now.items():
            if off > before.get(g, -1):
                seen[g] = t1 - committed_at[g]
        time.sleep(max(0.0, 1.0 - (t1 - t0)))
    say(f"  {len(seen)} of {len(sampled)} sampled groups moved on the target")
    return list(seen.values()), rounds


def _cpu(pid: int) -> float:
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / TICKS  # own + waited-for children
    except OSError:
        return 0.0


def idle_window(root: Path, seconds: float) -> dict[str, float]:
    """CPU of every process of the engines under `root` over `seconds` (sampled each 0.5 s, so processes that
    start and end inside the window count with what they used while seen), and their PSS at the end."""
    seen: dict[int, tuple[float, float]] = {}  # pid -> (cpu at first sight, cpu at last sight)
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        for p in instance.scan(under=root.resolve()):
            cpu = _cpu(p.pid)
            first = seen.get(p.pid, (cpu, cpu))[0]
            seen[p.pid] = (first, max(cpu, seen.get(p.pid, (cpu, cpu))[1]))
        time.sleep(0.5)
    wall = time.monotonic() - t0
    now = instance.scan(under=root.resolve())
    return {
        "cpu_pct": 100.0 * sum(last - first for first, last in seen.values()) / wall,
        "pss_mb": sum(pss_mb(p.pid) for p in now),
        "processes": float(len(now)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=1000, help="topics in all (half on each source)")
    ap.add_argument("--partitions", type=int, default=5)
    ap.add_argument("--groups", type=int, default=20000, help="consumer groups in all (half on each source)")
    ap.add_argument("--records-per-partition", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--idle-seconds", type=float, default=20.0)
    ap.add_argument(
        "--checkpoint-sample",
        type=int,
        default=500,
        help="groups (spread over all) whose offsets move once caught up, to time the checkpoint interval held (0: skip)",
    )
    ap.add_argument(
        "--poison",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="once caught up: one partition of a stops answering, a backlog on a and b (default: on)",
    )
    ap.add_argument("--poison-topics", type=int, default=4, help="the poison backlog's topics on each source")
    ap.add_argument("--poison-records", type=int, default=50_000, help="the poison backlog's records per partition")
    ap.add_argument(
        "--ratelimit",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="once caught up: flow a capped by an apply, a backlog on a and b (default: on)",
    )
    ap.add_argument("--cap", type=int, default=20_000, help="flow a's rate_limit.records_per_second")
    ap.add_argument(
        "--cap-seconds", type=float, default=40.0, help="a's backlog: this many seconds at its cap (b's copy inside)"
    )
    ap.add_argument("--sibling-backlog", type=int, default=1_000_000, help="b's backlog, alone and beside a")
    ap.add_argument("--no-apply", action="store_true", help="validate and plan only")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    opts = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped run still stops its brokers and engine

    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    say(f"work directory {work}")
    per_source = opts.topics // len(SOURCES)
    group_names = [f"g{i:06d}" for i in range(opts.groups)]
    topics = {s: topic_names(s, per_source) for s in SOURCES}
    # the poisoned partition's own leader is there from the start (answering until the poison phase)
    # (--no-poison or --no-apply: no such relay, the requests of a plan as before)
    poisoned = {"a": frozenset({poisoned_key(topics, opts.partitions)})} if opts.poison and not opts.no_apply else {}
    clusters = {a: start_cluster(a, work, poisoned.get(a, frozenset())) for a in (*SOURCES, TARGET)}
    root = work / "state"
    env = {**os.environ, "RECONCILER_STATE_DIR": str(root), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    figures: dict[str, list[float]] = {}
    requests: list[Counter[str]] = []
    notes: list[str] = []
    try:
        say("setting up the sources")
        for i, s in enumerate(SOURCES):
            populate(
                clusters[s], topics[s], opts.partitions, opts.records_per_partition, group_names[i :: len(SOURCES)]
            )
        tdir = work / "topology"
        tdir.mkdir()
        (tdir / "topology.yaml").write_text(topology(clusters))

        for r in range(opts.repeat):
            say(f"validate, run {r + 1}")
            s, done = cli(["validate", str(tdir)], env)
            if done.returncode != 0:
                raise RuntimeError(f"validate exited {done.returncode}: {done.stderr[-2000:]}")
            figures.setdefault("validate_s", []).append(s)
        for r in range(opts.repeat):
            say(f"plan, run {r + 1}")
            for c in clusters.values():
                c.reset()
            s, done = cli(["plan", str(tdir)], env)
            if done.returncode not in (0, 2):
                raise RuntimeError(f"plan exited {done.returncode}: {done.stderr[-2000:]}")
            figures.setdefault("plan_s", []).append(s)
            requests.append(requests_of(clusters))
            figures.setdefault("plan_requests", []).append(float(sum(requests[-1].values())))

        if not opts.no_apply:
            run_engine(opts, clusters, topics, group_names, tdir, root, env, figures)
            control_plane(opts, clusters, tdir, env, figures)
            caught_up_phases(opts, clusters, topics, tdir, env, figures, notes, root)
    finally:
        stop_engines(root)
        for c in clusters.values():
            c.close()
            if c.broker.pid:
                stop_pid(c.broker.pid)

    report(opts, figures, requests, notes)
    if opts.json:
        opts.json.write_text(
            json.dumps({"options": vars(opts) | {"json": str(opts.json)}, "figures": figures, "notes": notes}, indent=2)
        )
    return 0


def control_plane(opts, clusters: dict[str, Cluster], tdir: Path, env, figures: dict[str, list[float]]) -> None:
    """Once caught up, --repeat times each: `reconciler drift DIR` (the live clusters and the running engine against
    the topology; exit 0 in sync, 2 drift) and `reconciler status DIR` (every job's status record), as a user runs
    them: seconds, and the requests each sent to the brokers (the relays' counts while it ran, less the running
    engine's own over as many seconds right after: an estimate)."""
    for command in ("drift", "status"):
        for r in range(opts.repeat):
            say(f"{command}, run {r + 1}")
            for c in clusters.values():
                c.reset()
            s, done = cli([command, str(tdir)], env)
            if done.returncode not in (0, 2):
                raise RuntimeError(f"{command} exited {done.returncode}: {done.stderr[-2000:]}")
            sent = sum(requests_of(clusters).values())
            for c in clusters.values():  # the running engine's own requests over as long, subtracted
                c.reset()
            time.sleep(s)
            background = sum(requests_of(clusters).values())
            figures.setdefault(f"{command}_s", []).append(s)
            figures.setdefault(f"{command}_requests", []).append(float(max(0, sent - background)))
            figures.setdefault(f"{command}_exit", []).append(float(done.returncode))


def run_engine(opts, clusters, topics, group_names, tdir: Path, root: Path, env, figures) -> None:
    say("apply")
    t0 = time.monotonic()
    s, done = cli(["apply", str(tdir), "--auto-approve"], env)
    if done.returncode != 0:
        raise RuntimeError(f"apply exited {done.returncode}: {done.stderr[-2000:]}")
    figures["apply_returned_s"] = [s]
    expected = opts.topics // len(SOURCES) * len(SOURCES) * opts.partitions * opts.records_per_partition
    remote = [f"{src}.{t}" for src in SOURCES for t in topics[src]]
    done_at = all_copied(clusters[TARGET], remote, opts.partitions, expected, t0)
    figures["apply_to_all_records_s"] = [done_at - t0]
    deadline = time.monotonic() + 1800
    while True:
        n, _ = synced_groups(tdir, env)
        say(f"  {n:,} of {len(group_names):,} groups synced after {time.monotonic() - t0:.0f} s (`reconciler status`)")
        if n >= len(group_names) or time.monotonic() > deadline:
            break
        time.sleep(5)
    figures["apply_to_all_groups_s"] = [time.monotonic() - t0]
    if opts.checkpoint_sample:
        say(f"checkpoint interval held: {opts.checkpoint_sample} groups move")
        groups_of = {s: (clusters[s], topics[s], group_names[i :: len(SOURCES)]) for i, s in enumerate(SOURCES)}
        held = checkpoint_held(clusters[TARGET], sample_groups(groups_of, opts.checkpoint_sample))
        figures["checkpoint_lag_s"] = held.lags_s
        figures["checkpoint_interval_s"] = [held.checkpoint_interval_s]
        figures["group_sync_interval_s"] = [held.sync_interval_s]
        say("  " + held.line())
    say("settling 30 s before the idle windows")
    time.sleep(30)
    for w in range(opts.windows):
        say(f"idle window {w + 1} of {opts.windows} ({opts.idle_seconds:.0f} s)")
        m = idle_window(root, opts.idle_seconds)
        figures.setdefault("idle_cpu_pct", []).append(m["cpu_pct"])
        figures.setdefault("engine_pss_mb", []).append(m["pss_mb"])


# --------------------------------------------------------------------------------------------------- once caught up
def poisoned_key(topics: dict[str, list[str]], partitions: int) -> tuple[str, int]:
    """The partition of `a` whose leader stops answering in the poison phase: the last of its first topic (the
    checkpoint sample commits groups on partitions 0)."""
    return topics["a"][0], partitions - 1


def poison_partitions(topics: dict[str, list[str]], opts) -> dict[str, list[tuple[str, int]]]:
    """The backlog's partitions on each source: every partition of the first --poison-topics topics of `a` but the
    poisoned one (its topic's others among them), and as many of `b`'s, at the same places."""
    skip = poisoned_key(topics, opts.partitions)[1]
    return {
        s: [
            (t, p)
            for i, t in enumerate(topics[s][: opts.poison_topics])
            for p in range(opts.partitions)
            if i or p != skip
        ]
        for s in SOURCES
    }


def poison_phase(opts, clusters: dict[str, Cluster], topics, figures, notes: list[str], alive: Alive) -> None:
    """One partition of `a` stops answering (its own leader, `LeaderRelay.stall`); --repeat times, a backlog of
    --poison-records lands at once on partitions of `a` and as many of `b` (`poison_partitions`): records/s per
    partition of `a`'s healthy ones against `b`'s, in the same engine at the same moment (`poisoned_figures`). The
    poisoned partition's own records are written during the stall (a hung leader takes none: they wait in their
    producer); once it answers again, the seconds until they are all on the target."""
    a, hub = clusters["a"], clusters[TARGET]
    assert a.leader is not None
    bad = poisoned_key(topics, opts.partitions)
    parts = poison_partitions(topics, opts)
    a.leader.stall()
    say(f"poison: partition {bad[1]} of {bad[0]} on a: its leader stops answering")
    stuck = tuned_producer(a.bootstrap, **{"message.timeout.ms": 3_600_000})
    for _ in range(opts.poison_records):
        stuck.produce(bad[0], b"p" * 100, None, bad[1])
    stuck.poll(0)
    for rep in range(opts.repeat):
        load = os.getloadavg()[0]
        say(
            f"  poison run {rep + 1}: {opts.poison_records:,} records on each of {len(parts['a'])} partitions of a "
            f"and of b (load average {load:.1f})"
        )
        r = poison_round(opts, clusters, parts, alive)
        r["load"] = load
        for k, v in r.items():
            figures.setdefault(f"poison_{k}", []).append(v)
        say(
            "    " + poisoned_line(r) + f"; written in {r['produce_s']:.1f} s; a copied from {r['a_first_s']:.1f} s "
            f"to {r['a_last_s']:.1f} s after the write began, b from {r['b_first_s']:.1f} s to {r['b_last_s']:.1f} s"
        )
    answered = time.monotonic()
    a.leader.answer()
    say("  the poisoned partition's leader answers again")
    if stuck.flush(600):
        raise RuntimeError("the poisoned partition's records were not acknowledged once its leader answered")
    on_source = partition_records(a, [bad])[bad]
    remote = (f"a.{bad[0]}", bad[1])
    while (on_target := partition_records(hub, [remote])[remote]) < on_source:
        if time.monotonic() - answered > 900:
            raise RuntimeError(f"the poisoned partition: {on_target:,} of {on_source:,} records on the target")
        time.sleep(2)
    figures["poison_caught_up_s"] = [time.monotonic() - answered]
    notes.append(
        f"poisoned partition {bad[0]}[{bad[1]}]: all {on_source:,} of its records on the target "
        f"{figures['poison_caught_up_s'][0]:.0f} s after its leader answered again ({on_target:,} there)"
    )
    say("  " + notes[-1])


def poison_round(
    opts, clusters: dict[str, Cluster], parts: dict[str, list[tuple[str, int]]], alive: Alive
) -> dict[str, float]:
    """One backlog on `parts` of both sources at once, each flow's remote partitions watched from their ends before
    it; the figures of `poisoned_figures` (`b` the healthy flow) and the seconds the backlog took to write."""
    hub = clusters[TARGET]
    remote = {s: [(f"{s}.{t}", p) for t, p in parts[s]] for s in SOURCES}
    every = [k for s in SOURCES for k in remote[s]]
    base = partition_records(hub, every)  # from offset 0: the records there are the partition's end
    listed = _ends(hub, [TopicPartition(t, p) for t, p in every])
    watches = {
        s: PartitionWatch(
            hub.bootstrap,
            {k: base[k] + opts.poison_records for k in remote[s]},
            start={k: max(listed[f"{k[0]}/{k[1]}"], 0) for k in remote[s]},
        )
        for s in SOURCES
    }
    try:
        failed: list[BaseException] = []

        def write(s: str) -> None:
            try:
                produce_on(clusters[s].bootstrap, parts[s], opts.poison_records)
            except Exception as e:  # noqa: BLE001 - raised below, in the bench's thread
                failed.append(e)

        t0 = time.monotonic()
        writers = [threading.Thread(target=write, args=(s,)) for s in SOURCES]
        for w in writers:
            w.start()
        for w in writers:
            w.join()
        written = time.monotonic() - t0
        if failed:
            raise RuntimeError(f"the poison backlog was not written: {failed[0]}")
        for w in watches.values():
            w.wait(900, alive)
    finally:
        for w in watches.values():
            w.close()
    when = {
        f"{s}_{edge}_s": f(w) - t0
        for s, w in watches.items()
        for edge, f in (
            ("first", lambda w: min(t for t, _ in w.first.values())),
            ("last", lambda w: max(w.last.values())),
        )
    }
    return poisoned_figures(watches["b"], watches["a"]) | {"produce_s": written} | when


@dataclass
class Staged:
    """The rate-limit phase's state: flow `a`'s cap and the staged topics released to the flows so far."""

    cap: int
    on: dict[str, list[str]] = field(default_factory=dict)  # source -> its staged topics


def apply_topology(clusters, tdir: Path, env, staged: Staged) -> str:
    """The topology with `staged` written and applied (`reconciler apply` in a new process): apply's output."""
    (tdir / "topology.yaml").write_text(topology(clusters, staged.on, staged.cap))
    _, done = cli(["apply", str(tdir), "--auto-approve"], env)
    if done.returncode != 0:
        raise RuntimeError(f"apply exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout + done.stderr


def release(clusters, tdir: Path, env, staged: Staged, source: str, topic: str) -> None:
    """A staged topic of `source` (its backlog written, its remote topic created on the target) released to its
    flow: added to the includes by an apply (hot: the flow finds it at its next refresh)."""
    staged.on.setdefault(source, []).append(topic)
    apply_topology(clusters, tdir, env, staged)


def stage(clusters, source: str, topic: str, records: int, partitions: int) -> None:
    """A new topic of `source` with its backlog, and its remote topic on the target (the flow finds it there)."""
    create_topics(clusters[TARGET], [f"{source}.{topic}"], partitions)
    fill(clusters[source].bootstrap, topic, partitions, records)


def ratelimit_phase(
    opts, clusters: dict[str, Cluster], tdir: Path, env, figures, notes: list[str], staged, alive: Alive
) -> None:
    """Flow `a` gets rate_limit --cap by an apply (hot: its spec handed to the running flow); then `ratelimit_run`
    --repeat times."""
    out = apply_topology(clusters, tdir, env, staged)
    said = [line.strip() for line in out.splitlines() if "a->hub" in line or "hot reload" in line or "restart" in line]
    notes.append(
        f"rate_limit {opts.cap:,} records/s on flow a by `reconciler apply`: "
        + ("; ".join(dict.fromkeys(said)) or out[-500:])
    )
    say("  " + notes[-1])
    for rep in range(opts.repeat):
        r = ratelimit_run(opts, clusters, tdir, env, staged, rep, alive)
        for k, v in r.items():
            figures.setdefault(f"ratelimit_{k}", []).append(v)


def ratelimit_run(
    opts, clusters: dict[str, Cluster], tdir: Path, env, staged: Staged, rep: int, alive: Alive
) -> dict[str, float]:
    """A backlog of --sibling-backlog on a new topic of `b`, released alone: `b`'s records/s alone. Then one of
    --cap x --cap-seconds on a new topic of `a`, released; once `a` copies it, another of --sibling-backlog on `b`,
    released: `a`'s records/s against its cap and `b`'s against its own alone, `b`'s copy inside `a`'s (each flow
    finds a new topic at its own next refresh: released together, `b`'s copy could end before `a`'s began). Each
    timed by `TargetWatch` (every record read back). The backlogs are written before their release: the copy is
    timed on records all there, not on their producer."""
    hub, n, capped = clusters[TARGET], opts.sibling_backlog, int(opts.cap * opts.cap_seconds)
    load = os.getloadavg()[0]
    solo, mine, beside = f"rl{rep}-solo", f"rl{rep}-capped", f"rl{rep}-beside"
    stage(clusters, "b", solo, n, opts.partitions)
    say(f"  rate-limit run {rep + 1}: b alone, {n:,} records (load average {load:.1f})")
    watch = TargetWatch(hub.bootstrap, f"b.{solo}", opts.partitions, n)
    try:
        release(clusters, tdir, env, staged, "b", solo)
        watch.wait(900, alive)
        b_solo = watch.rate()
    finally:
        watch.close()
    stage(clusters, "a", mine, capped, opts.partitions)
    stage(clusters, "b", beside, n, opts.partitions)
    say(f"  rate-limit run {rep + 1}: a ({capped:,} records, cap {opts.cap:,}/s), then b beside it")
    wa = TargetWatch(hub.bootstrap, f"a.{mine}", opts.partitions, capped)
    wb = TargetWatch(hub.bootstrap, f"b.{beside}", opts.partitions, n)
    try:
        release(clusters, tdir, env, staged, "a", mine)
        deadline = time.monotonic() + 300
        while wa.first is None and time.monotonic() < deadline:
            time.sleep(0.2)
        release(clusters, tdir, env, staged, "b", beside)
        wa.wait(900, alive)
        wb.wait(900, alive)
        assert wa.first and wa.last and wb.first and wb.last
        inside = max(0.0, min(wa.last, wb.last) - max(wa.first[0], wb.first[0])) / max(1e-9, wb.last - wb.first[0])
        r = {"a": wa.rate(), "b_solo": b_solo, "b_beside": wb.rate(), "overlap": inside, "load": load}
    finally:
        wa.close()
        wb.close()
    r["a_to_cap"], r["b_to_solo"] = r["a"] / opts.cap, r["b_beside"] / b_solo
    say(
        f"    a {r['a']:,.0f} records/s ({r['a_to_cap']:.2f}x its cap), b {r['b_beside']:,.0f} beside a, "
        f"{b_solo:,.0f} alone ({r['b_to_solo']:.2f}x); {100 * inside:.0f} % of b's copy while a copied"
    )
    return r


def every_record(clusters: dict[str, Cluster], topics, staged: Staged, opts, notes: list[str]) -> None:
    """Every partition of every source topic (generated and staged) read back on its source and on the target:
    the partitions with fewer records on the target (waited for up to 2 minutes) noted, else all there."""
    source = {
        s: partition_records(
            clusters[s], [(t, p) for t in (*topics[s], *staged.on.get(s, ())) for p in range(opts.partitions)], 1800
        )
        for s in SOURCES
    }
    deadline = time.monotonic() + 120
    while True:
        short: dict[tuple[str, int], tuple[int, int]] = {}
        for s in SOURCES:
            remote = {(f"{s}.{t}", p): n for (t, p), n in source[s].items()}
            target = partition_records(clusters[TARGET], list(remote), 1800)
            short |= {k: (target[k], n) for k, n in remote.items() if target[k] < n}
        if not short or time.monotonic() > deadline:
            break
        time.sleep(10)
    total = sum(sum(v.values()) for v in source.values())
    if short:
        notes.append(
            f"MISSING on the target: {len(short)} partitions short (target, source): {list(short.items())[:5]}"
        )
    else:
        notes.append(f"every record on the target: all {total:,} records of the sources' partitions read back there")
    say("  " + notes[-1])


def caught_up_phases(opts, clusters, topics, tdir: Path, env, figures, notes: list[str], root: Path) -> None:
    """After the idle windows (a stalled leader would weigh on them): the poison phase, then the rate-limit phase
    (its applies plan against the sources: the leader answers again by then), then every record read back. A phase
    that fails (the engine ended, a copy not complete) is noted, with the engine's exit code and log, and ends the
    phases: the figures measured so far are still printed."""
    staged = Staged(opts.cap)
    alive = deployer_alive(root)
    phases = [(name, run) for name, run in (("poison", opts.poison), ("ratelimit", opts.ratelimit)) if run]
    try:
        for name, _ in phases:
            if name == "poison":
                poison_phase(opts, clusters, topics, figures, notes, alive)
            else:
                ratelimit_phase(opts, clusters, tdir, env, figures, notes, staged, alive)
        if phases:
            say("every record: the sources' partitions read back on the target")
            every_record(clusters, topics, staged, opts, notes)
    except RuntimeError as e:
        ended = [f"{f.parent.name}: exit code {f.read_text().strip()}" for f in root.glob("engines/*/exit_code")]
        notes.append(
            f"FAILED: {e}; engine {'alive' if alive() else 'ended'} ({', '.join(ended) or 'no exit code'}); "
            f"its log: {', '.join(str(f) for f in root.glob('engines/*/job.log'))}"
        )
        say("  " + notes[-1])


def report(opts, figures: dict[str, list[float]], requests: list[Counter[str]], notes: list[str]) -> None:
    partitions = opts.topics // len(SOURCES) * len(SOURCES) * opts.partitions
    print(
        f"\none target, {opts.topics:,} topics, {partitions:,} partitions, {opts.groups:,} groups, 2 flows "
        f"(load average {os.getloadavg()[0]:.1f} at the end; {os.cpu_count()} cores): median [min-max]"
    )
    rows = [
        ("validate, s", "validate_s"),
        ("plan against the live clusters, s", "plan_s"),
        ("requests per plan (3 brokers)", "plan_requests"),
        ("apply returned, s", "apply_returned_s"),
        ("drift (caught up), s", "drift_s"),
        ("requests per drift", "drift_requests"),
        ("drift exit code (0 in sync, 2 drift)", "drift_exit"),
        ("status, s", "status_s"),
        ("requests per status", "status_requests"),
        ("apply -> every record on the target, s", "apply_to_all_records_s"),
        ("apply -> every group synced on the target, s", "apply_to_all_groups_s"),
        ("commit on a source -> offset on the target, s", "checkpoint_lag_s"),
        ("engine idle CPU, % of one core", "idle_cpu_pct"),
        ("engine PSS, MB", "engine_pss_mb"),
    ]
    for label, key in rows:
        if key in figures:
            print(f"  {label:46} {spread(figures[key], '{:,.2f}')}")
    if requests:
        kinds = sorted(set().union(*requests), key=lambda k: -statistics.median(r[k] for r in requests))
        print(
            "  requests per plan by kind: "
            + ", ".join(f"{k} {statistics.median(r[k] for r in requests):,.0f}" for k in kinds)
        )
    if "engine_pss_mb" in figures:
        pss = statistics.median(figures["engine_pss_mb"])
        print(f"  engine PSS / partitions: {1024 * pss / partitions:,.1f} KB (fixed cost included)")
    if figures.get("checkpoint_lag_s"):
        lags = sorted(figures["checkpoint_lag_s"])
        print(
            f"  checkpoint interval held ({len(lags)} groups moved once caught up): p95 "
            f"{lags[min(len(lags) - 1, int(0.95 * len(lags)))]:.1f} s, max {lags[-1]:.1f} s against "
            f"checkpoints.interval_seconds {figures['checkpoint_interval_s'][0]:g} + "
            f"sync.group_offsets_interval_seconds {figures['group_sync_interval_s'][0]:g}"
        )
    report_poison(opts, figures)
    report_ratelimit(opts, figures)
    for note in notes:
        print(f"  {note}")
    print("  memory per partition and per group: bench/curves.py (the slopes)")


def report_poison(opts, figures: dict[str, list[float]]) -> None:
    if "poison_ratio_per_partition" not in figures:
        return
    f = figures
    print(
        f"  poison ({len(f['poison_load'])} runs, load average {spread(f['poison_load'], '{:.1f}')}): one partition "
        f"of a does not answer; {opts.poison_records:,} records on each of {opts.poison_topics * opts.partitions - 1} "
        f"partitions of a and of b at once (written in {spread(f['poison_produce_s'], '{:.1f}')} s)"
    )
    rows = [
        ("a's healthy partitions, records/s per partition", "poison_poisoned_per_partition", "{:,.0f}"),
        ("b's (the healthy flow), records/s per partition", "poison_healthy_per_partition", "{:,.0f}"),
        ("a's first copied record, s after the write began", "poison_a_first_s", "{:.1f}"),
        ("b's, s", "poison_b_first_s", "{:.1f}"),
        ("a's last landed, s after the write began", "poison_a_last_s", "{:.1f}"),
        ("b's, s", "poison_b_last_s", "{:.1f}"),
        ("a / b while both copy", "poison_ratio_while_both_copy", "{:.2f}"),
        ("a / b, slowest partition", "poison_ratio_slowest_partition", "{:.2f}"),
    ]
    for label, key, fmt in rows:
        print(f"    {label:48} {spread([v for v in f[key] if v == v], fmt)}")  # NaN: the flows did not overlap
    ratio = f["poison_ratio_per_partition"]
    ok = statistics.median(ratio) >= POISON_RATIO
    print(
        f"    {'a / b, records/s per partition':48} {spread(ratio, '{:.2f}')}  (target >= {POISON_RATIO}: "
        f"{'MET' if ok else 'MISSED'})"
    )


def report_ratelimit(opts, figures: dict[str, list[float]]) -> None:
    if "ratelimit_a" not in figures:
        return
    f = figures
    print(
        f"  rate limit ({len(f['ratelimit_load'])} runs, load average {spread(f['ratelimit_load'], '{:.1f}')}): "
        f"a capped at {opts.cap:,} records/s with {int(opts.cap * opts.cap_seconds):,} waiting, b uncapped with "
        f"{opts.sibling_backlog:,}, against b alone in the same run ({opts.partitions} partitions a topic)"
    )
    print(f"    {'A (a, capped), records/s':48} {spread(f['ratelimit_a'])}")
    print(f"    {'B (b) alone, records/s':48} {spread(f['ratelimit_b_solo'])}")
    print(f"    {'B beside A, records/s':48} {spread(f['ratelimit_b_beside'])}")
    label = "share of B's copy while A copied"
    print(f"    {label:48} {spread(f['ratelimit_overlap'], '{:.2f}')}")
    for line in cap_verdicts(f["ratelimit_a_to_cap"], f["ratelimit_b_to_solo"]):
        print(f"    {line}")


if __name__ == "__main__":
    sys.exit(main())
