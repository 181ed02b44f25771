"""The job as `apply` deploys it (issue 23): LocalDeployer -> spark-submit jobs/mirror_job.py -> records on the target.

    python bench/deployed.py                                          # both scenarios, 3 repetitions
    python bench/deployed.py --scenario backlog --records 200000 --repeat 1
    python bench/deployed.py --scenario latency --rate 10000 --seconds 20
    python bench/deployed.py --job max_batch_ms=30000 ...             # a `job:` setting of the flow changed

This is the benchmark's headline; bench/replication.py measures the driver in process (its own
SparkContext, the benchmark's 30-s tasks) and is the figure beside it. Each repetition starts two
fresh Tansu brokers (noida-db with --engine noida) on loopback (source, target) and a state directory in a temporary directory.
The flow is built from a one-flow topology (`JobSpec.from_flow`, as `plan` builds it: the topology's
defaults, `job: {}` unless --job says otherwise) and deployed with `LocalDeployer().deploy(spec,
{"engine": "bench"})`, which starts `spark-submit jobs/mirror_job.py --engine-dir DIR` as apply does.

backlog   --records 100-byte records on --partitions partitions are produced first; then, on those
          brokers, in this order: the hand-written loop (bench/replication.py `baseline`: one process,
          poll -> produce, async commits; records/s over its whole loop), the deployed job (records/s
          from the first copied record seen on the target to the last: the target's listed ends,
          polled every 50 ms, and complete only once every record is read back: bench/common.py
          `TargetWatch`; spark-submit and Spark start-up are not in it, printed apart as
          deploy_to_first_s), the deployed job warm (a second flow, `warm`, added to the running engine
          as apply adds one, copying the same backlog: without the first task's start-up), and the in-process driver on the same spec (its own SparkContext in this
          process, stopped before anything else runs; timed the same way from the target, and by its
          own loop as bench/replication.py does: in_process_loop). Each reads the same source topic
          from the start with its own consumer group and writes its own target topic. Ratios within
          one repetition: deployed / baseline (issue 39's target: >= 3.0), deployed / in-process, and the same for warm.
startup   apply -> the first copied record (issue 39's target: <= 10 s): 1,000 records wait on the source; the
          clock runs from LocalDeployer.deploy (a new engine: spark-submit, the JVM, the SparkContext, the flow's
          driver start, its first batch) until the target's high watermarks first move (polled every 50 ms).
          Then, on the same brokers, the same as a user runs it: `reconciler apply DIR --auto-approve` in a
          new process (topology read and validated, both clusters observed, the remote topic created, the engine
          deployed) -> the first copied record (apply_cli_to_first_s; another source alias, so all of it is new).
          --logs DIR keeps each repetition's engine log (job.log: timestamped lines of each step).
latency   --rate records/s (100 B, --partitions partitions, a producer with librdkafka's default
          linger in a process of its own) for WARM_S (5 s) and then, without a pause, the --seconds measured (the
          job copying a stream; *_after_pause_max is the worst record of the load's first AFTER_PAUSE_S, 2 s, after
          the warm-up's pause: the job waking up to a stream); a plain consumer (librdkafka's defaults but
          fetch.wait.max.ms --reader-wait-ms, 100: see below; in a process of its own) reads the topic and takes (time seen - producer timestamp) per record:
          floor: the SOURCE topic, no job deployed, nothing else running;
          job:   the job's target topic, the job deployed and caught up.
          --beside adds a second plain reader of the job's SOURCE topic during the job (source_during_job_*): what
                 the source broker itself delivers while the job runs; job_p99_over_source is the job's own share.
                 Off by default: on Tansu, whose cost per fetch grows with the partition's length, that reader's
                 fetches load the source broker enough to raise the job's own figure (README, "a fifth look").
          p50/p99/max of each, the p99 of each 10 s; the job's p99 against the floor's, and where the job's tail is: the
          records later than max(100 ms, 1.5x the floor's p99) grouped into episodes (a gap of 1 s starts
          a new one), each episode's start (s into the window), length and worst latency, which shows
          whether the tail comes at the job's task boundaries (one per `max_batch_ms` at a steady rate).

          The readers' fetch.wait.max.ms matters on Tansu, which answers a waiting fetch late when records
          arrive: a plain consumer of the source topic with no job at 10,000/s saw p50/p99 ~135/~280 ms with
          librdkafka's default 500 ms, 37/83 ms with 100 ms, 15/190-390 ms with 10 ms (the broker busier:
          bench/replication.py's readers). Floor and job are read with the same setting.

CPU: busy_pct_* is how busy the whole machine was over each measured window (/proc/stat, every process).
Every figure is measured --repeat times; the report prints the median and [min-max].
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


import reconciler.deployers.instance as instance  # noqa: E402
from bench import common  # noqa: E402
from bench.common import (  # noqa: E402
    TargetWatch,
    apply_cli,
    deploy,
    figure_line,
    stop_engines,
)
from bench.replication import (  # noqa: E402
    Clusters,
    TargetReader,
    baseline,
    copied_records,
    create,
    environment,
    generate_window,
    log,
    percentiles,
    produce_only,
    steady,
)
from reconciler import logs  # noqa: E402
from reconciler.contract.spec import JobSpec  # noqa: E402
from reconciler.deployers.local import LocalDeployer  # noqa: E402
from reconciler.dev.brokers import Engine  # noqa: E402
from reconciler.topology.build import load_topology_text  # noqa: E402

SCENARIOS = ("backlog", "latency", "startup")
TOPIC = "bench-src"


def flow_spec(source: str, target: str, alias: str, topic: str, job: dict[str, Any], delivery: str) -> JobSpec:
    """The spec `plan` builds for one flow alias->east of `topic`, the topology's defaults unless `job` says."""
    topology = load_topology_text(topology_text(source, target, alias, topic, job, delivery), "bench")
    return JobSpec.from_flow(topology, topology.flows[0])


