"""Cost curves (issue 47): how one engine's start-up, idle CPU and memory grow with partitions, groups and flows.

    python bench/curves.py                                   # every axis at its default points
    python bench/curves.py --axes partitions --partitions 10 100 1000 2500
    python bench/curves.py --axes groups --groups 10 1000 10000 --checkpoint-sample 500
    python bench/curves.py --axes flows --flows 1 10 50
    python bench/curves.py --quick                           # small points, short windows: does it run

For each point of each axis, on fresh Tansu brokers behind counting relays (bench/scale.py's machinery: a source
`a` and the target `hub`), one engine deployed as `reconciler apply` deploys it (the local deployer), and:

  partitions  P partitions (topics of --partitions-per-topic each), --base-groups groups, one flow
  groups      --base-partitions partitions, G groups (each committed on partition 0 of one topic), one flow
  flows       F flows into the one engine (source aliases s000... on the same source broker, each its own topic
              of one partition and one group), so the engine runs F flows of one partition each

the figures of that point:

  apply returned     `reconciler apply DIR --auto-approve` (a new process, as a user runs it), seconds
  first record       apply -> the first record on the target (the ends of up to 20 remote topics, every 0.25 s)
  caught up          apply -> every record on the target (read back in full: scale.all_copied)
  groups synced      apply -> `reconciler status` counts every group synced
  checkpoint held    groups axis (and --checkpoint-sample > 0): once caught up, scale.checkpoint_held: a sample of
                     groups move on their sources; seconds from each commit to its translated offset on the target
  idle CPU           once caught up and --settle seconds later, --windows windows of --idle-seconds: CPU of every
                     process of the engine (scale.idle_window: /proc, JVM and Python workers, short-lived ones
                     included) as % of one core, median [min-max] over the windows
  PSS                the engine's processes' proportional set size at the end of each window, MB
  load               the 1-minute load average at the end of each idle window (median): other work on the machine
                     moves every figure, so it is printed beside each point

Then, per axis, a least-squares line through the points for each figure (slope per unit with its intercept, R^2
and the largest residual; "a line does not fit" below R^2 0.9; two points make a line through both, no residual),
printed per 1,000 partitions, per 1,000 groups and per flow, and the memory per partition and per group (the PSS
slopes). Markdown tables on stdout (docs/benchmarks.md keeps them), progress on stderr.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import KafkaException, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, OffsetSpec  # noqa: E402

from bench.common import stop_engines  # noqa: E402
from bench.scale import (  # noqa: E402
    TARGET,
    CheckpointHeld,
    Cluster,
    FlowDecl,
    admin,
    all_copied,
    checkpoint_held,
    cli,
    idle_window,
    partition_records,
    populate,
    sample_groups,
    say,
    spread,
    start_cluster,
    synced_groups,
    topic_names,
    topology_yaml,
)
from reconciler.dev.brokers import stop_pid  # noqa: E402


class Axis(Enum):
    PARTITIONS = "partitions"
    GROUPS = "groups"
    FLOWS = "flows"


# per axis: the unit its growth is printed per (and its name)
PER = {Axis.PARTITIONS: (1000, "1,000 partitions"), Axis.GROUPS: (1000, "1,000 groups"), Axis.FLOWS: (1, "flow")}


@dataclass(frozen=True)
class Point:
    axis: Axis
    x: int
    partitions: int  # in all
    partitions_per_topic: int
    groups: int  # in all
    flows: int

    @property
    def aliases(self) -> list[str]:
        return ["a"] if self.flows == 1 else [f"s{i:03d}" for i in range(self.flows)]


def point_for(axis: Axis, x: int, opts) -> Point:
    if axis is Axis.PARTITIONS:
        ppt = min(x, opts.partitions_per_topic)
        return Point(axis, x, math.ceil(x / ppt) * ppt, ppt, opts.base_groups, 1)
    if axis is Axis.GROUPS:
        return Point(axis, x, opts.base_partitions, opts.partitions_per_topic, x, 1)
    return Point(axis, x, x, 1, x, x)


@dataclass
class Measured:
    point: Point
    apply_returned_s: float = math.nan
    first_record_s: float = math.nan
    caught_up_s: float = math.nan
    groups_synced_s: float = math.nan
    idle_cpu_pct: list[float] = field(default_factory=list)
    pss_mb: list[float] = field(default_factory=list)
    processes: list[float] = field(default_factory=list)  # the engine's processes at each window's end
    load: list[float] = field(default_factory=list)
    checkpoint: CheckpointHeld | None = None


@dataclass(frozen=True)
class Fit:
    slope: float
    intercept: float
    r2: float
    max_residual: float
    points: int

    @property
    def verdict(self) -> str:
        if self.points == 2:
            return "2 points: a line through both"
        if self.r2 < 0.9:
            return f"a line does not fit (R^2 {self.r2:.2f}, largest residual {self.max_residual:,.1f})"
        return f"R^2 {self.r2:.2f}, largest residual {self.max_residual:,.1f}"


def fit(xs: list[float], ys: list[float]) -> Fit | None:
    """Least squares y = slope * x + intercept over the points with a figure; None under 2 points."""
    pts = [(x, y) for x, y in zip(xs, ys) if not math.isnan(y)]
    if len({x for x, _ in pts}) < 2:
        return None
    slope, intercept = statistics.linear_regression([x for x, _ in pts], [y for _, y in pts])
    residuals = [y - (slope * x + intercept) for x, y in pts]
    mean = statistics.fmean(y for _, y in pts)
    total = sum((y - mean) ** 2 for _, y in pts)
    r2 = 1.0 - sum(r * r for r in residuals) / total if total else 1.0
    return Fit(slope, intercept, r2, max(abs(r) for r in residuals), len(pts))


class Rig:
    """One point's brokers, topology and engine: started fresh, stopped with everything it started."""

    def __init__(self, point: Point, work: Path, records_per_partition: int):
        self.point, self.work, self.rpp = point, work, records_per_partition
        work.mkdir(parents=True)
        self.source = start_cluster("a", work)
        self.target = start_cluster(TARGET, work)
        self.root = work / "state"
        self.env = {
            **os.environ,
            "RECONCILER_STATE_DIR": str(self.root),
            "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
        }
        n = len(point.aliases)
        topics_each = point.partitions // point.partitions_per_topic // n
        self.topics = {a: topic_names(a, topics_each) for a in point.aliases}
        self.groups = {a: [f"{a}g{k:06d}" for k in range(i, point.groups, n)] for i, a in enumerate(point.aliases)}
        self.tdir = work / "topology"

    @property
    def remote(self) -> list[str]:
        return [f"{a}.{t}" for a, ts in self.topics.items() for t in ts]

    def populate(self) -> None:
        for a in self.point.aliases:
            populate(self.source, self.topics[a], self.point.partitions_per_topic, self.rpp, self.groups[a])
        self.tdir.mkdir()
        flows = [FlowDecl(a, f"{a}\\d{{5}}", f"{a}g\\d{{6}}") for a in self.point.aliases]
        bootstraps = {a: self.source.bootstrap for a in self.point.aliases} | {TARGET: self.target.bootstrap}
        (self.tdir / "topology.yaml").write_text(topology_yaml(bootstraps, flows, name="curves"))

    def groups_of(self) -> dict[str, tuple[Cluster, list[str], list[str]]]:
        return {a: (self.source, self.topics[a], self.groups[a]) for a in self.point.aliases}

    def stop(self) -> None:
        stop_engines(self.root)
        for c in (self.source, self.target):
            c.close()
            if c.broker.pid:
                stop_pid(c.broker.pid)


