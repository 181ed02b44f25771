"""Replication benchmark: client limit, hand-written baseline, and the Spark job in both modes.

    python bench/replication.py                      # every scenario, 3 repetitions (~12 min)
    python bench/replication.py --scenario throughput --repeat 5 --json out.json

The headline figures are bench/deployed.py's: the job as `apply` deploys it (LocalDeployer ->
spark-submit jobs/mirror_job.py -> records on the target), beside the hand-written loop and the
in-process driver in the same run, and its latency beside a plain consumer of the source topic with
no job. This file measures the driver IN PROCESS (its own SparkContext, warmed up, the benchmark's
30-s tasks, timed by the driver's own loop): what the copy loop can do, not what a user gets. Its
latency scenario reads with fetch.wait.max.ms 10 in two readers at once (the target topic and the
source topic) beside the job's consumers: on Tansu each tailing reader costs the source broker most
of a core, so that scenario measures a saturated source broker (p99 ~1.2 s at 10,000/s), not the job;
see bench/deployed.py and docs/replication-job.md ("The deployed job").

Each scenario starts two fresh brokers (source, target; Tansu, or noida-db with --engine noida) on loopback
and measures, on those same brokers:

throughput  8 partitions x --records of --size bytes: the client limit (produce-only, and
            consume-only with one and with --parallelism processes), the copy ceiling (the same
            number of records produced to the target and consumed from the source at the same
            time, no copy logic: what any copy can reach on these cores), the baseline a user writes
            (one process, poll -> produce, async commits), the job at-least-once and exactly-once
            (rate from the first copied batch to the last record; Spark start-up is not in it; the
            benchmark's tasks run up to 30 s, and job_alo_spec_defaults is at-least-once again with
            the spec's default task length and record budget, what a new job gets),
            after a throwaway copy of 100,000 records (a SparkContext's first copy job costs more), the two
            modes in turn first from one repetition to the next,
            and CPU-seconds per million records of the job (driver + Spark JVM + Python workers,
            read from /proc) against the baseline's (its process CPU time).
scale       the same backlog spread over 512 partitions in 50 topics, at-least-once, against the
            8-partition figure of the same repetition (when both scenarios run).
size        1 KB and 10 KB records (--size-mb per case): limit, copy ceiling and job at-least-once in MB/s.
latency     produce timestamp -> visible on the target (read_committed for exactly-once) at a
            steady 10,000 and 50,000 records/s, both modes: p50/p95/p99; and the same reading on
            the source topic (source_p50/p99: the load generator's and source broker's share).
            The readers and the load generator run in processes of their own. Before the job runs,
            the source broker's CPU under the same load with no job (generator alone, then one
            reader tailing): source_broker_cores_generator_* / _one_reader_*.
startup     time from the driver's start to the first record visible on the target (a new job,
            Spark already running; the Spark session start is printed apart), and from a
            restart (old driver stopped) to records flowing again.

Where the CPU went (throughput, scale, size and latency): over the copy ceiling's and each job's
measured window, busy_pct_* is how busy the whole machine was (% of all cores, /proc/stat: every
process, the brokers included), machine_cpu_s_per_m_* / _per_gb_* the CPU the machine spent per
million records / per GB copied, source_ / target_broker_cpu_s_per_* each broker's part of it, and
machine_cpu_x_ceiling_* the job's machine CPU per record over the ceiling's. A copy near 100% busy is
bound by the cores; then job / ceiling = (busy job / busy ceiling) / machine_cpu_x_ceiling. The latency
scenario prints each broker's CPU in cores while the load ran (source_broker_cores_*).

Every figure is measured --repeat times (default 3); the report prints the median and min-max,
and every ratio (job/baseline, job/limit, exactly-once/at-least-once, CPU per record) is computed
within ONE repetition, then its median reported. The header says what it ran on (cores, load
average, Python, confluent-kafka, librdkafka, PySpark, Java) and `--json FILE` writes it all.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench.common import figure_line, report_runs, tuned_producer  # noqa: E402
from reconciler import logs  # noqa: E402
from reconciler.adapters.read_to_end import END_READER  # noqa: E402
from reconciler.contract.spec import ClusterSpec, JobSpec, RuntimeSettings  # noqa: E402
from reconciler.dev.brokers import Engine, discard, free_port, start_broker  # noqa: E402
from reconciler.engine.driver import ReplicationDriver, SparkExecutor  # noqa: E402
from reconciler.engine.session import build_context  # noqa: E402
from reconciler.mirror.filters import TopicFilter  # noqa: E402
from reconciler.topology.build import default_settings  # noqa: E402
from reconciler.topology.model import Delivery  # noqa: E402

SCENARIOS = ("throughput", "scale", "size", "latency", "startup")
# The limit's and the ceiling's consumers: the product's reader settings (fetch.queue.backoff.ms among them),
# and large fetches and local queue.
CONSUMER_TUNED = {
    **END_READER,
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 4_194_304,
    "queued.max.messages.kbytes": 262_144,
}


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def percentiles(samples: list[float], points=(50, 95, 99)) -> dict[str, float | None]:
    """Nearest-rank percentiles (None when there are no samples)."""
    data = sorted(samples)
    out: dict[str, float | None] = {}
    for pt in points:
        out[f"p{pt}"] = float(data[max(1, -(-len(data) * pt // 100)) - 1]) if data else None
    return out


# ---------------------------------------------------------------- CPU accounting (/proc, Linux)

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kids.setdefault(int(fields[1]), []).append(int(name))
    return kids


def _cpu_of(pid: int) -> float:
    """utime + stime + waited-for children's times of one process, in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / _TICK


