"""Benchmark: plan time for 5 clusters, 20 flows (full mesh) and 10,000 source topics.

Reports cluster reads (I/O: probe, metadata, configs in batches, ACLs) apart from pure computation
(desired state, diff, rendering). Two scenarios: `first` (empty targets: every remote topic is a
create) and `converged` (everything applied: the plan is empty, the usual case in pull requests
and drift runs).

    PYTHONPATH=. python bench/plan.py                       # memory double (no network)
    PYTHONPATH=. python bench/plan.py --backend tansu       # 5 embedded Tansu brokers
    PYTHONPATH=. python bench/plan.py --topics 2000 --json  # smaller, machine-readable
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from contextlib import contextmanager

from reconciler.adapters.base import NewTopicSpec
from reconciler.adapters.live_read import Connections, clusters_of, read_live
from reconciler.adapters.memory_admin import MemoryCluster, MemoryFactory
from reconciler.apply.executor import ApplyContext, execute
from reconciler.operations.handlers import handler_table
from reconciler.plan.desired import desired_state
from reconciler.plan.diff import diff
from reconciler.render import plan_json, plan_text
from reconciler.topology.build import load_topology_text


def make_topology(n_clusters: int, bootstraps: list[str]):
    aliases = [f"c{i}" for i in range(n_clusters)]
    lines = ["apiVersion: reconciler/v1", "kind: Topology", "metadata: {name: bench}", "clusters:"]
    lines += [
        f'  {a}: {{bootstrap_servers: "{b}", replication_principal: "User:mirror"}}'
        for a, b in zip(aliases, bootstraps)
    ]
    lines += ["flows:"]
    for s in aliases:
        for t in aliases:
            if s != t:
                lines.append(f'  - {{source: {s}, target: {t}, topics: {{include: ["app\\\\..*"]}}}}')
    return load_topology_text("\n".join(lines) + "\n")


def source_specs(n_topics: int, n_clusters: int) -> dict[str, list[NewTopicSpec]]:
    out: dict[str, list[NewTopicSpec]] = {f"c{i}": [] for i in range(n_clusters)}
    for j in range(n_topics):
        configs = {"retention.ms": str(3600000 + j), "cleanup.policy": "delete"} if j % 2 else {}
        out[f"c{j % n_clusters}"].append(NewTopicSpec(f"app.topic{j}", 1 + j % 6, -1, configs))
    return out


@contextmanager
def timer(into: dict, key: str):
    t = time.perf_counter()
    yield
    into[key] = into.get(key, 0.0) + time.perf_counter() - t


def run_plan(topology, factory) -> tuple[dict, object]:
    times: dict = {}
    with Connections(dict(topology.clusters), factory) as conns:
        with timer(times, "read_s"):
            live = read_live(conns, clusters_of(topology))
    with timer(times, "desired_s"):
        desired = desired_state(topology, live)
    with timer(times, "diff_s"):
        plan = diff(desired, live, topology)
    with timer(times, "render_s"):
        plan_text.render(plan)
        plan_json.render(plan)
    times["pure_s"] = times["desired_s"] + times["diff_s"] + times["render_s"]
    times["live_topics"] = sum(len(c.topics) for c in live.clusters.values())
    times["actions"] = len(plan.actions)
    return times, plan


def setup(args):
    """(topology, factory, cleanup) for the chosen backend, with the source topics created."""
    specs = source_specs(args.topics, args.clusters)
    if args.backend == "memory":
        bootstraps = [f"memory:{i}" for i in range(args.clusters)]
        topology = make_topology(args.clusters, bootstraps)
        factory = MemoryFactory({a: MemoryCluster(a) for a in topology.clusters})
        for alias, ss in specs.items():
            for s in ss:
                factory.clusters[alias].add_topic(s.name, s.partitions, s.configs)
        return topology, factory, lambda: None

    from reconciler.adapters.kafka_admin import KafkaAdmin
    from reconciler.dev.brokers import free_port, start_broker, stop_pid

    brokers = [start_broker("127.0.0.1", free_port()) for _ in range(args.clusters)]
    topology = make_topology(args.clusters, [b.bootstrap for b in brokers])
    t = time.perf_counter()
    for alias, ss in specs.items():
        admin = KafkaAdmin(topology.clusters[alias])
        for i in range(0, len(ss), 1000):
            res = admin.create_topics(ss[i : i + 1000])
            bad = [r for r in res.values() if not r.ok]
            if bad:
                raise SystemExit(f"setup failed on {alias}: {bad[0].message}")
        admin.close()
    print(
        f"# created {args.topics} source topics on {args.clusters} Tansu brokers in {time.perf_counter() - t:.1f}s",
        file=sys.stderr,
    )
    return topology, KafkaAdmin, lambda: [stop_pid(b.pid) for b in brokers]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=["memory", "tansu"], default="memory")
    p.add_argument("--clusters", type=int, default=5)
    p.add_argument("--topics", type=int, default=10000, help="source topics, spread over the clusters")
    p.add_argument("--repeat", type=int, default=3, help="plans per scenario (the median is reported)")
    p.add_argument("--no-converged", action="store_true", help="skip applying and the converged scenario")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    topology, factory, cleanup = setup(args)
    results = []
    try:
        scenarios = ["first"] if args.no_converged else ["first", "converged"]
        for scenario in scenarios:
            if scenario == "converged":
                _, plan = run_plan(topology, factory)
                t = time.perf_counter()
                with Connections(dict(topology.clusters), factory) as conns:
                    report = execute(plan, ApplyContext(conns.get), handler_table())
                if not report.ok:
                    raise SystemExit(
                        "apply failed: " + next(r.result.message for r in report.results if not r.result.ok)
                    )
                print(f"# applied {len(plan.actions)} actions in {time.perf_counter() - t:.1f}s", file=sys.stderr)
            runs = [run_plan(topology, factory)[0] for _ in range(args.repeat)]
            row = {
                "backend": args.backend,
                "scenario": scenario,
                "clusters": args.clusters,
                "flows": len(topology.flows),
                "source_topics": args.topics,
            }
            for key in ("read_s", "desired_s", "diff_s", "render_s", "pure_s"):
                row[key] = round(statistics.median(r[key] for r in runs), 3)
            row["live_topics"], row["actions"] = runs[-1]["live_topics"], runs[-1]["actions"]
            results.append(row)
    finally:
        cleanup()

    if args.json:
        print(json.dumps(results, indent=1))
    else:
        print(
            f"{'backend':8} {'scenario':10} {'live topics':>11} {'actions':>8} {'reads s':>8} {'desired s':>9} "
            f"{'diff s':>7} {'render s':>8} {'pure s':>7}"
        )
        for r in results:
            print(
                f"{r['backend']:8} {r['scenario']:10} {r['live_topics']:>11} {r['actions']:>8} {r['read_s']:>8.3f} "
                f"{r['desired_s']:>9.3f} {r['diff_s']:>7.3f} {r['render_s']:>8.3f} {r['pure_s']:>7.3f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
