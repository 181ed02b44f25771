"""spark-submit entry point of a replication job (one flow).

    spark-submit jobs/mirror_job.py --spec /path/to/west-east.json [--master local[2]]

Exit codes: 0 stopped (SIGTERM/SIGINT or --max-seconds), 1 failed, 3 the spec file changed in a
field that needs a restart (the deployer restarts the job with the new spec).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

for _root in Path(__file__).resolve().parents:  # the project, when run from a checkout that is not installed
    if (_root / "reconciler" / "__init__.py").is_file():
        sys.path.insert(0, str(_root))
        break

from reconciler import settings  # noqa: E402
from reconciler.contract.deployers import RUNTIME_FILE  # noqa: E402
from reconciler.contract.metrics import AUTO_PORT  # noqa: E402
from reconciler.contract.spec import JobSpec  # noqa: E402
from reconciler.replication.driver import ReplicationDriver, SparkExecutor, configure_logging  # noqa: E402
from reconciler.replication.lifeline import watch_parent  # noqa: E402
from reconciler.replication.session import build_session  # noqa: E402

log = logging.getLogger("reconciler.replication")


def _orphaned(parent: int) -> None:
    """The JVM that started this driver is gone: nothing of this job may keep copying."""
    log.error("the Spark JVM (pid %d) that started this driver is gone: the job ends", parent)
    logging.shutdown()
    os._exit(1)


def write_runtime(metrics_port: int | None, application_id: str | None) -> None:
    """Say who this job is in its job directory (the deployer reads it): instance, driver pid, metrics port and
    Spark application id (on a standalone cluster the executors are the application's: they end with it)."""
    job_dir = settings.job_dir()
    if not job_dir:
        return
    path = job_dir / RUNTIME_FILE
    record = {
        "instance_id": settings.job_instance(),
        "pid": os.getpid(),
        "metrics_port": metrics_port,
        "application_id": application_id,
        "at": time.time(),
    }
    try:
        tmp = path.with_name(f"{RUNTIME_FILE}.tmp{os.getpid()}")
        tmp.write_text(json.dumps(record, sort_keys=True) + "\n")
        tmp.replace(path)
    except OSError as exc:
        log.warning("cannot write %s: %s", path, exc)


def main(argv: list[str] | None = None) -> int:
    if settings.check():  # a malformed RECONCILER_* variable: one line each, exit 1, before Spark starts
        return 1
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", required=True, help="job spec JSON file (re-read every refresh interval)")
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
    args = ap.parse_args(argv)
    watch_parent(_orphaned)
    spec = JobSpec.load(args.spec)
    configure_logging(args.log_level, spec)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    session = build_session(spec, args.master)
    try:
        driver = ReplicationDriver(Path(args.spec), SparkExecutor(session.sparkContext), install_signal_handlers=True)
        if args.metrics_port:
            driver.metrics.serve(0 if args.metrics_port == AUTO_PORT else args.metrics_port)
            log.info("metrics on http://0.0.0.0:%d/metrics", driver.metrics.port)
        write_runtime(driver.metrics.port, session.sparkContext.applicationId)
        return driver.run(max_seconds=args.max_seconds)
    finally:
        session.stop()


if __name__ == "__main__":
    sys.exit(main())
