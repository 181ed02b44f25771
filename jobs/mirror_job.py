"""spark-submit entry point of a replication job (one flow).

    spark-submit jobs/mirror_job.py --spec /path/to/west-east.json [--master local[2]]

Exit codes: 0 stopped (SIGTERM/SIGINT or --max-seconds), 1 failed, 3 the spec file changed in a
field that needs a restart (the deployer restarts the job with the new spec).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

for _root in Path(__file__).resolve().parents:  # the project, when run from a checkout that is not installed
    if (_root / "reconciler" / "__init__.py").is_file():
        sys.path.insert(0, str(_root))
        break

from reconciler.contract.spec import JobSpec  # noqa: E402
from reconciler.replication.driver import ReplicationDriver, SparkExecutor, configure_logging  # noqa: E402
from reconciler.replication.metrics import metrics_port  # noqa: E402
from reconciler.replication.session import build_session  # noqa: E402


def main(argv: list[str] | None = None) -> int:
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
        default=metrics_port(),
        help="serve Prometheus metrics on this port (0: off; default $RECONCILER_METRICS_PORT, else off)",
    )
    args = ap.parse_args(argv)
    spec = JobSpec.load(args.spec)
    configure_logging(args.log_level, spec)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    session = build_session(spec, args.master)
    try:
        driver = ReplicationDriver(Path(args.spec), SparkExecutor(session.sparkContext), install_signal_handlers=True)
        if args.metrics_port:
            driver.metrics.serve(args.metrics_port)
            logging.getLogger("reconciler.replication").info("metrics on http://0.0.0.0:%d/metrics", args.metrics_port)
        return driver.run(max_seconds=args.max_seconds)
    finally:
        session.stop()


if __name__ == "__main__":
    sys.exit(main())
