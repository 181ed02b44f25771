"""Helpers shared by CLI commands: loading + validating + analysing, printing diagnostics, exit codes."""

from __future__ import annotations

import sys
from typing import Iterable

from reconciler.analysis.hazards import analyse
from reconciler.topology.build import load_topology
from reconciler.topology.diagnostics import Diagnostics
from reconciler.topology.model import Topology

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CHANGES = 2  # Terraform's --detailed-exitcode meaning: success, with changes / drift


def load_validated(paths: Iterable[str], quiet_warnings: bool = False) -> tuple[Topology | None, Diagnostics]:
    """load -> validate -> model -> analyse; prints every diagnostic to stderr. Topology None on errors."""
    topology, diags = load_topology(paths)
    if topology is not None:
        analyse(topology, diags)
    shown = diags.errors if quiet_warnings else diags.items
    if shown:
        print(Diagnostics(list(shown)).render(), file=sys.stderr)
    if diags.errors:
        n = len(diags.errors)
        print(f"{n} error{'s' if n != 1 else ''}: topology is invalid; nothing was changed", file=sys.stderr)
        return None, diags
    return topology, diags


def add_paths_argument(parser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="topology files or directories")
