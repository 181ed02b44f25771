"""`reconciler demo` (the README's first command) runs end to end, here on free ports: clusters,
sample data, plan, apply with the replication jobs (4 Spark jobs, local[1]), records, heartbeats
and checkpoints downstream, the summary, the drift report, and a clean stop of jobs and clusters."""

import re
import shutil

import pytest

from reconciler.cli import demo
from reconciler.deployers.local import LocalDeployer
from reconciler.dev.brokers import free_port

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.jobs]


def test_demo_runs_end_to_end(tmp_path, state_dir, capsys):
    topo = tmp_path / "demo"
    shutil.copytree(demo.DEFAULT_TOPOLOGY, topo)
    clusters = topo / "clusters.yaml"
    text = clusters.read_text()
    for port in sorted(set(re.findall(r"127\.0\.0\.1:(\d+)", text))):
        text = text.replace(f"127.0.0.1:{port}", f"127.0.0.1:{free_port()}")
    clusters.write_text(text)

    try:
        code = demo.run(topo, records_per_cluster=300, wait_timeout=240)
    finally:
        LocalDeployer().stop_all()  # whatever happened, no job outlives the test
    out, err = capsys.readouterr()
    print(out, err)
    assert code == 0, err
    assert "demo OK" in out
    assert "+ create topic eu-west.orders (4 partitions" in out
    # The flow's own master is local[1]; the analytics engine runs both its flows: local[2], as the plan says.
    assert re.search(r"\+ deploy job eu-west->analytics \(engine analytics, local local\[2\], spec \w{12}\)", out)
    assert "4 replication flows in 3 engines (one Spark application per target cluster)" in out
    assert "second plan: no changes" in out
    for what in ("records", "heartbeats", "checkpoints"):
        assert f"{what} arrived downstream after" in out
    assert re.search(
        r"eu-west->eu-central +running \(engine eu-central: driver pid \d+ \(instance \w{12}\), local\[\d+\], app local-\d+, "
        r"metrics http://127\.0\.0\.1:\d+/metrics\)",
        out,
    ), "the job table, with where the job's metrics are"
    assert "DRIFT: 1 item (1 config drift) on 1 cluster, 1 flow." in out, "the drift report"
    assert "~ set config retention.ms on eu-west.orders: '3600000' -> '604800000'" in out
    assert "No drift: the clusters and jobs match the topology." in out, "in sync after the repair"
    assert (state_dir / "demo-drift.html").read_text().startswith("<!DOCTYPE html>")
    assert out.count("stopped cleanly") == 3 and out.count("stopped pid") == 3, "engines and clusters stopped"
    assert not [d for d in LocalDeployer().all_deployments() if d.alive]