def topology_text(source: str, target: str, alias: str, topic: str, job: dict[str, Any], delivery: str) -> str:
    """A one-flow topology alias->east of `topic` (JSON, which is YAML), the defaults unless `job` says."""
    return json.dumps(
        {
            "apiVersion": "reconciler/v1",
            "kind": "Topology",
            "metadata": {"name": "bench"},
            "clusters": {alias: {"bootstrap_servers": source}, "east": {"bootstrap_servers": target}},
            "flows": [
                {
                    "source": alias,
                    "target": "east",
                    "topics": {"include": [topic]},
                    "delivery": delivery,
                    **({"job": job} if job else {}),
                }
            ],
        }
    )


def deployer_alive(root: Path) -> Callable[[], bool]:
    return lambda: bool(instance.scan(under=root.resolve()))


# ---------------------------------------------------------------- backlog


def scenario_backlog(opts, work: Path) -> dict[str, float]:
    n, parts = opts.records, opts.partitions
    r: dict[str, float] = {}
    with Clusters(opts) as c:
        create(c.src.bootstrap, {TOPIC: parts})
        tps = [(TOPIC, p) for p in range(parts)]
        log(f"  producing {n:,} records of 100 B on {parts} partitions")
        produce_only(c.src.bootstrap, tps, n, 100)

        log("  baseline: the hand-written poll -> produce loop")
        meter = c.meter()
        r["baseline"], _ = baseline(c.src.bootstrap, c.dst.bootstrap, tps, n, c.exclude)
        r["busy_pct_baseline"] = meter.window().busy_pct

        log("  deployed: LocalDeployer -> spark-submit jobs/mirror_job.py")
        spec = flow_spec(c.src.bootstrap, c.dst.bootstrap, "west", TOPIC, opts.job, opts.delivery)
        root = work / "state"
        deployer = LocalDeployer(root=root, stop_timeout=30)
        watch = TargetWatch(c.dst.bootstrap, f"west.{TOPIC}", parts, n, c.meter)
        t_deploy = time.monotonic()
        try:
            deploy(deployer, spec, "bench")
            watch.wait(900, deployer_alive(root))
            watch.close()
            r["deployed"] = watch.rate()
            assert watch.first is not None
            r["deploy_to_first_s"] = watch.first[0] - t_deploy
            r["busy_pct_deployed"] = watch.busy_pct()
            # The same backlog again, by a second flow added to the running engine (apply's hot add: its JVM
            # and Python workers are up, the first flow idles): the deployed job without its first task's
            # start-up (Python workers forked, modules imported, clients created, the JVM's code warm).
            log("  deployed, warm: a second flow added to the running engine copies the same backlog")
            warm = flow_spec(c.src.bootstrap, c.dst.bootstrap, "warm", TOPIC, opts.job, opts.delivery)
            watch = TargetWatch(c.dst.bootstrap, f"warm.{TOPIC}", parts, n, c.meter)
            deploy(deployer, warm, "bench")
            watch.wait(900, deployer_alive(root))
            r["deployed_warm"] = watch.rate()
            r["busy_pct_deployed_warm"] = watch.busy_pct()
        finally:
            watch.close()
            stop_engines(root, deployer)

        log("  in process: the same spec's driver in this process's SparkContext")
        from reconciler.engine.driver import ReplicationDriver, SparkExecutor

        ispec = flow_spec(c.src.bootstrap, c.dst.bootstrap, "inproc", TOPIC, opts.job, opts.delivery)
        spark = c.spark  # started and warmed up (Python workers, the job's modules) before the clock
        r["in_process_spark_start_s"] = c.spark_start_s or 0.0
        driver = ReplicationDriver(ispec, SparkExecutor(spark))
        watch = TargetWatch(c.dst.bootstrap, f"inproc.{TOPIC}", parts, n, c.meter)
        try:
            driver.start()
            loop_start: float | None = None
            while copied_records(driver) < n:
                before = time.perf_counter()
                driver.step()
                if loop_start is None and driver.records > 0:
                    loop_start = before
                if driver.last_error and driver.errors > 20:
                    raise RuntimeError(driver.last_error)
            loop_end = time.perf_counter()
            watch.wait(120)
        finally:
            driver.stop_event.set()
            driver.close()
            watch.close()
        r["busy_pct_in_process"] = watch.busy_pct()
        assert loop_start is not None
        r["in_process"] = watch.rate()
        r["in_process_loop"] = n / (loop_end - loop_start)
        r["deployed_x_baseline"] = r["deployed"] / r["baseline"]
        r["in_process_x_baseline"] = r["in_process"] / r["baseline"]
        r["deployed_pct_in_process"] = 100 * r["deployed"] / r["in_process"]
        r["deployed_warm_x_baseline"] = r["deployed_warm"] / r["baseline"]
        r["deployed_warm_pct_in_process"] = 100 * r["deployed_warm"] / r["in_process"]
        log(
            f"  baseline {r['baseline']:,.0f}/s, deployed {r['deployed']:,.0f}/s "
            f"({r['deployed_x_baseline']:.2f}x), warm {r['deployed_warm']:,.0f}/s, in process {r['in_process']:,.0f}/s ({r['in_process_x_baseline']:.2f}x)"
        )
    return r


