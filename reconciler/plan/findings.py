"""Findings: what a plan cannot or will not do, in words, with what the user can do about it.

Errors make `plan` exit 1 and `apply` refuse; warnings and notes are shown but change nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.plan.reasons import ReasonKind


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class FindingKind(str, enum.Enum):
    UNREACHABLE = "unreachable"  # a cluster could not be read
    UNSUPPORTED = "unsupported"  # the cluster lacks an API the change needs
    IMPOSSIBLE = "impossible"  # no in-place change exists (partition decrease, replication factor)
    UNMANAGED = "unmanaged"  # looks like ours, no flow wants it; deleted only with prune
    PRUNE_DISABLED = "prune-disabled"  # a deletion the topology does not allow
    RETAINED = "retained"  # would be pruned, kept for safety (disabled flow, still a source)
    CONFLICT = "conflict"  # two flows want different things of one topic
    SECURITY = "security"  # e.g. someone else may WRITE a remote topic
    PERMISSION = "permission"  # a principal lacks an ACL the flows need, on a cluster that enforces ACLs (issue 45)
    ACLS_UNKNOWN = "acls-unknown"  # source ACLs could not be read, ACL sync skipped
    RECORD_SIZE = "record-size"  # a source topic takes records larger than its remote topic or the job's producer
    MULTIPLIED = "multiplied"  # filters multiply topics along paths past RECONCILER_MAX_REMOTE_TOPICS
    PENDING = "pending"  # a job rendered for a cluster to sync (GitOps) has not started yet
    RETENTION = "retention"  # a rate-limited flow's backlog at its cap outlives a source topic's retention (backlog.py)


@dataclass(frozen=True)
class Finding:
    severity: Severity
    kind: FindingKind
    cluster: str
    subject: str
    message: str
    hint: str | None = None
    why: ReasonKind | None = None  # what it is about, when the kind alone does not say (see reason_kind)

    @property
    def reason_kind(self) -> ReasonKind:
        return self.why or _DEFAULT_REASONS.get(self.kind, ReasonKind.OTHER)

    def sort_key(self) -> tuple:
        order = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
        return (order[self.severity], self.cluster, self.kind.value, self.subject, self.message)

    def to_dict(self) -> dict:
        return {
            "severity": self.severity.value,
            "kind": self.kind.value,
            "cluster": self.cluster,
            "subject": self.subject,
            "message": self.message,
            "hint": self.hint,
            "reason_kind": self.reason_kind.value,
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> Finding:
        return cls(
            Severity(d["severity"]),
            FindingKind(d["kind"]),
            d["cluster"],
            d["subject"],
            d["message"],
            d.get("hint"),
            ReasonKind(d["reason_kind"]) if d.get("reason_kind") else None,
        )


_DEFAULT_REASONS: dict[FindingKind, ReasonKind] = {
    FindingKind.UNREACHABLE: ReasonKind.CLUSTER,
    FindingKind.UNSUPPORTED: ReasonKind.CLUSTER,
    FindingKind.IMPOSSIBLE: ReasonKind.PARTITIONS,
    FindingKind.UNMANAGED: ReasonKind.TOPIC_EXTRA,
    FindingKind.PRUNE_DISABLED: ReasonKind.CONFIG,
    FindingKind.RETAINED: ReasonKind.TOPIC_EXTRA,
    FindingKind.CONFLICT: ReasonKind.CONFLICT,
    FindingKind.SECURITY: ReasonKind.ACL,
    FindingKind.PERMISSION: ReasonKind.ACL,
    FindingKind.ACLS_UNKNOWN: ReasonKind.ACL,
    FindingKind.PENDING: ReasonKind.JOB_PENDING_SYNC,
}
