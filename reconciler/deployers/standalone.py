"""`spark-standalone` deployer: `spark-submit --master spark://HOST:PORT` in client mode.

Spark standalone cannot run Python drivers in cluster mode, so the driver is a local detached
process exactly as with the `local` deployer (same state directory, same graceful stop); the
executors, and so the Python workers that copy the records, run on the cluster's workers. The
workers need the project importable (a shared checkout, an installed package, or `--py-files`)
and the `${ENV_VAR}`s the spec references (`spark.executorEnv.NAME` in `job.spark_conf`, or the
workers' environment): see docs/jobs.md.
"""

from __future__ import annotations

from reconciler.adapters.base import OpResult
from reconciler.contract.deployers import SPARK_STANDALONE
from reconciler.contract.spec import JobSpec
from reconciler.deployers.local import ProcessDeployer


class StandaloneDeployer(ProcessDeployer):
    name = SPARK_STANDALONE

    def refuse(self, spec: JobSpec) -> OpResult | None:
        if not spec.engine.master.startswith("spark://"):
            return OpResult.failed(
                f"flow {spec.flow}: the spark-standalone deployer needs a spark://HOST:PORT master, not {spec.engine.master!r}"
            )
        return None
