"""What the benchmarks share, one home for each so every bench starts, times and prints the same way: printing
(`say`, `spread`, `summarise` and `figure_line`), local brokers (`start_brokers`, `stop_brokers`), producing a
backlog (`backlog_producer`, `tuned_producer`, `produce_all`), `reconciler apply` in a new process (`apply_cli`),
repetitions of scenarios and their report (`run_repeated`, `report_runs`), deploying and stopping engines (`deploy`,
`stop_engines`), --job settings (`parse_job`), the process's signals and Spark's Python (`bench_process`), a process's memory (`proc_mb`, `pss_mb`) and watching a remote topic
fill up (`TargetWatch`)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

import reconciler.deployers.instance as instance
from reconciler import logs
from reconciler.contract.spec import JobSpec
from reconciler.deployers.local import LocalDeployer
from reconciler.dev.brokers import Broker, free_port, start_broker, stop_pid

VALUE = b"x" * 100


def say(msg: str) -> None:
    """A progress line, on stderr (stdout holds the report)."""
    print(msg, file=sys.stderr, flush=True)


def spread(values: list[float], fmt: str = "{:,.0f}") -> str:
    """`median [min-max]` of `values`, each formatted with `fmt`; `-` for none."""
    if not values:
        return "-"
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


def summarise(runs: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Each figure every run has: its median, min, max and how many runs gave a number (NaN left out)."""
    keys = [k for k in runs[0] if all(k in r for r in runs)]
    out = {}
    for k in keys:
        vals = [r[k] for r in runs if r[k] == r[k]]  # drop NaN
        if vals:
            out[k] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}
    return out


Targets = dict[str, tuple[str, str, float]]  # figure -> (label, ">=" or "<=", target)


def figure_line(key: str, s: dict[str, float], targets: Targets | None = None) -> str:
    """One figure of a report, `key  median  [min - max]`, and its target met or missed where `targets` has one."""
    line = f"    {key:<26} {s['median']:>12,.2f}  [{s['min']:,.2f} - {s['max']:,.2f}]"
    if targets and key in targets:
        label, cmp, target = targets[key]
        ok = s["median"] >= target if cmp == ">=" else s["median"] <= target
        line += f"   {label}: target {cmp} {target:g} {'MET' if ok else 'MISSED'}"
    return line


def start_brokers(work: Path, n: int = 2) -> list[Broker]:
    """`n` fresh Tansu brokers on loopback, their logs `work/broker{i}.log`."""
    return [start_broker("127.0.0.1", free_port(), work / f"broker{i}.log") for i in range(n)]


def stop_brokers(brokers) -> None:
    for b in brokers:
        if b.pid:
            stop_pid(b.pid)


def apply_cli(tdir: Path, env: dict[str, str], timeout: float, cwd: Path | None = None) -> None:
    """`reconciler apply DIR --auto-approve` in a new process, as a user runs it; an error if it fails. `cwd`: the
    checkout whose reconciler applies (`python -m` puts the working directory first on the path, before PYTHONPATH:
    a baseline's `--code` must be run from there, or the current checkout runs)."""
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "apply", str(tdir), "--auto-approve"],
        env={**os.environ, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"reconciler apply exited {done.returncode}: {done.stderr[-2000:]}")


def produce_all(p: Producer, topic: str, records: int, partitions: int | None = None, value: bytes = VALUE) -> None:
    """`records` records of `value` on `topic` (round-robin over `partitions` when given, else the partitioner's
    choice), waiting for room in the producer's queue; not flushed."""
    for i in range(records):
        while True:
            try:
                if partitions is None:
                    p.produce(topic, value)
                else:
                    p.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)


def backlog_producer(bootstrap: str) -> Producer:
    """The benches' backlog producer: 20-ms linger, 256 KB batches."""
    return Producer(logs.client_config({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 262144}))


