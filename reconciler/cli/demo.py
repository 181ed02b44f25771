"""`reconciler demo`: the main job, end to end on embedded clusters.

validate -> start the clusters of `topologies/demo` (local Tansu brokers) -> produce a sample
backlog, a consumer group's offsets and a live stream -> plan -> apply (topics, then one
replication job per flow, `local` deployer) -> wait until records, heartbeats and checkpoints
arrive downstream -> print what was replicated where (counts, end-to-end latency of the live
stream, heartbeat hops, checkpoints) and `reconciler status` -> change a remote topic by hand and
show the drift in a plan, then apply to put it back -> stop jobs and clusters (unless
--keep-running; Ctrl-C also stops them cleanly).

Each step prints what it does; a failing step says which one and what failed. The product's steps
(plan, apply, status, drift, checkpoints, heartbeats) call the operations with the Backend and print what
the commands would; the demo's own traffic on the clusters (sample data, the live stream, counts, latency,
the change by hand) is `dev/demo_io.py`.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from reconciler import outputs, settings
from reconciler.analysis.expansion import route
from reconciler.cli.commands_plan import Console, ConsoleApplyUI, conclude_apply
from reconciler.cli.commands_status import render_text
from reconciler.cli.common import EXIT_OK, load_validated
from reconciler.dev import demo_io
from reconciler.dev.brokers import Engine, default_engine
from reconciler.dev.sample_data import produce, sample_records
from reconciler.drift.report import DriftReport
from reconciler.gitops.revision import revision_label
from reconciler.mirror.mirror_client import reachability
from reconciler.mirror.records import Heartbeat
from reconciler.operations import offsets
from reconciler.operations import status as job_status
from reconciler.operations.apply import ApplyRequest, apply
from reconciler.operations.backend import Backend
from reconciler.operations.dev import dev_down, dev_up
from reconciler.operations.drift import drift
from reconciler.operations.plan import plan_topology
from reconciler.plan.actions import Plan
from reconciler.render import drift_html, drift_text, plan_text
from reconciler.render.graph import mermaid
from reconciler.resources import demo_topology
from reconciler.textutil import LIVE_E2E, RECORD_AGE, LiveLine
from reconciler.topology.model import Flow, Topology


class _ApplyShown(Console):
    """The console of the demo's apply: what it applied, not the plan it shows first (the step before printed
    it); everything when it applies nothing."""

    def __init__(self, clusters) -> None:
        super().__init__(clusters)
        self.held: list[str] | None = []

    def out(self, text: str = "", end: str = "\n") -> None:
        if self.held is not None and "Applying " not in text:
            self.held.append(text + end)
            return
        if self.held is not None:  # the first line shown: "Applying ...", without the blank line before it
            self.held, text = None, text.lstrip("\n")
        super().out(text, end)

    def flush(self) -> None:
        if self.held:
            sys.stdout.write(self.redact("".join(self.held)))
        self.held = None


def demo_apply(ctx: DemoContext) -> int:
    """`reconciler apply PATH --auto-approve` as an operation, printing only what it applied."""
    git = ctx.backend.git.revision([str(ctx.topology_path)])
    request = ApplyRequest(ctx.topo, None, revision_label(git), git, auto_approve=True)
    io = _ApplyShown(dict(ctx.topo.clusters))
    try:
        return conclude_apply(io, apply(request, ctx.backend, ConsoleApplyUI(io, True, ctx.backend.ask)))
    finally:
        io.flush()


def demo_plan(ctx: DemoContext) -> Plan:
    """`reconciler plan PATH` as an operation: the plan, printed as the command prints it."""
    git = ctx.backend.git.revision([str(ctx.topology_path)])
    plan = plan_topology(ctx.topo, ctx.backend, revision_label(git)).plan
    Console(dict(ctx.topo.clusters)).out(plan_text.render(plan), end="")
    if plan.errors:
        raise DemoFailed("the plan has errors (see above)")
    return plan


DEFAULT_TOPOLOGY = demo_topology()
LOCAL_TOPICS = {"orders": 4, "payments": 2, "inventory.stock": 2, "clickstream": 4, "customers.profiles": 2}
#: Explicit configs of the source topics (copied to remote topics; the drift step changes one by hand).
TOPIC_CONFIGS = {"orders": {"retention.ms": "604800000"}}
GROUP = "billing-app"  # a consumer group on each region's `payments`, checkpointed downstream
GROUP_TOPIC = "payments"
GROUP_OFFSET = 10  # the group has processed this many records of each partition
LIVE_RATE = 50.0  # records/s per source cluster while the demo runs
DRIFT = ("eu-central", "eu-west.orders", "retention.ms", "3600000")


@dataclass
class DemoContext:
    topology_path: Path
    records_per_cluster: int
    keep_running: bool
    backend: Backend
    wait_timeout: float = 300.0
    engine: Engine = Engine.TANSU
    topology: Topology | None = None
    backlog: dict[str, dict[str, int]] = field(default_factory=dict)  # source cluster -> topic -> records
    stream: demo_io.LiveStream | None = None
    replicated: int = 0
    latency: list[float] = field(default_factory=list)  # e2e latency samples of the live stream, all flows
    notes: list[str] = field(default_factory=list)
    records_seen: tuple[int, int] = (0, 0)  # (records downstream, records expected) at the last count

    @property
    def topo(self) -> Topology:
        """The validated topology (loaded by the first step; every later step needs it)."""
        if self.topology is None:
            raise DemoFailed("the demo topology is not loaded")
        return self.topology

    def bootstrap(self, alias: str) -> str:
        return self.topo.clusters[alias].bootstrap_servers


class DemoFailed(Exception):
    pass


# --- reading clusters ---------------------------------------------------------------------------


def routed(flow: Flow) -> list[tuple[str, str]]:
    """(source topic, remote topic) of the demo's local topics that `flow` replicates."""
    return [(t, r) for t in LOCAL_TOPICS if (r := route(flow, t))]