def tree_cpu(exclude: set[int]) -> float:
    """CPU seconds of this process and its live descendants (the Spark JVM and its Python
    workers), leaving out the brokers. Workers that exit and are reaped count through their
    parent's children-times; the job's Python workers are long-lived (reused) in any case."""
    kids = _children()
    total, todo = 0.0, [os.getpid()]
    while todo:
        pid = todo.pop()
        if pid in exclude:
            continue
        total += _cpu_of(pid)
        todo.extend(kids.get(pid, ()))
    return total


def _machine_jiffies() -> tuple[int, int]:
    """(busy, total) clock ticks of all CPUs since boot (/proc/stat): busy is user, nice, system, irq
    and softirq time; total adds idle, iowait and steal (time the hypervisor gave to other machines)."""
    with open("/proc/stat") as f:
        user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in f.readline().split()[1:9])
    busy = user + nice + system + irq + softirq
    return busy, busy + idle + iowait + steal


@dataclass(frozen=True)
class CpuWindow:
    """Where the CPU went over one measured window: the whole machine (every process, the brokers and
    anything else running) and each broker on its own."""

    wall_s: float
    busy_pct: float  # % of all cores' time spent running anything
    machine_cpu_s: float
    source_cpu_s: float  # the source broker
    target_cpu_s: float  # the target broker


class CpuMeter:
    """Started at construction; `window()` reads what was spent since (Linux /proc)."""

    def __init__(self, source_pid: int, target_pid: int):
        self._pids = (source_pid, target_pid)
        self._start = self._read()

    def _read(self) -> tuple[float, int, int, float, float]:
        busy, total = _machine_jiffies()
        source, target = self._pids
        return time.perf_counter(), busy, total, _cpu_of(source), _cpu_of(target)

    def window(self) -> CpuWindow:
        t0, busy0, total0, src0, dst0 = self._start
        t1, busy1, total1, src1, dst1 = self._read()
        return CpuWindow(
            wall_s=t1 - t0,
            busy_pct=100 * (busy1 - busy0) / max(1, total1 - total0),
            machine_cpu_s=(busy1 - busy0) / _TICK,
            source_cpu_s=src1 - src0,
            target_cpu_s=dst1 - dst0,
        )


# ---------------------------------------------------------------- Kafka helpers


def create(bootstrap: str, topics: dict[str, int]) -> None:
    admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap}))
    for f in admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()]).values():
        f.result(60)


def produce_only(bootstrap: str, topics: list[tuple[str, int]], n: int, size: int) -> float:
    """Tuned producer writing n records round-robin over (topic, partition): records/s."""
    p = tuned_producer(bootstrap, **{"enable.idempotence": True})
    value = b"x" * size
    k = len(topics)
    start = time.perf_counter()
    for i in range(n):
        topic, part = topics[i % k]
        while True:
            try:
                p.produce(topic, value, None, part)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(300)
    return n / (time.perf_counter() - start)


def _consume_share(args) -> tuple[int, float]:
    bootstrap, share, group = args
    c = Consumer(logs.client_config({"bootstrap.servers": bootstrap, "group.id": group, **CONSUMER_TUNED}))
    c.assign([TopicPartition(t, p, 0) for t, p in share])
    got, eof = 0, set()
    start = time.perf_counter()
    while len(eof) < len(share):
        for m in c.consume(10_000, 0) or c.consume(1, 1.0):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add((m.topic(), m.partition()))
                continue
            got += 1
    took = time.perf_counter() - start
    c.close()
    return got, took


def consume(bootstrap: str, tps: list[tuple[str, int]], processes: int) -> float:
    """Consume-only records/s with `processes` client processes (1: in this process)."""
    if processes == 1:
        got, took = _consume_share((bootstrap, tps, "bench-consume-1"))
        return got / took
    import multiprocessing

    shares = [tps[i::processes] for i in range(processes)]
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        results = pool.map(_consume_share, [(bootstrap, sh, f"bench-consume-{processes}") for sh in shares])
    return sum(n for n, _ in results) / max(t for _, t in results)


def _ceiling_part(kind: str, args: tuple, ready, start, done) -> None:
    ready.put(kind)  # imported and about to wait
    start.wait()
    t0 = time.perf_counter()
    if kind == "produce":
        produce_only(*args)
    else:
        _consume_share(args)
    done.put(time.perf_counter() - t0)