class TargetWatch:
    """Watches a topic fill up to `n` records: when records first appeared (and how many), and when the last one
    landed. Complete only once `n` records have been READ BACK from the topic.

    One thread reads the partitions' listed ends (ListOffsets: one request, no records read) every `interval` s and
    keeps each time they moved (`moves`): cheap, and they move with every batch appended, so the first move is the
    first copied record and the last move the last batch. They are not counts: Tansu lists a partition's end as its
    last batch's base offset + 1 (one batch of 5 records: 1), transaction markers take offsets too, and in three of
    twenty runs of bench/ratelimit.py the listed ends of a capped flow's topic added up to `n` about 10 s before its
    records were all there. So they only say when to look: once they reach `n`, or have been still for `settle` s,
    another thread's reader (one consumer of every partition from the start, reading on from where it stopped: each
    record read once over the watch's life) reads to end-of-partition and counts the records. `n` read: the copy
    ended at the last move of the listed ends before the reader read the `n`-th record (a record is readable only
    once its batch, or its transaction's marker, moved the end). Listed ends of `n` or more with fewer records
    there: they are not to be trusted for this topic, and from then on the reader reads on every `interval` s and
    the copy ends when it has read the `n`-th record (timed by the read, not by the ends).

    The listing has a thread of its own so that a read back (seconds for millions of records) never delays seeing
    the ends move: with one thread for both, a read that overlapped the copy's end timed the last batch when the
    read ended (up to its 10 s) and a million-record hot partition read ~10 s slow (2026-11-29). `settle` is 2 s
    so that a pause of the copy (a job's batch boundary) does not start a reader of the target beside the copy it
    times (the read back costs the target broker and this process CPU the copy would have)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        n: int,
        meter: Callable[[], Any] | None = None,
        interval: float = 0.05,
        settle: float = 2.0,
    ):
        self.bootstrap, self.topic = bootstrap, topic
        self.tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.n, self.interval, self.settle = n, interval, settle
        refresh = {"topic.metadata.refresh.interval.ms": 1000}  # the topic appears later: not cached as unknown
        group = f"bench-watch-{time.monotonic_ns()}"
        self.consumer = Consumer(logs.client_config({"bootstrap.servers": bootstrap, "group.id": group, **refresh}))
        self.reader = Consumer(
            logs.client_config(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": f"{group}-read",
                    "enable.partition.eof": True,
                    "enable.auto.commit": False,
                    "fetch.wait.max.ms": 50,
                    **refresh,
                }
            )
        )
        self.reader.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.first: tuple[float, int] | None = None
        self.last: float | None = None
        self.seen = 0  # the listed ends' sum at the last reading
        self.moves: list[tuple[float, int]] = []  # (when, the listed ends' sum) at each move seen
        self.counted = 0  # records read back so far
        self.listed_early = False  # the listed ends said `n` while fewer records were there
        self._at_eof: set[int] = set()
        self._counted_at: float | None = None  # when the reader read the `n`-th record
        self._meter, self._started, self._window = meter, None, None  # the machine's CPU from first to last
        self._stop, self._closed = threading.Event(), False
        self._lister = threading.Thread(target=self._list, daemon=True)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._lister.start()
        self._thread.start()

    def _listed(self) -> int:
        try:
            return sum(max(self.consumer.get_watermark_offsets(tp, timeout=5)[1], 0) for tp in self.tps)
        except KafkaException:
            return 0

    def read_on(self, timeout: float = 10.0) -> int:
        """Reads on to end-of-partition on every partition (or for `timeout` s); the records read back so far. A
        partition's end is only ever taken from the records themselves, so the count can lag, never run ahead."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self._stop.is_set():
            msgs = self.reader.consume(100_000, self.interval)
            got = 0
            for m in msgs:
                err = m.error()
                if err is None:
                    got += 1
                    self._at_eof.discard(m.partition())
                elif err.code() == KafkaError._PARTITION_EOF:
                    self._at_eof.add(m.partition())
            self.counted += got
            if self.counted >= self.n and self._counted_at is None:
                self._counted_at = time.monotonic()
            if not msgs and len(self._at_eof) == len(self.tps):
                break
        return self.counted  # `_at_eof` says whether it read to the end of every partition

    def _list(self) -> None:
        """The listing thread: the listed ends every `interval` s, each move kept (`moves`), the first one timed."""
        while not self._stop.is_set() and self.last is None:
            seen, now = self._listed(), time.monotonic()
            if seen != self.seen:
                self.moves.append((now, seen))
                self.seen = seen
            if seen and self.first is None:
                self.first = (now, seen)
                self._started = self._meter() if self._meter else None
            self._stop.wait(self.interval)

    def _moved_at(self) -> float:
        return self.moves[-1][0] if self.moves else 0.0

    def _run(self) -> None:
        checked_at, failed_at = 0.0, -1.0
        while not self._stop.is_set():
            seen, now, moved_at = self.seen, time.monotonic(), self._moved_at()
            look = seen >= self.n or (seen and now - max(moved_at, checked_at) >= self.settle)
            if self.listed_early or look:
                checked_at = now
                if self.read_on() >= self.n:
                    counted_at = self._counted_at if self._counted_at is not None else time.monotonic()
                    moved = [t for t, _ in self.moves if t <= counted_at]
                    # The ends moved since the last look that read to the end and found records missing: the last
                    # batch landed at the last move before the n-th record was read. Else the records came without
                    # the ends moving: the read that found the last one times it.
                    trusted = not self.listed_early and moved and moved[-1] > failed_at
                    self.last = moved[-1] if trusted else counted_at
                    self._window = self._started.window() if self._started is not None else None
                    return
                if len(self._at_eof) < len(self.tps):
                    continue  # not read to the end yet (millions of records take longer than a read): read on
                failed_at = now  # read to the end of every partition, and records are missing
                self.listed_early = self.listed_early or seen >= self.n
            self._stop.wait(self.interval)

    def wait(self, timeout: float, alive: Callable[[], bool] = lambda: True) -> None:
        deadline = time.monotonic() + timeout
        while self._thread.is_alive() and time.monotonic() < deadline:
            if not alive():
                raise RuntimeError(f"the job ended with {self.counted:,} of {self.n:,} records read back")
            self._thread.join(0.5)
        if self.last is None:
            raise RuntimeError(f"{self.counted:,} of {self.n:,} records read back after {timeout:.0f} s")

    def rate(self) -> float:
        """Records/s from the first records seen to the last (those seen at the first reading excluded)."""
        assert self.first is not None and self.last is not None
        t0, c0 = self.first
        return (self.n - c0) / max(1e-9, self.last - t0)

    def busy_pct(self) -> float:
        return self._window.busy_pct if self._window is not None else float("nan")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._thread.join(15)
        self._lister.join(15)
        self.consumer.close()
        self.reader.close()


