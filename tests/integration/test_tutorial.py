"""docs/getting-started.md runs as it reads: its marked files are saved and its marked commands run in order, as a
reader types them (the `reconciler` CLI, `python`, `sed`), in an empty directory on free ports, on the embedded
brokers and a local Spark engine per target cluster; each command's exit code and output are the page's, up to
the placeholders of what truly varies (tests/doc_steps.py, docs/contributing.md "Tested pages")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.deployers.local import LocalDeployer
from reconciler.dev.brokers import free_port
from tests import doc_steps

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.jobs]

PAGE = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"


def test_the_tutorial_runs_as_it_reads(tmp_path, state_dir):
    page = PAGE.read_text(encoding="utf-8")
    ports = {port: str(free_port()) for port in doc_steps.page_ports(page)}
    assert len(ports) == 2, "the tutorial's two clusters"
    work = tmp_path / "first"
    work.mkdir()
    bin_dir = str(Path(sys.executable).parent)  # `reconciler` and `python`, as on the tutorial's PATH
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env["RECONCILER_STATE_DIR"] = str(state_dir)
    env.pop("RECONCILER_JOBS", None)
    try:
        doc_steps.run(doc_steps.steps(page), work, env, ports)
    finally:  # whatever happened, no engine and no broker outlives the test
        subprocess.run(
            [str(Path(bin_dir) / "reconciler"), "dev", "down"], env=env, capture_output=True, timeout=180, check=False
        )
        LocalDeployer().stop_all()
    assert not [d for d in LocalDeployer().all_deployments() if d.alive]
