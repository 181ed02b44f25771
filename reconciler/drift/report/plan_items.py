"""The plan's actions and findings as drift items, and the MirrorMaker 2 internal topics the plan never lists.

| category | from |
|---|---|
| missing-topic | CreateTopic actions (remote or MM2 internal topic absent) |
| extra-topic | DeleteTopic actions; `retained` findings (notes) |
| partitions | AddPartitions actions; `impossible` and `unsupported` findings about a topic's partitions |
| config | SetConfig / DeleteConfig actions; `unsupported` findings about a topic's config; `prune-disabled` findings (a key the source does not set, kept because `prune.configs` is off) |
| acl | CreateAcl / DeleteAcl actions; `security` findings; `prune-disabled` ACL findings |
| unmanaged | `unmanaged` findings; MM2 checkpoint / offset-sync topics no enabled flow uses |
| job | any other action kind whose name mentions a job (the job issue's deploy/update/restart/stop, subject = flow) |
| cluster | a cluster that could not be read (an error: exit 1) |
"""

from __future__ import annotations

from reconciler.drift.report.items import Category, DriftItem, Level
from reconciler.mirror.policy import known_policies, parse_mm2_internal_topic
from reconciler.plan.actions import Action
from reconciler.plan.attribution import action_flows, finding_flows, flows_of_topic
from reconciler.plan.desired import DesiredState
from reconciler.plan.findings import Finding, FindingKind, Severity
from reconciler.plan.reasons import ReasonKind
from reconciler.state.live import LiveState
from reconciler.topology.model import Topology

#: The drift category of what an action is about (every job reason is Category.JOB).
_REASON_CATEGORIES = {
    ReasonKind.TOPIC_MISSING: Category.MISSING_TOPIC,
    ReasonKind.TOPIC_EXTRA: Category.EXTRA_TOPIC,
    ReasonKind.PARTITIONS: Category.PARTITIONS,
    ReasonKind.CONFIG: Category.CONFIG,
    ReasonKind.ACL: Category.ACL,
}


def action_item(a: Action, desired: DesiredState | None, topology: Topology) -> DriftItem:
    rk = a.reason_kind
    category = _REASON_CATEGORIES.get(rk) or (Category.JOB if rk.is_job else Category.OTHER)
    return DriftItem(
        category,
        Level.DRIFT,
        a.cluster,
        action_flows(a, desired, topology),
        a.subject,
        a.describe(),
        "`reconciler apply` makes this change",
        a.VERB.value,
        a.to_dict(),
        a.reason,
    )


def _finding_category(f: Finding) -> tuple[Category, Level]:
    subject = bool(f.subject)
    k = f.kind
    if f.severity is Severity.ERROR:
        return (Category.CLUSTER if k is FindingKind.UNREACHABLE else Category.OTHER), Level.ERROR
    if k is FindingKind.UNMANAGED:
        return Category.UNMANAGED, Level.DRIFT
    if k is FindingKind.RETAINED:
        return Category.EXTRA_TOPIC, Level.NOTE
    if k is FindingKind.IMPOSSIBLE:
        return Category.PARTITIONS, Level.DRIFT  # partition count or replication factor of a topic
    if k is FindingKind.SECURITY:
        return Category.ACL, Level.DRIFT
    if k is FindingKind.UNSUPPORTED:
        if not subject:
            return Category.OTHER, Level.NOTE  # the cluster lacks an API: nothing differs yet
        return (Category.PARTITIONS if f.reason_kind is ReasonKind.PARTITIONS else Category.CONFIG), Level.DRIFT
    if k is FindingKind.PRUNE_DISABLED:  # differs from the source; kept only because pruning is off
        return (Category.ACL if f.reason_kind is ReasonKind.ACL else Category.CONFIG), Level.DRIFT
    if k is FindingKind.PENDING:  # a rendered job no cluster has started yet: a note, drift once it waits long
        return Category.JOB, (Level.DRIFT if f.severity is Severity.WARNING else Level.NOTE)
    if k in (FindingKind.ACLS_UNKNOWN, FindingKind.CONFLICT):
        return (Category.ACL if k is FindingKind.ACLS_UNKNOWN else Category.OTHER), Level.NOTE
    category = Category.OTHER
    return category, (Level.DRIFT if f.severity is Severity.WARNING else Level.NOTE)


def finding_item(f: Finding, desired: DesiredState | None, topology: Topology) -> DriftItem:
    category, level = _finding_category(f)
    return DriftItem(category, level, f.cluster, finding_flows(f, desired, topology), f.subject, f.message, f.hint)


def unmanaged_internal(
    topology: Topology, live: LiveState, desired: DesiredState, mentioned: set[tuple[str, str]]
) -> list[DriftItem]:
    """MM2 checkpoint and offset-sync topics that no enabled flow of the topology uses (the plan never
    touches internal topics, so it does not list them): left behind by a removed or renamed flow."""
    out = []
    policies = known_policies(topology.flows)
    for alias, c in sorted(live.clusters.items()):
        if not c.reachable:
            continue
        for name in sorted(c.topics):
            if (
                parse_mm2_internal_topic(name, policies) is None
                or desired.get(alias, name) is not None
                or (alias, name) in mentioned
            ):
                continue
            flows = flows_of_topic(alias, name, None, topology)
            owner = f" (flow {flows[0]} is not an enabled flow of the topology)" if flows else ""
            out.append(
                DriftItem(
                    Category.UNMANAGED,
                    Level.DRIFT,
                    alias,
                    flows,
                    name,
                    f"{alias}:{name} is a MirrorMaker 2 internal topic no enabled flow uses{owner}",
                    "delete it by hand once no MirrorMaker 2 or job uses it (the reconciler never "
                    "deletes internal topics)",
                )
            )
    return out
