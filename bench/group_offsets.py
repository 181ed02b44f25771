"""Benchmark: a checkpoint round's read of N consumer groups' committed offsets (issue 47), the per-group reader
(librdkafka, one OffsetFetch per group: the baseline) against the batched reader (FindCoordinator v4 + OffsetFetch
v8, 1,000 groups a request), both from reconciler/adapters/group_offsets.py, measured in the same run.

Two Tansu brokers, each with the same `--groups` groups committed (one partition each, AlterConsumerGroupOffsets):
the first is read for the times (wall seconds of one read, CPU seconds of this process and of the broker during it),
the second sits behind a `RequestCounter` relay that it advertises (bench/kafka_wire.py), read once per reader and N
for the requests on the wire (the relay's own CPU would have counted in this process's time). Rounds alternate the
readers, `--repeat` of each per N; every figure is `median [min-max]`, and the ratio is batched / per-group of the
medians. Also the cost of opening a broker connection (TCP, and TLS when openssl and stunnel4 are here), which the
batched reader pays once per coordinator per round (it holds no connection between rounds).

    PYTHONPATH=. python bench/group_offsets.py                     # N = 1,000 and 10,000, 7 rounds of each
    PYTHONPATH=. python bench/group_offsets.py --sizes 1000 20000 --repeat 5
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench.common import say, spread  # noqa: E402
from bench.kafka_wire import RequestCounter  # noqa: E402
from reconciler import logs  # noqa: E402
from reconciler.adapters.group_offsets import BatchedReader, GroupOffsetsReader, PerGroupReader  # noqa: E402
from reconciler.adapters.probe import open_socket  # noqa: E402
from reconciler.dev.brokers import Broker, discard, free_port, start_broker  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
TOPIC = "committed"
PARTITIONS = 8
OFFSET_FETCH, FIND_COORDINATOR = 9, 10
READERS = ("per-group", "batched")


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds of this process (all its threads: librdkafka's too), or of process `pid`."""
    if pid is None:
        return time.process_time()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def populate(bootstrap: str, groups: list[str]) -> AdminClient:
    admin = AdminClient(logs.client_config({"bootstrap.servers": bootstrap}))
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    p = Producer(logs.client_config({"bootstrap.servers": bootstrap, "linger.ms": 5}))
    for part in range(PARTITIONS):
        for i in range(10):
            p.produce(TOPIC, b"%d" % i, partition=part)
    assert p.flush(30) == 0
    for i in range(0, len(groups), 500):  # one group per request (the admin API's rule), 500 in flight
        futures = [
            f
            for j, g in enumerate(groups[i : i + 500], start=i)
            for f in admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(g, [TopicPartition(TOPIC, j % PARTITIONS, 1 + j % 9, f"m{j}")])]
            ).values()
        ]
        for f in futures:
            f.result(60)
    return admin


def readers(bootstrap: str, admin: AdminClient) -> dict[str, GroupOffsetsReader]:
    return {"per-group": PerGroupReader(admin), "batched": BatchedReader({"bootstrap.servers": bootstrap})}


def one_round(reader: GroupOffsetsReader, groups: list[str], broker_pid: int | None) -> dict[str, float]:
    cpu, broker_cpu, started = cpu_seconds(), cpu_seconds(broker_pid), time.perf_counter()
    answers = reader.read(groups, 30.0)
    wall = time.perf_counter() - started
    failed = sum(1 for a in answers.values() if a.error is not None or not a.offsets)
    if failed:
        raise RuntimeError(f"{failed} of {len(groups)} groups not read")
    return {"wall": wall, "cpu": cpu_seconds() - cpu, "broker_cpu": cpu_seconds(broker_pid) - broker_cpu}


def requests(relay: RequestCounter, reader: GroupOffsetsReader, groups: list[str]) -> tuple[int, int]:
    relay.reset()
    reader.read(groups, 30.0)
    sent = relay.counts()
    return sent[OFFSET_FETCH], sent[FIND_COORDINATOR]