def start_up(rig: Rig, m: Measured) -> float:
    """Apply in a new process; the seconds until it returned and until the first record was on the target."""
    t0 = time.monotonic()
    # its output to a file: a plan of thousands of topics fills a pipe, and apply would wait on it for ever
    log = rig.work / "apply.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "apply", str(rig.tdir), "--auto-approve"],
            env=rig.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    sample = [TopicPartition(t, p) for t in rig.remote[:20] for p in range(rig.point.partitions_per_topic)]
    client = admin(rig.target)  # one client polled (a new one every 0.25 s piles up threads)
    deadline = t0 + 900
    while time.monotonic() < deadline and (math.isnan(m.first_record_s) or proc.poll() is None):
        if proc.poll() is not None and math.isnan(m.apply_returned_s):
            m.apply_returned_s = time.monotonic() - t0
            if proc.returncode != 0:
                raise RuntimeError(f"apply exited {proc.returncode}: {log.read_text()[-2000:]}")
        if math.isnan(m.first_record_s) and _any_record(client, sample):
            m.first_record_s = time.monotonic() - t0
        time.sleep(0.25)
    if math.isnan(m.apply_returned_s):
        proc.wait(60)
        m.apply_returned_s = time.monotonic() - t0
    return t0


def _any_record(client: AdminClient, tps: list[TopicPartition]) -> bool:
    for f in client.list_offsets({tp: OffsetSpec.latest() for tp in tps}).values():
        try:
            if f.result().offset > 0:
                return True
        except KafkaException:
            pass
    return False