# --- steps --------------------------------------------------------------------------------------


def step_validate(ctx: DemoContext) -> None:
    ctx.topology, diags = load_validated([str(ctx.topology_path)])
    if ctx.topology is None:
        raise DemoFailed("the demo topology does not validate")
    print(f"  {len(ctx.topo.clusters)} clusters, {len(ctx.topo.flows)} flows, {len(diags.warnings)} warnings")
    print("  " + mermaid(ctx.topo).replace("\n", "\n  ").rstrip())


def step_clusters(ctx: DemoContext) -> None:
    outcome = dev_up(ctx.topo, ctx.backend, ctx.engine)
    if outcome.unresolved is not None:
        raise DemoFailed(outcome.unresolved.render())
    if outcome.error is not None:
        raise DemoFailed(outcome.error)
    for status in outcome.clusters:
        print("  " + status.line())


def step_sample_data(ctx: DemoContext) -> None:
    sources = sorted({f.source for f in ctx.topo.active_flows})
    for alias in sources:
        bootstrap = ctx.bootstrap(alias)
        demo_io.create_topics(bootstrap, LOCAL_TOPICS, TOPIC_CONFIGS)
        records = list(sample_records(alias, list(LOCAL_TOPICS), ctx.records_per_cluster))
        acked = produce(bootstrap, iter(records))
        if acked != len(records):
            raise DemoFailed(f"{alias}: only {acked} of {len(records)} sample records were acknowledged")
        per_topic: dict[str, int] = {}
        for r in records:
            per_topic[r.topic] = per_topic.get(r.topic, 0) + 1
        ctx.backlog[alias] = per_topic
        # A consumer group that has processed part of `payments`: its offsets are checkpointed downstream.
        demo_io.commit_group(bootstrap, GROUP, GROUP_TOPIC, LOCAL_TOPICS[GROUP_TOPIC], GROUP_OFFSET)
        print(
            f"  {alias}: {acked} records on {', '.join(LOCAL_TOPICS)}; group {GROUP} committed "
            f"{GROUP_TOPIC} at offset {GROUP_OFFSET}"
        )
    ctx.stream = demo_io.LiveStream({a: ctx.bootstrap(a) for a in sources}, list(LOCAL_TOPICS), LIVE_RATE)
    ctx.stream.start()
    print(f"  live stream: {LIVE_RATE:.0f} records/s per region from now on")


def step_plan(ctx: DemoContext) -> None:
    if not demo_plan(ctx).has_changes:
        print("  (no changes: an earlier run left everything in place)")


