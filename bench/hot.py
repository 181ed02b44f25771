"""One hot partition beside idle ones in the same flow (issue 47), as `apply` deploys it.

    python bench/hot.py [--records 4000000] [--idle-partitions 4] [--repeat 3] [--alone] [--logs DIR] [--trace DIR]
                        [--job KEY=VALUE ...]

Each repetition starts two fresh Tansu brokers (noida-db with --engine noida) on loopback and produces --records
100-byte records on ONE partition of the topic `hot`; the topic `idle` (--idle-partitions partitions) stays empty.
Then, on those brokers, one after the other:

  baseline   the hand-written poll -> produce loop (bench/replication.py `baseline`) copying the hot partition:
             records/s over its whole loop, measured in the same repetition;
  reader     one consumer of the hot partition, nothing produced (bench/replication.py `consume`): what the source
             broker serves from one partition, the ceiling no copy of it passes;
  deployed   one flow whose topics are `hot` and `idle` (the topology's defaults: `job: {}`, or --job), built as `plan`
             builds it (`JobSpec.from_flow`) and deployed with `LocalDeployer().deploy` into a new engine, as apply
             does: records/s from the first copied record on the target to the last (the remote topic's listed ends
             every 50 ms, complete once every record is read back: bench/common.py `TargetWatch`), and
             deploy_to_first_s: the deploy call -> the first copied record (spark-submit, the JVM, the SparkContext,
             the flow's start, its first batch);
  alone      (--alone) the same flow without the idle topic, in a new engine of its own.

Beside each rate, the CPU seconds per million records copied: the loop's (its process, over its loop), each
engine's (every process under its state directory, between the first and the last copied record) and each broker's
over the same windows, with how busy the whole machine was (`busy_pct`, % of all cores): the machine's load moves a
rate (the loop takes one core, the job both) far more than what a record costs. And `stalled_s`: the seconds the
target's listed ends stood still for 0.25 s or more between the first and the last record (the copy paused: a
batch's end), with the longest pause. --trace DIR writes each engine's listed ends over time (JSON).

Prints the median and [min-max] over the repetitions of each figure and of the ratios within a repetition
(deployed / baseline, alone / baseline, each / reader), with the machine's load average at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import reconciler.deployers.instance as instance  # noqa: E402
from bench.common import TargetWatch, bench_process, deploy, figure_line, parse_job, stop_engines  # noqa: E402
from bench.deployed import deployer_alive, keep_logs  # noqa: E402
from bench.engines import TICKS, _cpu_seconds  # noqa: E402
from bench.replication import (  # noqa: E402
    Clusters,
    CpuMeter,
    _machine_jiffies,
    baseline,
    consume,
    create,
    environment,
    log,
    produce_only,
)
from reconciler.contract.spec import JobSpec  # noqa: E402
from reconciler.deployers.local import LocalDeployer  # noqa: E402
from reconciler.dev.brokers import Engine  # noqa: E402
from reconciler.topology.build import load_topology_text  # noqa: E402

HOT, IDLE = "hot", "idle"
STALL_S = 0.25  # the target's ends still this long: the copy paused

#: (label, comparison, target) of the figures issue 47 targets
TARGETS = {
    "deployed_x_baseline": ("hot partition with idle siblings / the loop", ">=", 2.5),
    "deploy_to_first_s": ("apply -> first record", "<=", 10.0),
}


def spec_of(source: str, target: str, alias: str, topics: list[str], job: dict[str, Any] | None = None) -> JobSpec:
    """The spec `plan` builds for one flow alias->east of `topics`, the topology's defaults (`job`: its `job:`
    settings, --job KEY=VALUE; none by default)."""
    text = json.dumps(
        {
            "apiVersion": "reconciler/v1",
            "kind": "Topology",
            "metadata": {"name": "bench"},
            "clusters": {alias: {"bootstrap_servers": source}, "east": {"bootstrap_servers": target}},
            "flows": [
                {"source": alias, "target": "east", "topics": {"include": topics}, **({"job": job} if job else {})}
            ],
        }
    )
    topology = load_topology_text(text, "bench")
    return JobSpec.from_flow(topology, topology.flows[0])


class EngineCpu:
    """The CPU seconds of every process of an engine (its state directory's: supervisor, JVMs, Python driver and
    workers; brokers not), of each broker and of the whole machine, sampled every `interval` s while its copy runs,
    so that the CPU spent between the first copied record and the last can be read off (`between`): the job's CPU
    per record, which the machine's load moves far less than its rate, beside what the brokers spent meanwhile."""

    def __init__(self, root: Path, brokers: dict[str, int], interval: float = 0.2):
        self.root, self.brokers, self.interval = root, brokers, interval
        self.samples: list[tuple[float, dict[str, float]]] = []

    def sample(self) -> None:
        procs = instance.scan(under=self.root.resolve())
        busy, total = _machine_jiffies()
        now = {"engine": sum(_cpu_seconds(p.pid) for p in procs), "busy": busy / TICKS, "total": total / TICKS}
        now.update({name: _cpu_seconds(pid) for name, pid in self.brokers.items()})
        self.samples.append((time.monotonic(), now))

    def between(self, t0: float, t1: float) -> dict[str, float]:
        """CPU seconds of each (engine, each broker, `busy`: the machine's, `total`: every core's time) from t0 to
        t1 (the samples nearest to them)."""

        def at(t: float) -> dict[str, float]:
            return min(self.samples, key=lambda s: abs(s[0] - t))[1]

        a, b = at(t0), at(t1)
        return {k: b[k] - a[k] for k in b}


