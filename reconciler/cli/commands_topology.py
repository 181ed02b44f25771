"""`validate` and `graph`: pure commands on topology files (no cluster access)."""

from __future__ import annotations

import sys

from reconciler.cli.common import EXIT_ERROR, EXIT_OK, add_paths_argument, load_validated
from reconciler.operations.backend import Backend
from reconciler.render import graph
from reconciler.textutil import plural, term
from reconciler.topology import environments
from reconciler.topology.diagnostics import Diagnostics
from reconciler.topology.loader import load_paths, separate_roots


def register(sub) -> None:
    p = sub.add_parser("validate", help="check topology files: schema, semantics, loops, diamonds, policies")
    add_paths_argument(p)
    p.add_argument(
        "--each",
        action="store_true",
        help="validate every PATH as its own topology (default: all paths are merged into one)",
    )
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("graph", help="print the topology as a Mermaid or DOT graph")
    add_paths_argument(p)
    p.add_argument("--format", choices=["mermaid", "dot"], default="mermaid")
    p.set_defaults(func=cmd_graph)


def cmd_validate(args, backend: Backend) -> int:
    if getattr(args, "each", False) and len(args.paths) > 1:
        results = [_validate_each_env([p], args.env) for p in args.paths]
        return EXIT_ERROR if EXIT_ERROR in results else EXIT_OK
    roots = separate_roots(args.paths)
    if roots:
        print(
            f"note: {plural(len(args.paths), 'path')} merged into ONE topology ({len(roots)} of them define "
            "clusters and flows of their own); to validate each on its own: reconciler validate --each "
            + " ".join(args.paths),
            file=sys.stderr,
        )
    return _validate_each_env(args.paths, args.env)


def _validate_each_env(paths: list[str], env: str | None) -> int:
    """`validate` without `--env` on a topology that declares environments checks every one of them (a pull
    request's check: an override breaking only production is found before any environment is planned); the other
    commands act on one environment and require `--env`."""
    declared = environments.names(load_paths(paths, Diagnostics())) if env is None else ()
    if not declared:
        return _validate_one(paths, env)
    results = []
    for name in declared:
        results.append(_validate_one(paths, name))
        if results[-1] != EXIT_OK:
            print(f"environment {term(name)}: not valid (the errors above)", file=sys.stderr)
    return EXIT_ERROR if EXIT_ERROR in results else EXIT_OK


def _validate_one(paths: list[str], env: str | None) -> int:
    topology, diags = load_validated(paths, env=env)
    if topology is None:
        return EXIT_ERROR
    warn = len(diags.warnings)
    print(
        "valid: "
        + (f"environment {term(topology.environment)}, " if topology.environment else "")
        + f"{plural(len(topology.clusters), 'cluster')}, {plural(len(topology.flows), 'flow')}"
        + (f", {plural(warn, 'warning')}" if warn else "")
        + f" ({', '.join(topology.files)})"
    )
    return EXIT_OK


def cmd_graph(args, backend: Backend) -> int:
    topology, _ = load_validated(args.paths, quiet_warnings=True, env=args.env)
    if topology is None:
        return EXIT_ERROR
    sys.stdout.write(graph.mermaid(topology) if args.format == "mermaid" else graph.dot(topology))
    return EXIT_OK
