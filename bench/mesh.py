"""What the 4-region mesh costs idle (issue 47): 12 flows, each region replicating to the other three, deployed as a
user deploys them (`reconciler apply`, the local deployer: one engine per target cluster, so 4 engines).

    python bench/mesh.py [--windows 5] [--idle-seconds 30] [--partitions 8] [--settle 60] [--set KEY=VALUE ...]

Starts four fresh Tansu brokers on loopback (regions r0..r3), each with one topic `events` (--partitions partitions,
--records records in all) and --groups consumer groups with a committed offset there. The topology: default
settings, the local deployer, twelve flows `rI -> rJ` (I != J) copying `events` and every group. After `apply`, once
every remote topic holds every record and every flow's status says running, --settle seconds, then --windows idle
windows of --idle-seconds, each measuring:

  cpu     the CPU of ALL the processes of the 4 engines as % of one core: every process whose environment names an
          engine under the state directory (supervisors, spark-submit JVMs, Python drivers, Spark's Python workers),
          found every 0.25 s; each process's utime + stime and the cutime + cstime of the children it waited for
          (/proc/PID/stat), from its first sight (or 0 for a process first seen inside the window: it started there)
          to its last. A process that starts and ends between two looks is counted through its parent's cutime.
  by role the same split by process kind (JVM, Python driver, Python workers, supervisors)
  pss     the proportional set size of those processes at the window's end (/proc/PID/smaps_rollup: shared pages
          divided among the processes that share them), MB
  procs   how many processes, and how many were seen to start or end inside the window

Prints each figure's median and spread (min-max) over the windows, with the load average and the machine's cores.
The target (issue 47): at most 5 % of one core in total, at most 3 GB PSS.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import reconciler.deployers.instance as instance  # noqa: E402
from bench.common import apply_cli, parse_settings, pss_mb, say, spread, stop_brokers, stop_engines  # noqa: E402
from reconciler import logs  # noqa: E402
from reconciler.dev.brokers import free_port, start_broker  # noqa: E402
from reconciler.jobplan.backend import read_job_status  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
REGIONS = ("r0", "r1", "r2", "r3")
TOPIC = "events"


def populate(bootstrap: str, partitions: int, records: int, groups: int, region: str) -> None:
    admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap}))
    for f in admin.create_topics([NewTopic(TOPIC, partitions, 1)]).values():
        f.result(30)
    p = Producer(logs.client_config({"bootstrap.servers": bootstrap, "linger.ms": 20}))
    for i in range(records):
        p.produce(TOPIC, value=b"x" * 100, key=str(i).encode(), partition=i % partitions)
    p.flush(60)
    for g in range(groups):
        tp = TopicPartition(TOPIC, g % partitions, 1)
        for f in admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(f"{region}-g{g}", [tp])]).values():
            f.result(30)


def topology(bootstraps: dict[str, str], settings: list[str] | None = None) -> str:
    """The mesh's topology; `settings`: KEY=VALUE flow settings of `defaults:` ("heartbeats.interval_seconds=10")."""
    defaults: dict[str, Any] = {"replication_factor": 1, "job": {"deployer": "local"}}
    for key, value in parse_settings(settings or []).items():
        defaults[key] = {**defaults[key], **value} if isinstance(defaults.get(key), dict) else value
    lines = ["apiVersion: reconciler/v1", "kind: Topology", "metadata: {name: mesh}", "clusters:"]
    lines += [f'  {r}: {{bootstrap_servers: "{b}"}}' for r, b in bootstraps.items()]
    lines += [f"defaults: {json.dumps(defaults)}", "flows:"]
    lines += [
        f"  - {{source: {s}, target: {t}, topics: {{include: ['{TOPIC}']}}, groups: {{include: ['.*']}}}}"
        for s in REGIONS
        for t in REGIONS
        if s != t
    ]
    return "\n".join(lines) + "\n"


def _stat(pid: int) -> tuple[float, float, int] | None:
    """(own CPU s, waited-for children's CPU s, parent pid)."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(f[11]) + int(f[12])) / TICKS, (int(f[13]) + int(f[14])) / TICKS, int(f[1])


def role_of(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    if "java" in cmd.split(" ")[0]:
        return "jvm"
    if "pyspark.worker" in cmd or "pyspark.daemon" in cmd or "engine.daemon" in cmd:
        return "python workers"
    if "mirror_job.py" in cmd:
        return "python driver"
    if "supervisor" in cmd:
        return "supervisors"
    return "other"


def idle_window(root: Path, seconds: float) -> dict[str, float]:
    """The module docstring's figures over one window."""
    first: dict[int, float] = {}  # pid -> own + children's CPU at first sight (0.0: started inside the window)
    last: dict[int, float] = {}
    roles: dict[int, str] = {}
    t0 = time.monotonic()
    started = 0
    initial = True
    while True:
        for p in instance.scan(under=root.resolve()):
            st = _stat(p.pid)
            if st is None:
                continue
            cpu = st[0] + st[1]
            if p.pid not in first:
                first[p.pid] = cpu if initial else 0.0
                started += 0 if initial else 1
                roles[p.pid] = role_of(p.pid)
            last[p.pid] = cpu
        initial = False
        if time.monotonic() - t0 >= seconds:
            break
        time.sleep(0.25)
    wall = time.monotonic() - t0
    alive = {p.pid for p in instance.scan(under=root.resolve())}
    out = {
        "cpu_pct": 100.0 * sum(last[p] - first[p] for p in last) / wall,
        "pss_mb": sum(pss_mb(p) for p in alive),
        "processes": float(len(alive)),
        "started_or_ended": float(started + len(set(last) - alive)),
    }
    for role in ("jvm", "python driver", "python workers", "supervisors", "other"):
        out[f"cpu_pct {role}"] = 100.0 * sum(last[p] - first[p] for p in last if roles[p] == role) / wall
    return out


