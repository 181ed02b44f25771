"""`reconciler demo`: the main job, end to end on embedded clusters.

Each step prints what it does; a failing step says which one failed. Steps that later issues
add (plan, apply, jobs, drift) slot into `STEPS`.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from confluent_kafka.admin import AdminClient, NewTopic

from reconciler.cli.common import EXIT_CHANGES, EXIT_OK, load_validated
from reconciler.dev.clusters import DevClusters
from reconciler.dev.sample_data import produce, sample_records
from reconciler.render.graph import mermaid
from reconciler.topology.model import Topology


def cli_main(argv: list[str]) -> int:
    from reconciler.cli.main import main  # late: the CLI imports this module

    return main(argv)

DEFAULT_TOPOLOGY = Path(__file__).resolve().parents[1] / "topologies" / "demo"
LOCAL_TOPICS = {"orders": 4, "payments": 2, "inventory.stock": 2, "clickstream": 4, "customers.profiles": 2}


@dataclass
class DemoContext:
    topology_path: Path
    records_per_cluster: int
    keep_running: bool
    topology: Topology | None = None
    produced: dict[str, int] = field(default_factory=dict)


class DemoFailed(Exception):
    pass


def step_validate(ctx: DemoContext) -> None:
    ctx.topology, diags = load_validated([str(ctx.topology_path)])
    if ctx.topology is None:
        raise DemoFailed("the demo topology does not validate")
    print(f"  {len(ctx.topology.clusters)} clusters, {len(ctx.topology.flows)} flows, {len(diags.warnings)} warnings")
    print("  " + mermaid(ctx.topology).replace("\n", "\n  ").rstrip())


def step_clusters(ctx: DemoContext) -> None:
    for status in DevClusters().up(ctx.topology):
        print("  " + status.line())


def step_sample_data(ctx: DemoContext) -> None:
    for alias, cluster in sorted(ctx.topology.clusters.items()):
        if not any(f.source == alias for f in ctx.topology.flows):
            continue
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        existing = set(admin.list_topics(timeout=10).topics)
        new = [NewTopic(t, n, 1) for t, n in LOCAL_TOPICS.items() if t not in existing]
        for fut in admin.create_topics(new).values() if new else ():
            fut.result(15)
        acked = produce(cluster.bootstrap_servers, sample_records(alias, list(LOCAL_TOPICS), ctx.records_per_cluster))
        ctx.produced[alias] = acked
        print(f"  {alias}: {acked} records acknowledged on {', '.join(LOCAL_TOPICS)}")


def step_plan(ctx: DemoContext) -> None:
    code = cli_main(["plan", str(ctx.topology_path), "--detailed-exitcode"])
    if code != EXIT_CHANGES:
        raise DemoFailed(f"expected a plan with changes (exit 2), got exit {code}")


def step_apply(ctx: DemoContext) -> None:
    if cli_main(["apply", str(ctx.topology_path), "--auto-approve"]) != EXIT_OK:
        raise DemoFailed("apply failed (see above)")
    if cli_main(["plan", str(ctx.topology_path), "--detailed-exitcode"]) != EXIT_OK:
        raise DemoFailed("the plan after apply is not empty")
    print("  second plan: no changes")


STEPS: list[tuple[str, Callable[[DemoContext], None]]] = [
    ("validate the demo topology", step_validate),
    ("start the embedded clusters", step_clusters),
    ("produce sample records", step_sample_data),
    ("plan: diff the topology against the live clusters", step_plan),
    ("apply: create remote and internal topics, then plan again", step_apply),
]


def run(topology_path: Path = DEFAULT_TOPOLOGY, records_per_cluster: int = 2000, keep_running: bool = False) -> int:
    ctx = DemoContext(topology_path, records_per_cluster, keep_running)
    started = time.monotonic()
    try:
        for i, (title, step) in enumerate(STEPS, 1):
            print(f"[{i}/{len(STEPS)}] {title}", flush=True)
            try:
                step(ctx)
            except DemoFailed as exc:
                print(f"demo FAILED at step {i} ({title}): {exc}", file=sys.stderr)
                return 1
            except Exception as exc:  # the demo must say what failed, not dump a trace
                print(f"demo FAILED at step {i} ({title}): {type(exc).__name__}: {exc}", file=sys.stderr)
                return 1
        print(f"demo OK in {time.monotonic() - started:.1f}s")
        return 0
    finally:
        if keep_running:
            print("clusters left running; stop them with `reconciler dev down`")
        else:
            for status in DevClusters().down():
                print("  " + status.line())
