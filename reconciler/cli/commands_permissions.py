"""`reconciler permissions PATH...`: the ACLs each principal needs for the topology's flows, per cluster (issue 45;
docs/security.md). Exit 0 when nothing is missing on the clusters that enforce ACLs, 1 otherwise (or when a cluster
cannot be read)."""

from __future__ import annotations

from reconciler.cli.commands_plan import Console
from reconciler.cli.common import EXIT_ERROR, EXIT_OK, add_paths_argument, load_validated
from reconciler.operations.backend import Backend
from reconciler.operations.permissions import permissions
from reconciler.render import permissions as render


def register(sub) -> None:
    p = sub.add_parser(
        "permissions",
        help="list the ACLs each principal needs for the flows, and which ones clusters that enforce ACLs lack",
    )
    add_paths_argument(p)
    p.add_argument("--format", choices=["text", "json", "markdown"], default="text")
    p.set_defaults(func=cmd_permissions)


def cmd_permissions(args, backend: Backend) -> int:
    topology, _ = load_validated(args.paths, quiet_warnings=True, env=args.env)
    if topology is None:
        return EXIT_ERROR
    report = permissions(topology, backend)
    if args.format == "json":
        out = render.to_json(report.required, report.enforcement, report.missing, report.unreadable)
    elif args.format == "markdown":
        out = render.markdown(report.required, report.missing)
    else:
        out = render.text(report.required, report.enforcement, report.missing, report.unreadable)
    Console(dict(topology.clusters)).out(out, end="")  # a cluster's read error may quote its config: redacted
    return EXIT_OK if report.ok else EXIT_ERROR
