"""Lag while the job's Python workers are held up (issue 21): the job, deployed by `apply`, copies a live stream
of ~2,000 records/s; its Spark Python workers are SIGSTOPped for ~12 s. The records that arrive meanwhile must show
as lag (records and seconds) in the status record, the metrics, `reconciler status` and `reconciler drift` (an SLO
breach) while the workers are stopped, not only once a task ends, and the lag must fall back once they go on."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from reconciler.cli.main import main
from reconciler.contract.status import StatusRecord, StatusState
from reconciler.deployers.instance import Role
from reconciler.deployers.local import LocalDeployer
from reconciler.jobplan.backend import read_job_status
from tests.integration.mirror_helpers import SequencedProducer, create_topic, wait_for
from tests.integration.test_job_metrics import scrape, total

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.jobs]

PARTITIONS = 4
RATE = 2_000.0
HOLD_SECONDS = 12.0
TOPOLOGY = """apiVersion: reconciler/v1
kind: Topology
metadata: {{name: lag-it}}
clusters:
  west: {{bootstrap_servers: "{west}"}}
  east: {{bootstrap_servers: "{east}"}}
defaults:
  sync: {{acls: false}}
  job: {{deployer: local, master: "local[1]", parallelism: 1, max_batch_ms: 500}}
slo: {{max_lag_records: 5000, max_lag_seconds: 2}}
flows:
  - {{source: west, target: east, topics: {{include: [clicks]}}}}
"""
FLOW = "west->east"


def python_workers(deployer: LocalDeployer) -> list[int]:
    """The job's Spark Python worker processes (the pyspark daemon and the workers it forks)."""
    return [p.pid for p in deployer._processes(FLOW) if p.role is Role.WORKER]


def signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def test_lag_grows_while_the_python_workers_are_held_up_and_falls_back_after(
    fresh_clusters, tmp_path, capsys, state_dir
):
    source, target = fresh_clusters
    topic = "clicks"
    create_topic(source.bootstrap, topic, PARTITIONS)
    path = tmp_path / "topology.yaml"
    path.write_text(TOPOLOGY.format(west=source.bootstrap, east=target.bootstrap))

    def cli(*args: str) -> tuple[int, str]:
        code = main([*args[:1], str(path), *args[1:]])
        out, err = capsys.readouterr()
        return code, out + err

    # Enough records for the warm-up, the hold and the catch-up at RATE (the producer stops after them).
    producer = SequencedProducer(source.bootstrap, topic, PARTITIONS, total=int(RATE * 240), rate=RATE)
    deployer = LocalDeployer()
    stopped: list[int] = []

    def status() -> StatusRecord | None:
        return read_job_status({"bootstrap.servers": target.bootstrap}, FLOW, timeout=3)

    try:
        code, out = cli("apply", "--auto-approve")
        assert code == 0, out
        wait_for(
            lambda: (s := status()) is not None and s.state is StatusState.RUNNING,
            120,
            what="the job running",
        )
        port = deployer.metrics_port(FLOW)
        assert port, deployer.inspect(FLOW)
        producer.start()
        wait_for(lambda: (s := status()) and (s.records or 0) >= 4_000, 90, what="the job copying the stream")
        caught_up = wait_for(
            lambda: (s := status()) is not None and s.lag_total is not None and s.lag_total < 2_000 and s,
            60,
            what="the job keeping up before the hold",
        )
        assert caught_up.lag_read_at is not None  # the source's ends are read beside the batches
        code, out = cli("drift")
        assert code == 0 and "No drift" in out, out  # keeping up: within max_lag_records and max_lag_seconds

        stopped = python_workers(deployer)
        assert stopped, "no pyspark worker process of the job"
        signal_all(stopped, signal.SIGSTOP)
        held_at = time.monotonic()
        stopped += [p for p in python_workers(deployer) if p not in stopped]  # forked meanwhile
        signal_all(stopped, signal.SIGSTOP)

        behind = wait_for(
            lambda: (s := status()) is not None and (s.lag_total or 0) > 5_000 and (s.lag_seconds or 0) > 2 and s,
            HOLD_SECONDS - 1,
            interval=0.5,
            what="lag in records and seconds growing while the workers are stopped",
        )
        assert behind.state is StatusState.RUNNING
        assert sum(p.lag or 0 for p in behind.lag) == behind.lag_total
        metrics = scrape(port)  # the metrics move between batches too
        assert total(metrics["mirror_partition_lag_records"], "mirror_partition_lag_records") > 5_000
        assert total(metrics["mirror_lag_seconds"], "mirror_lag_seconds") > 2
        code, out = cli("status")
        head, row = (line for line in out.splitlines() if line.startswith(("FLOW", FLOW)))
        cells = dict(zip(re.split(r"  +", head), re.split(r"  +", row)))
        assert int(cells["LAG"]) > 5_000 and float(cells["LAG AGE"].rstrip("s")) > 2, out
        code, out = cli("drift")
        assert code != 0, out
        assert re.search(r"flow west->east is [\d,]+ records behind \(SLO 5,000\)", out), out
        assert "oldest record not replicated yet is" in out and "(SLO max_lag_seconds 2s)" in out, out
        time.sleep(max(0.0, HOLD_SECONDS - (time.monotonic() - held_at)))
    finally:
        signal_all(stopped, signal.SIGCONT)

    try:
        after = wait_for(
            lambda: (
                (s := status()) is not None
                and s.lag_total is not None
                and s.lag_total < 2_000
                and (s.lag_seconds or 0) < 2
                and s
            ),
            90,
            what="lag falling back once the workers go on",
        )
        assert after.state is StatusState.RUNNING and deployer.inspect(FLOW).alive
        assert producer.error is None
    finally:
        producer.stop()
        deployer.stop_all()
