"""spark-submit entry point of a replication job: one flow (`--spec`) or an engine of flows (`--engine-dir`).

    spark-submit jobs/mirror_job.py --spec /path/to/west-east.json [--master local[2]]
    spark-submit jobs/mirror_job.py --engine-dir /path/to/engines/east      (reconciler.engine.host)

Exit codes: 0 stopped (SIGTERM/SIGINT or --max-seconds), 1 failed, 3 the spec file changed in a
field that needs a restart (the deployer restarts the job with the new spec; an engine restarts the flow
itself), 4 superseded by a newer instance of the flow.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import signal
import sys
import threading
from pathlib import Path

for _root in Path(__file__).resolve().parents:  # the project, when run from a checkout that is not installed
    if (_root / "reconciler" / "__init__.py").is_file():
        sys.path.insert(0, str(_root))
        break

from reconciler import settings  # noqa: E402
from reconciler.contract.engine import EngineRecord, FlowRuntime, write_runtime  # noqa: E402
from reconciler.contract.spec import JobSpec  # noqa: E402
from reconciler.drift.engines import engine_status  # noqa: E402
from reconciler.engine.clients import SharedClients  # noqa: E402
from reconciler.engine.driver import ReplicationDriver, SparkExecutor, configure_logging  # noqa: E402
from reconciler.engine.driver_parts import CredentialWatch  # noqa: E402
from reconciler.engine.health_writer import status_writer  # noqa: E402
from reconciler.engine.host import EngineHost  # noqa: E402
from reconciler.engine.lifeline import watch_parent  # noqa: E402
from reconciler.engine.metrics import serve_merged  # noqa: E402
from reconciler.engine.session import (  # noqa: E402
    PendingContext,
    build_context,
    context_of,
    engine_conf,
    start_workers,
)
from reconciler.settings import AUTO_PORT  # noqa: E402
from reconciler.topology import secrets  # noqa: E402

log = logging.getLogger("reconciler.engine")


def _orphaned(parent: int) -> None:
    """The JVM that started this driver is gone: nothing of this job may keep copying."""
    log.error("the Spark JVM (pid %d) that started this driver is gone: the job ends", parent)
    logging.shutdown()
    os._exit(1)


#: runtime.json is written from the engine's loop and, once the SparkContext is up, from the thread that made it
_SAYING = threading.Lock()


def _say_who(metrics_port: int | None, application_id: str | None, flows: list[FlowRuntime] | None = None) -> None:
    job_dir = settings.job_dir()
    if job_dir:
        with _SAYING:
            write_runtime(job_dir, settings.job_instance(), metrics_port, application_id, flows)


def run_flow(args: argparse.Namespace) -> int:
    spec = JobSpec.load(args.spec)
    CredentialWatch.enabled = False  # a rotated credential ends no one-flow job (an engine restarts a flow in place)
    configure_logging(args.log_level, spec)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    sc = build_context(spec, args.master)
    start_workers(sc)  # while the driver connects and plans its first batch
    try:
        driver = ReplicationDriver(Path(args.spec), SparkExecutor(sc), install_signal_handlers=True)
        if args.metrics_port:
            driver.metrics.serve(0 if args.metrics_port == AUTO_PORT else args.metrics_port, args.metrics_bind)
            log.info("metrics on http://%s:%d/metrics", args.metrics_bind, driver.metrics.port)
        _say_who(driver.metrics.port, sc.applicationId)
        return driver.run(max_seconds=args.max_seconds)
    finally:
        sc.stop()


def run_engine(args: argparse.Namespace) -> int:
    engine_dir = Path(args.engine_dir)
    record = EngineRecord.load(engine_dir)
    redact = secrets.Redactor()  # each flow's secrets are added as it starts
    from reconciler import logs

    logs.setup(args.log_level, None, redact)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    conf = engine_conf(record.name, args.master or record.master, record.spark_conf)
    shared = SharedClients()  # the flows' producers and admins, one per cluster and role (engine/clients.py)
    port: int | None = None
    host: EngineHost | None = None

    def context_ready(sc) -> None:
        start_workers(sc)  # while the flows plan their first batch
        if host is not None:
            _say_who(port, sc.applicationId, host.last_flows)

    def context_failed(exc: BaseException) -> None:
        log.error("the SparkContext could not be started: %s: %s", type(exc).__name__, exc)
        if host is not None:
            host.stop_event.set()

    # The JVM makes the SparkContext while the flows start (connect, topics, positions, offset syncs): their first
    # batch waits for it (issue 47, apply -> first record).
    spark = PendingContext(lambda: context_of(conf), context_ready, context_failed)
    executor = SparkExecutor(pending=spark)

    def make_driver(path: Path) -> ReplicationDriver:
        driver = ReplicationDriver(path, executor, shared=shared)
        for c in (driver.spec.source, driver.spec.target):
            redact.add_from(dict(c.config))
        driver.metrics.port = port
        return driver

    host = EngineHost(engine_dir, make_driver, on_change=lambda flows: _say_who(port, spark.application_id(), flows))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: host.stop_event.set())
    writer = status_writer(host, record.name, engine_status)  # on Kubernetes: the verdict for Argo CD and Flux
    try:
        if writer is not None:
            writer.start(host.stop_event)
        if args.metrics_port:
            port = serve_merged(
                lambda: [d.metrics.registry for d in host.drivers()],  # type: ignore[attr-defined]
                0 if args.metrics_port == AUTO_PORT else args.metrics_port,
                args.metrics_bind,
            )
            log.info("metrics on http://%s:%d/metrics", args.metrics_bind, port)
        _say_who(port, None, [])
        spark.start()
        log.info("engine %s started (%s)", record.name, conf.get("spark.master", "inherited master"))
        host.run(max_seconds=args.max_seconds)
        return 1 if spark.failed is not None else 0
    finally:
        if writer is not None:
            host.stop_event.set()
            writer.join()
        try:
            spark.get(timeout=120).stop()
        except Exception as exc:  # noqa: BLE001 - it failed (logged) or never came: nothing to stop
            log.debug("no SparkContext to stop: %s", exc)


def main(argv: list[str] | None = None) -> int:
    if settings.check():  # a malformed RECONCILER_* variable: one line each, exit 1, before Spark starts
        return 1
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--spec", help="one flow: its job spec JSON file (re-read every refresh interval)")
    what.add_argument("--engine-dir", help="an engine: its directory (engine.json, flows/*.json), watched")
    ap.add_argument(
        "--master", help="override the spec's Spark master (`inherit`: keep the one spark-submit was given)"
    )
    ap.add_argument("--max-seconds", type=float, help="stop after this long (benchmarks, tests)")
    ap.add_argument("--log-level", default="INFO")
    ap.add_argument(
        "--metrics-port",
        type=int,
        default=settings.metrics_port(),
        help="serve Prometheus metrics on this port (0: off; -1: any free port; default $RECONCILER_METRICS_PORT, "
        "`auto` meaning -1, else off)",
    )
    ap.add_argument(
        "--metrics-bind",
        default=settings.metrics_bind(),
        help="the address /metrics listens on (default $RECONCILER_METRICS_BIND, else 127.0.0.1: this machine only; "
        "the endpoint has no authentication, docs/security.md)",
    )
    args = ap.parse_args(argv)
    # `kill -USR1 <driver pid>` (runtime.json's pid) writes every thread's Python stack to the job's log: what a job
    # that copies nothing and logs nothing is waiting for.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    watch_parent(_orphaned)
    return run_engine(args) if args.engine_dir else run_flow(args)


if __name__ == "__main__":
    sys.exit(main())