def copy_ceiling(c: Clusters, tps: list[tuple[str, int]], n: int, size: int) -> tuple[float, CpuWindow]:
    """What a copy could reach on this machine with no copy logic at all: n records consumed from the source
    (--parallelism consumers) while n fresh records are produced to the target, all at once, started
    together. records/s = n / the time until both are done, and the CPU spent meanwhile. Unlike the client
    limit (each measured alone), the consumers, the producer and both brokers share the cores here, as they
    do under the job."""
    import multiprocessing

    source, target, processes = c.src.bootstrap, c.dst.bootstrap, c.opts.parallelism

    ctx = multiprocessing.get_context("spawn")
    create(target, {"bench-ceiling": len({p for _, p in tps})})
    ready, start, done = ctx.Queue(), ctx.Event(), ctx.Queue()
    shares = [tps[i::processes] for i in range(processes)]
    parts = [
        ctx.Process(
            target=_ceiling_part,
            args=("produce", (target, [("bench-ceiling", p) for _, p in tps], n, size), ready, start, done),
        )
    ]
    parts += [
        ctx.Process(target=_ceiling_part, args=("consume", (source, sh, "bench-ceiling"), ready, start, done))
        for sh in shares
    ]
    for proc in parts:
        proc.start()
    for _ in parts:
        ready.get(timeout=120)  # every process imported and waiting
    meter = c.meter()
    start.set()
    took = max(done.get(timeout=600) for _ in parts)
    window = meter.window()
    for proc in parts:
        proc.join(30)
    return n / took, window