# ---------------------------------------------------------------- startup


#: Records waiting on the source when the start-up scenario deploys (a few per partition: the first is seen at once).
STARTUP_RECORDS = 1000


def scenario_startup(opts, work: Path) -> dict[str, float]:
    """apply -> the first copied record: records are waiting on the source; the flow is deployed into no
    engine (LocalDeployer.deploy: spark-submit, the JVM, the SparkContext, the flow's driver start, its first
    batch); the clock runs from the call to deploy until the target's high watermarks first move."""
    parts = opts.partitions
    r: dict[str, float] = {}
    with Clusters(opts) as c:
        create(c.src.bootstrap, {TOPIC: parts})
        produce_only(c.src.bootstrap, [(TOPIC, p) for p in range(parts)], STARTUP_RECORDS, 100)
        spec = flow_spec(c.src.bootstrap, c.dst.bootstrap, "west", TOPIC, opts.job, opts.delivery)
        root = work / "state"
        deployer = LocalDeployer(root=root, stop_timeout=30)
        watch = TargetWatch(c.dst.bootstrap, f"west.{TOPIC}", parts, STARTUP_RECORDS, c.meter)
        t_deploy = time.monotonic()
        try:
            deploy(deployer, spec, "bench")
            r["deploy_call_s"] = time.monotonic() - t_deploy
            r["deploy_to_first_s"] = first_record_after(watch, root, t_deploy, "the deploy")
        finally:
            watch.close()
            stop_engines(root, deployer)
            keep_logs(opts, root, "startup")
        r.update(startup_by_cli(opts, c, work))
    return r


