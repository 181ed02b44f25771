"""Moved to reconciler.contract.spec (the job spec is a contract between planning and the job)."""

from reconciler.contract.spec import *  # noqa: F401,F403
from reconciler.contract.spec import (  # noqa: F401
    EXIT_RESTART_REQUIRED,
    HOT_RELOADABLE,
    OFFSET_RESET_CHOICES,
    SPEC_VERSION,
    STATUS_TOPIC,
    ClusterSpec,
    JobSpec,
    job_group,
    offset_syncs_topic_name,
    restart_fields_of,
    transactional_id,
)
