"""Benchmark: `reconciler verify`, records compared per second (issue 38's target: 100,000/s).

Starts two embedded brokers, writes the same N records (key, value, a header, a fixed timestamp) to `bench` on
the source and `west.bench` on the target, with the offset sync a flow would have written, then runs the real
`reconciler verify` entry point in-process `--repeat` times and prints each run and the median records/s
(source records compared / the command's own wall time: both sides read to their end, digested and aligned).

    PYTHONPATH=. python bench/verify.py                     # 200,000 records, 2 partitions, 3 runs
    PYTHONPATH=. python bench/verify.py --records 500000 --partitions 4
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from reconciler import logs  # noqa: E402
from reconciler.cli.main import main  # noqa: E402
from reconciler.dev.brokers import discard, free_port, start_broker  # noqa: E402
from reconciler.mirror.records import OffsetSync  # noqa: E402


def fill(bootstrap: str, topic: str, records: int, partitions: int) -> None:
    admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap}))  # held while its future is awaited
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)
    p = Producer(logs.client_config({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000}))
    ts = 1_700_000_000_000
    for i in range(records):
        while True:
            try:
                p.produce(
                    topic,
                    b"value-%08d-" % i + b"x" * 64,
                    b"key-%d" % i,
                    partition=i % partitions,
                    headers=[("seq", b"%d" % i)],
                    timestamp=ts + i,
                )
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0


def main_bench() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-verify-"))
    brokers = [start_broker("127.0.0.1", free_port(), work / f"broker{i}.log") for i in range(2)]
    try:
        west, east = (b.bootstrap for b in brokers)
        fill(west, "bench", args.records, args.partitions)
        fill(east, "west.bench", args.records, args.partitions)
        p = Producer(logs.client_config({"bootstrap.servers": west}))
        for part in range(args.partitions):
            s = OffsetSync("bench", part, 0, 0)
            p.produce("mm2-offset-syncs.east.internal", s.record_value(), s.record_key(), partition=0)
        assert p.flush(10) == 0
        topology = work / "t.yaml"
        topology.write_text(
            "apiVersion: reconciler/v1\nkind: Topology\nclusters:\n"
            f'  west: {{bootstrap_servers: "{west}"}}\n  east: {{bootstrap_servers: "{east}"}}\n'
            "flows:\n  - {source: west, target: east, topics: {include: [bench]}}\n"
        )
        rates = []
        for run in range(args.repeat):
            out = io.StringIO()
            started = time.monotonic()
            with contextlib.redirect_stdout(out):
                code = main(["verify", str(topology), "--flow", "west->east", "--format", "json"])
            seconds = time.monotonic() - started
            data = json.loads(out.getvalue())
            rate = data["records_compared"] / seconds
            rates.append(rate)
            print(
                f"run {run + 1}: exit {code}, {data['records_compared']} records compared in {seconds:.2f}s: "
                f"{rate:,.0f} records/s"
            )
        print(
            f"median: {statistics.median(rates):,.0f} records/s ({args.records} records, {args.partitions} partitions)"
        )
    finally:
        for b in brokers:
            discard(b)
    return 0


if __name__ == "__main__":
    raise SystemExit(main_bench())
