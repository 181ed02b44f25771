"""A/B of the at-least-once backlog copy rate between source trees (e.g. a commit and its parent).

    git archive HEAD~1 | tar -x -C /tmp/before
    python bench/alo_backlog.py /tmp/before . [--pairs 6] [--records 1000000]

For each pair, and each tree in turn (alternating, so drift in the machine's load hits both alike):
a subprocess that imports the job from that tree, starts two fresh Tansu brokers and a Spark
session (bench/replication.py's `Clusters`), writes a backlog of --records 100-byte records over 8
partitions and copies it with an at-least-once job twice: with the spec's default task length and
record budget, then with the benchmark's 30-s tasks (`run_job`: records/s from the first batch).
Prints every run and, per variant, the median of the per-pair ratios (second tree / first).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

VARIANTS = ("alo_default_tasks", "alo_30s_tasks")


def one_run(root: Path, records: int) -> dict[str, float]:
    """Runs inside the subprocess, with `root` first on sys.path."""
    spec = importlib.util.spec_from_file_location("bench_replication", root / "bench" / "replication.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_replication"] = bench
    spec.loader.exec_module(bench)
    from reconciler.contract.spec import RuntimeSettings

    opts = argparse.Namespace(master="local[2]", parallelism=2, records=records, size=100, engine="tansu")
    out: dict[str, float] = {}
    with bench.Clusters(opts) as c:
        bench.create(c.src.bootstrap, {"bench-src": 8})
        bench.produce_only(c.src.bootstrap, [("bench-src", p) for p in range(8)], records, 100)
        _ = c.spark  # started (and its workers warmed) before the first job
        job = bench.job_spec(c.src.bootstrap, c.dst.bootstrap, "dflt", "at-least-once", ("bench-src",), opts)
        d = RuntimeSettings()
        engine = replace(job.engine, max_batch_ms=d.max_batch_ms, max_records_per_partition=d.max_records_per_partition)
        out["alo_default_tasks"] = bench.run_job(c, replace(job, engine=engine), records).rate
        job = bench.job_spec(c.src.bootstrap, c.dst.bootstrap, "long", "at-least-once", ("bench-src",), opts)
        out["alo_30s_tasks"] = bench.run_job(c, job, records).rate
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trees", nargs=2, type=Path, help="the two source trees: before, after")
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--run", type=Path, help=argparse.SUPPRESS)  # internal: one run from this tree
    opts = ap.parse_args()
    if opts.run is not None:
        print("RESULT " + json.dumps(one_run(opts.run, opts.records)), flush=True)
        return 0
    trees = [t.resolve() for t in opts.trees]
    runs: dict[Path, list[dict[str, float]]] = {t: [] for t in trees}
    for i in range(opts.pairs):
        for tree in trees:
            env = {
                **os.environ,
                "PYTHONPATH": str(tree),
                "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
                "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable),
            }
            argv = [sys.executable, __file__, *map(str, trees), "--records", str(opts.records), "--run", str(tree)]
            done = subprocess.run(argv, env=env, cwd=tree, capture_output=True, text=True, check=False)
            line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
            if line is None:
                print(done.stdout[-2000:], done.stderr[-4000:], file=sys.stderr)
                return 1
            runs[tree].append(json.loads(line[len("RESULT ") :]))
            print(f"pair {i + 1} {tree}: {runs[tree][-1]}", flush=True)
    before, after = (runs[t] for t in trees)
    for v in VARIANTS:
        ratios = [a[v] / b[v] for a, b in zip(after, before, strict=True)]
        print(
            f"{v}: before median {statistics.median(r[v] for r in before):,.0f} records/s, after "
            f"{statistics.median(r[v] for r in after):,.0f}; after/before per pair median "
            f"{statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
