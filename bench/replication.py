"""Replication benchmark: client limit, hand-written baseline, and the Spark job in both modes.

    python bench/replication.py [--records 1000000] [--partitions 8] [--size 100] [--master local[2]]

Starts two Tansu brokers (source, target) on loopback and, on those same brokers, measures:

1. the client limit: produce-only rate (one tuned confluent-kafka producer writing the source
   topic) and consume-only rate (one tuned consumer reading it back);
2. the baseline a user would write: one process, `consumer.poll()` -> `producer.produce()`, with
   periodic async commits (default client settings);
3. the replication job (ReplicationDriver + Spark, Python workers copying), at-least-once and
   exactly-once, copying the same backlog; the rate counts from the first copied batch to the
   last record, so Spark's start-up is not included (it is printed separately);
4. end-to-end latency (source produce timestamp -> consumed on the target) while a producer
   writes a steady --latency-rate records/s through the at-least-once job.

Prints a table with records/s and the ratios job/baseline, job/limit, exactly-once/at-least-once,
and latency p50/p99; `--json FILE` also writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from reconciler.dev.brokers import free_port, start_broker, stop_pid  # noqa: E402
from reconciler.replication.driver import ReplicationDriver, SparkExecutor  # noqa: E402
from reconciler.replication.session import build_session  # noqa: E402
from reconciler.replication.spec import ClusterSpec, JobSpec  # noqa: E402
from reconciler.replication.status import percentiles  # noqa: E402

TOPIC = "bench-src"


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def create(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)


def produce_only(bootstrap: str, n: int, partitions: int, size: int) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
                  "enable.idempotence": True})
    value = b"x" * size
    start = time.perf_counter()
    for i in range(n):
        try:
            p.produce(TOPIC, value, None, i % partitions)
        except BufferError:
            p.poll(0.05)
            p.produce(TOPIC, value, None, i % partitions)
    p.flush(120)
    return n / (time.perf_counter() - start)


def consume_only(bootstrap: str, n: int, partitions: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-consume-only", "enable.auto.commit": False,
                  "enable.partition.eof": True, "fetch.max.bytes": 52_428_800,
                  "max.partition.fetch.bytes": 4_194_304, "queued.max.messages.kbytes": 262_144})
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    got = 0
    eof = set()
    start = time.perf_counter()
    while got < n or len(eof) < partitions:
        for m in c.consume(10_000, 0) or c.consume(1, 1.0):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                continue
            got += 1
    rate = got / (time.perf_counter() - start)
    c.close()
    return rate


def _consume_share(args) -> tuple[int, float]:
    bootstrap, partitions, share = args
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-consume-parallel", "enable.auto.commit": False,
                  "enable.partition.eof": True, "fetch.max.bytes": 52_428_800,
                  "max.partition.fetch.bytes": 4_194_304, "queued.max.messages.kbytes": 262_144})
    c.assign([TopicPartition(TOPIC, p, 0) for p in share])
    got, eof = 0, set()
    start = time.perf_counter()
    while len(eof) < len(share):
        for m in c.consume(10_000, 0) or c.consume(1, 1.0):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                continue
            got += 1
    took = time.perf_counter() - start
    c.close()
    return got, took


def consume_parallel(bootstrap: str, partitions: int, processes: int) -> float:
    """Consume-only with as many client processes as the job has slots (its shape)."""
    import multiprocessing

    shares = [[p for p in range(partitions) if p % processes == i] for i in range(processes)]
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        results = pool.map(_consume_share, [(bootstrap, partitions, sh) for sh in shares])
    return sum(n for n, _ in results) / max(t for _, t in results)


def baseline(source: str, target: str, n: int, partitions: int) -> float:
    """What a user writes: poll one record, produce it, commit now and then."""
    create(target, "baseline-copy", partitions)
    c = Consumer({"bootstrap.servers": source, "group.id": "bench-baseline", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    p = Producer({"bootstrap.servers": target, "enable.idempotence": True})
    c.assign([TopicPartition(TOPIC, i, 0) for i in range(partitions)])
    copied = 0
    start = time.perf_counter()
    while copied < n:
        msg = c.poll(1.0)
        if msg is None or msg.error():
            continue
        while True:
            try:
                p.produce("baseline-copy", msg.value(), msg.key(), msg.partition(),
                          timestamp=msg.timestamp()[1], headers=msg.headers())
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
    rate = copied / (time.perf_counter() - start)
    c.close()
    return rate


# Backlog-friendly batches (a batch ends earlier when its partitions are caught up, so this does
# not change latency at a steady rate); the spec defaults are 1 s and 50,000.
BATCH = {"max_batch_ms": 5_000, "max_records_per_partition": 500_000}


def job_spec(source: str, target: str, alias: str, delivery: str, master: str, parallelism: int) -> JobSpec:
    return JobSpec(flow=f"{alias}->target", source=ClusterSpec(alias, source), target=ClusterSpec("target", target),
                   topics_include=(TOPIC,), delivery=delivery, master=master, parallelism=parallelism,
                   heartbeats_interval_seconds=5, checkpoints_interval_seconds=5, refresh_interval_seconds=5,
                   status_interval_seconds=2, trigger_interval_ms=50, **BATCH)


def run_job(spark, spec: JobSpec, n: int) -> tuple[float, float]:
    """Copy the backlog; returns (records/s from the first batch on, seconds to the first batch)."""
    driver = ReplicationDriver(spec, SparkExecutor(spark.sparkContext))
    t0 = time.perf_counter()
    driver.start()
    first = None
    try:
        while driver.records < n:
            before = time.perf_counter()
            driver.step()
            if first is None and driver.records > 0:
                first = (before, driver.records)
            if driver.last_error and driver.errors > 20:
                raise RuntimeError(driver.last_error)
        end = time.perf_counter()
    finally:
        driver.stop_event.set()
        driver.close()
    assert first is not None
    # The first batch includes worker start-up; count it in full (conservative).
    return n / (end - first[0]), first[0] - t0


def warm_up(spark, parallelism: int) -> None:
    """Start the Python workers and import the job's modules once (a running job has them)."""
    def touch(it):
        import reconciler.replication.worker  # noqa: F401

        return [sum(1 for _ in it)]

    spark.sparkContext.parallelize(range(parallelism * 4), parallelism * 2).mapPartitions(touch).collect()


