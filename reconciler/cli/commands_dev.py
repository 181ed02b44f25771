"""`dev up|down|status`: local brokers (Tansu or noida-db) for the loopback clusters of a topology."""

from __future__ import annotations

import sys

from reconciler.cli.common import EXIT_ERROR, EXIT_OK, add_env_argument, load_validated
from reconciler.dev.brokers import Engine
from reconciler.operations.backend import Backend
from reconciler.operations.dev import dev_down, dev_status, dev_up
from reconciler.textutil import term


def register(sub) -> None:
    dev = sub.add_parser("dev", help="local Kafka-protocol clusters (Tansu or noida-db) for development")
    dev_sub = dev.add_subparsers(dest="dev_command", metavar="ACTION")
    dev_sub.required = True
    p = dev_sub.add_parser("up", help="start one broker per loopback cluster of the topology (idempotent)")
    p.add_argument("paths", nargs="+", metavar="PATH")
    add_env_argument(p)
    p.add_argument(
        "--engine",
        choices=[e.value for e in Engine],
        help="the brokers' Kafka implementation (default $RECONCILER_DEV_ENGINE, else tansu; docs/brokers.md)",
    )
    p.set_defaults(func=cmd_up)
    p = dev_sub.add_parser(
        "down", help="stop every dev broker (and local replication job) started from this state directory"
    )
    p.set_defaults(func=cmd_down)
    p = dev_sub.add_parser("status", help="list dev brokers")
    p.set_defaults(func=cmd_status)


def cmd_up(args, backend: Backend) -> int:
    topology, _ = load_validated(args.paths, quiet_warnings=True, env=args.env)
    if topology is None:
        return EXIT_ERROR
    outcome = dev_up(topology, backend, Engine(args.engine) if args.engine else None)
    if outcome.unresolved is not None:
        print(outcome.unresolved.render(), file=sys.stderr)
        return EXIT_ERROR
    if outcome.error is not None:
        print(term(f"error: {outcome.error}"), file=sys.stderr)
        return EXIT_ERROR
    for s in outcome.clusters:
        print(s.line())
    return EXIT_OK


def cmd_down(args, backend: Backend) -> int:
    outcome = dev_down(backend)
    for what, res in outcome.jobs:
        print(f"{what}: {res.message}")
    for s in outcome.clusters:
        print(s.line())
    if not outcome.clusters:
        print("no dev clusters running")
    return EXIT_OK


def cmd_status(args, backend: Backend) -> int:
    rows = dev_status(backend)
    for s in rows:
        print(s.line())
    if not rows:
        print("no dev clusters running")
    return EXIT_OK