def step_apply(ctx: DemoContext) -> None:
    print(f"  $ reconciler apply {ctx.topology_path} --auto-approve   # (the plan above, then:)")
    if demo_apply(ctx) != EXIT_OK:
        raise DemoFailed("apply failed (see above)")
    if demo_plan(ctx).has_changes:
        raise DemoFailed("the plan after apply is not empty")
    print("  second plan: no changes (the jobs are starting)")


def _missing_records(ctx: DemoContext) -> list[str]:
    missing = []
    by_target: dict[str, list[tuple[Flow, str, str]]] = {}
    for f in ctx.topo.active_flows:
        for t, r in routed(f):
            by_target.setdefault(f.target, []).append((f, t, r))
    seen = expected = 0
    for target, items in sorted(by_target.items()):
        counts = demo_io.count_records(ctx.bootstrap(target), sorted({r for _, _, r in items}))
        for f, t, r in items:
            want = ctx.backlog.get(f.source, {}).get(t, 0)
            seen, expected = seen + min(counts[r], want), expected + want
            if counts[r] < want:
                missing.append(f"{f.name}: {r} on {target} has {counts[r]} of {want} records")
    ctx.records_seen = (seen, expected)
    return missing


def _heartbeats(ctx: DemoContext) -> dict[str, Mapping[str, Heartbeat | None]]:
    out = {}
    for target in sorted({f.target for f in ctx.topo.active_flows}):
        policy = next(f.policy for f in ctx.topo.active_flows if f.target == target)
        out[target] = ctx.backend.read_heartbeats(ctx.topo.clusters[target], policy)
    return out


def _missing_heartbeats(ctx: DemoContext) -> list[str]:
    beats = _heartbeats(ctx)
    return [
        f"{f.name}: no heartbeat on {f.target}:{f.policy.format_remote_topic(f.source, 'heartbeats')}"
        for f in ctx.topo.active_flows
        if f.heartbeats.enabled and beats[f.target].get(f.policy.format_remote_topic(f.source, "heartbeats")) is None
    ]


def _checkpoint_flows(ctx: DemoContext) -> list[Flow]:
    return [
        f for f in ctx.topo.active_flows if f.checkpoints.enabled and f.groups.matches(GROUP) and route(f, GROUP_TOPIC)
    ]


def _checkpoints(ctx: DemoContext, flow: Flow):
    """The group's translated offsets on the flow's target (`offsets translate`), {} while there are none."""
    move = offsets.GroupMove(GROUP, flow.source, flow.target, timeout=10.0)
    try:
        return offsets.translate(ctx.topo, move, ctx.backend).scan.offsets()
    except offsets.Refused as exc:
        if isinstance(exc.__cause__, Exception):  # the cluster could not be read: the wait retries
            raise
        return {}  # no checkpoints (yet)


def _missing_checkpoints(ctx: DemoContext) -> list[str]:
    return [
        f"{f.name}: no checkpoint of group {GROUP} in {f.target}:{f.policy.checkpoints_topic(f.source)}"
        for f in _checkpoint_flows(ctx)
        if not _checkpoints(ctx, f)
    ]


def _job_problems(ctx: DemoContext) -> list[str]:
    return [
        f"job {r.flow} is {r.state}: {r.why or r.last_error or ''}".rstrip(": ")
        for r in job_status.status(ctx.topo, ctx.backend).rows
        if r.wanted and r.state != "running"
    ]


def wait_progress(records: tuple[int, int], waiting_for: list[str], elapsed: float, limit: float) -> str:
    """The live line while the demo waits for data downstream."""
    seen, expected = records
    return (
        f"  waiting for {', '.join(waiting_for)}: {seen:,} of {expected:,} records seen downstream, "
        f"{elapsed:.0f}s elapsed (time limit {limit:.0f}s)"
    )