def say_short(rig: Rig, counts: dict[tuple[str, int], int], per_partition: int) -> None:
    """The partitions short on the target, what the source holds there, and what the flow's status says: whether the
    records were never on the source or the engine did not copy them (docs/benchmarks.md, the 2,500-partition run)."""
    missing = sorted(tp for tp, n in counts.items() if n < per_partition)
    if not missing:
        return
    on_source = partition_records(rig.source, [(remote.split(".", 1)[1], p) for remote, p in missing])
    shown = ", ".join(f"{t}[{p}]" for t, p in missing[:10]) + (", ..." if len(missing) > 10 else "")
    say(
        f"  {len(missing):,} partitions short on the target ({shown}): {sum(counts[tp] for tp in missing):,} records "
        f"there, {sum(on_source.values()):,} on the source, {len(missing) * per_partition:,} produced"
    )
    _, done = cli(["status", str(rig.tdir), "--format", "json"], rig.env, timeout=300)
    for job in json.loads(done.stdout or "{}").get("jobs", []) if done.returncode == 0 else []:
        findings = job.get("findings") or []
        say(
            f"  status of {job['flow']}: {job['state']}, lag {job['lag_total']}, {len(job.get('faults') or [])} "
            f"fault(s), {len(findings)} finding(s){': ' + findings[0] if findings else ''}"
        )


def measure_point(point: Point, opts, work: Path) -> Measured:
    m = Measured(point)
    rig = Rig(point, work, opts.records_per_partition)
    try:
        say(
            f"{point.axis.value} = {point.x:,}: {point.partitions:,} partitions, {point.groups:,} groups, "
            f"{point.flows} flow(s); load average {os.getloadavg()[0]:.1f}"
        )
        rig.populate()
        t0 = start_up(rig, m)
        say(f"  apply returned {m.apply_returned_s:.1f} s, first record {m.first_record_s:.1f} s")
        expected = point.partitions * opts.records_per_partition
        short = functools.partial(say_short, rig, per_partition=opts.records_per_partition)
        m.caught_up_s = all_copied(rig.target, rig.remote, point.partitions_per_topic, expected, t0, short) - t0
        deadline = time.monotonic() + opts.group_timeout
        while point.groups:
            n, _ = synced_groups(rig.tdir, rig.env)
            if n >= point.groups or time.monotonic() > deadline:
                m.groups_synced_s = time.monotonic() - t0 if n >= point.groups else math.nan
                say(f"  {n:,} of {point.groups:,} groups synced after {time.monotonic() - t0:.0f} s")
                break
            time.sleep(2)
        if point.axis is Axis.GROUPS and opts.checkpoint_sample:
            m.checkpoint = checkpoint_held(rig.target, sample_groups(rig.groups_of(), opts.checkpoint_sample))
            say("  " + m.checkpoint.line())
        time.sleep(opts.settle)
        for w in range(opts.windows):
            window = idle_window(rig.root, opts.idle_seconds)
            m.idle_cpu_pct.append(window["cpu_pct"])
            m.pss_mb.append(window["pss_mb"])
            m.processes.append(window["processes"])
            m.load.append(os.getloadavg()[0])
            say(
                f"  idle window {w + 1}: {window['cpu_pct']:.1f} % of a core, {window['pss_mb']:.0f} MB PSS "
                f"({window['processes']:.0f} processes), "
                f"load {m.load[-1]:.1f}"
            )
    finally:
        rig.stop()
    return m