def stalls(moves: list[tuple[float, int]], t0: float, t1: float, gap: float = STALL_S) -> tuple[float, float]:
    """The seconds between t0 and t1 in which the target's listed ends stood still for `gap` s or more (the copy
    paused: a batch's end, a round's flush), and the longest such pause."""
    times = [t for t, _ in moves if t0 <= t <= t1]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if b - a >= gap]
    return sum(gaps), max(gaps, default=0.0)


def deployed(c: Clusters, opts, work: Path, alias: str, topics: list[str]) -> dict[str, float]:
    """The hot partition's records/s (`rate`), the seconds from the deploy call to its first copied record
    (`to_first_s`), the engine's and each broker's CPU seconds per million records copied (`cpu_s_per_m`,
    `source_cpu_s_per_m`, `target_cpu_s_per_m`), how busy the machine was meanwhile (`busy_pct`, % of all cores) and
    the seconds the copy stood still (`stalled_s`, pauses of STALL_S or more; `longest_stall_s`) of a new engine."""
    spec = spec_of(c.src.bootstrap, c.dst.bootstrap, alias, topics, opts.job)
    root = work / f"state-{alias}"
    deployer = LocalDeployer(root=root, stop_timeout=30)
    watch = TargetWatch(c.dst.bootstrap, f"{alias}.{HOT}", 1, opts.records, c.meter)
    cpu = EngineCpu(root, {"source": c.src.pid, "target": c.dst.pid})
    t0 = time.monotonic()
    try:
        deploy(deployer, spec, f"bench-{alias}")
        alive, deadline = deployer_alive(root), time.monotonic() + 900
        while watch.last is None and time.monotonic() < deadline:
            if not alive():
                raise RuntimeError(f"the job ended with about {watch.seen:,} of {opts.records:,} records copied")
            cpu.sample()
            time.sleep(cpu.interval)
        cpu.sample()
        watch.wait(60)
        assert watch.first is not None and watch.last is not None
        copied = opts.records - watch.first[1]
        spent = cpu.between(watch.first[0], watch.last)
        stalled, longest = stalls(watch.moves, watch.first[0], watch.last)
        if opts.trace:
            trace = Path(opts.trace) / f"{alias}-{time.strftime('%H%M%S')}.json"
            trace.write_text(json.dumps({"first": watch.first, "last": watch.last, "moves": watch.moves}))
        return {
            "rate": watch.rate(),
            "to_first_s": watch.first[0] - t0,
            "cpu_s_per_m": spent["engine"] / copied * 1e6,
            "source_cpu_s_per_m": spent["source"] / copied * 1e6,
            "target_cpu_s_per_m": spent["target"] / copied * 1e6,
            "busy_pct": 100 * spent["busy"] / max(1e-9, spent["total"]),
            "stalled_s": stalled,
            "longest_stall_s": longest,
        }
    finally:
        watch.close()
        stop_engines(root, deployer)
        keep_logs(opts, root, alias)