def step_wait(ctx: DemoContext) -> None:
    checks: list[tuple[str, Callable[[DemoContext], list[str]]]] = [
        ("records", _missing_records),
        ("heartbeats", _missing_heartbeats),
        ("checkpoints", _missing_checkpoints),
    ]
    started = time.monotonic()
    done: set[str] = set()
    last: dict[str, list[str]] = {}
    line = LiveLine(sys.stdout)
    while time.monotonic() - started < ctx.wait_timeout:
        for name, check in checks:
            if name in done:
                continue
            try:
                last[name] = check(ctx)
            except Exception as exc:  # noqa: BLE001 - a cluster busy or a topic not there yet: try again
                last[name] = [f"{type(exc).__name__}: {exc}"]
            if not last[name]:
                done.add(name)
                line.done()
                print(f"  {name} arrived downstream after {time.monotonic() - started:.0f}s")
        if len(done) == len(checks):
            return
        line.show(
            wait_progress(
                ctx.records_seen, [n for n, _ in checks if n not in done], time.monotonic() - started, ctx.wait_timeout
            )
        )
        time.sleep(2)
    line.done()
    lines = [f"{n}: {m}" for n, _ in checks if n not in done for m in last.get(n, ["not checked"])]
    try:
        lines += _job_problems(ctx)
    except Exception:  # noqa: BLE001
        pass
    raise DemoFailed(
        f"not everything arrived within {ctx.wait_timeout:.0f}s:\n    "
        + "\n    ".join(lines)
        + f"\n    (job logs: {ctx.backend.local_jobs().dir}/<source>.<target>/job.log)"
    )


def _latency_probe(ctx: DemoContext, seconds: float = 8.0) -> dict[str, list[float]]:
    """End-to-end latency of the live stream: from the producer's timestamp on the source to a
    consumer receiving the record on the target, per flow."""
    remotes: dict[str, list[str]] = {}
    flows_of: dict[tuple[str, str], str] = {}
    for f in ctx.topo.active_flows:
        for _, r in routed(f):
            remotes.setdefault(f.target, []).append(r)
            flows_of[(f.target, r)] = f.name
    samples: dict[str, list[float]] = {}
    bootstraps = {t: ctx.bootstrap(t) for t in remotes}
    for key, values in demo_io.e2e_latency(remotes, bootstraps, seconds).items():
        samples.setdefault(flows_of[key], []).extend(values)
    return samples