def wait_copied(bootstraps: dict[str, str], partitions: int, records: int, timeout: float = 900) -> None:
    from confluent_kafka import Consumer

    deadline = time.monotonic() + timeout
    for t in REGIONS:
        for s in REGIONS:
            if s == t:
                continue
            topic = f"{s}.{TOPIC}"
            while True:
                c = Consumer(logs.client_config({"bootstrap.servers": bootstraps[t], "group.id": "mesh-count"}))
                try:
                    n = sum(
                        max(0, c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1])
                        for p in range(partitions)
                    )
                except Exception:  # noqa: BLE001 - not created yet
                    n = 0
                finally:
                    c.close()
                if n > 0 or time.monotonic() > deadline:  # Tansu's high watermark is below the end by a batch
                    break
                time.sleep(2)
    say("  every remote topic holds records")


def wait_running(bootstraps: dict[str, str], timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    flows = [(s, t) for s in REGIONS for t in REGIONS if s != t]
    while time.monotonic() < deadline:
        states = [read_job_status({"bootstrap.servers": bootstraps[t]}, f"{s}->{t}", timeout=3) for s, t in flows]
        if all(st is not None and st.state_name == "running" for st in states):
            say("  every flow running")
            return
        time.sleep(3)
    raise RuntimeError("not every flow running within the timeout")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=10, help="consumer groups per region")
    ap.add_argument("--windows", type=int, default=5)
    ap.add_argument("--idle-seconds", type=float, default=30.0)
    ap.add_argument("--settle", type=float, default=60.0, help="seconds after every flow runs before the windows")
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="a flow setting of the topology's defaults (e.g. heartbeats.interval_seconds=10); default: none",
    )
    ap.add_argument(
        "--code",
        type=Path,
        default=Path(__file__).resolve().parents[1],
        help="the checkout whose reconciler is applied (a baseline: another worktree, e.g. main's)",
    )
    opts = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    work = Path(tempfile.mkdtemp(prefix="bench-mesh-"))
    say(f"work directory {work}")
    brokers = {}
    bootstraps = {}
    for r in REGIONS:
        port = free_port()
        brokers[r] = start_broker("127.0.0.1", port, work / f"{r}.log")
        bootstraps[r] = f"127.0.0.1:{port}"
    root = work / "state"
    env = {"RECONCILER_STATE_DIR": str(root), "PYTHONPATH": str(opts.code.resolve())}
    windows: list[dict[str, float]] = []
    try:
        for r in REGIONS:
            populate(bootstraps[r], opts.partitions, opts.records, opts.groups, r)
        tdir = work / "topology"
        tdir.mkdir()
        (tdir / "topology.yaml").write_text(topology(bootstraps, opts.set))
        say("apply")
        apply_cli(tdir, env, 900, cwd=opts.code.resolve())  # --code's checkout, not this one
        wait_copied(bootstraps, opts.partitions, opts.records)
        wait_running(bootstraps)
        say(f"settling {opts.settle:.0f} s")
        time.sleep(opts.settle)
        for w in range(opts.windows):
            m = idle_window(root, opts.idle_seconds)
            say(
                f"  window {w + 1}: {m['cpu_pct']:.1f} % of a core (JVM {m['cpu_pct jvm']:.1f}, drivers "
                f"{m['cpu_pct python driver']:.1f}, workers {m['cpu_pct python workers']:.1f}), "
                f"{m['pss_mb']:.0f} MB PSS, {m['processes']:.0f} processes ({m['started_or_ended']:.0f} came or went); "
                f"load {os.getloadavg()[0]:.1f}"
            )
            windows.append(m)
    finally:
        stop_engines(root)
        stop_brokers(brokers.values())
    report(opts, windows)
    if opts.json:
        opts.json.write_text(json.dumps({"options": {k: str(v) for k, v in vars(opts).items()}, "windows": windows}))
    return 0


def report(opts, windows: list[dict[str, float]]) -> None:
    def col(key: str) -> list[float]:
        return [w[key] for w in windows]

    print(
        f"\n4-region mesh, 12 flows, 4 engines (apply, local deployer, "
        f"{'settings ' + ' '.join(opts.set) if opts.set else 'default settings'}), {opts.partitions} partitions "
        f"per topic, code {opts.code}; {len(windows)} windows of {opts.idle_seconds:.0f} s (load average {os.getloadavg()[0]:.1f} at "
        f"the end; {os.cpu_count()} cores): median [min-max]"
    )
    print(f"  idle CPU, all processes, % of one core   {spread(col('cpu_pct'), '{:,.1f}')}   (target <= 5)")
    for role in ("jvm", "python driver", "python workers", "supervisors", "other"):
        print(f"    {role:38} {spread(col(f'cpu_pct {role}'), '{:,.1f}')}")
    print(f"  PSS, MB                                  {spread(col('pss_mb'), '{:,.0f}')}   (target <= 3,072)")
    print(f"  processes                                {spread(col('processes'), '{:,.0f}')}")
    print(f"  processes started or ended in a window   {spread(col('started_or_ended'), '{:,.0f}')}")


if __name__ == "__main__":
    sys.exit(main())