def first_record_after(watch: TargetWatch, root: Path, t0: float, what: str) -> float:
    """Seconds from `t0` (monotonic) until `watch` saw the first copied record; an error after 120 s or once no
    process of the job runs under `root`."""
    deadline = time.monotonic() + 120
    while watch.first is None and time.monotonic() < deadline and deployer_alive(root)():
        time.sleep(0.02)
    if watch.first is None:
        raise RuntimeError(f"no record copied within 120 s of {what}")
    seconds = watch.first[0] - t0
    log(f"  {what} -> first copied record: {seconds:.2f} s")
    return seconds


def keep_logs(opts, root: Path, what: str) -> None:
    """--logs: the engine's log, whose timestamped lines show where the seconds went."""
    if opts.logs:
        Path(opts.logs).mkdir(parents=True, exist_ok=True)
        for f in root.glob("engines/*/job.log"):
            shutil.copy(f, Path(opts.logs) / f"{what}-{time.strftime('%H%M%S')}-{f.parent.name}.log")


def startup_by_cli(opts, c: Clusters, work: Path) -> dict[str, float]:
    """`reconciler apply DIR --auto-approve` -> the first copied record, as a user runs it: a new process, the
    topology read and validated, both clusters observed, the remote topic created, the engine deployed. Another
    source alias (`north`) on the same brokers, so the remote topic and the engine are new."""
    parts = opts.partitions
    r: dict[str, float] = {}
    tdir = work / "topology-cli"
    tdir.mkdir()
    (tdir / "topology.yaml").write_text(
        topology_text(c.src.bootstrap, c.dst.bootstrap, "north", TOPIC, opts.job, opts.delivery)
    )
    root = work / "state-cli"
    watch = TargetWatch(c.dst.bootstrap, f"north.{TOPIC}", parts, STARTUP_RECORDS, c.meter)
    t0 = time.monotonic()
    try:
        apply_cli(tdir, {"RECONCILER_STATE_DIR": str(root)}, 180)
        r["apply_cli_returned_s"] = time.monotonic() - t0
        r["apply_cli_to_first_s"] = first_record_after(watch, root, t0, "`reconciler apply`")
    finally:
        watch.close()
        stop_engines(root)
        keep_logs(opts, root, "startup-cli")
    return r


# ---------------------------------------------------------------- latency


def episodes(samples: list[tuple[float, float]], above_ms: float, gap_ms: float = 1000) -> list[dict[str, float]]:
    """The records later than `above_ms`, grouped by produce time (a gap of `gap_ms` starts a new group)."""
    if not samples:
        return []
    t_start = min(ts for ts, _ in samples)
    late = sorted((ts, lat) for ts, lat in samples if lat > above_ms)
    out: list[dict[str, float]] = []
    for ts, lat in late:
        if out and ts - out[-1]["_end"] <= gap_ms:
            e = out[-1]
            e["_end"], e["records"], e["worst_ms"] = ts, e["records"] + 1, max(e["worst_ms"], lat)
        else:
            out.append({"at_s": (ts - t_start) / 1000, "_end": ts, "records": 1, "worst_ms": lat})
    for e in out:
        e["length_s"] = (e.pop("_end") - t_start) / 1000 - e["at_s"]
    return out