def _med(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def _s(value: float, fmt: str = "{:,.1f}") -> str:
    return "-" if math.isnan(value) else fmt.format(value)


# the figures fitted per axis: label, unit, how to read one from a point
FIGURES = (
    ("idle CPU", "% of a core", lambda m: _med(m.idle_cpu_pct)),
    ("PSS", "MB", lambda m: _med(m.pss_mb)),
    ("apply -> first record", "s", lambda m: m.first_record_s),
    ("apply -> caught up", "s", lambda m: m.caught_up_s),
    ("apply -> groups synced", "s", lambda m: m.groups_synced_s),
)


def table(axis: Axis, ms: list[Measured]) -> None:
    print(f"\n### {axis.value}\n")
    print(
        "| point | partitions | groups | flows | load (1 min) | apply returned s | apply -> first record s "
        "| apply -> caught up s | apply -> groups synced s | idle CPU % of a core | PSS MB | processes | commit -> target s |"
    )
    print("|" + "---|" * 13)
    for m in ms:
        p, cp = m.point, m.checkpoint
        held = "-"
        if cp is not None and cp.lags_s:
            lags = sorted(cp.lags_s)
            held = (
                f"{statistics.median(lags):.1f} / {lags[min(len(lags) - 1, int(0.95 * len(lags)))]:.1f} / "
                f"{lags[-1]:.1f} ({len(lags)} of {cp.sample})"
            )
        print(
            f"| {p.x:,} | {p.partitions:,} | {p.groups:,} | {p.flows} | {spread(m.load, '{:.1f}')} "
            f"| {_s(m.apply_returned_s)} | {_s(m.first_record_s)} | {_s(m.caught_up_s)} | {_s(m.groups_synced_s)} "
            f"| {spread(m.idle_cpu_pct, '{:.1f}')} | {spread(m.pss_mb, '{:.0f}')} | {spread(m.processes, '{:.0f}')} | {held} |"
        )


def growth(axis: Axis, ms: list[Measured]) -> dict[str, Fit]:
    per, unit = PER[axis]
    xs = [float(m.point.x) for m in ms]
    fits: dict[str, Fit] = {}
    print(f"\nfitted growth per {unit} (least squares over {len(ms)} points; the intercept is the fixed cost):\n")
    for label, u, read in FIGURES:
        f = fit(xs, [read(m) for m in ms])
        if f is None:
            continue
        fits[label] = f
        print(f"- {label}: {f.slope * per:+,.2f} {u} per {unit} (intercept {f.intercept:,.1f} {u}; {f.verdict})")
    if "PSS" in fits and axis is not Axis.FLOWS:
        print(f"- memory per {axis.value[:-1]}: {fits['PSS'].slope * 1024:,.1f} KB (the PSS slope)")
    return fits


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--axes", nargs="+", default=[a.value for a in Axis], choices=[a.value for a in Axis])
    ap.add_argument("--partitions", type=int, nargs="+", default=[10, 100, 1000, 2500, 5000])
    ap.add_argument("--groups", type=int, nargs="+", default=[10, 1000, 10000, 20000])
    ap.add_argument("--flows", type=int, nargs="+", default=[1, 10, 50, 100])
    ap.add_argument("--partitions-per-topic", type=int, default=5)
    ap.add_argument("--base-partitions", type=int, default=100, help="the groups axis's partitions")
    ap.add_argument("--base-groups", type=int, default=10, help="the partitions axis's groups")
    ap.add_argument("--records-per-partition", type=int, default=5)
    ap.add_argument("--checkpoint-sample", type=int, default=500, help="groups axis: groups moved once caught up")
    ap.add_argument("--group-timeout", type=float, default=1800.0, help="seconds to wait for every group synced")
    ap.add_argument("--settle", type=float, default=20.0, help="seconds between caught up and the idle windows")
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--idle-seconds", type=float, default=15.0)
    ap.add_argument("--quick", action="store_true", help="two small points per axis, short windows")
    ap.add_argument("--json", type=Path, help="also write the points here")
    opts = ap.parse_args(argv)
    if opts.quick:
        opts.partitions, opts.groups, opts.flows = [10, 100], [10, 200], [1, 3]
        opts.base_partitions, opts.records_per_partition, opts.checkpoint_sample = 20, 2, 20
        opts.settle, opts.windows, opts.idle_seconds = 5.0, 2, 5.0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped run still stops its brokers and engine
    work = Path(tempfile.mkdtemp(prefix="bench-curves-"))
    say(f"work directory {work}")
    points = {a: getattr(opts, a.value) for a in Axis if a.value in opts.axes}
    results: dict[Axis, list[Measured]] = {}
    for axis, xs in points.items():
        for x in xs:
            p = point_for(axis, x, opts)
            results.setdefault(axis, []).append(measure_point(p, opts, work / f"{axis.value}-{x}"))
    print(
        f"\n## cost curves, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores "
        f"(load average beside each point); median [min-max] over {opts.windows} idle windows of "
        f"{opts.idle_seconds:g} s; commit -> target: median / p95 / max"
    )
    for axis, ms in results.items():
        table(axis, ms)
        growth(axis, ms)
    if opts.json:
        opts.json.write_text(
            json.dumps(
                {
                    a.value: [asdict(m) | {"point": asdict(m.point) | {"axis": a.value}} for m in ms]
                    for a, ms in results.items()
                },
                indent=2,
                default=str,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