def tuned_producer(bootstrap: str, **more: Any) -> Producer:
    """The benches' fast producer: 20-ms linger, 1 MB batches, a queue of a million records (1 GB); `more` on top."""
    config = {
        "bootstrap.servers": bootstrap,
        "linger.ms": 20,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
    }
    return Producer(logs.client_config({**config, **more}))


def proc_mb(pid: int, file: str, field: str) -> float:
    """A kB figure of /proc/PID/`file` (`field`, e.g. "Pss:" of smaps_rollup, "VmRSS:" of status) in MB; 0 if gone."""
    try:
        for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def pss_mb(pid: int) -> float:
    return proc_mb(pid, "smaps_rollup", "Pss:")


def run_repeated(
    scenarios: list[str],
    repeat: int,
    prefix: str,
    announce: Callable[[str, int], None],
    run: Callable[[str, Path, int], dict[str, float]],
) -> dict[str, list[dict[str, float]]]:
    """Each scenario `repeat` times, in turn, each repetition in a temporary directory of its own (removed after):
    every scenario's figures, a dict a repetition."""
    runs: dict[str, list[dict[str, float]]] = {s: [] for s in scenarios}
    for i in range(repeat):
        for s in scenarios:
            announce(s, i)
            work = Path(tempfile.mkdtemp(prefix=f"{prefix}-{s}-"))
            try:
                runs[s].append(run(s, work, i))
            finally:
                shutil.rmtree(work, ignore_errors=True)
    return runs


def report_runs(
    env: dict[str, Any],
    runs: dict[str, list[dict[str, float]]],
    report: Callable[[dict[str, dict[str, dict[str, float]]]], None],
    json_path: str | Path | None,
) -> dict[str, dict[str, dict[str, float]]]:
    """After `run_repeated`: the load average at the end into `env`, each scenario's figures summarised and
    reported, and with `json_path` the environment, every run and the summary written there."""
    env["loadavg_end"] = os.getloadavg()
    summary = {s: summarise(r) for s, r in runs.items() if r}
    report(summary)
    if json_path:
        Path(json_path).write_text(json.dumps({"environment": env, "runs": runs, "summary": summary}, indent=2))
    return summary


def deploy(deployer: LocalDeployer, spec: JobSpec, engine: str) -> None:
    """`spec` deployed into `engine` as apply deploys it; an error with the deployer's message if it is not."""
    res = deployer.deploy(spec, {"engine": engine})
    if not res.ok:
        raise RuntimeError(res.message)


def stop_engines(root: Path, deployer: LocalDeployer | None = None) -> None:
    """Every engine under the state directory `root` stopped, and whatever process of theirs is left ended."""
    (deployer or LocalDeployer(root=root, stop_timeout=30)).stop_all()
    instance.end(instance.scan(under=root.resolve()), 5)


def parse_settings(items: list[str]) -> dict[str, Any]:
    """KEY=VALUE ... as topology settings: a dotted key nests (`heartbeats.interval_seconds=10` ->
    {"heartbeats": {"interval_seconds": 10}}), a value is read as YAML (a whole number an int, `true` a bool)."""
    out: dict[str, Any] = {}
    for item in items:
        key, _, value = item.partition("=")
        *parents, leaf = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(value) if value else value
    return out


#: --job KEY=VALUE ... as a flow's `job:` settings.
parse_job = parse_settings


def bench_process() -> None:
    """SIGTERM (e.g. `kill`) unwinds like Ctrl-C (brokers, engines and readers stopped by their `finally`), and
    Spark's Python, where not set, is this one."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
