"""`reconciler demo`: the main job, end to end on embedded clusters.

validate -> start the clusters of `topologies/demo` (local Tansu brokers) -> produce a sample
backlog, a consumer group's offsets and a live stream -> plan -> apply (topics, then one
replication job per flow, `local` deployer) -> wait until records, heartbeats and checkpoints
arrive downstream -> print what was replicated where (counts, end-to-end latency of the live
stream, heartbeat hops, checkpoints) and `reconciler status` -> change a remote topic by hand and
show the drift in a plan, then apply to put it back -> stop jobs and clusters (unless
--keep-running; Ctrl-C also stops them cleanly).

Each step prints what it does; a failing step says which one and what failed.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from reconciler import logs, settings
from reconciler.adapters.read_to_end import read_to_end, reader_config
from reconciler.analysis.expansion import route
from reconciler.cli.common import EXIT_CHANGES, EXIT_OK, load_validated
from reconciler.dev.brokers import Engine, default_engine
from reconciler.dev.clusters import DevClusters
from reconciler.dev.sample_data import produce, sample_records
from reconciler.operations import status as job_status
from reconciler.operations.backend import Backend
from reconciler.render.graph import mermaid
from reconciler.resources import demo_topology
from reconciler.textutil import LIVE_E2E, RECORD_AGE, LiveLine
from reconciler.topology.model import Flow, Topology

#: Runs one CLI command (argv -> exit code): `main` with this run's backend, handed in by `run`
#: (the demo drives the CLI; importing cli.main here would be a cycle: main registers the demo).
_cli: Callable[[list[str]], int] | None = None


def cli_main(argv: list[str]) -> int:
    if _cli is None:
        raise RuntimeError("the demo runs CLI commands only inside demo.run(..., cli=...)")
    return _cli(argv)


def cli_apply(path: Path) -> int:
    """`reconciler apply PATH --auto-approve`, printing only what it applied (the plan it shows first
    was just printed by the step before)."""
    import contextlib
    import io

    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            code = cli_main(["apply", str(path), "--auto-approve"])
    finally:
        lines = buf.getvalue().splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("Applying ")), 0)
        print("\n".join(lines[start:]))
    return code


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
    stream: LiveStream | None = None
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


def count_records(bootstrap: str, topics: list[str], timeout: float = 20.0) -> dict[str, int]:
    """Records per topic, read to the end of every partition (ListOffsets is not trusted: Tansu
    answers the last batch's base offset there). Missing topics count 0."""
    admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap}))
    md = admin.list_topics(timeout=10).topics
    tps = [TopicPartition(t, p, 0) for t in topics if t in md and md[t].error is None for p in md[t].partitions]
    out = {t: 0 for t in topics}
    if not tps:
        return out
    c = Consumer(logs.client_config(reader_config({"bootstrap.servers": bootstrap}, "__demo.counter")))
    try:
        c.assign(tps)

        def count(m) -> None:
            out[m.topic()] += 1

        read_to_end(
            c, timeout, count, partitions=[(tp.topic, tp.partition) for tp in tps], batch=10_000, poll_seconds=0.5
        )
    finally:
        c.close()
    return out


class LiveStream(threading.Thread):
    """Sample records to every source cluster at a steady rate, until stopped."""

    def __init__(self, clusters: dict[str, str], rate: float):
        super().__init__(daemon=True, name="demo-live-stream")
        self.clusters, self.rate = clusters, rate
        self.produced = 0
        self.error: str | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            producers = {
                a: Producer(logs.client_config({"bootstrap.servers": b, "linger.ms": 5}))
                for a, b in self.clusters.items()
            }
            gens = {a: sample_records(a, list(LOCAL_TOPICS), 10**9, seed=1) for a in self.clusters}
            start, n = time.monotonic(), 0
            while not self._halt.is_set():
                for alias, p in producers.items():
                    r = next(gens[alias])
                    p.produce(r.topic, r.value, r.key, headers=list(r.headers), timestamp=int(time.time() * 1000))
                    p.poll(0)
                    self.produced += 1
                n += 1
                ahead = n / self.rate - (time.monotonic() - start)
                if ahead > 0:
                    self._halt.wait(ahead)
            for p in producers.values():
                p.flush(10)
        except Exception as exc:  # noqa: BLE001 - reported in the summary, never a trace
            self.error = f"{type(exc).__name__}: {exc}"

    def stop(self) -> None:
        self._halt.set()
        self.join(15)


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
    for status in DevClusters().up(ctx.topo, ctx.engine):
        print("  " + status.line())


