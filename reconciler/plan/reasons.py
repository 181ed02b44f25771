"""What an action or a finding is about, as a type: renderers and drift read this, never the prose.

Every Action has a `reason_kind` (a class default, or per instance for job actions: a restart is
for a job that is down, a spec it cannot take live, or changed deployment settings; an engine replacement for
changed engine settings, an engine that runs twice or one that is down, and each flow it restarts has its own);
every Finding has one (given where it is made, else derived from its FindingKind).
"""

from __future__ import annotations

import enum


class ReasonKind(str, enum.Enum):
    TOPIC_MISSING = "topic-missing"  # a remote/internal topic the topology wants does not exist
    TOPIC_EXTRA = "topic-extra"  # a topic exists that no flow wants (prune, unmanaged, retained)
    PARTITIONS = "partitions"  # partition count (or replication factor) differs
    CONFIG = "config"  # a topic config differs
    ACL = "acl"  # an ACL differs, or ACLs could not be compared
    CLUSTER = "cluster"  # the cluster itself: unreachable, lacks an API
    JOB_MISSING = "job-missing"  # no job runs an enabled flow
    JOB_DOWN = "job-down"  # the job is down, failed or asks for a restart
    JOB_DUPLICATED = "job-duplicated"  # more than one instance of a flow's job runs (an orphan, a leftover)
    JOB_STALE_SPEC = "job-stale-spec"  # the job runs another spec than the topology's
    JOB_DEPLOYMENT = "job-deployment"  # the flow's deployer or its settings changed
    JOB_ENGINE_SETTINGS = "job-engine-settings"  # an engine's own settings changed: it is replaced (ReplaceEngine)
    JOB_WITH_ENGINE = "job-with-engine"  # the flow restarts because its engine is replaced (nothing of its own changed)
    JOB_UNWANTED = "job-unwanted"  # a job runs a flow the topology no longer has
    JOB_STATUS_UNKNOWN = "job-status-unknown"  # the job's status records could not be read
    JOB_PENDING_SYNC = "job-pending-sync"  # rendered for a cluster to sync (GitOps), not started yet
    CONFLICT = "conflict"  # two wants disagree (flows on one topic, a job deployed elsewhere)
    OWNERSHIP = "ownership"  # an owner's claim of a remote topic is not recorded yet, or is left of a deleted one
    OTHER = "other"

    @property
    def is_job(self) -> bool:
        return self.value.startswith("job-")
