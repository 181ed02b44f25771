"""`reconciler demo` (the README's first command) runs end to end, here on free ports."""

import re
import shutil

import pytest

from reconciler import demo
from reconciler.dev.brokers import free_port

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_demo_runs_end_to_end(tmp_path, state_dir, capsys):
    topo = tmp_path / "demo"
    shutil.copytree(demo.DEFAULT_TOPOLOGY, topo)
    clusters = topo / "clusters.yaml"
    text = clusters.read_text()
    for port in sorted(set(re.findall(r"127\.0\.0\.1:(\d+)", text))):
        text = text.replace(f"127.0.0.1:{port}", f"127.0.0.1:{free_port()}")
    clusters.write_text(text)

    assert demo.run(topo, records_per_cluster=300) == 0
    out = capsys.readouterr().out
    assert "demo OK" in out
    assert "+ create topic eu-west.orders (4 partitions" in out
    assert "second plan: no changes" in out
    assert out.count("stopped pid") == 3, "clusters are stopped at the end"
