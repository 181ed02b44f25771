"""`reconciler promote --from A --to B PATH...`: what promoting environment A's topology to environment B changes.

Prints the declared differences between the two environments, key by key (path, A's value, B's value; secrets
only as their `${NAME}` references), and with `--plan` what B's clusters would change (a plan against them, read
only). Both environments must validate. Exit 0, or 1 on an error (an invalid topology, an unknown environment, a
plan with errors); with `--detailed-exitcode` 2 when anything differs (or the plan has changes).
"""

from __future__ import annotations

import sys

from reconciler.cli.common import EXIT_CHANGES, EXIT_ERROR, EXIT_OK, add_env_argument, load_validated
from reconciler.gitops.revision import revision_label
from reconciler.operations.backend import Backend
from reconciler.operations.promote import promote
from reconciler.render import promote as render
from reconciler.textutil import term
from reconciler.topology.connection import redactor_for


def register(sub) -> None:
    p = sub.add_parser(
        "promote",
        help="show what promoting one environment of a topology to another changes: the declared differences, "
        "and with --plan what the target's clusters would change",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="topology files or directories")
    add_env_argument(p, "--from", "source")
    add_env_argument(p, "--to", "target")
    p.add_argument("--plan", action="store_true", help="also plan the --to environment against its clusters")
    p.add_argument("--format", choices=sorted(render.RENDERERS), default="text")
    p.add_argument(
        "--detailed-exitcode",
        action="store_true",
        help="exit 0 when nothing differs (and the plan has no changes), 2 when something does, 1 on error",
    )
    p.set_defaults(func=cmd_promote)


def cmd_promote(args, backend: Backend) -> int:
    if not args.source or not args.target:
        print("error: promote needs --from ENV and --to ENV (two environments of the topology)", file=sys.stderr)
        return EXIT_ERROR
    if args.source == args.target:
        print(term(f"error: --from and --to are both {args.source}: name two environments"), file=sys.stderr)
        return EXIT_ERROR
    source, _ = load_validated(args.paths, quiet_warnings=True, env=args.source)
    target, _ = load_validated(args.paths, quiet_warnings=True, env=args.target)
    if source is None or target is None:
        return EXIT_ERROR
    git = backend.git.revision(args.paths) if args.plan and backend.jobs is not None else None
    promotion, diags = promote(
        args.paths, source, target, backend, with_plan=args.plan, git_revision=revision_label(git)
    )
    if promotion is None:
        print(diags.render(), file=sys.stderr)
        return EXIT_ERROR
    redact = redactor_for(source)
    redact.secrets |= redactor_for(target).secrets
    sys.stdout.write(term(redact(render.RENDERERS[args.format](promotion)), newlines=True))
    if promotion.plan is not None and promotion.plan.errors:
        return EXIT_ERROR
    changed = bool(promotion.differences) or bool(promotion.plan is not None and promotion.plan.has_changes)
    return EXIT_CHANGES if args.detailed_exitcode and changed else EXIT_OK
