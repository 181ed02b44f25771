"""Benchmark: `reconciler validate` (load, schema, model, graph analysis) on large replication graphs.

The cases of issue 12, all with the default topic filters (`.*`), so MM2 would re-replicate remote
topics along every path: a 50-cluster full mesh (2,450 flows, default policy), a 1,000-cluster ring
(default policy) and a 20-cluster identity-policy full mesh (must be refused as a loop). Each case
runs the real `reconciler validate` entry point in-process on a generated file, `--repeat` times,
and prints the median and min-max wall time, the exit code and the first finding.

    PYTHONPATH=. python bench/analysis.py                # all cases, 5 repeats
    PYTHONPATH=. python bench/analysis.py --repeat 3 --case ring
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

from reconciler.cli.main import main


def topology(aliases: list[str], pairs: list[tuple[str, str]], policy: str = "default") -> str:
    lines = ["apiVersion: reconciler/v1", "kind: Topology", "metadata: {name: bench}", "clusters:"]
    lines += [f'  {a}: {{bootstrap_servers: "127.0.0.1:{9000 + i}"}}' for i, a in enumerate(aliases)]
    lines += ["flows:"]
    extra = "" if policy == "default" else f", policy: {policy}"
    lines += [f"  - {{source: {s}, target: {t}{extra}}}" for s, t in pairs]
    return "\n".join(lines) + "\n"


def mesh(n: int, policy: str = "default") -> str:
    aliases = [f"c{i}" for i in range(n)]
    return topology(aliases, [(s, t) for s in aliases for t in aliases if s != t], policy)


def ring(n: int) -> str:
    aliases = [f"c{i}" for i in range(n)]
    return topology(aliases, [(aliases[i], aliases[(i + 1) % n]) for i in range(n)])


CASES = {
    "mesh": ("50-cluster full mesh, 2,450 flows, default policy", lambda: mesh(50)),
    "ring": ("1,000-cluster ring, default policy", lambda: ring(1000)),
    "identity": ("20-cluster full mesh, identity policy (a loop)", lambda: mesh(20, "identity")),
    "mesh9": ("9-cluster full mesh, 72 flows (was killed after 30 s)", lambda: mesh(9)),
}


def run(path: Path) -> tuple[float, int, str]:
    err = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["validate", str(path)])
    elapsed = time.perf_counter() - start
    lines = err.getvalue().splitlines()
    first = next((line for line in lines if "error:" in line), None) or next(
        (line for line in lines if "warning:" in line), "(no finding)"
    )
    return elapsed, rc, first


def main_(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--case", choices=sorted(CASES), action="append")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.case or ["mesh", "ring", "identity", "mesh9"]:
            title, make = CASES[name]
            path = Path(tmp) / f"{name}.yaml"
            path.write_text(make(), encoding="utf-8")
            times, rc, first = [], 0, ""
            for _ in range(args.repeat):
                t, rc, first = run(path)
                times.append(t)
            print(
                f"{title}: median {statistics.median(times):.2f} s (min {min(times):.2f}, max {max(times):.2f}, "
                f"{args.repeat} runs), exit {rc}"
            )
            print(f"    {first[:220]}")
    return 0


if __name__ == "__main__":
    sys.exit(main_())
