"""Small test helpers shared by unit and integration tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

from reconciler.topology.build import load_topology
from reconciler.topology.diagnostics import Diagnostics

MINIMAL = """\
apiVersion: reconciler/v1
kind: Topology
clusters:
  west:
    bootstrap_servers: 127.0.0.1:19092
  east:
    bootstrap_servers: 127.0.0.1:19093
flows:
  - source: west
    target: east
    topics:
      include: ["orders.*", "payments"]
      exclude: [".*\\\\.tmp"]
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def diagnose(*paths: Path) -> Diagnostics:
    """Load + validate + analyse; returns every diagnostic."""
    from reconciler.analysis.hazards import analyse

    topology, diags = load_topology(paths)
    if topology is not None:
        analyse(topology, diags)
    return diags


def rendered_errors(diags: Diagnostics) -> list[str]:
    return [d.render().splitlines()[0] for d in diags.sorted() if d.severity.value == "error"]
