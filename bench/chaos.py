"""Chaos figures of a deployed job (issue 21): kill -9 each process of a running job, in turn, and count.

    python bench/chaos.py [--kills 3] [--rate 2000] [--partitions 4] [--delivery at-least-once]

Starts two fresh Tansu brokers on loopback and deploys one job with the local deployer (spark-submit,
the supervisor, the spec's default task length), as `apply` does. A producer writes sequenced records
at --rate records/s. For each process role (the supervisor, the Spark JVM, the Python driver, a Spark
Python worker), on a topic of its own: --kills times, 3.5 s after records arrive on the target
(inside a task, the worst case for at-least-once), the process is SIGKILLed; the whole instance
then ends by itself (a worker is replaced by Spark and the instance goes on) and the deployer is
asked to deploy again, as the next `apply` would. Then the producer stops, everything is read back
from the target and compared record by record.

Prints per role: kills, records produced, missing, duplicates (and per kill, against the issue's bound
of rate x 2 s), and the recovery time of each kill (from the kill until records of the next instance reach the target; a worker's kill: until
the target's end moves again),
median and spread; also the processes left behind (must be none). The baseline is the same job, the
same stream and the same length with no kill, measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, KafkaException, TopicPartition  # noqa: E402

import reconciler.deployers.instance as instance  # noqa: E402
from bench.common import bench_process, say, start_brokers, stop_brokers  # noqa: E402
from reconciler import logs  # noqa: E402
from reconciler.deployers.instance import Role  # noqa: E402
from reconciler.deployers.local import LocalDeployer  # noqa: E402
from tests.integration.mirror_helpers import (  # noqa: E402
    SequencedProducer,
    create_topic,
    read_topic,
    seqs,
    spec_for,
    wait_for,
)

ROLES = (None, Role.SUPERVISOR, Role.JVM, Role.DRIVER, Role.WORKER)  # None: the baseline, no kill
KILL_AFTER_S = 3.5
BOUND_S = 2.0


class TargetEnd:
    """The sum of the remote topic's high watermarks: enough to see records arrive."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        self.tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.consumer = Consumer(
            logs.client_config(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": f"chaos-{time.monotonic_ns()}",
                    # the remote topic appears after the first call: an unknown topic is otherwise cached for 5 min
                    "topic.metadata.refresh.interval.ms": 1000,
                }
            )
        )

    def __call__(self) -> int:
        try:
            return sum(max(self.consumer.get_watermark_offsets(tp, timeout=5)[1], 0) for tp in self.tps)
        except KafkaException:
            return 0

    def close(self) -> None:
        self.consumer.close()


def moved(end: TargetEnd, before: int, timeout: float = 240.0) -> float:
    """Seconds until the target's end passes `before`."""
    t0 = time.monotonic()
    wait_for(lambda: end() > before, timeout, interval=0.1, what="records on the target")
    return time.monotonic() - t0


def scenario(role: Role | None, src: str, dst: str, opts, root: Path) -> dict:
    name = role.value if role else "no kill"
    topic = f"chaos-{role.value if role else 'baseline'}"
    remote = f"west.{topic}"
    create_topic(src, topic, opts.partitions)
    spec = spec_for(
        type("C", (), {"bootstrap": src}),
        type("C", (), {"bootstrap": dst}),
        topics_include=(topic,),
        delivery=opts.delivery,
        master="local[1]",
        parallelism=1,
        status_interval_seconds=3.0,
    )
    deployer = LocalDeployer(root=root / topic, stop_timeout=20)
    say(f"  job log: {deployer.job_dir(spec.flow)}")
    producer = SequencedProducer(src, topic, opts.partitions, int(opts.rate * 3600), opts.rate)
    end = TargetEnd(dst, remote, opts.partitions)
    recover: list[float] = []
    try:
        producer.start()
        assert deployer.deploy(spec).ok
        moved(end, 0)
        for i in range(opts.kills):
            time.sleep(KILL_AFTER_S)
            if role is None:
                continue
            procs = wait_for(
                lambda: [p for p in deployer._processes(spec.flow) if p.role is role], 120, what=f"a {name}"
            )
            for p in procs if role is Role.WORKER else procs[:1]:  # the pyspark daemon and the worker it forked
                os.kill(p.pid, signal.SIGKILL)
            t0 = time.monotonic()
            if role is not Role.WORKER:
                wait_for(lambda: not deployer._processes(spec.flow), 60, interval=0.2, what="the instance ended")
                at_gone = end()  # nothing of the killed instance is in flight any more
                assert deployer.deploy(spec).ok  # what the next apply does
            else:  # the instance goes on: Spark runs the failed task again in a new Python worker
                at_gone = end()
            moved(end, at_gone)
            recover.append(time.monotonic() - t0)
            say(f"  {name}: kill {i + 1}/{opts.kills}, records flowing again after {recover[-1]:.1f} s")
        producer.stop()
        expected = producer.expected()

        def caught_up():
            got = read_topic(dst, remote, opts.partitions)
            return got if all(set(expected[p]) <= set(seqs(got[p])) for p in expected) else None

        got = wait_for(caught_up, 300, interval=2, what="all records replicated")
    finally:
        producer.stop()
        end.close()
        deployer.stop_all()
    left = instance.scan(under=(root / topic).resolve())
    produced = sum(len(v) for v in expected.values())
    return {
        "role": name,
        "kills": len(recover),
        "produced": produced,
        "missing": sum(len(set(expected[p]) - set(seqs(got[p]))) for p in expected),
        "duplicates": sum(len(got[p]) - len(set(seqs(got[p]))) for p in expected),
        "recover": recover,
        "left": len(left),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=3, help="kills per process role (default 3)")
    ap.add_argument("--rate", type=float, default=2_000.0, help="records/s produced (default 2000)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument(
        "--roles",
        nargs="*",
        default=[r.value if r else "none" for r in ROLES],
        help="none supervisor jvm driver worker",
    )
    ap.add_argument("--delivery", default="at-least-once", choices=["at-least-once", "exactly-once"])
    opts = ap.parse_args(argv)
    bench_process()
    rows = []
    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        root = Path(tmp)
        brokers = start_brokers(root)
        try:
            src, dst = (b.bootstrap for b in brokers)
            for role in (r for r in ROLES if (r.value if r else "none") in opts.roles):
                say(f"scenario: {role.value if role else 'no kill (baseline)'}")
                rows.append(scenario(role, src, dst, opts, root))
        finally:
            stop_brokers(brokers)
    bound = opts.rate * BOUND_S
    print(
        f"\nchaos: {opts.delivery}, {opts.rate:.0f} records/s over {opts.partitions} partitions, "
        f"kill -9 {KILL_AFTER_S} s after records arrive, then deploy again (bound: {bound:.0f} duplicates per kill)\n"
    )
    head = ("killed", "kills", "produced", "missing", "duplicates", "per kill", "recovery median [min-max] s", "left")
    table = [head]
    for r in rows:
        rec = r["recover"]
        table.append(
            (
                r["role"],
                str(r["kills"]),
                f"{r['produced']:,}",
                f"{r['missing']:,}",
                f"{r['duplicates']:,}",
                f"{r['duplicates'] / r['kills']:,.0f}" if r["kills"] else "-",
                f"{statistics.median(rec):.1f} [{min(rec):.1f}-{max(rec):.1f}]" if rec else "-",
                str(r["left"]),
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for row in table:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))))
    bad = [
        r["role"] for r in rows if r["missing"] or r["left"] or (r["kills"] and r["duplicates"] > bound * r["kills"])
    ]
    if bad:
        print(f"\nOUT OF BOUNDS: {', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
