"""`reconciler` command line: one module per command group, registered here."""

from __future__ import annotations

import argparse
import sys

from reconciler import __version__, logs, settings
from reconciler.cli import (
    commands_demo,
    commands_dev,
    commands_drift,
    commands_env,
    commands_export,
    commands_failover,
    commands_interop,
    commands_lock,
    commands_migrate,
    commands_permissions,
    commands_plan,
    commands_promote,
    commands_render,
    commands_show,
    commands_status,
    commands_topology,
)
from reconciler.operations.backend import Backend

COMMAND_MODULES = [
    commands_topology,
    commands_plan,
    commands_promote,
    commands_permissions,
    commands_status,
    commands_drift,
    commands_dev,
    commands_demo,
    commands_failover,
    commands_migrate,
    commands_interop,
    commands_export,
    commands_render,
    commands_env,
    commands_show,
    commands_lock,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reconciler",
        description="Declarative GitOps reconciler for cross-cluster Kafka replication (MirrorMaker 2 semantics).",
    )
    parser.add_argument("--version", action="version", version=f"reconciler {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="show the Kafka clients' own log lines (librdkafka) on stderr; -vv: all of them",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None, backend: Backend | None = None) -> int:
    """Run one command; `backend` (default: the real one) is every outside dependency it has."""
    parser = build_parser()
    args = parser.parse_args(argv)
    with logs.cli_logging(getattr(args, "verbose", 0)):  # RECONCILER_LOG_FORMAT=json: stderr as JSON events
        return _run(args, backend)


def _run(args: argparse.Namespace, backend: Backend | None) -> int:
    if settings.check():  # malformed RECONCILER_* environment variables: refuse before doing anything
        return 1
    try:
        return int(args.func(args, backend if backend is not None else Backend.default()) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `reconciler graph ... | head`
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
