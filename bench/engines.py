"""What an engine costs (issue 23): N flows in one Spark application against N applications of one flow each.

    python bench/engines.py [--flows 1 4 12] [--windows 3] [--idle-seconds 20] [--backlog 4000000]
                            [--heartbeats-seconds 1]

Starts two fresh Tansu brokers on loopback. For each N in --flows and each layout:

  engine    the N flows (sources s0..sN-1, each its own topic on the same broker) in one engine, deployed by the
            local deployer as `apply` does (one spark-submit, one JVM)
  per-flow  the baseline, measured in the same run: the earlier release's layout, one spark-submit per flow

once every flow's status says running and 10 s have passed, --windows windows of --idle-seconds with nothing to
copy: the JVMs, the resident memory of every process of the layout (sum of VmRSS: shared pages count once per
process, so this is an upper bound) and the CPU they used (utime + stime from /proc, as % of one core). Then, with
--backlog > 0, the aggregate throughput of the engine: --backlog 100-byte records copied by 1 flow alone (all in its
topic) and by 4 flows in one engine (a quarter in each flow's topic): records/s from the first copied record to the
last, timed on the remote topics' listed ends as bench/deployed.py times the deployed job, complete once every
record is read back (bench/common.py `TargetWatch`; a Python consumer of every record read during the copy was the
bound at ~150-200k records/s), and the ratio within each run.

Prints each figure's median and spread (min-max) over the windows, and engine/per-flow ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import reconciler.deployers.instance as instance  # noqa: E402
from bench.common import (  # noqa: E402
    TargetWatch,
    backlog_producer,
    proc_mb,
    produce_all,
    say,
    start_brokers,
    stop_brokers,
)  # noqa: E402
from reconciler.deployers.instance import Role  # noqa: E402
from reconciler.deployers.local import LocalDeployer  # noqa: E402
from reconciler.deployers.process import LocalJob  # noqa: E402
from reconciler.jobplan.backend import read_job_status  # noqa: E402
from tests.integration.mirror_helpers import create_topic, spec_for, wait_for  # noqa: E402

TICKS = 100.0  # clock ticks per second (/proc/PID/stat)


class Broker:
    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def measure(root: Path, seconds: float) -> dict[str, float]:
    procs = instance.scan(under=root.resolve())
    before = {p.pid: _cpu_seconds(p.pid) for p in procs}
    t0 = time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - t0
    now = instance.scan(under=root.resolve())
    used = sum(_cpu_seconds(p.pid) - before.get(p.pid, _cpu_seconds(p.pid)) for p in now)
    return {
        "jvms": float(sum(p.role is Role.JVM for p in now)),
        "processes": float(len(now)),
        "rss_mb": sum(proc_mb(p.pid, "status", "VmRSS:") for p in now),
        "idle_cpu_pct": 100.0 * used / wall,
    }


def flows(west: Broker, east: Broker, n: int, heartbeats_seconds: float = 1.0) -> list:
    specs = []
    for i in range(n):
        create_topic(west.bootstrap, f"t{i}", 1)
        specs.append(
            spec_for(
                west,
                east,
                source_alias=f"s{i}",
                topics_include=(f"t{i}",),
                master="local[1]",
                parallelism=1,
                status_interval_seconds=3.0,
                refresh_interval_seconds=5.0,
                heartbeats_interval_seconds=heartbeats_seconds,
                checkpoints_interval_seconds=5.0,
                trigger_interval_ms=200,
            )
        )
    return specs


def all_running(east: Broker, specs: list, timeout: float = 600.0) -> None:
    def ok():
        return all(
            (s := read_job_status({"bootstrap.servers": east.bootstrap}, spec.flow, timeout=3)) is not None
            and s.state_name == "running"
            for spec in specs
        )

    wait_for(ok, timeout, interval=2, what=f"{len(specs)} flows running")


def run_layout(layout: str, specs: list, east: Broker, root: Path, opts) -> list[dict[str, float]]:
    jobs: list[LocalJob] = []
    deployer = LocalDeployer(root=root, stop_timeout=30)
    try:
        if layout == "engine":
            for spec in specs:
                res = deployer.deploy(spec, {"engine": "east"})
                assert res.ok, res.message
        else:
            for spec in specs:
                d = root / "jobs" / spec.flow.replace("->", ".")
                jobs.append(LocalJob.start(spec, d, master="local[1]", log_path=d / "job.log"))
        all_running(east, specs)
        time.sleep(10)
        out = []
        for w in range(opts.windows):
            m = measure(root, opts.idle_seconds)
            say(
                f"  {layout:8} {len(specs):2} flows, window {w + 1}: {m['jvms']:.0f} JVMs, {m['rss_mb']:.0f} MB, "
                f"idle {m['idle_cpu_pct']:.1f} % of a core"
            )
            out.append(m)
        return out
    finally:
        deployer.stop_all()
        for j in jobs:
            j.stop(30)
        instance.end(instance.scan(under=root.resolve()), 5)


def copied_over(watches: list[TargetWatch]) -> tuple[float, str]:
    """Records/s of all the flows together, from the first records seen on any remote topic to the last landed on
    any (each topic's TargetWatch: its listed ends every 50 ms, every record read back once they reach the count or
    are still, as bench/deployed.py times the deployed job; a Python consumer counting every record was the bound at ~150-200k
    records/s here), and when each flow's records began and ended arriving, in seconds after the first."""
    firsts = [w.first for w in watches if w.first is not None]
    lasts = [w.last for w in watches if w.last is not None]
    assert len(firsts) == len(lasts) == len(watches)
    t0 = min(t for t, _ in firsts)
    total = sum(w.n for w in watches) - sum(c for _, c in firsts)
    spans = sorted((f[0] - t0, last - t0) for f, last in zip(firsts, lasts))
    return total / max(1e-9, max(lasts) - t0), ", ".join(f"{a:.1f}-{b:.1f} s" for a, b in spans)


