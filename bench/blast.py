"""Blast radius and fair scheduling (issue 47): one poisoned partition degrades only itself; a flow that falls behind
does not starve the flows of its engine.

    python bench/blast.py                                   # every scenario, 3 repetitions
    python bench/blast.py --scenario stalled --repeat 1 --records 200000
    python bench/blast.py --scenario fairness --rate 5000 --logs /tmp/blast-logs

Each repetition starts two fresh Tansu brokers on loopback (source, target). The source advertises a relay in front
of it (bench/kafka_wire.py `LeaderRelay`) that makes one partition of the poisoned topic led by a node of its own,
which can be made to stop answering; the other partitions, and every partition of the healthy topic, are led by the
broker itself. Flows are built from a one-flow topology with the topology's defaults (bench/deployed.py `flow_spec`)
and deployed by the local deployer as `apply` does (spark-submit, one engine per scenario and repetition).

stalled   Two flows in one engine, side by side from its start (as after an apply of the whole topology): `ok` copies
          the healthy topic, `bad` the other, whose partition --poisoned has a leader of its own that stops
          answering before the engine starts (its connections stay open, nothing comes back: a hung host). Each
          copies --records 100-byte records on each of the same --partitions - 1 partitions (the healthy topic's
          --poisoned partition is empty), from offset 0 committed in its group (a flow that ran before: its
          positions are loaded). Figures: records/s per partition of each flow, its partitions' records from the
          first seen on the target to the last landed (the target's high watermarks every 50 ms, the true ends once
          they are still, as bench/deployed.py times the deployed job), and the ratio poisoned / healthy; beside it
          the same while both copy (from the later flow's first record to the earlier's last) and the slowest
          partition's own records/s. Both flows copy at the same time on the same machine, so a load that comes and
          goes weighs on both alike.
refused   as stalled, but the poisoned partition holds a record of 2 MB halfway through its backlog and its remote
          topic takes 1 MB (`max.message.bytes`; `on_refused_record: fail`, the default): the partition halts there
          (the healthy topic's partition holds as many records as the poisoned one copies, half the others').
fairness  two flows in one engine: `steady` copies --rate records/s (100 B, over --partitions partitions, a producer
          in a process of its own) and a plain consumer of its remote topic times each record (time seen - producer
          timestamp). Alone: --seconds measured. Beside a flow that is behind: `behind` is added to the running
          engine (as apply adds one: the engine's `local[2]`, sized for `steady`, is not raised) with
          --behind-records records waiting on each partition; the steady flow is timed while `behind` copies them. Figures: the steady flow's p50/p99/max
          and the share of its records received, alone and beside, and the behind flow's records/s.

Prints each figure's median and spread (min-max) over the repetitions, the ratios within each repetition (poisoned /
healthy records/s per partition: target >= 0.9), and the machine's load average at the start and the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from bench.common import (  # noqa: E402
    bench_process,
    deploy,
    figure_line,
    parse_job,
    report_runs,
    run_repeated,
    say,
    stop_brokers,
    stop_engines,
    tuned_producer,
)
from bench.deployed import deployer_alive, flow_spec  # noqa: E402
from bench.kafka_wire import LeaderRelay  # noqa: E402
from bench.neighbours import POISON_RATIO, PartitionWatch, poisoned_figures, poisoned_line  # noqa: E402
from bench.replication import TargetReader, create, environment, generate_window, percentiles  # noqa: E402
from reconciler import logs  # noqa: E402
from reconciler.contract.spec import job_group  # noqa: E402
from reconciler.deployers.local import LocalDeployer  # noqa: E402
from reconciler.dev.brokers import Broker, free_port, start_broker  # noqa: E402

SCENARIOS = ("stalled", "refused", "fairness")
HEALTHY, POISONED = "blast-ok", "blast-bad"
BIG = 2_000_000  # bytes: the refused record (the remote topic takes 1 MB)


# --------------------------------------------------------------------------------------------------- the brokers
@dataclass
class Brokers:
    source: Broker
    target: Broker
    relay: LeaderRelay

    @property
    def src(self) -> str:
        return f"127.0.0.1:{self.relay.port}"

    @property
    def dst(self) -> str:
        return self.target.bootstrap


@contextmanager
def brokers(work: Path, poisoned: int) -> Iterator[Brokers]:
    """A source broker behind a `LeaderRelay` that moves partition `poisoned` of POISONED to a node of its own, and
    a target broker."""
    port = free_port()
    relay = LeaderRelay(("127.0.0.1", port), {(POISONED, poisoned)})
    source = start_broker("127.0.0.1", port, work / "source.log", advertised=("127.0.0.1", relay.port))
    target = start_broker("127.0.0.1", free_port(), work / "target.log")
    try:
        yield Brokers(source, target, relay)
    finally:
        relay.close()
        stop_brokers((source, target))


def produce(bootstrap: str, topic: str, partitions: list[int], n: int, big_at: dict[int, int] | None = None) -> None:
    """`n` records of 100 B on each of `partitions` of `topic` (round-robin); `big_at`: partition -> the index of
    its record of BIG bytes."""
    p = tuned_producer(bootstrap, **{"message.max.bytes": 10_000_000})
    value, big = b"x" * 100, b"B" * BIG
    big_at = big_at or {}
    for i in range(n):
        for part in partitions:
            while True:
                try:
                    p.produce(topic, big if big_at.get(part) == i else value, None, part)
                    break
                except BufferError:
                    p.poll(0.05)
    if p.flush(300):
        raise RuntimeError(f"records of {topic} not acknowledged")


# --------------------------------------------------------------------------------------------------- deployment
@contextmanager
def engine(work: Path, name: str, opts) -> Iterator[LocalDeployer]:
    """A local deployer whose engines are stopped (and their logs kept with --logs) at the end."""
    root = work / f"state-{name}"
    deployer = LocalDeployer(root=root, stop_timeout=30)
    try:
        yield deployer
    finally:
        stop_engines(root, deployer)
        if opts.logs:
            Path(opts.logs).mkdir(parents=True, exist_ok=True)
            for f in root.glob("engines/*/job.log"):
                shutil.copy(f, Path(opts.logs) / f"{name}-{time.strftime('%H%M%S')}-{f.parent.name}.log")


def seed_positions(bootstrap: str, group: str, topic: str, partitions: int) -> None:
    """Commit offset 0 of every partition in the job's group, as a flow that ran before has: its positions are
    loaded, not looked up at the log start (which asks each partition's leader)."""
    c = Consumer(logs.client_config({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}))
    try:
        c.commit(offsets=[TopicPartition(topic, p, 0) for p in range(partitions)], asynchronous=False)
    finally:
        c.close()


def copy_both(
    b: Brokers, work: Path, runs: dict[str, str], expected: dict[int, int], opts
) -> dict[str, PartitionWatch]:
    """Deploy one engine with a flow per entry of `runs` (source alias -> topic, each from offset 0, committed in its
    group), every flow there from the engine's start (as after an apply of the whole topology: they copy side by
    side, a task slot for each of their tasks), and wait until the partitions of `expected` of every remote topic
    hold their counts on the target; each flow's watch (its rates)."""
    specs = {alias: flow_spec(b.src, b.dst, alias, topic, opts.job, "at-least-once") for alias, topic in runs.items()}
    watches: dict[str, PartitionWatch] = {}
    try:
        with engine(work, "blast", opts) as deployer:
            first, *rest = specs.values()
            for spec in rest:
                path = deployer.flow_file("blast", spec.flow)
                path.parent.mkdir(parents=True, exist_ok=True)
                spec.write(path)
            for alias, spec in specs.items():
                seed_positions(b.src, job_group(spec), runs[alias], opts.partitions)
                remote = f"{alias}.{runs[alias]}"
                watches[alias] = PartitionWatch(b.dst, {(remote, p): n for p, n in expected.items()})
            deploy(deployer, first, "blast")
            for w in watches.values():
                w.wait(900, deployer_alive(deployer.root))
    finally:
        for w in watches.values():
            w.close()
    return watches


# --------------------------------------------------------------------------------------------------- blast radius
def scenario_poisoned(opts, work: Path, kind: str, rep: int) -> dict[str, float]:
    """Two flows in one engine, side by side from its start: `ok` copies the healthy topic, `bad` the topic whose
    partition --poisoned is poisoned (`kind`: stalled or refused); each copies --records on each of the same
    partitions (the healthy topic's --poisoned partition is empty). Both run at the same time on the same machine,
    so a load that comes and goes weighs on both alike (timed one after the other, the load of the hour decided)."""
    parts, n, bad = opts.partitions, opts.records, opts.poisoned
    healthy = [p for p in range(parts) if p != bad]
    r: dict[str, float] = {}
    with brokers(work, bad) as b:
        create(b.src, {HEALTHY: parts, POISONED: parts})
        if kind == "refused":
            # The remote topic exists and takes 1 MB: the record of 2 MB is refused (predicted from its limit).
            from tests.integration.mirror_helpers import create_topic

            create_topic(b.dst, f"bad.{POISONED}", parts, {"max.message.bytes": "1000000"})
        say(f"  producing {n:,} records on each of {len(healthy)} partitions of two topics")
        produce(b.src, HEALTHY, healthy, n)
        if kind == "refused":  # the poisoned partition copies its records up to the refused one: so does this one
            produce(b.src, HEALTHY, [bad], n // 2)
        produce(b.src, POISONED, list(range(parts)), n, {bad: n // 2} if kind == "refused" else None)
        if kind == "stalled":
            b.relay.stall()  # the leader of partition `bad` stops answering
        what = "its leader does not answer" if kind == "stalled" else "a record the target refuses"
        say(f"  flows ok (healthy) and bad (partition {bad} of {parts}: {what}) side by side in one engine")
        watches = copy_both(b, work, {"ok": HEALTHY, "bad": POISONED}, {p: n for p in healthy}, opts)
        r = poisoned_figures(watches["ok"], watches["bad"])
        say("  " + poisoned_line(r))
    return r


def scenario_stalled(opts, work: Path, rep: int) -> dict[str, float]:
    return scenario_poisoned(opts, work, "stalled", rep)


def scenario_refused(opts, work: Path, rep: int) -> dict[str, float]:
    return scenario_poisoned(opts, work, "refused", rep)


# --------------------------------------------------------------------------------------------------- fairness
def steady_window(b: Brokers, topic: str, remote: str, opts, seconds: float) -> dict[str, float]:
    """--rate records/s into `topic` for a warm-up then `seconds`, timed by a reader of `remote` on the target."""
    reader = TargetReader(b.dst, remote, opts.partitions, {"fetch.wait.max.ms": 100})
    try:
        seen = reader.count
        deadline = time.monotonic() + 120
        warm = Producer(logs.client_config({"bootstrap.servers": b.src}))
        while reader.count == seen and time.monotonic() < deadline:  # the flow copies: the reader sees records
            for p in range(opts.partitions):
                warm.produce(topic, b"w" * 100, None, p)
            warm.flush(10)
            time.sleep(0.5)
        reader.measure_from_now()
        sent, window_ms = generate_window(b.src, topic, opts.partitions, opts.rate, seconds, 3.0)
        time.sleep(3)
    finally:
        reader.close()
    lat = [x for ts, x in reader.timed if ts >= window_ms]
    out = {k: v for k, v in percentiles(lat, (50, 99)).items() if v is not None}
    out["max"] = max(lat) if lat else float("nan")
    out["received_pct"] = 100 * len(lat) / max(1, sent)
    return out


def scenario_fairness(opts, work: Path, rep: int) -> dict[str, float]:
    parts = opts.partitions
    r: dict[str, float] = {}
    with brokers(work, opts.poisoned) as b:
        create(b.src, {"steady": parts, "behind": parts})
        say(f"  producing {opts.behind_records:,} records on each of {parts} partitions for the behind flow")
        produce(b.src, "behind", list(range(parts)), opts.behind_records)
        steady = flow_spec(b.src, b.dst, "st", "steady", opts.job, "at-least-once")
        behind = flow_spec(b.src, b.dst, "bh", "behind", opts.job, "at-least-once")
        with engine(work, "fair", opts) as deployer:
            deploy(deployer, steady, "fair")
            say(f"  steady flow alone: {opts.rate:,.0f} records/s for {opts.seconds:.0f} s")
            alone = steady_window(b, "steady", "st.steady", opts, opts.seconds)
            r.update({f"alone_{k}": v for k, v in alone.items()})
            say(f"    p50/p99/max {alone.get('p50', 0):.0f}/{alone.get('p99', 0):.0f}/{alone['max']:.0f} ms")
            watch = PartitionWatch(b.dst, {("bh.behind", p): opts.behind_records for p in range(parts)})
            result: dict[str, dict[str, float]] = {}
            try:
                deploy(deployer, behind, "fair")
                t0 = time.monotonic()
                while not watch.first and time.monotonic() - t0 < 120:
                    time.sleep(0.05)
                say("  steady flow beside the behind flow, while it copies its backlog")

                def timed() -> None:
                    result["beside"] = steady_window(b, "steady", "st.steady", opts, opts.seconds)

                t = threading.Thread(target=timed, daemon=True)
                t.start()
                watch.wait(900, deployer_alive(deployer.root))
                behind_done = time.monotonic()
                t.join(opts.seconds + 300)
                r["behind_total"] = watch.rate()
                r["behind_busy_s"] = behind_done - min(t for t, _ in watch.first.values())
            finally:
                watch.close()
            beside = result["beside"]
            r.update({f"beside_{k}": v for k, v in beside.items()})
            say(
                f"    p50/p99/max {beside.get('p50', 0):.0f}/{beside.get('p99', 0):.0f}/{beside['max']:.0f} ms; "
                f"behind flow {r['behind_total']:,.0f} records/s over {r['behind_busy_s']:.1f} s"
            )
            if alone.get("p99"):
                r["beside_p99_x_alone"] = beside.get("p99", float("nan")) / alone["p99"]
    return r


RUNNERS: dict[str, Callable[[Any, Path, int], dict[str, float]]] = {
    "stalled": scenario_stalled,
    "refused": scenario_refused,
    "fairness": scenario_fairness,
}


def report(env: dict[str, Any], opts, results: dict[str, dict[str, dict[str, float]]]) -> None:
    print(
        f"\nBlast radius and fairness, {env['date_utc']}: {env['cpus']} CPUs (load average at start "
        f"{env['loadavg_start'][0]:.1f}, at end {env['loadavg_end'][0]:.1f}), Python {env['python']}, "
        f"confluent-kafka {env['confluent_kafka']}, PySpark {env['pyspark']}; Tansu brokers on loopback; "
        f"job settings: {opts.job or 'the topology defaults'}; median [min-max] of {opts.repeat} repetitions"
    )
    for scenario, figures in results.items():
        if scenario == "fairness":
            what = (
                f"steady flow {opts.rate:,.0f} records/s over {opts.partitions} partitions for {opts.seconds:.0f} s; "
                f"behind flow {opts.behind_records:,} records on each of {opts.partitions} partitions"
            )
        else:
            what = (
                f"two flows side by side, {opts.records:,} records on each of {opts.partitions - 1} partitions of "
                f"each; the poisoned flow's partition {opts.poisoned} "
                f"{'does not answer' if scenario == 'stalled' else 'refuses a record'}"
            )
        print(f"\n  {scenario} ({what})")
        for key, s in figures.items():
            line = figure_line(key, s)
            if key == "ratio_per_partition":
                ok = s["median"] >= POISON_RATIO
                line += f"   records/s per partition, poisoned flow / healthy flow: target >= {POISON_RATIO} " + (
                    "MET" if ok else "MISSED"
                )
            print(line)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", action="append", choices=SCENARIOS, help="repeatable; default: all")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--poisoned", type=int, default=3, help="the poisoned partition")
    ap.add_argument("--records", type=int, default=300_000, help="records of 100 B on each partition")
    ap.add_argument("--rate", type=float, default=5_000, help="fairness: the steady flow's records/s")
    ap.add_argument("--seconds", type=float, default=20, help="fairness: seconds measured")
    ap.add_argument(
        "--behind-records", type=int, default=500_000, help="fairness: records waiting on each partition of behind"
    )
    ap.add_argument("--job", nargs="*", default=[], metavar="KEY=VALUE", help="the flows' `job:` settings")
    ap.add_argument("--logs", help="copy each engine's log (job.log) into this directory")
    ap.add_argument("--json", help="write the environment, every repetition and the summary to this file")
    opts = ap.parse_args(argv)
    opts.job = parse_job(opts.job)
    # for bench.replication.environment
    opts.size, opts.master, opts.parallelism, opts.engine = 100, "local[2]", 2, "tansu"
    bench_process()
    scenarios = [s for s in SCENARIOS if s in (opts.scenario or SCENARIOS)]
    env = environment(opts)
    runs = run_repeated(
        scenarios,
        opts.repeat,
        "bench-blast",
        lambda s, i: say(f"{s}, repetition {i + 1}/{opts.repeat} (load average {os.getloadavg()[0]:.1f})"),
        lambda s, work, i: RUNNERS[s](opts, work, i),
    )
    report_runs(env, runs, lambda summary: report(env, opts, summary), opts.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