def _pct(values: list[float], p: float) -> float:
    data = sorted(values)
    return data[max(0, -(-len(data) * int(p) // 100) - 1)]


def step_summary(ctx: DemoContext) -> None:
    print(f"  {LIVE_E2E} of the live stream (produced on the source -> consumed on the target), 8 s ...")
    latency = _latency_probe(ctx)
    ctx.latency = [v for values in latency.values() for v in values]
    rows = {r.flow: r.to_dict() for r in job_status.status(ctx.topo, ctx.backend).rows}
    table = [["FLOW", "TOPIC -> REMOTE TOPIC", "SOURCE", "TARGET"]]
    for f in sorted(ctx.topo.active_flows, key=lambda f: f.name):
        pairs = routed(f)
        target_counts = demo_io.count_records(ctx.bootstrap(f.target), [r for _, r in pairs])
        source_counts = demo_io.count_records(ctx.bootstrap(f.source), [t for t, _ in pairs])
        for i, (t, r) in enumerate(pairs):
            table.append(
                [f.name if i == 0 else "", f"{t} -> {f.target}:{r}", str(source_counts[t]), str(target_counts[r])]
            )
            ctx.replicated += target_counts[r]
    print("\n  Records (source topic and its remote copy, counted now; the live stream keeps adding):")
    _print_table(table)

    table = [["FLOW", "JOB", "RECORDS COPIED", "REC/S", "LAG", "LIVE E2E P50", "LIVE E2E P99", "SAMPLES"]]
    for f in sorted(ctx.topo.active_flows, key=lambda f: f.name):
        row = rows.get(f.name, {})
        lat = latency.get(f.name, [])
        table.append(
            [
                f.name,
                f"{row.get('state')} ({row.get('where')})",
                str(row.get("records")),
                "-" if row.get("records_per_second") is None else f"{row['records_per_second']:.0f}",
                "-" if row.get("lag_total") is None else str(row["lag_total"]),
                f"{statistics.median(lat):.0f} ms" if lat else "-",
                f"{_pct(lat, 99):.0f} ms" if lat else "-",
                str(len(lat)),
            ]
        )
    print("\n  Jobs:")
    _print_table(table)

    print("\n  Heartbeats (reachability and hops, as MirrorMaker 2's RemoteClusterUtils reads them):")
    now_ms = int(ctx.backend.clock() * 1000)
    for target, beats in _heartbeats(ctx).items():
        policy = next(f.policy for f in ctx.topo.active_flows if f.target == target)
        reach = reachability(target, beats, policy, now_ms)
        for u in reach.upstream:
            paths = sorted(
                ((hb.sources.index(u.alias) + 1, hb) for hb in reach.topics if u.alias in hb.sources),
                key=lambda x: (x[0], x[1].topic),
            )
            age = f", {u.age_seconds:.0f}s ago" if u.age_seconds is not None else ", none yet"
            text = f"{u.hops} hop{'s' if u.hops != 1 else ''} ({u.via}{age})"
            for n, hb in paths:
                if n <= u.hops:
                    continue
                text += f"; also {n} hops via {' -> '.join(reversed(hb.sources[: n - 1]))} ({hb.topic})"
            print(f"    {target} <- {u.alias}: {text}")
    print(f"\n  Checkpoints (where group {GROUP} may resume after a failover):")
    for f in _checkpoint_flows(ctx):
        offsets = _checkpoints(ctx, f)
        where = ", ".join(f"{tp} at {o}" for tp, o in sorted(offsets.items()))
        print(
            f"    {f.name}: on {f.target}: {where or 'none'} (committed on {f.source}: {GROUP_TOPIC} at {GROUP_OFFSET})"
        )
    print(
        "    (MirrorMaker 2 translates conservatively, from the newest offset sync at or before the committed\n"
        "    offset: a consumer that fails over may re-read up to offset_syncs.lag_max records, never skips one)"
    )
    print("\n  $ reconciler status " + str(ctx.topology_path))
    report = job_status.status(ctx.topo, ctx.backend)
    sys.stdout.write(render_text([r.to_dict() for r in report.rows], report.now_ms))
    print(
        f"  (AGE P50/P99 here are the jobs' own figures, {RECORD_AGE} when the target acknowledged a record over the\n"
        "  last minute: they include the backlog produced before the jobs started, and are what the topology's\n"
        f"  slo.max_latency_p99_ms is checked against; LIVE E2E above is the {LIVE_E2E} of fresh records)"
    )


def demo_drift(ctx: DemoContext) -> DriftReport:
    """`reconciler drift PATH` as an operation: the report, its text printed as the command prints it."""
    found = drift(ctx.topo, ctx.backend, revision=ctx.backend.git.revision([str(ctx.topology_path)]))
    sys.stdout.write(drift_text.render(found))
    return found


def _print_table(table: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("    " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def step_drift(ctx: DemoContext) -> None:
    cluster, topic, key, value = DRIFT
    demo_io.set_topic_config(ctx.bootstrap(cluster), topic, key, value)
    print(f"  by hand: set {key}={value} on {cluster}:{topic} (the topology says: as on the source)")
    report = settings.state_dir() / "demo-drift.html"
    print(f"\n  $ reconciler drift {ctx.topology_path} --out {report}")
    found = demo_drift(ctx)
    outputs.write_text(str(report), drift_html.render(found, ctx.topo))
    print(f"Wrote the drift report to {report}", file=sys.stderr)
    if found.errors or not found.has_drift:
        raise DemoFailed("the drift report did not show the manual change")
    print(f"\n  $ reconciler apply {ctx.topology_path} --auto-approve   # put it back")
    if demo_apply(ctx) != EXIT_OK:
        raise DemoFailed("apply could not put the change back")
    print(f"\n  $ reconciler drift {ctx.topology_path}")
    again = demo_drift(ctx)
    if again.errors or again.has_drift:
        raise DemoFailed("drift is still reported after the repair")
    ctx.notes.append(
        f"drift       {key} changed by hand on {cluster}:{topic}: reported by drift (HTML: {report}), "
        "put back by apply, then in sync"
    )


STEPS: list[tuple[str, Callable[[DemoContext], None]]] = [
    ("validate the demo topology", step_validate),
    ("start the embedded clusters", step_clusters),
    ("produce sample records (a backlog, a consumer group, a live stream)", step_sample_data),
    ("plan: diff the topology against the live clusters (topics and jobs)", step_plan),
    ("apply: create remote and internal topics, deploy the replication jobs, plan again", step_apply),
    ("wait until records, heartbeats and checkpoints arrive downstream", step_wait),
    ("what was replicated where", step_summary),
    ("drift: change a remote topic by hand, see it in the drift report, apply puts it back", step_drift),
]


def _shutdown(ctx: DemoContext) -> list[str]:
    if ctx.stream is not None:
        ctx.stream.stop()
    if ctx.keep_running:
        print(
            "\nLeft running (--keep-running): the clusters and the replication jobs.\n"
            f"  reconciler status {ctx.topology_path}    # the jobs\n"
            "  reconciler dev down                   # stop jobs and clusters"
        )
        return ["left running (--keep-running): clusters and jobs; `reconciler dev down` stops them"]
    print("\nStopping the replication jobs (graceful: finish the batch, commit) and the clusters ...")
    stopped = dev_down(ctx.backend)
    for what, res in stopped.jobs:
        print(f"  {what}: {res.message}")
    for status in stopped.clusters:
        print("  " + status.line())
    done, clusters = stopped.jobs, stopped.clusters
    return [
        f"stopped {len(done)} engine{'s' if len(done) != 1 else ''} and {len(clusters)} cluster"
        f"{'s' if len(clusters) != 1 else ''}"
    ]


def run(
    topology_path: Path = DEFAULT_TOPOLOGY,
    records_per_cluster: int = 2000,
    keep_running: bool = False,
    wait_timeout: float = 300.0,
    *,
    backend: Backend | None = None,
    engine: Engine | None = None,
) -> int:
    """`backend`: the outside world the demo's operations (plan, apply, status, drift, checkpoints,
    heartbeats) run against (default: the real one)."""
    topology_path = Path(topology_path)
    try:  # shown in every command the demo prints: shorter, and what a user would type
        shown = topology_path.resolve().relative_to(Path.cwd())
        topology_path = shown
    except ValueError:
        pass
    ctx = DemoContext(
        topology_path,
        records_per_cluster,
        keep_running,
        backend if backend is not None else Backend.default(),
        wait_timeout,
        engine or default_engine(),
    )
    started = time.monotonic()
    failed: str | None = None
    interrupted: str | None = None
    try:
        for i, (title, step) in enumerate(STEPS, 1):
            print(f"\n[{i}/{len(STEPS)}] {title}", flush=True)
            try:
                step(ctx)
            except DemoFailed as exc:
                failed = f"step {i} ({title}): {exc}"
                break
            except KeyboardInterrupt:
                interrupted = f"step {i} ({title})"
                break
            except Exception as exc:  # the demo must say what failed, not dump a trace
                failed = f"step {i} ({title}): {type(exc).__name__}: {exc}"
                break
    finally:
        try:
            stopped = _shutdown(ctx)
        except KeyboardInterrupt:
            stopped = ["interrupted again while stopping: check `reconciler dev status` and `reconciler status`"]
    took = time.monotonic() - started
    if interrupted:
        print(f"\ndemo interrupted (Ctrl-C) at {interrupted} after {took:.0f}s; " + "; ".join(stopped), file=sys.stderr)
        return 130
    if failed:
        print(f"\ndemo FAILED at {failed}", file=sys.stderr)
        print(f"demo FAILED after {took:.0f}s; " + "; ".join(stopped), file=sys.stderr)
        return 1
    if ctx.stream is not None and ctx.stream.error:
        ctx.notes.append(f"note        the live stream reported: {ctx.stream.error}")
    flows = ctx.topo.active_flows
    lat = (
        f"; live stream end to end p50 {statistics.median(ctx.latency):.0f} ms, p99 {_pct(ctx.latency, 99):.0f} ms"
        if ctx.latency
        else ""
    )
    lines = [
        f"clusters    {len(ctx.topo.clusters)}: {', '.join(sorted(ctx.topo.clusters))} (local {ctx.engine.product} brokers)",
        f"jobs        {len(flows)} replication flows in {len({f.engine for f in flows})} engines (one Spark application "
        "per target cluster), deployed by apply (local deployer)",
        f"replicated  {ctx.replicated} records on the targets: a backlog of {ctx.records_per_cluster} per region and "
        f"a live stream{lat}",
        f"downstream  heartbeats on every target, checkpoints of group {GROUP} on both regions",
        *ctx.notes,
        *(f"end         {x}" for x in stopped),
    ]
    print(f"\ndemo OK in {took:.0f}s\n  " + "\n  ".join(lines))
    return 0
