"""`dev up|down|status`: local brokers (Tansu or noida-db) for the loopback clusters of a topology."""

from __future__ import annotations

import sys

from reconciler.cli.common import EXIT_ERROR, EXIT_OK, load_validated
from reconciler.dev.brokers import DevClusterError, Engine
from reconciler.dev.clusters import DevClusters
from reconciler.operations.backend import Backend
from reconciler.topology.connection import check_references


def register(sub) -> None:
    dev = sub.add_parser("dev", help="local Kafka-protocol clusters (Tansu or noida-db) for development")
    dev_sub = dev.add_subparsers(dest="dev_command", metavar="ACTION")
    dev_sub.required = True
    p = dev_sub.add_parser("up", help="start one broker per loopback cluster of the topology (idempotent)")
    p.add_argument("paths", nargs="+", metavar="PATH")
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
    topology, _ = load_validated(args.paths, quiet_warnings=True)
    if topology is None:
        return EXIT_ERROR
    unresolved = check_references(topology)
    if not unresolved.ok:
        print(unresolved.render(), file=sys.stderr)
        return EXIT_ERROR
    try:
        for s in DevClusters().up(topology, Engine(args.engine) if args.engine else None):
            print(s.line())
    except DevClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def cmd_down(args, backend: Backend) -> int:
    from reconciler.deployers.local import LocalDeployer

    for what, res in LocalDeployer().stop_all():  # the engines first: they would only retry against stopped brokers
        print(f"{what}: {res.message}")
    stopped = DevClusters().down()
    for s in stopped:
        print(s.line())
    if not stopped:
        print("no dev clusters running")
    return EXIT_OK


def cmd_status(args, backend: Backend) -> int:
    rows = DevClusters().status()
    for s in rows:
        print(s.line())
    if not rows:
        print("no dev clusters running")
    return EXIT_OK