def connect_cost(open_one: Callable[[], socket.socket], n: int = 30) -> list[float]:
    """Milliseconds to open (and close) one broker connection, `n` times."""
    out = []
    for _ in range(n):
        started = time.perf_counter()
        open_one().close()
        out.append((time.perf_counter() - started) * 1000)
    return out


def tls_connect_cost(work: Path) -> str:
    from reconciler.dev.tls import CertificateAuthority, missing_tools, start_secure_broker

    if missing_tools():
        return "not measured (no openssl or stunnel4)"
    ca = CertificateAuthority.create(work / "ca")
    broker = start_secure_broker(work / "tls", ca, mutual=True, log_path=work / "tls.log")
    try:
        conf = broker.client_config()
        return spread(connect_cost(lambda: open_socket(broker.host, broker.port, conf, 10.0)), "{:.2f}") + " ms"
    finally:
        broker.stop()


def report(sizes: list[int], rounds: dict, wire: dict, tcp: list[float], tls: str) -> None:
    print(f"group offsets read per checkpoint round, Tansu, {rounds['repeat']} rounds of each reader per N")
    for n in sizes:
        print(f"  N = {n:,} groups")
        base = {k: statistics.median(r[k] for r in rounds[n, "per-group"]) for k in ("wall", "cpu", "broker_cpu")}
        for name in READERS:
            runs = rounds[n, name]
            fetches, finds = wire[n, name]
            line = f"    {name:<10} OffsetFetch {fetches:>6,}  FindCoordinator {finds:>3,}"
            for key, label in (("wall", "wall s"), ("cpu", "cpu s"), ("broker_cpu", "broker cpu s")):
                values = [r[key] for r in runs]
                ratio = statistics.median(values) / base[key] if base[key] else float("nan")
                line += f"  {label} {spread(values, '{:.3f}')} ({ratio:.2f}x)"
            print(line)
    print(f"  a plaintext connection opened and closed: {spread(tcp, '{:.2f}')} ms; a mutual-TLS one: {tls}")


def measure(args, work: Path) -> None:
    groups = [f"bench-group-{i:06d}" for i in range(max(args.sizes))]
    timed = start_broker("127.0.0.1", free_port(), work / "timed.log")
    relay_port, counted_port = free_port(), free_port()
    relay = RequestCounter(relay_port, ("127.0.0.1", counted_port))
    counted: Broker | None = None
    try:
        counted = start_broker("127.0.0.1", counted_port, work / "counted.log", advertised=("127.0.0.1", relay.port))
        say(f"committing {len(groups):,} groups on two brokers")
        timed_readers = readers(timed.bootstrap, populate(timed.bootstrap, groups))
        counted_bootstrap = f"127.0.0.1:{relay.port}"
        counted_readers = readers(counted_bootstrap, populate(counted_bootstrap, groups))
        rounds: dict = {"repeat": args.repeat}
        wire = {}
        for n in args.sizes:
            for name in READERS:
                wire[n, name] = requests(relay, counted_readers[name], groups[:n])
                one_round(timed_readers[name], groups[:n], timed.pid)  # a first round, not counted
            for i in range(args.repeat):
                for name in READERS if i % 2 == 0 else READERS[::-1]:
                    rounds.setdefault((n, name), []).append(one_round(timed_readers[name], groups[:n], timed.pid))
                say(f"  N = {n:,}: round {i + 1} of {args.repeat}")
        tcp = connect_cost(lambda: open_socket("127.0.0.1", timed.port, {}, 10.0))
        report(args.sizes, rounds, wire, tcp, tls_connect_cost(work))
    finally:
        relay.close()
        for b in (timed, counted):
            if b is not None:
                discard(b)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000], help="groups read per round")
    ap.add_argument("--repeat", type=int, default=7, help="rounds of each reader per size")
    args = ap.parse_args()
    started = datetime.datetime.now(datetime.UTC)
    load = os.getloadavg()
    print(f"started {started:%Y-%m-%d %H:%M} UTC, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    measure(args, Path(tempfile.mkdtemp(prefix="bench-group-offsets-")))
    load = os.getloadavg()
    print(
        f"ended {datetime.datetime.now(datetime.UTC):%H:%M} UTC, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