def step_sample_data(ctx: DemoContext) -> None:
    sources = sorted({f.source for f in ctx.topo.active_flows})
    for alias in sources:
        bootstrap = ctx.bootstrap(alias)
        admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap}))
        existing = set(admin.list_topics(timeout=10).topics)
        new = [NewTopic(t, n, 1, config=TOPIC_CONFIGS.get(t, {})) for t, n in LOCAL_TOPICS.items() if t not in existing]
        for fut in admin.create_topics(new).values() if new else ():
            fut.result(15)
        records = list(sample_records(alias, list(LOCAL_TOPICS), ctx.records_per_cluster))
        acked = produce(bootstrap, iter(records))
        if acked != len(records):
            raise DemoFailed(f"{alias}: only {acked} of {len(records)} sample records were acknowledged")
        per_topic: dict[str, int] = {}
        for r in records:
            per_topic[r.topic] = per_topic.get(r.topic, 0) + 1
        ctx.backlog[alias] = per_topic
        # A consumer group that has processed part of `payments`: its offsets are checkpointed downstream.
        c = Consumer(
            logs.client_config({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
        )
        c.commit(
            offsets=[TopicPartition(GROUP_TOPIC, p, GROUP_OFFSET) for p in range(LOCAL_TOPICS[GROUP_TOPIC])],
            asynchronous=False,
        )
        c.close()
        print(
            f"  {alias}: {acked} records on {', '.join(LOCAL_TOPICS)}; group {GROUP} committed "
            f"{GROUP_TOPIC} at offset {GROUP_OFFSET}"
        )
    ctx.stream = LiveStream({a: ctx.bootstrap(a) for a in sources}, LIVE_RATE)
    ctx.stream.start()
    print(f"  live stream: {LIVE_RATE:.0f} records/s per region from now on")


def step_plan(ctx: DemoContext) -> None:
    code = cli_main(["plan", str(ctx.topology_path), "--detailed-exitcode"])
    if code == EXIT_OK:
        print("  (no changes: an earlier run left everything in place)")
    elif code != EXIT_CHANGES:
        raise DemoFailed(f"plan failed (exit {code}; see above)")


def step_apply(ctx: DemoContext) -> None:
    print(f"  $ reconciler apply {ctx.topology_path} --auto-approve   # (the plan above, then:)")
    if cli_apply(ctx.topology_path) != EXIT_OK:
        raise DemoFailed("apply failed (see above)")
    if cli_main(["plan", str(ctx.topology_path), "--detailed-exitcode"]) != EXIT_OK:
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
        counts = count_records(ctx.bootstrap(target), sorted({r for _, _, r in items}))
        for f, t, r in items:
            want = ctx.backlog.get(f.source, {}).get(t, 0)
            seen, expected = seen + min(counts[r], want), expected + want
            if counts[r] < want:
                missing.append(f"{f.name}: {r} on {target} has {counts[r]} of {want} records")
    ctx.records_seen = (seen, expected)
    return missing


def _mirror_reader(ctx: DemoContext, alias: str):
    from reconciler.adapters.mirror_kafka import MirrorKafka

    return MirrorKafka({"bootstrap.servers": ctx.bootstrap(alias)}, timeout=10)


def _heartbeats(ctx: DemoContext) -> dict[str, dict]:
    from reconciler.mirror.mirror_client import latest_heartbeats

    out = {}
    for target in sorted({f.target for f in ctx.topo.active_flows}):
        policy = next(f.policy for f in ctx.topo.active_flows if f.target == target)
        out[target] = latest_heartbeats(_mirror_reader(ctx, target), policy)
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
    from reconciler.mirror.mirror_client import NoCheckpointsTopic, translate_offsets

    try:
        return translate_offsets(_mirror_reader(ctx, flow.target), flow.source, GROUP, flow.policy).offsets()
    except NoCheckpointsTopic:
        return {}


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
    from reconciler.deploy.local import LocalDeployer

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
        + f"\n    (job logs: {LocalDeployer().dir}/<source>.<target>/job.log)"
    )


def _latency_probe(ctx: DemoContext, seconds: float = 8.0) -> dict[str, list[float]]:
    """End-to-end latency of the live stream: from the producer's timestamp on the source to a
    consumer receiving the record on the target, per flow."""
    t0 = int(time.time() * 1000)
    consumers = []
    flows_of: dict[tuple[str, str], str] = {}
    for target in sorted({f.target for f in ctx.topo.active_flows}):
        remotes = []
        for f in ctx.topo.active_flows:
            if f.target == target:
                for _, r in routed(f):
                    remotes.append(r)
                    flows_of[(target, r)] = f.name
        c = Consumer(
            logs.client_config(
                {
                    "bootstrap.servers": ctx.bootstrap(target),
                    "group.id": "__demo.latency",
                    "enable.auto.commit": False,
                    "fetch.wait.max.ms": 20,
                }
            )
        )
        md = c.list_topics(timeout=10).topics
        c.assign([TopicPartition(r, p, OFFSET_END) for r in remotes if r in md for p in md[r].partitions])
        consumers.append((target, c))
    samples: dict[str, list[float]] = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for target, c in consumers:
            for m in c.consume(1000, 0.05):
                if m.error():
                    continue
                now = time.time() * 1000
                ts = m.timestamp()[1]
                if ts >= t0:
                    samples.setdefault(flows_of[(target, m.topic() or "")], []).append(now - ts)
    for _, c in consumers:
        c.close()
    return samples


def _pct(values: list[float], p: float) -> float:
    data = sorted(values)
    return data[max(0, -(-len(data) * int(p) // 100) - 1)]


def step_summary(ctx: DemoContext) -> None:
    from reconciler.mirror.mirror_client import reachability

    print(f"  {LIVE_E2E} of the live stream (produced on the source -> consumed on the target), 8 s ...")
    latency = _latency_probe(ctx)
    ctx.latency = [v for values in latency.values() for v in values]
    rows = {r.flow: r.to_dict() for r in job_status.status(ctx.topo, ctx.backend).rows}
    table = [["FLOW", "TOPIC -> REMOTE TOPIC", "SOURCE", "TARGET"]]
    for f in sorted(ctx.topo.active_flows, key=lambda f: f.name):
        pairs = routed(f)
        target_counts = count_records(ctx.bootstrap(f.target), [r for _, r in pairs])
        source_counts = count_records(ctx.bootstrap(f.source), [t for t, _ in pairs])
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
    now_ms = int(time.time() * 1000)
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
    cli_main(["status", str(ctx.topology_path)])
    print(
        f"  (AGE P50/P99 here are the jobs' own figures, {RECORD_AGE} when the target acknowledged a record over the\n"
        "  last minute: they include the backlog produced before the jobs started, and are what the topology's\n"
        f"  slo.max_latency_p99_ms is checked against; LIVE E2E above is the {LIVE_E2E} of fresh records)"
    )


def _print_table(table: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("    " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def step_drift(ctx: DemoContext) -> None:
    cluster, topic, key, value = DRIFT
    admin = AdminClient(logs.client_config({"bootstrap.servers": ctx.bootstrap(cluster)}))
    res = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)],
    )
    for fut in admin.incremental_alter_configs([res]).values():
        fut.result(15)
    print(f"  by hand: set {key}={value} on {cluster}:{topic} (the topology says: as on the source)")
    report = settings.state_dir() / "demo-drift.html"
    print(f"\n  $ reconciler drift {ctx.topology_path} --out {report}")
    if cli_main(["drift", str(ctx.topology_path), "--out", str(report)]) != EXIT_CHANGES:
        raise DemoFailed("the drift report did not show the manual change")
    print(f"\n  $ reconciler apply {ctx.topology_path} --auto-approve   # put it back")
    if cli_apply(ctx.topology_path) != EXIT_OK:
        raise DemoFailed("apply could not put the change back")
    print(f"\n  $ reconciler drift {ctx.topology_path}")
    if cli_main(["drift", str(ctx.topology_path)]) != EXIT_OK:
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
    from reconciler.deploy.local import LocalDeployer

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
    done = []
    for what, res in LocalDeployer().stop_all():
        print(f"  {what}: {res.message}")
        done.append(what)
    clusters = DevClusters().down()
    for status in clusters:
        print("  " + status.line())
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
    cli: Callable[[list[str]], int],
    backend: Backend | None = None,
    engine: Engine | None = None,
) -> int:
    """`cli` runs one CLI command (argv -> exit code): `reconciler.cli.main.main` bound to `backend`, the
    outside world the demo's own operations (status) use too (default: the real one)."""
    global _cli
    _cli = cli
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
