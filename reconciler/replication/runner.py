"""Moved to reconciler.deploy.process (starting a job process is the deployers' business)."""

from reconciler.deploy.process import *  # noqa: F401,F403
from reconciler.deploy.process import LocalJob, StandaloneCluster, job_env, spark_submit  # noqa: F401
