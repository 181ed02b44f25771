"""Moved to reconciler.contract.status (the status record is a contract between the job and the reconciler)."""

from reconciler.contract.status import *  # noqa: F401,F403
from reconciler.contract.status import (  # noqa: F401
    LatencyWindow,
    RateWindow,
    StatusPublisher,
    percentiles,
    read_all_job_status,
    read_job_status,
)
