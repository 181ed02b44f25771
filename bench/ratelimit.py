"""A flow's rate limit in a shared engine (issue 47): the limited flow near its cap, its unlimited sibling near its solo
rate.

    python bench/ratelimit.py                      # cap 20,000 records/s, 5 repetitions (~15 min)
    python bench/ratelimit.py --cap 50000 --seconds 20 --backlog 2000000 --repeat 5

Starts two fresh Tansu brokers on loopback. Each repetition, on those brokers, in an order that alternates between
repetitions:

  solo      flow B alone in an engine (deployed by the local deployer as `apply` does): --backlog 100-byte records
            on --partitions partitions, waiting on the source; B's records/s from its first copied record to its last
  together  flows A and B in one engine, both starting with it (their flow files there when it starts, as after an
            apply of the topology): A has `rate_limit: {records_per_second: --cap}` and a backlog of --cap x
            --seconds records, B none and the same backlog as solo (copied while A's lasts). A's records/s against
            its cap, B's against its solo rate of the same repetition

Each flow's records/s is timed on its remote topic by bench/common.py `TargetWatch` (from the first records to the
last, those of the first read excluded), complete only once every record is read back: its listed ends alone took a
capped flow's topic for complete 10 s early in three of twenty runs, 1.4-1.5x its cap, while its task's own counts
were at the cap (the figures of 2026-11-29 05:03 read every record back during the copy); each flow's first and last
record are printed as it goes. The
flows are the tests' (`spec_for`: the topology's defaults but 1-s refresh, heartbeat and checkpoint intervals) with
--master local[2] and --parallelism 2: the engine's local[N] is raised to its flows' task slots, 4, so A's one task
(an at-least-once flow capped below 100,000 records/s runs one) has a slot beside B's two.

Prints each figure's median and spread [min-max] and the two ratios against issue 47's targets: A within 15 % of
its cap, B at least 80 % of its solo rate; the load average and the date with them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench.common import TargetWatch, say, spread, start_brokers, stop_brokers  # noqa: E402
from bench.engines import Broker  # noqa: E402
from bench.neighbours import cap_verdicts, fill  # noqa: E402
from reconciler import logs  # noqa: E402
from reconciler.contract.spec import JobSpec  # noqa: E402
from reconciler.deployers.local import LocalDeployer  # noqa: E402
from tests.integration.mirror_helpers import create_topic, spec_for  # noqa: E402


def flow(west: Broker, east: Broker, alias: str, topic: str, opts, include: str | None = None, **more) -> JobSpec:
    """The flow of `alias`'s `topic` (`include`: the flow's topic pattern, `topic` by default)."""
    return spec_for(
        west,
        east,
        source_alias=alias,
        topics_include=(include or topic,),
        master=opts.master,
        parallelism=opts.parallelism,
        status_interval_seconds=3.0,
        **more,
    )


def run_engine(
    east: Broker, specs: list[JobSpec], topics: list[str], sizes: list[int], opts, root: Path
) -> list[float]:
    """Deploy `specs` in one engine (all there when it starts) and time each flow's copy of its `sizes[i]` records
    of its topic `topics[i]`; their records/s."""
    remote = [f"{s.source.alias}.{t}" for s, t in zip(specs, topics)]
    for t in remote:
        create_topic(east.bootstrap, t, opts.partitions)  # the job finds it there (as a remote topic it would create)
    landed = [TargetWatch(east.bootstrap, t, opts.partitions, n) for t, n in zip(remote, sizes)]
    deployer = LocalDeployer(root=root, stop_timeout=30)
    try:
        engine = root.name
        for spec in specs[1:]:
            path = deployer.flow_file(engine, spec.flow)
            path.parent.mkdir(parents=True, exist_ok=True)
            spec.write(path)
        deployed = time.monotonic()
        assert deployer.deploy(specs[0], {"engine": engine}).ok
        for w in landed:
            w.wait(900)
        for spec, w in zip(specs, landed):
            assert w.first is not None and w.last is not None
            say(
                f"  {spec.flow}: first records {w.first[0] - deployed:.1f} s after the deploy ({w.first[1]:,}), "
                f"the last {w.last - deployed:.1f} s after; {w.counted:,} records read back"
            )
        return [w.rate() for w in landed]
    finally:
        for w in landed:
            w.close()
        deployer.stop_all()


def idle_topics(bootstrap: str, prefix: str, partitions: int, per_topic: int) -> None:
    """`partitions` partitions without records beside flow A's backlog, as topics `<prefix>.idle<i>` of up to
    `per_topic` each, which A's topic pattern takes too (bench/scale.py's flow `a`: 500 topics of 5 partitions
    beside the 5 of its backlog)."""
    admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap}))
    sizes = [per_topic] * (partitions // per_topic) + ([partitions % per_topic] if partitions % per_topic else [])
    new = [NewTopic(f"{prefix}.idle{i}", n, 1) for i, n in enumerate(sizes)]
    for f in admin.create_topics(new).values() if new else ():
        f.result(300)


def repetition(west: Broker, east: Broker, rep: int, opts, work: Path) -> dict[str, float]:
    limited = int(opts.cap * opts.seconds)
    out: dict[str, float] = {}
    runs = ("solo", "together") if rep % 2 == 0 else ("together", "solo")
    for run in runs if opts.sibling else ("together",):
        tag = f"{run[0]}{rep}"
        if opts.sibling:
            fill(west.bootstrap, f"b{tag}", opts.partitions, opts.backlog)
        b = flow(west, east, f"b{tag}", f"b{tag}", opts)
        if run == "solo":
            say(f"run {rep + 1}: B alone, {opts.backlog:,} records")
            (out["b_solo"],) = run_engine(east, [b], [f"b{tag}"], [opts.backlog], opts, work / f"solo{rep}")
            say(f"  B {out['b_solo']:,.0f} records/s")
            continue
        fill(west.bootstrap, f"a{tag}", opts.partitions, limited)
        idle_topics(west.bootstrap, f"a{tag}", opts.idle_partitions, opts.idle_topic_partitions)
        include = f"a{tag}(\\.idle[0-9]+)?" if opts.idle_partitions else None
        a = flow(west, east, f"a{tag}", f"a{tag}", opts, include, records_per_second=opts.cap)
        beside = f" and B ({opts.backlog:,} records)" if opts.sibling else " alone"
        idle = f" beside {opts.idle_partitions:,} idle partitions" if opts.idle_partitions else ""
        say(f"run {rep + 1}: A (cap {opts.cap:,}/s, {limited:,} records{idle}){beside} in one engine")
        if not opts.sibling:
            (out["a"],) = run_engine(east, [a], [f"a{tag}"], [limited], opts, work / f"a{rep}")
            say(f"  A {out['a']:,.0f} records/s ({out['a'] / opts.cap:.3f}x its cap)")
            break
        out["a"], out["b_together"] = run_engine(
            east, [a, b], [f"a{tag}", f"b{tag}"], [limited, opts.backlog], opts, work / f"both{rep}"
        )
        say(f"  A {out['a']:,.0f} records/s, B {out['b_together']:,.0f} records/s")
    out["a_to_cap"] = out["a"] / opts.cap
    if opts.sibling:
        out["b_to_solo"] = out["b_together"] / out["b_solo"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cap", type=int, default=20_000, help="flow A's rate_limit.records_per_second")
    ap.add_argument("--seconds", type=float, default=30.0, help="A's backlog: this many seconds at its cap")
    ap.add_argument("--backlog", type=int, default=4_000_000, help="B's backlog (records), solo and together")
    ap.add_argument("--partitions", type=int, default=2, help="of each flow's topic")
    ap.add_argument("--master", default="local[2]", help="the flows' job.master (raised to their task slots)")
    ap.add_argument("--parallelism", type=int, default=2, help="the flows' job.parallelism")
    ap.add_argument(
        "--idle-partitions",
        type=int,
        default=0,
        help="partitions without records in A's topics beside its backlog",
    )
    ap.add_argument("--idle-topic-partitions", type=int, default=5, help="of each idle topic (--idle-partitions)")
    ap.add_argument(
        "--no-sibling", dest="sibling", action="store_false", help="A alone in its engine: no flow B, no B alone"
    )
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", type=Path, help="also write each run's figures here")
    opts = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-ratelimit-"))
    load_start, date = os.getloadavg(), time.strftime("%Y-%m-%d %H:%M")
    brokers = start_brokers(work)
    west, east = Broker(brokers[0].bootstrap), Broker(brokers[1].bootstrap)
    runs: list[dict[str, float]] = []
    try:
        for rep in range(opts.repeat):
            runs.append(repetition(west, east, rep, opts, work))
    finally:
        stop_brokers(brokers)
    load_end = os.getloadavg()

    def col(key: str) -> list[float]:
        return [r[key] for r in runs]

    print(
        f"\nrate limit in a shared engine, {opts.repeat} runs, {date} ({os.cpu_count()} cores, load average "
        f"{load_start[0]:.1f} at start, {load_end[0]:.1f} at end; {opts.master}, parallelism {opts.parallelism}, "
        f"{opts.partitions} partitions a topic, {opts.idle_partitions:,} idle partitions beside A's): median [min-max]"
    )
    print(f"  A (rate_limit {opts.cap:,} records/s): {spread(col('a'))} records/s")
    if not opts.sibling:
        print(f"  A / its cap: {spread(col('a_to_cap'), '{:.3f}')}  (no flow B)")
    else:
        print(f"  B alone:                  {spread(col('b_solo'))} records/s")
        print(f"  B beside A:               {spread(col('b_together'))} records/s")
        for line in cap_verdicts(col("a_to_cap"), col("b_to_solo")):
            print(f"  {line}")
    if opts.json:
        env = {"date": date, "cores": os.cpu_count(), "loadavg_start": load_start, "loadavg_end": load_end}
        opts.json.write_text(json.dumps({"options": vars(opts) | {"json": str(opts.json)}, "env": env, "runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