def baseline(source: str, target: str, tps: list[tuple[str, int]], n: int, exclude: set[int]) -> tuple[float, float]:
    """What a user writes: poll one record, produce it, commit now and then. (records/s, CPU s)."""
    create(target, {"baseline-copy": max(p for _, p in tps) + 1})
    c = Consumer(
        logs.client_config(
            {
                "bootstrap.servers": source,
                "group.id": "bench-baseline",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
    )
    p = Producer(logs.client_config({"bootstrap.servers": target, "enable.idempotence": True}))
    c.assign([TopicPartition(t, i, 0) for t, i in tps])
    copied = 0
    cpu0, start = tree_cpu(exclude), time.perf_counter()
    while copied < n:
        msg = c.poll(1.0)
        if msg is None or msg.error():
            continue
        while True:
            try:
                p.produce(
                    "baseline-copy",
                    msg.value(),
                    msg.key(),
                    msg.partition(),
                    timestamp=msg.timestamp()[1],
                    headers=msg.headers(),
                )
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
        copied += 1
        if copied % 10_000 == 0:
            c.commit(asynchronous=True)
    p.flush(120)
    try:
        c.commit(asynchronous=False)
    except Exception:  # noqa: BLE001 - nothing new to commit
        pass
    rate, cpu = copied / (time.perf_counter() - start), tree_cpu(exclude) - cpu0
    c.close()
    return rate, cpu


# ---------------------------------------------------------------- the job

# Long tasks: a task copies while records flow and ends early once its partitions are idle, so a
# backlog drains in one task, and at a steady rate the gap between two Spark jobs (where records
# wait) comes once per 30 s. The spec defaults are 1 s and 50,000 (docs/replication-job.md).
BATCH = {"max_batch_ms": 30_000, "max_records_per_partition": 5_000_000}


def job_spec(source: str, target: str, alias: str, delivery: str, include: tuple[str, ...], opts) -> JobSpec:
    defaults = default_settings()
    settings = replace(
        defaults,
        topics=TopicFilter(include),
        delivery=Delivery(delivery),
        heartbeats=replace(defaults.heartbeats, interval_seconds=5),
        checkpoints=replace(defaults.checkpoints, interval_seconds=5),
        refresh_interval_seconds=5,
    )
    engine = RuntimeSettings(
        master=opts.master,
        parallelism=opts.parallelism,
        status_interval_seconds=2,
        trigger_interval_ms=50,
        **BATCH,
    )
    return JobSpec(f"{alias}->target", ClusterSpec(alias, source), ClusterSpec("target", target), settings, engine)


@dataclass(frozen=True)
class JobRun:
    rate: float  # records/s from the first batch on
    startup_s: float  # driver start -> the first batch
    cpu_s: float  # the job's own CPU (driver + Spark JVM + Python workers) from the first batch on
    window: CpuWindow  # the machine's and the brokers' CPU over the same time


def copied_records(driver: ReplicationDriver) -> int:
    """How many of the benchmark's records (topics written from offset 0, no transactions) the driver has copied:
    the sum of its positions, heartbeats aside. Not `driver.records`, which counts the heartbeats it copies too: a
    loop on that stops a few records short when a batch ends before the partitions' last records (a split backlog
    ends at the ends read before it, BatchShaper.split_tasks, engine/batches.py)."""
    heartbeats = driver.spec.settings.policy.is_heartbeats_topic
    return sum(max(pos, 0) for (t, _), pos in driver.parts.positions.items() if not heartbeats(t))


def run_job(c: Clusters, spec: JobSpec, n: int) -> JobRun:
    """Copy a backlog of n records; the first batch includes worker start-up and counts in full
    (conservative)."""
    driver = ReplicationDriver(spec, SparkExecutor(c.spark))
    t0 = time.perf_counter()
    driver.start()
    first: tuple[float, float, CpuMeter] | None = None
    try:
        while copied_records(driver) < n:
            before, cpu_before, meter = time.perf_counter(), tree_cpu(c.exclude), c.meter()
            driver.step()
            if first is None and driver.records > 0:
                first = (before, cpu_before, meter)
            if driver.last_error and driver.errors > 20:
                raise RuntimeError(driver.last_error)
        end, cpu_end = time.perf_counter(), tree_cpu(c.exclude)
        assert first is not None
        window = first[2].window()
    finally:
        driver.stop_event.set()
        driver.close()
    return JobRun(n / (end - first[0]), first[0] - t0, cpu_end - first[1], window)


def warm_up(spark, parallelism: int) -> None:
    """Start the Python workers and import the job's modules once (a running job has them)."""

    def touch(it):
        import reconciler.engine.worker  # noqa: F401

        return [sum(1 for _ in it)]

    spark.parallelize(range(parallelism * 4), parallelism * 2).mapPartitions(touch).collect()


# The steady-load generator's producer: librdkafka's default linger (5 ms), as an application would run.
# With linger.ms 1 (this benchmark before) the generator sends a request per millisecond and partition,
# which Tansu does not keep up with at 50,000 records/s: records reached a reader of the SOURCE topic
# at p50 0.6 s / p99 1.8 s with no job running; with 5 ms, p50 16 ms / p99 90 ms (20 ms: 17 / 30 ms).
GENERATOR = {"linger.ms": 5}


class Clusters:
    """Two fresh brokers and a Spark session for one scenario repetition; stopped on exit."""

    def __init__(self, opts):
        self.opts = opts
        self.src = start_broker("127.0.0.1", free_port(), engine=Engine(opts.engine))
        self.dst = start_broker("127.0.0.1", free_port(), engine=Engine(opts.engine))
        self.exclude = {self.src.pid, self.dst.pid}
        self._spark = None
        self.spark_start_s: float | None = None

    def meter(self) -> CpuMeter:
        return CpuMeter(self.src.pid, self.dst.pid)

    @property
    def spark(self):
        if self._spark is None:
            t = time.perf_counter()
            self._spark = build_context(
                job_spec(self.src.bootstrap, self.dst.bootstrap, "x", "at-least-once", (".*",), self.opts),
                self.opts.master,
            )
            warm_up(self._spark, self.opts.parallelism)
            self.spark_start_s = time.perf_counter() - t
        return self._spark

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._spark is not None:
            self._spark.stop()
        discard(self.src)
        discard(self.dst)


# ---------------------------------------------------------------- scenarios (one repetition each)


def limit(c: Clusters, tps, n: int, size: int) -> dict[str, float]:
    out = {
        "produce_only": produce_only(c.src.bootstrap, tps, n, size),
        "consume_1": consume(c.src.bootstrap, tps, 1),
        "consume_parallel": consume(c.src.bootstrap, tps, c.opts.parallelism),
    }
    # The job runs `parallelism` consumers at once: its ceiling is the best consume rate.
    out["limit"] = min(out["produce_only"], max(out["consume_1"], out["consume_parallel"]))
    return out


def cpu_figures(tag: str, w: CpuWindow, units: float, unit: str) -> dict[str, float]:
    """Whether a copy was bound by the machine's CPU: how busy every core was, and the CPU the whole
    machine and each broker spent per `unit` copied (`units` of them were)."""
    return {
        f"busy_pct_{tag}": w.busy_pct,
        f"machine_cpu_s_per_{unit}_{tag}": w.machine_cpu_s / units,
        f"source_broker_cpu_s_per_{unit}_{tag}": w.source_cpu_s / units,
        f"target_broker_cpu_s_per_{unit}_{tag}": w.target_cpu_s / units,
    }


#: Records of the throwaway copy before the throughput scenario's measured jobs (see there).
WARM_COPY_RECORDS = 100_000


def scenario_throughput(opts) -> dict[str, float]:
    n, parts = opts.records, 8
    with Clusters(opts) as c:
        create(c.src.bootstrap, {"bench-src": parts})
        tps = [("bench-src", p) for p in range(parts)]
        r = limit(c, tps, n, opts.size)
        log("  copy ceiling (produce and consume at once, no copy logic)")
        r["copy_ceiling"], window = copy_ceiling(c, tps, n, opts.size)
        r.update(cpu_figures("ceiling", window, n / 1e6, "m"))
        r["baseline"], base_cpu = baseline(c.src.bootstrap, c.dst.bootstrap, tps, n, c.exclude)
        r["baseline_cpu_s_per_m"] = base_cpu * 1e6 / n
        # The first copy job of a SparkContext costs more than the next ones (measured: ~1.6-2.0 CPU-s per 300k
        # records against ~1.0-1.3, whichever mode it was, 2026-11-27): with at-least-once always first, it
        # alone paid for it, and at-least-once looked slower than exactly-once. A throwaway copy first, and
        # the two modes in turn first from one repetition to the next.
        create(c.src.bootstrap, {"bench-warm": parts})
        warm = min(n, WARM_COPY_RECORDS)
        produce_only(c.src.bootstrap, [("bench-warm", p) for p in range(parts)], warm, opts.size)
        run_job(c, job_spec(c.src.bootstrap, c.dst.bootstrap, "warm", "at-least-once", ("bench-warm",), opts), warm)
        modes = [("at-least-once", "alo"), ("exactly-once", "eos")]
        for mode, key in modes if getattr(opts, "repetition", 0) % 2 == 0 else modes[::-1]:
            log(f"  job {mode}")
            j = run_job(c, job_spec(c.src.bootstrap, c.dst.bootstrap, key, mode, ("bench-src",), opts), n)
            r[f"job_{key}"], r[f"job_{key}_cpu_s_per_m"] = j.rate, j.cpu_s * 1e6 / n
            r.update(cpu_figures(key, j.window, n / 1e6, "m"))
        # What a new job gets without the benchmark's long tasks: the spec's own task length and record budget.
        log("  job at-least-once with the spec's default max_batch_ms and max_records_per_partition")
        spec = job_spec(c.src.bootstrap, c.dst.bootstrap, "dflt", "at-least-once", ("bench-src",), opts)
        defaults = RuntimeSettings()
        spec = replace(
            spec,
            engine=replace(
                spec.engine,
                max_batch_ms=defaults.max_batch_ms,
                max_records_per_partition=defaults.max_records_per_partition,
            ),
        )
        r["job_alo_spec_defaults"] = run_job(c, spec, n).rate
        r["spec_defaults_pct_alo"] = 100 * r["job_alo_spec_defaults"] / r["job_alo"]
        r["alo_x_baseline"] = r["job_alo"] / r["baseline"]
        r["alo_pct_limit"] = 100 * r["job_alo"] / r["limit"]
        r["eos_pct_alo"] = 100 * r["job_eos"] / r["job_alo"]
        r["ceiling_x_baseline"] = r["copy_ceiling"] / r["baseline"]
        r["ceiling_pct_limit"] = 100 * r["copy_ceiling"] / r["limit"]
        r["alo_pct_ceiling"] = 100 * r["job_alo"] / r["copy_ceiling"]
        r["cpu_alo_x_baseline"] = r["job_alo_cpu_s_per_m"] / r["baseline_cpu_s_per_m"]
        r["cpu_eos_x_baseline"] = r["job_eos_cpu_s_per_m"] / r["baseline_cpu_s_per_m"]
        # job / ceiling = (busy_pct_alo / busy_pct_ceiling) / machine_cpu_x_ceiling_alo: how much of the gap
        # is CPU the machine left unused, and how much is CPU the copy spends per record beyond the ceiling's
        r["machine_cpu_x_ceiling_alo"] = r["machine_cpu_s_per_m_alo"] / r["machine_cpu_s_per_m_ceiling"]
        r["spark_start_s"] = c.spark_start_s or 0.0
    return r


def scenario_scale(opts) -> dict[str, float]:
    """512 partitions over 50 topics (12 of 11 partitions, 38 of 10), and the 8-partition job
    on the same brokers in the same repetition, so the ratio shares the machine's state."""
    n = opts.records
    topics = {f"bench-scale-{i:02d}": (11 if i < 12 else 10) for i in range(50)}
    with Clusters(opts) as c:
        create(c.src.bootstrap, {**topics, "bench-src": 8})
        wide = [(t, p) for t, k in topics.items() for p in range(k)]
        produce_only(c.src.bootstrap, wide, n, opts.size)
        produce_only(c.src.bootstrap, [("bench-src", p) for p in range(8)], n, opts.size)
        r = {"partitions": float(len(wide))}
        for tag, alias, include in (("8", "eight", "bench-src"), ("512", "wide", "bench-scale-.*")):
            j = run_job(c, job_spec(c.src.bootstrap, c.dst.bootstrap, alias, "at-least-once", (include,), opts), n)
            r[f"job_alo_{tag}"] = j.rate
            r.update(cpu_figures(tag, j.window, n / 1e6, "m"))
        r["pct_of_8"] = 100 * r["job_alo_512"] / r["job_alo_8"]
    return r


def scenario_size(opts) -> dict[str, float]:
    r: dict[str, float] = {}
    for size in (1_000, 10_000):
        n = max(1_000, int(opts.size_mb * 1e6 / size))
        with Clusters(opts) as c:
            create(c.src.bootstrap, {"bench-src": 8})
            tps = [("bench-src", p) for p in range(8)]
            lim = limit(c, tps, n, size)
            ceiling, ceiling_window = copy_ceiling(c, tps, n, size)
            j = run_job(c, job_spec(c.src.bootstrap, c.dst.bootstrap, "size", "at-least-once", ("bench-src",), opts), n)
            tag, gb = f"{size // 1000}k", n * size / 1e9
            r[f"limit_mb_s_{tag}"] = lim["limit"] * size / 1e6
            r[f"job_alo_mb_s_{tag}"] = j.rate * size / 1e6
            r[f"ceiling_mb_s_{tag}"] = ceiling * size / 1e6
            r[f"pct_limit_{tag}"] = 100 * j.rate / lim["limit"]
            r[f"pct_ceiling_{tag}"] = 100 * j.rate / ceiling
            r.update(cpu_figures(tag, j.window, gb, "gb"))
            r.update(cpu_figures(f"ceiling_{tag}", ceiling_window, gb, "gb"))
            r[f"machine_cpu_x_ceiling_{tag}"] = j.window.machine_cpu_s / ceiling_window.machine_cpu_s
    return r


#: The benchmark readers' consumer settings (bench/deployed.py passes its own fetch wait).
READER = {"fetch.wait.max.ms": 10, "isolation.level": "read_committed"}


def _read_target(bootstrap: str, topic: str, partitions: int, config: dict, count, since_ms, stop, results) -> None:
    """TargetReader's process: count records, and keep (produce timestamp, now - produce timestamp) for the
    records produced at or after `since_ms`; send them back when stopped."""
    c = Consumer(
        logs.client_config(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-reader-{topic}-{os.getpid()}",
                "enable.auto.commit": False,
                **config,
            }
        )
    )
    timed: list[tuple[float, float]] = []
    assigned = False
    while not stop.is_set():
        if not assigned:
            if topic in c.list_topics(timeout=5).topics:
                c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
                assigned = True
            else:
                time.sleep(0.1)
            continue
        msgs = c.consume(1000, 0) or c.consume(1, 0.05)
        now = time.time() * 1000
        since = since_ms.value
        n = 0
        for m in msgs:
            if not m.error():
                n += 1
                ts = m.timestamp()[1]
                if ts >= since:
                    timed.append((ts, now - ts))
        if n:
            with count.get_lock():
                count.value += n
    c.close()
    results.send(timed)
    results.close()


class TargetReader:
    """Reads a topic in its own process (so that the benchmark's producer and the driver in this process do
    not delay it through the GIL): a count of records seen, and latency samples (time seen - produce
    timestamp) of the records produced after `measure_from_now()`, with their produce timestamps in `timed`."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, config: dict | None = None):
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self._count = ctx.Value("q", 0)
        self._since = ctx.Value("d", float("inf"))
        self._stop = ctx.Event()
        self._recv, send = ctx.Pipe(duplex=False)
        self.timed: list[tuple[float, float]] = []  # (produce timestamp ms, latency ms)
        self.proc = ctx.Process(
            target=_read_target,
            args=(
                bootstrap,
                topic,
                partitions,
                READER if config is None else config,
                self._count,
                self._since,
                self._stop,
                send,
            ),
            daemon=True,
        )
        self.proc.start()

    @property
    def count(self) -> int:
        return int(self._count.value)

    @property
    def samples(self) -> list[float]:
        return [lat for _, lat in self.timed]

    def measure_from_now(self) -> None:
        self._since.value = time.time() * 1000

    def close(self) -> None:
        self._stop.set()
        if self._recv.poll(60):
            self.timed = self._recv.recv()
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()


def steady(
    producer: Producer,
    topic: str,
    partitions: int,
    rate: float,
    seconds: float,
    until: Callable[[], bool] | None = None,
) -> int:
    """Produce at a steady rate for `seconds` (or until `until()`); returns the count."""
    start, i = time.monotonic(), 0
    while time.monotonic() - start < seconds and not (until and i % 100 == 0 and until()):
        try:
            producer.produce(topic, b"x" * 100, None, i % partitions)
        except BufferError:
            producer.poll(0.05)
            continue
        i += 1
        if i % 100 == 0:
            producer.poll(0)
            ahead = i / rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
    return i


def _generate(
    bootstrap: str, topic: str, partitions: int, rate: float, seconds: float, warm_s: float, sent, window_ms
) -> None:
    p = Producer(logs.client_config({"bootstrap.servers": bootstrap, **GENERATOR}))
    if warm_s > 0:
        steady(p, topic, partitions, rate, warm_s)
    window_ms.value = time.time() * 1000
    sent.value = steady(p, topic, partitions, rate, seconds)
    p.flush(30)


def generate_window(
    bootstrap: str, topic: str, partitions: int, rate: float, seconds: float, warm_s: float = 0.0
) -> tuple[int, float]:
    """The steady load in a process of its own (not in the driver's, where the GIL it shares with the
    driver thread would delay it): `warm_s` seconds at the rate, then, without a pause, the measured
    `seconds`. Returns the count produced in the measured part and when it began (epoch ms; records
    with a producer timestamp from then on are the window's)."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    sent, window_ms = ctx.Value("q", 0), ctx.Value("d", 0.0)
    proc = ctx.Process(target=_generate, args=(bootstrap, topic, partitions, rate, seconds, warm_s, sent, window_ms))
    proc.start()
    proc.join(warm_s + seconds + 120)
    return int(sent.value), float(window_ms.value)


def generate(bootstrap: str, topic: str, partitions: int, rate: float, seconds: float) -> int:
    """`seconds` of steady load (generate_window without a warm-up); returns the count produced."""
    return generate_window(bootstrap, topic, partitions, rate, seconds)[0]


REFERENCE_S = 8.0  # seconds of load per reference reading of the source broker's CPU


def broker_reference(c: Clusters, rate: float, parts: int) -> dict[str, float]:
    """The source broker's CPU (in cores) under the latency scenario's load with no job at all: the load
    generator alone, then with one reader tailing the topic. What Tansu spends to serve a tail, set apart
    from what the job costs it."""
    topic, tag = f"bench-ref-{int(rate)}", int(rate)
    create(c.src.bootstrap, {topic: parts})
    meter = c.meter()
    generate(c.src.bootstrap, topic, parts, rate, REFERENCE_S)
    alone = meter.window()
    reader = TargetReader(c.src.bootstrap, topic, parts)
    try:
        time.sleep(2)  # assigned and tailing
        meter = c.meter()
        generate(c.src.bootstrap, topic, parts, rate, REFERENCE_S)
        tailed = meter.window()
    finally:
        reader.close()
    return {
        f"source_broker_cores_generator_{tag}": alone.source_cpu_s / alone.wall_s,
        f"source_broker_cores_one_reader_{tag}": tailed.source_cpu_s / tailed.wall_s,
    }


def scenario_latency(opts) -> dict[str, float]:
    r: dict[str, float] = {}
    parts = 8
    with Clusters(opts) as c:
        for rate in opts.latency_rates:
            log(f"  the source broker's CPU at {rate:,.0f} rec/s with no job: generator alone, then one reader")
            r.update(broker_reference(c, rate, parts))
        for mode, key in (("at-least-once", "alo"), ("exactly-once", "eos")):
            for rate in opts.latency_rates:
                alias, topic = f"lat{key}{int(rate)}", f"bench-lat-{key}-{int(rate)}"
                create(c.src.bootstrap, {topic: parts})
                spec = job_spec(c.src.bootstrap, c.dst.bootstrap, alias, mode, (topic,), opts)
                driver = ReplicationDriver(spec, SparkExecutor(c.spark))
                thread = threading.Thread(target=driver.run, daemon=True)
                thread.start()
                reader = TargetReader(c.dst.bootstrap, f"{alias}.{topic}", parts)
                # The same reading on the source topic: how late records are visible there already
                # (the load generator and the source broker share the machine), to set apart.
                at_source = TargetReader(c.src.bootstrap, topic, parts)
                p = Producer(logs.client_config({"bootstrap.servers": c.src.bootstrap, **GENERATOR}))
                try:
                    # warm-up until records flow through, then a steady stream
                    steady(p, topic, parts, 200, 90, until=lambda reader=reader: reader.count > 0)
                    steady(p, topic, parts, rate, 2)
                    p.flush(10)
                    time.sleep(1)
                    reader.measure_from_now()
                    at_source.measure_from_now()
                    log(f"  latency {mode} at {rate:,.0f} rec/s for {opts.latency_seconds:.0f}s")
                    meter = c.meter()
                    sent = generate(c.src.bootstrap, topic, parts, rate, opts.latency_seconds)
                    window = meter.window()
                    time.sleep(3)
                finally:
                    reader.close()
                    at_source.close()
                    driver.stop_event.set()
                    thread.join(60)
                pct = percentiles(reader.samples)
                tag = f"{key}_{int(rate)}"
                r[f"rate_{tag}"] = sent / opts.latency_seconds
                for k, v in pct.items():
                    r[f"{k}_ms_{tag}"] = v if v is not None else float("nan")
                for k, v in percentiles(at_source.samples, (50, 99)).items():
                    r[f"source_{k}_ms_{tag}"] = v if v is not None else float("nan")
                # how busy the machine and each broker were while the load ran (cores: CPU s per second)
                r[f"busy_pct_{tag}"] = window.busy_pct
                r[f"source_broker_cores_{tag}"] = window.source_cpu_s / window.wall_s
                r[f"target_broker_cores_{tag}"] = window.target_cpu_s / window.wall_s
    return r


def scenario_startup(opts) -> dict[str, float]:
    """A trickle of 1,000 records/s into a new topic: driver start -> first record on the target;
    then the driver is stopped and a new one started on the same spec: restart -> the target's
    count grows again."""
    parts, topic, alias = 8, "bench-start", "start"
    r: dict[str, float] = {}
    with Clusters(opts) as c:
        spark = c.spark
        r["spark_session_start_s"] = c.spark_start_s or 0.0
        create(c.src.bootstrap, {topic: parts})
        spec = job_spec(c.src.bootstrap, c.dst.bootstrap, alias, opts.startup_delivery, (topic,), opts)
        # The spec's default task length: a driver stops after its running task, and a trickle
        # never lets a task end idle (this does not change the figures measured here).
        spec = replace(spec, engine=replace(spec.engine, max_batch_ms=1_000))
        reader = TargetReader(c.dst.bootstrap, f"{alias}.{topic}", parts)
        stop = threading.Event()
        p = Producer(logs.client_config({"bootstrap.servers": c.src.bootstrap, **GENERATOR}))
        trickle = threading.Thread(target=lambda: steady(p, topic, parts, 1_000, 600, until=stop.is_set), daemon=True)
        trickle.start()
        try:
            for phase in ("first_record_s", "restart_flowing_s"):
                seen = reader.count
                driver = ReplicationDriver(spec, SparkExecutor(spark))
                t0 = time.perf_counter()
                thread = threading.Thread(target=driver.run, daemon=True)
                thread.start()
                while reader.count == seen and time.perf_counter() - t0 < 120:
                    time.sleep(0.01)
                r[phase] = time.perf_counter() - t0
                time.sleep(1)
                driver.stop_event.set()
                thread.join(60)
        finally:
            stop.set()
            trickle.join(10)
            reader.close()
    return r


RUNNERS: dict[str, Callable[[Any], dict[str, float]]] = {
    "throughput": scenario_throughput,
    "scale": scenario_scale,
    "size": scenario_size,
    "latency": scenario_latency,
    "startup": scenario_startup,
}


# ---------------------------------------------------------------- environment and report


def environment(opts) -> dict[str, Any]:
    import confluent_kafka
    import pyspark

    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=20).stderr.splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        java = "unknown"
    return {
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "python": platform.python_version(),
        "confluent_kafka": confluent_kafka.version()[0],
        "librdkafka": confluent_kafka.libversion()[0],
        "pyspark": pyspark.__version__,
        "java": java,
        "platform": platform.platform(),
        "master": opts.master,
        "parallelism": opts.parallelism,
        "engine": opts.engine,
        "records": opts.records,
        "size": opts.size,
        "repeat": opts.repeat,
        **BATCH,
    }


TARGETS = {  # key: (label, comparison, target) for the lines the issue sets targets on
    "alo_x_baseline": ("job at-least-once / baseline", ">=", 2.0),
    "alo_pct_limit": ("job at-least-once, % of the client limit", ">=", 75),
    "eos_pct_alo": ("exactly-once, % of at-least-once", ">=", 90),
    "cpu_alo_x_baseline": ("CPU per record, job at-least-once / baseline", "<=", 1.0),
    "cpu_eos_x_baseline": ("CPU per record, job exactly-once / baseline", "<=", 1.0),
    "pct_of_8": ("512 partitions / 8 partitions, %", ">=", 80),
    "pct_limit_1k": ("1 KB records, % of the limit (MB/s)", ">=", 70),
    "pct_limit_10k": ("10 KB records, % of the limit (MB/s)", ">=", 70),
    "p99_ms_alo_10000": ("p99 ms at 10k rec/s, at-least-once", "<=", 250),
    "p99_ms_eos_10000": ("p99 ms at 10k rec/s, exactly-once", "<=", 250),
    "p99_ms_alo_50000": ("p99 ms at 50k rec/s, at-least-once", "<=", 1000),
    "p99_ms_eos_50000": ("p99 ms at 50k rec/s, exactly-once", "<=", 1000),
}


def report(env: dict[str, Any], results: dict[str, dict[str, dict[str, float]]]) -> None:
    print(
        f"\nReplication benchmark, {env['date_utc']}: {env['cpus']} CPUs (load average at start "
        f"{env['loadavg_start'][0]:.1f}), Python {env['python']}, confluent-kafka {env['confluent_kafka']} "
        f"(librdkafka {env['librdkafka']}), PySpark {env['pyspark']} {env['master']}, {env['java']}; "
        f"Tansu brokers on loopback; median [min-max] of {env['repeat']} repetitions"
    )
    for scenario, figures in results.items():
        print(f"\n  {scenario}")
        for key, s in figures.items():
            print(figure_line(key, s, TARGETS))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--scenario", action="append", choices=SCENARIOS + ("all",), help="scenario to run (repeatable; default all)"
    )
    ap.add_argument("--repeat", type=int, default=3, help="repetitions of every figure (default 3)")
    ap.add_argument("--records", type=int, default=1_000_000, help="backlog for throughput and scale")
    ap.add_argument("--size", type=int, default=100, help="record size for throughput and scale (bytes)")
    ap.add_argument("--size-mb", type=float, default=400, help="megabytes per case in the size scenario")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument(
        "--engine", default="tansu", choices=[e.value for e in Engine], help="the brokers' engine (docs/brokers.md)"
    )
    ap.add_argument("--parallelism", type=int, default=2)
    ap.add_argument("--latency-rates", type=float, nargs="+", default=[10_000, 50_000])
    ap.add_argument("--latency-seconds", type=float, default=15)
    ap.add_argument("--startup-delivery", default="at-least-once", choices=("at-least-once", "exactly-once"))
    ap.add_argument("--max-batch-ms", type=int, default=BATCH["max_batch_ms"])
    ap.add_argument("--max-records-per-partition", type=int, default=BATCH["max_records_per_partition"])
    ap.add_argument("--json", help="write the environment, every repetition and the summary to this file")
    opts = ap.parse_args(argv)
    # SIGTERM (e.g. `kill`) unwinds like Ctrl-C: the brokers, the Spark session and the reader processes are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    scenarios = [s for s in SCENARIOS if not opts.scenario or "all" in opts.scenario or s in opts.scenario]
    BATCH.update(max_batch_ms=opts.max_batch_ms, max_records_per_partition=opts.max_records_per_partition)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    env = environment(opts)
    runs: dict[str, list[dict[str, float]]] = {s: [] for s in scenarios}
    for i in range(opts.repeat):
        opts.repetition = i
        for s in scenarios:
            log(f"{s}, repetition {i + 1}/{opts.repeat}")
            runs[s].append(RUNNERS[s](opts))
    report_runs(env, runs, lambda summary: report(env, summary), opts.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