def repetition(opts, work: Path) -> dict[str, float]:
    r: dict[str, float] = {}
    with Clusters(opts) as c:
        create(c.src.bootstrap, {HOT: 1, IDLE: opts.idle_partitions})
        log(f"  producing {opts.records:,} records of 100 B on {HOT}[0]")
        produce_only(c.src.bootstrap, [(HOT, 0)], opts.records, 100)
        r["load_1m_before"] = os.getloadavg()[0]
        log("  baseline: the hand-written poll -> produce loop")
        meter = CpuMeter(c.src.pid, c.dst.pid)
        r["baseline"], loop_cpu = baseline(c.src.bootstrap, c.dst.bootstrap, [(HOT, 0)], opts.records, c.exclude)
        w = meter.window()
        r["baseline_cpu_s_per_m"] = loop_cpu / opts.records * 1e6
        r["baseline_source_cpu_s_per_m"] = w.source_cpu_s / opts.records * 1e6
        r["baseline_target_cpu_s_per_m"] = w.target_cpu_s / opts.records * 1e6
        r["baseline_busy_pct"] = w.busy_pct
        log("  reader: one consumer of the hot partition, nothing produced (the source broker's one-partition ceiling)")
        r["reader"] = consume(c.src.bootstrap, [(HOT, 0)], 1)
        r["reader_x_baseline"] = r["reader"] / r["baseline"]
        runs = [("deployed", "west", [HOT, IDLE])] + ([("alone", "solo", [HOT])] if opts.alone else [])
        for name, alias, topics in runs:
            log(
                f"  {name}: one flow of "
                + (f"{HOT} and {IDLE} ({opts.idle_partitions} idle partitions)" if len(topics) > 1 else f"{HOT} only")
            )
            d = deployed(c, opts, work, alias, topics)
            r[name], r[f"{name}_deploy_to_first_s" if name != "deployed" else "deploy_to_first_s"] = (
                d["rate"],
                d["to_first_s"],
            )
            for k in (
                "cpu_s_per_m",
                "source_cpu_s_per_m",
                "target_cpu_s_per_m",
                "busy_pct",
                "stalled_s",
                "longest_stall_s",
            ):
                r[f"{name}_{k}"] = d[k]
            r[f"{name}_x_baseline"] = r[name] / r["baseline"]
            r[f"{name}_x_reader"] = r[name] / r["reader"]
            r[f"{name}_cpu_x_baseline"] = r[f"{name}_cpu_s_per_m"] / r["baseline_cpu_s_per_m"]
        r["load_1m_after"] = os.getloadavg()[0]
        log(
            f"  baseline {r['baseline']:,.0f}/s, deployed {r['deployed']:,.0f}/s ({r['deployed_x_baseline']:.2f}x), "
            f"deploy -> first {r['deploy_to_first_s']:.1f} s"
            + (f", alone {r['alone']:,.0f}/s ({r['alone_x_baseline']:.2f}x)" if opts.alone else "")
        )
    return r


def report(env: dict[str, Any], opts, runs: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    print(
        f"\nHot-partition benchmark, {env['date_utc']}: {env['cpus']} CPUs (load average at start "
        f"{env['loadavg_start'][0]:.1f}, at end {env['loadavg_end'][0]:.1f}), {Engine(opts.engine).product} brokers "
        f"on loopback; {opts.records:,} records on one partition, {opts.idle_partitions} idle partitions in the same "
        f"flow; the topology's defaults; median [min-max] of {len(runs)} repetitions"
    )
    summary = {}
    for key in runs[0]:
        vals = [r[key] for r in runs if key in r]
        s = {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}
        summary[key] = s
        print(figure_line(key, s, TARGETS))
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=4_000_000, help="100-byte records on the hot partition")
    ap.add_argument("--idle-partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--alone", action="store_true", help="also the flow of the hot topic alone, in a new engine")
    ap.add_argument("--engine", default="tansu", choices=[e.value for e in Engine])
    ap.add_argument("--logs", help="copy each engine's log (job.log) into this directory")
    ap.add_argument(
        "--trace", help="write each engine's copy as the target's listed ends over time into this directory"
    )
    ap.add_argument("--job", nargs="*", default=[], help="the flow's job: settings, KEY=VALUE (default: none)")
    ap.add_argument("--json", help="write the environment, every repetition and the summary to this file")
    opts = ap.parse_args(argv)
    opts.job = parse_job(opts.job)
    opts.size, opts.master, opts.parallelism = 100, "local[2]", 2  # for bench.replication's Clusters/environment
    bench_process()
    env = environment(opts)
    runs = []
    for i in range(opts.repeat):
        log(f"repetition {i + 1}/{opts.repeat}")
        work = Path(tempfile.mkdtemp(prefix="bench-hot-"))
        try:
            runs.append(repetition(opts, work))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    env["loadavg_end"] = os.getloadavg()
    summary = report(env, opts, runs)
    if opts.json:
        Path(opts.json).write_text(json.dumps({"environment": env, "runs": runs, "summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
