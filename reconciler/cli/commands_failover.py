"""`offsets translate`, `failover` and `reachability`: MirrorMaker 2's RemoteClusterUtils for operators.

Each command calls one operation of `reconciler.operations.offsets` with the Backend and renders what it
returns. Topology files only say how to reach the clusters (and which replication policy names remote
topics); `${ENV_VAR}` settings are resolved by the Backend's mirror client factory, for the one cluster
these commands read, and every printed line goes through a Redactor. Only `failover --apply` writes
anything.

A cluster that is down is found by the probe (`adapters/probe.py`) before any client is built: one
line, exit 1, within seconds; the clients' own log lines only with `-v`.
"""

from __future__ import annotations

import json
import sys

from reconciler.cli.common import EXIT_ERROR, EXIT_OK, add_paths_argument, load_validated, timeout_argument
from reconciler.mirror import mirror_client as mc
from reconciler.operations import offsets
from reconciler.operations.backend import Backend
from reconciler.render import failover as render
from reconciler.textutil import term
from reconciler.topology.connection import redactor_for
from reconciler.topology.model import Topology
from reconciler.topology.secrets import Redactor


def register(sub) -> None:
    offsets = sub.add_parser("offsets", help="consumer-group offsets across clusters (MM2 checkpoints)")
    offsets_sub = offsets.add_subparsers(dest="offsets_command", metavar="ACTION")
    offsets_sub.required = True
    p = offsets_sub.add_parser("translate", help="print where a group of SOURCE may resume on TARGET, from checkpoints")
    _add_group_arguments(p)
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser(
        "failover", help="move a consumer group from SOURCE to TARGET with translated offsets (dry run unless --apply)"
    )
    _add_group_arguments(p)
    p.add_argument(
        "--apply",
        action="store_true",
        help="commit the translated offsets to the group on TARGET (refused while the group is active there)",
    )
    p.add_argument(
        "--allow-rewind",
        action="store_true",
        help="also move offsets the group already committed further on TARGET back to the translation",
    )
    p.set_defaults(func=cmd_failover)

    p = sub.add_parser("reachability", help="upstream clusters of CLUSTER, hop counts and heartbeat age")
    p.add_argument("--cluster", required=True, help="cluster alias to inspect")
    _add_common_arguments(p)
    p.set_defaults(func=cmd_reachability)


def _add_common_arguments(p) -> None:
    add_paths_argument(p)
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument(
        "--timeout", type=timeout_argument, default=30.0, metavar="SECONDS", help="per cluster request (default 30)"
    )


def _add_group_arguments(p) -> None:
    p.add_argument("--group", required=True, help="consumer group id (as on SOURCE)")
    p.add_argument("--source", required=True, help="alias of the cluster the group consumed from")
    p.add_argument("--target", required=True, help="alias of the cluster the group moves to")
    _add_common_arguments(p)


def _move(args) -> offsets.GroupMove:
    return offsets.GroupMove(args.group, args.source, args.target, args.timeout)


def _warn(text: str) -> None:
    print(text, file=sys.stderr)


def run_on_topology(args, body) -> int:
    """Load the topology, run `body(topology, redact)`, and turn refusals and cluster errors into exit 1: the offset
    commands here and verify, cutover and failback (commands_migrate.py)."""
    topology, _ = load_validated(args.paths, quiet_warnings=True, env=args.env)
    if topology is None:
        return EXIT_ERROR
    redact = redactor_for(topology)
    try:
        return body(topology, redact)
    except offsets.Refused as exc:
        print(term(redact(f"error: {exc}")), file=sys.stderr)
        return EXIT_ERROR


def _emit(args, redact: Redactor, text: str, data: dict) -> None:
    sys.stdout.write(redact(json.dumps(data, indent=2) + "\n" if args.format == "json" else term(text, newlines=True)))


def cmd_translate(args, backend: Backend) -> int:
    def body(topology: Topology, redact: Redactor) -> int:
        t = offsets.translate(topology, _move(args), backend, _warn)
        _emit(args, redact, render.translation_text(t), render.translation_json(t))
        return EXIT_OK

    return run_on_topology(args, body)


def cmd_failover(args, backend: Backend) -> int:
    def body(topology: Topology, redact: Redactor) -> int:
        outcome = offsets.failover(
            topology, _move(args), backend, apply=args.apply, allow_rewind=args.allow_rewind, warn=_warn
        )
        _emit(args, redact, render.failover_text(outcome.shown), render.failover_json(outcome.shown))
        return _conclude(args, outcome.plan, outcome.refusal, outcome.applied)

    return run_on_topology(args, body)


def _conclude(args, plan: mc.FailoverPlan, refusal: str | None, applied: bool) -> int:
    n = len(plan.commits)
    kept = sum(p.action is mc.FailoverAction.KEEP_AHEAD for p in plan.partitions)
    if kept:
        print(
            f"note: {kept} partition(s) already committed further on {term(args.target)} are kept "
            "(--allow-rewind moves them back)",
            file=sys.stderr,
        )
    if not args.apply:
        if refusal:
            print(f"note: --apply would be refused: {term(refusal)}", file=sys.stderr)
        print(
            f"dry run: {n} offset(s) would be committed to group {term(args.group)} on {term(args.target)}; "
            "nothing was changed (use --apply)",
            file=sys.stderr,
        )
        return EXIT_OK
    if refusal:
        print(f"error: refusing to fail over: {term(refusal)}; nothing was changed", file=sys.stderr)
        return EXIT_ERROR
    print(
        f"committed {n} offset(s) to group {term(args.group)} on {term(args.target)}"
        if applied
        else f"nothing to commit: group {term(args.group)} on {term(args.target)} is already at or past the "
        "translated offsets",
        file=sys.stderr,
    )
    return EXIT_OK


def cmd_reachability(args, backend: Backend) -> int:
    def body(topology: Topology, redact: Redactor) -> int:
        report = offsets.reachability(topology, args.cluster, backend, args.timeout)
        _emit(
            args,
            redact,
            render.reachability_text(report, topology.slo.max_heartbeat_age_seconds),
            render.reachability_json(report),
        )
        return EXIT_OK

    return run_on_topology(args, body)