@dataclass
class Reading:
    """One latency reader's figures (p50, p99, max, received_pct) and samples ((produce ms, latency ms) each)."""

    figures: dict[str, float | None]
    samples: list[tuple[float, float]]

    def p99_by_slice(self, seconds: float = 10.0) -> list[float]:
        """p99 of the records produced in each `seconds` of the window, in order (where a growing tail shows)."""
        if not self.samples:
            return []
        t0 = min(ts for ts, _ in self.samples)
        by: dict[int, list[float]] = {}
        for ts, lat in self.samples:
            by.setdefault(int((ts - t0) / 1000 // seconds), []).append(lat)
        return [percentiles(by[k], (99,))["p99"] or 0.0 for k in sorted(by)]


def measure_latency(
    c: Clusters, load_topic: str, read_bootstrap: str, read_topic: str, opts, beside: str | None = None
) -> tuple[Reading, Reading | None]:
    """--rate records/s for --seconds into the source's `load_topic`, read from `read_topic` (by one reader) and,
    when `beside` names the source's topic, by a second plain reader of that topic at the same time (what the
    source broker itself delivers while the job runs)."""
    parts = opts.partitions
    readers = [TargetReader(read_bootstrap, read_topic, parts, opts.reader_config)]
    if beside is not None:
        readers.append(TargetReader(c.src.bootstrap, beside, parts, opts.reader_config))
    try:
        steady_warm_up(c.src.bootstrap, load_topic, parts, readers[0])  # the reader assigned, records flowing through
        for r in readers:
            r.measure_from_now()
        meter = c.meter()
        # WARM_S at the rate, then the window without a pause (the job copying a stream, not waking up to one)
        sent, window_ms = generate_window(c.src.bootstrap, load_topic, parts, opts.rate, opts.seconds, WARM_S)
        busy = meter.window().busy_pct
        time.sleep(3)
    finally:
        for r in readers:
            r.close()
    load_ms = window_ms - 1000 * WARM_S

    def figures(samples: list[tuple[float, float]]) -> dict[str, float | None]:
        lat = [x for ts, x in samples if ts >= window_ms]
        out = {**percentiles(lat, (50, 99)), "max": max(lat) if lat else float("nan")}
        out["received_pct"] = 100 * len(lat) / max(1, sent)
        woke = [x for ts, x in samples if load_ms <= ts < load_ms + 1000 * AFTER_PAUSE_S]
        out["after_pause_max"] = max(woke) if woke else None
        return out

    def reading(r: TargetReader, **more: float) -> Reading:
        return Reading({**figures(r.timed), **more}, [(ts, x) for ts, x in r.timed if ts >= window_ms])

    main = reading(readers[0], rate=sent / opts.seconds, busy_pct=busy)
    return main, reading(readers[1]) if beside is not None else None


#: Seconds at the rate before the window (the job: its first, catching-up task has ended; a stream flows).
WARM_S = 5.0
#: The first seconds of the load, after the warm-up's pause of the stream: how late the first records are while
#: the job wakes up to them (the arrival watch, a Spark job's start), printed apart as *_after_pause_max.
AFTER_PAUSE_S = 2.0


def steady_warm_up(bootstrap: str, topic: str, parts: int, reader: TargetReader) -> None:
    from confluent_kafka import Producer

    p = Producer(logs.client_config({"bootstrap.servers": bootstrap}))
    seen = reader.count
    steady(p, topic, parts, 200, 240, until=lambda: reader.count > seen)
    p.flush(10)
    time.sleep(2)


def scenario_latency(opts, work: Path) -> dict[str, float]:
    parts = opts.partitions
    r: dict[str, float] = {}
    with Clusters(opts) as c:
        create(c.src.bootstrap, {"bench-floor": parts, "bench-lat": parts})
        log(f"  floor: a plain consumer of the source topic at {opts.rate:,.0f} rec/s, no job")
        floor, _ = measure_latency(c, "bench-floor", c.src.bootstrap, "bench-floor", opts)
        r.update({f"floor_{k}": v for k, v in floor.figures.items() if v is not None})

        spec = flow_spec(c.src.bootstrap, c.dst.bootstrap, "west", "bench-lat", opts.job, opts.delivery)
        root = work / "state"
        deployer = LocalDeployer(root=root, stop_timeout=30)
        log(f"  job: deployed, a plain consumer of its target topic at {opts.rate:,.0f} rec/s")
        try:
            deploy(deployer, spec, "bench")
            beside = "bench-lat" if opts.beside else None
            job, source = measure_latency(c, "bench-lat", c.dst.bootstrap, "west.bench-lat", opts, beside=beside)
        finally:
            stop_engines(root, deployer)
        r.update({f"job_{k}": v for k, v in job.figures.items() if v is not None})
        if source is not None:
            r.update({f"source_during_job_{k}": v for k, v in source.figures.items() if v is not None})
        job_slices, source_slices = job.p99_by_slice(), source.p99_by_slice() if source is not None else []
        if job_slices:
            r["job_p99_first_10s"] = job_slices[0]
        if source_slices:
            r["source_during_job_p99_first_10s"] = source_slices[0]
        if r.get("floor_p99") and r.get("job_p99") is not None:
            r["job_p99_x_floor"] = r["job_p99"] / r["floor_p99"]
        if r.get("source_during_job_p99") is not None and r.get("job_p99") is not None:
            r["job_p99_over_source"] = r["job_p99"] - r["source_during_job_p99"]
        above = max(100.0, 1.5 * (r.get("floor_p99") or 0.0))
        eps = episodes(job.samples, above)
        r["tail_threshold_ms"] = above
        r["tail_episodes"] = float(len(eps))
        r["tail_records_pct"] = 100 * sum(e["records"] for e in eps) / max(1, len(job.samples))
        log(
            f"  floor p50/p99 {r.get('floor_p50', 0):.0f}/{r.get('floor_p99', 0):.0f} ms, "
            f"job {r.get('job_p50', 0):.0f}/{r.get('job_p99', 0):.0f} ms (max {r.get('job_max', 0):.0f}; "
            f"the load's first {AFTER_PAUSE_S:.0f} s after a pause: max {r.get('job_after_pause_max', 0):.0f} ms)"
            + (
                f", the source topic read beside it {r.get('source_during_job_p50', 0):.0f}/"
                f"{r.get('source_during_job_p99', 0):.0f} ms"
                if source is not None
                else ""
            )
        )
        log(
            "  p99 of each 10 s of the window: job "
            + " ".join(f"{x:.0f}" for x in job_slices)
            + " ms"
            + (
                "; the source topic read beside it " + " ".join(f"{x:.0f}" for x in source_slices) + " ms"
                if source_slices
                else ""
            )
        )
        log(f"  job records later than {above:.0f} ms: {len(eps)} episodes, {r['tail_records_pct']:.2f}% of records")
        for e in eps:
            log(
                f"    at {e['at_s']:6.2f} s for {e['length_s']:.2f} s: {e['records']:.0f} records, worst {e['worst_ms']:.0f} ms"
            )
        floor_eps = episodes(floor.samples, above)
        r["floor_tail_episodes"] = float(len(floor_eps))
    return r


RUNNERS: dict[str, Callable[[Any, Path], dict[str, float]]] = {
    "backlog": scenario_backlog,
    "latency": scenario_latency,
    "startup": scenario_startup,
}

TARGETS = {
    "deployed_x_baseline": ("deployed job / hand-written loop", ">=", 3.0),
    "job_p99": ("p99 ms through the deployed job", "<=", 200),
    "deploy_to_first_s": ("deploy -> first copied record, s", "<=", 10),
    "apply_cli_to_first_s": ("`reconciler apply` -> first copied record, s", "<=", 10),
}


def report(env: dict[str, Any], opts, results: dict[str, dict[str, dict[str, float]]]) -> None:
    print(
        f"\nDeployed-job benchmark, {env['date_utc']}: {env['cpus']} CPUs (load average at start "
        f"{env['loadavg_start'][0]:.1f}, at end {env['loadavg_end'][0]:.1f}), Python {env['python']}, "
        f"confluent-kafka {env['confluent_kafka']}, PySpark {env['pyspark']}, {env['java']}; "
        f"{Engine(opts.engine).product} brokers on "
        f"loopback; {opts.partitions} partitions; job settings: {opts.job or 'the topology defaults'}; "
        f"median [min-max] of {opts.repeat} repetitions"
    )
    for scenario, figures in results.items():
        what = (
            f"{opts.records:,} records"
            if scenario == "backlog"
            else f"{STARTUP_RECORDS:,} records waiting"
            if scenario == "startup"
            else f"{opts.rate:,.0f} records/s for {opts.seconds:.0f} s"
        )
        print(f"\n  {scenario} ({what})")
        for key, s in figures.items():
            print(figure_line(key, s, TARGETS))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--scenario",
        action="append",
        choices=SCENARIOS,
        help="scenario to run (repeatable; default backlog and latency)",
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--records", type=int, default=1_000_000, help="backlog, 100-byte records")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--rate", type=float, default=10_000, help="latency: records/s")
    ap.add_argument("--seconds", type=float, default=30, help="latency: seconds measured")
    ap.add_argument("--delivery", default="at-least-once", choices=("at-least-once", "exactly-once"))
    ap.add_argument(
        "--engine", default="tansu", choices=[e.value for e in Engine], help="the brokers' engine (docs/brokers.md)"
    )
    ap.add_argument("--job", nargs="*", default=[], metavar="KEY=VALUE", help="the flow's `job:` settings")
    ap.add_argument(
        "--reader-wait-ms",
        type=int,
        default=100,
        help="latency readers' fetch.wait.max.ms (default 100; librdkafka's own default, 500, costs ~130 ms at p50 "
        "on Tansu, 10 ms loads the broker: see docs/replication-job.md)",
    )
    ap.add_argument(
        "--beside",
        action="store_true",
        help="latency: a second reader of the source topic during the job (source_during_job_*; loads the broker)",
    )
    ap.add_argument("--logs", help="startup: copy each repetition's engine log (job.log) into this directory")
    ap.add_argument("--json", help="write the environment, every repetition and the summary to this file")
    opts = ap.parse_args(argv)
    opts.job = common.parse_job(opts.job)
    opts.reader_config = {"fetch.wait.max.ms": opts.reader_wait_ms}
    # for bench.replication.Clusters (the brokers) and its in-process SparkContext
    opts.size, opts.master, opts.parallelism = (
        100,
        opts.job.get("master", "local[2]"),
        opts.job.get("parallelism", 2),
    )
    common.bench_process()
    scenarios = [s for s in SCENARIOS if s in (opts.scenario or ("backlog", "latency"))]
    env = environment(opts)
    runs = common.run_repeated(
        scenarios,
        opts.repeat,
        "bench-deployed",
        lambda s, i: log(f"{s}, repetition {i + 1}/{opts.repeat}"),
        lambda s, work, i: RUNNERS[s](opts, work),
    )
    common.report_runs(env, runs, lambda summary: report(env, opts, summary), opts.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
