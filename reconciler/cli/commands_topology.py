"""`validate` and `graph`: pure commands on topology files (no cluster access)."""

from __future__ import annotations

import sys

from reconciler.cli.common import EXIT_ERROR, EXIT_OK, add_paths_argument, load_validated
from reconciler.render import graph


def register(sub) -> None:
    p = sub.add_parser("validate", help="check topology files: schema, semantics, loops, diamonds, policies")
    add_paths_argument(p)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("graph", help="print the topology as a Mermaid or DOT graph")
    add_paths_argument(p)
    p.add_argument("--format", choices=["mermaid", "dot"], default="mermaid")
    p.set_defaults(func=cmd_graph)


def cmd_validate(args) -> int:
    topology, diags = load_validated(args.paths)
    if topology is None:
        return EXIT_ERROR
    warn = len(diags.warnings)
    print(f"valid: {len(topology.clusters)} clusters, {len(topology.flows)} flows"
          + (f", {warn} warning{'s' if warn != 1 else ''}" if warn else "") + f" ({', '.join(topology.files)})")
    return EXIT_OK


def cmd_graph(args) -> int:
    topology, _ = load_validated(args.paths, quiet_warnings=True)
    if topology is None:
        return EXIT_ERROR
    sys.stdout.write(graph.mermaid(topology) if args.format == "mermaid" else graph.dot(topology))
    return EXIT_OK
