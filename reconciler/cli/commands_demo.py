"""`demo`: the main job on the embedded default clusters."""

from __future__ import annotations

from pathlib import Path

from reconciler.cli import demo
from reconciler.cli.common import timeout_argument
from reconciler.dev.brokers import Engine


def register(sub) -> None:
    p = sub.add_parser("demo", help="run the whole product on embedded clusters (topologies/demo)")
    p.add_argument("--topology", type=Path, default=demo.DEFAULT_TOPOLOGY, help="demo topology directory")
    p.add_argument("--records", type=int, default=2000, help="sample records produced per source cluster")
    p.add_argument("--keep-running", action="store_true", help="leave clusters and replication jobs running at the end")
    p.add_argument(
        "--timeout",
        type=timeout_argument,
        default=300.0,
        help="seconds to wait for records, heartbeats and checkpoints downstream (default 300)",
    )
    p.add_argument(
        "--engine",
        choices=[e.value for e in Engine],
        help="the embedded brokers' Kafka implementation (default $RECONCILER_DEV_ENGINE, else tansu; docs/brokers.md)",
    )
    p.set_defaults(
        func=lambda args, backend: demo.run(
            args.topology,
            args.records,
            args.keep_running,
            args.timeout,
            backend=backend,
            engine=Engine(args.engine) if args.engine else None,
        )
    )