def backlog_rate(west: Broker, east: Broker, n: int, records: int, root: Path, tag: str) -> float:
    """Records/s for n flows in one engine copying `records` each from a backlog (first to last copied record)."""

    specs = []
    for i in range(n):
        topic = f"b{tag}{i}"
        create_topic(west.bootstrap, topic, 1)
        p = backlog_producer(west.bootstrap)
        produce_all(p, topic, records)
        p.flush(60)
        specs.append(
            spec_for(west, east, source_alias=f"b{tag}{i}", topics_include=(topic,), master="local[2]", parallelism=1)
        )
    remote = [f"b{tag}{i}.{s.settings.topics.include[0]}" for i, s in enumerate(specs)]
    deployer = LocalDeployer(root=root, stop_timeout=30)
    for t in remote:
        create_topic(east.bootstrap, t, 1)  # the job finds it there (as a remote topic it would create)
    watches = [TargetWatch(east.bootstrap, t, 1, records) for t in remote]
    try:
        # Every flow starts with the engine (the flow files are there when it starts), as after an apply of the
        # whole topology: their copies overlap from the first record on (hot adds, a second each, would not).
        engine = f"bench{tag}"
        for spec in specs[1:]:
            path = deployer.flow_file(engine, spec.flow)
            path.parent.mkdir(parents=True, exist_ok=True)
            spec.write(path)
        assert deployer.deploy(specs[0], {"engine": engine}).ok
        for w in watches:
            w.wait(900)
        rate, spans = copied_over(watches)
        say(f"  each flow's records arrived over: {spans}")
        return rate
    finally:
        for w in watches:
            w.close()
        deployer.stop_all()


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):8.1f}  ({min(values):.1f}-{max(values):.1f})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flows", type=int, nargs="+", default=[1, 4, 12])
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument(
        "--heartbeats-seconds",
        type=float,
        default=1.0,
        help="every flow's heartbeats.interval_seconds: 1 (MM2's emit.heartbeats.interval.seconds, the default here) "
        "or 5 (the topology's default); each flow emits one and copies every flow's (they share a source cluster)",
    )
    ap.add_argument("--idle-seconds", type=float, default=20.0)
    ap.add_argument(
        "--backlog",
        type=int,
        default=4_000_000,
        help="records copied in each throughput run (0: skip): all in one flow's topic, or split among 4 flows' "
        "(the same work, so the two are timed over windows of the same length; 1,000,000 records take one flow "
        "about 2 s, mostly its first batch's start)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="backlog runs per figure")
    ap.add_argument("--layouts", nargs="+", default=["engine", "per-flow"], choices=["engine", "per-flow"])
    ap.add_argument("--no-idle", action="store_true", help="only the backlog figures")
    opts = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-engines-"))
    brokers = start_brokers(work)
    west, east = Broker(brokers[0].bootstrap), Broker(brokers[1].bootstrap)
    results: dict[tuple[str, int], list[dict[str, float]]] = {}
    rates: dict[int, list[float]] = {}
    try:
        specs = flows(west, east, max(opts.flows), opts.heartbeats_seconds)
        for n in [] if opts.no_idle else opts.flows:
            for layout in opts.layouts:
                say(f"{layout}: {n} flows")
                results[(layout, n)] = run_layout(layout, specs[:n], east, work / f"{layout}-{n}", opts)
        if opts.backlog:
            for rep in range(opts.repeat):
                for n in (1, 4):
                    say(f"backlog: {n} flow(s) in one engine, run {rep + 1}")
                    per_flow = opts.backlog // n
                    rate = backlog_rate(west, east, n, per_flow, work / f"backlog-{n}-{rep}", f"{n}r{rep}")
                    say(f"  {rate:,.0f} records/s")
                    rates.setdefault(n, []).append(rate)
    finally:
        stop_brokers(brokers)
    print(
        f"\nidle, {opts.windows} windows of {opts.idle_seconds:.0f} s each, heartbeats every "
        f"{opts.heartbeats_seconds:g} s: median (min-max)"
    )
    print(f"{'layout':9} {'flows':>5} {'JVMs':>5} {'resident MB':>22} {'idle CPU % of a core':>24}")
    for (layout, n), ms in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(
            f"{layout:9} {n:5d} {statistics.median(m['jvms'] for m in ms):5.0f} "
            f"{spread([m['rss_mb'] for m in ms]):>22} {spread([m['idle_cpu_pct'] for m in ms]):>24}"
        )
    for n in opts.flows:
        if ("engine", n) in results and ("per-flow", n) in results:
            e, p = results[("engine", n)], results[("per-flow", n)]
            rss = statistics.median(m["rss_mb"] for m in e) / statistics.median(m["rss_mb"] for m in p)
            pe = statistics.median(m["idle_cpu_pct"] for m in p)
            cpu = statistics.median(m["idle_cpu_pct"] for m in e) / pe if pe else float("nan")
            print(f"{n} flows: engine / per-flow: resident {rss:.2f}x, idle CPU {cpu:.2f}x")
    if rates:
        print(f"\nbacklog of {opts.backlog:,} records in all, {opts.repeat} runs: records/s, median (min-max)")
        for n, rs in sorted(rates.items()):
            print(f"{n} flow(s) in one engine ({opts.backlog // n:,} records each): {spread(rs)}")
        if 1 in rates and 4 in rates:
            ratios = [four / one for one, four in zip(rates[1], rates[4])]
            print(
                f"4 flows / 1 flow, within each run: {statistics.median(ratios):.2f}x "
                f"({min(ratios):.2f}-{max(ratios):.2f}x; target >= 1.0x)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