def latency(spark, source: str, target: str, partitions: int, rate: float, seconds: float, master: str,
            parallelism: int) -> dict:
    topic = "bench-latency"
    create(source, topic, partitions)
    spec = job_spec(source, target, "lat", "at-least-once", master, parallelism).with_(topics_include=(topic,))
    driver = ReplicationDriver(spec, SparkExecutor(spark.sparkContext))
    thread = threading.Thread(target=driver.run, daemon=True)
    thread.start()
    # consumer on the target, measuring now - produce timestamp
    samples: list[float] = []
    stop = threading.Event()

    def consume():
        c = Consumer({"bootstrap.servers": target, "group.id": "bench-latency", "enable.auto.commit": False,
                      "fetch.wait.max.ms": 10})
        assigned = False
        while not stop.is_set():
            if not assigned:
                md = c.list_topics(timeout=5)
                if f"lat.{topic}" in md.topics:
                    c.assign([TopicPartition(f"lat.{topic}", p, 0) for p in range(partitions)])
                    assigned = True
                else:
                    time.sleep(0.2)
                    continue
            for m in c.consume(1000, 0) or c.consume(1, 0.1):
                if not m.error():
                    samples.append(time.time() * 1000 - m.timestamp()[1])
        c.close()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    # warm-up until the job copies, then a steady stream
    p = Producer({"bootstrap.servers": source, "linger.ms": 1})
    deadline = time.monotonic() + 90
    while driver.records == 0 and time.monotonic() < deadline:
        p.produce(topic, b"w" * 100, None, 0)
        p.flush(5)
        time.sleep(0.2)
    time.sleep(2)
    samples.clear()
    start = time.monotonic()
    i = 0
    while time.monotonic() - start < seconds:
        p.produce(topic, b"x" * 100, None, i % partitions)
        i += 1
        if i % 100 == 0:
            p.poll(0)
            ahead = i / rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
    p.flush(30)
    time.sleep(3)
    stop.set()
    reader.join(10)
    driver.stop_event.set()
    thread.join(60)
    pct = percentiles(samples, (50, 95, 99))
    return {"produced": i, "measured": len(samples), "rate": i / seconds, **pct,
            "job_p99_at_ack": driver.latency.snapshot()["p99"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--parallelism", type=int, default=2)
    ap.add_argument("--latency-rate", type=float, default=10_000)
    ap.add_argument("--latency-seconds", type=float, default=20)
    ap.add_argument("--max-batch-ms", type=int, default=BATCH["max_batch_ms"])
    ap.add_argument("--max-records-per-partition", type=int, default=BATCH["max_records_per_partition"])
    ap.add_argument("--skip", default="", help="comma list of phases to skip: baseline,alo,eos,latency")
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    BATCH.update(max_batch_ms=args.max_batch_ms, max_records_per_partition=args.max_records_per_partition)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    src = start_broker("127.0.0.1", free_port())
    dst = start_broker("127.0.0.1", free_port())
    results: dict = {"records": args.records, "partitions": args.partitions, "size": args.size,
                     "master": args.master, "cpus": os.cpu_count(),
                     "parallelism": args.parallelism, **BATCH}
    spark = None
    try:
        create(src.bootstrap, TOPIC, args.partitions)
        log(f"produce-only: {args.records} records of {args.size} bytes on {args.partitions} partitions")
        results["produce_only"] = produce_only(src.bootstrap, args.records, args.partitions, args.size)
        log("consume-only")
        results["consume_only"] = consume_only(src.bootstrap, args.records, args.partitions)
        log(f"consume-only, {args.parallelism} processes")
        results["consume_parallel"] = consume_parallel(src.bootstrap, args.partitions, args.parallelism)
        # The job runs `parallelism` consumers at once: its ceiling is the parallel consume rate.
        results["limit"] = min(results["produce_only"], max(results["consume_only"], results["consume_parallel"]))
        if "baseline" not in skip:
            log("baseline: single-process poll/produce loop")
            results["baseline"] = baseline(src.bootstrap, dst.bootstrap, args.records, args.partitions)
        spark = build_session(job_spec(src.bootstrap, dst.bootstrap, "x", "at-least-once", args.master,
                                       args.parallelism), args.master)
        warm_up(spark, args.parallelism)
        for mode, alias, key in (("at-least-once", "alo", "alo"), ("exactly-once", "eos", "eos")):
            if key in skip:
                continue
            log(f"job {mode}")
            rate, startup = run_job(spark, job_spec(src.bootstrap, dst.bootstrap, alias, mode, args.master,
                                                    args.parallelism), args.records)
            results[f"job_{key}"] = rate
            results[f"job_{key}_startup_s"] = startup
        if "latency" not in skip:
            log(f"latency at {args.latency_rate:.0f} records/s for {args.latency_seconds:.0f}s")
            results["latency"] = latency(spark, src.bootstrap, dst.bootstrap, args.partitions, args.latency_rate,
                                         args.latency_seconds, args.master, args.parallelism)
    finally:
        if spark is not None:
            spark.stop()
        stop_pid(src.pid)
        stop_pid(dst.pid)
    report(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


def report(r: dict) -> None:
    def rate(key):
        return f"{r[key]:>12,.0f} rec/s" if key in r else "       (skipped)"

    print(f"\nReplication benchmark: {r['records']:,} records x {r['size']} B, {r['partitions']} partitions, "
          f"Spark {r['master']}, {r['cpus']} CPUs, Tansu brokers on loopback")
    print(f"  client limit, produce-only      {rate('produce_only')}")
    print(f"  client limit, consume-only      {rate('consume_only')}  (1 consumer)")
    print(f"  client limit, consume-only      {rate('consume_parallel')}  ({r.get('parallelism', 2)} consumer processes)")
    print(f"  limit used for the ratios       {r['limit']:>12,.0f} rec/s  (min of produce-only and the best consume-only)")
    print(f"  baseline (poll/produce loop)    {rate('baseline')}")
    print(f"  job at-least-once               {rate('job_alo')}")
    print(f"  job exactly-once                {rate('job_eos')}")
    limit = r["limit"]
    for key, label in (("job_alo", "at-least-once"), ("job_eos", "exactly-once")):
        if key in r:
            base = f"{r[key] / r['baseline']:.2f}x baseline (target >= 1.5)" if "baseline" in r else ""
            print(f"  {label:<14} = {base}, {100 * r[key] / limit:.0f}% of the limit (target >= 70%)")
    if "job_alo" in r and "job_eos" in r:
        print(f"  exactly-once / at-least-once = {100 * r['job_eos'] / r['job_alo']:.0f}% (target >= 80%)")
    if "latency" in r:
        lat = r["latency"]
        print(f"  end-to-end latency at {lat['rate']:,.0f} rec/s: p50 {lat['p50']:.0f} ms, p95 {lat['p95']:.0f} ms, "
              f"p99 {lat['p99']:.0f} ms (target p99 <= 1000 ms; {lat['measured']:,} records measured)")
    if "job_alo_startup_s" in r:
        print(f"  (job start-up before the first batch, not in the rates: {r['job_alo_startup_s']:.1f}s)")


if __name__ == "__main__":
    sys.exit(main())
