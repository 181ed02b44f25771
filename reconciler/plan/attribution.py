"""Which flows a plan action or finding is about (pure).

Used to group drift by flow and to limit `plan --base REV` to the flows a change affects.

* An action whose subject is a flow name (the job actions: deploy/update/restart/stop job) is
  about that flow; an engine replacement is about every flow it restarts.
* A topic the topology wants (a desired topic) is about the flows that produce it
  (`DesiredTopic.flows`: the remote topic's flow, or every flow sharing an internal topic).
* Any other topic is attributed by its name, as MirrorMaker 2 names topics: a remote-looking
  `<alias><sep>...` on cluster C to the flow `alias->C`, `<alias>.checkpoints.internal` on C to
  `alias->C`, `mm2-offset-syncs.<T>.internal` on C to `C->T` (or `T->C` with offset syncs on the
  target). Such a flow may no longer exist in the topology (it was removed): its name is still
  returned, so that a plan limited to a removed flow keeps that flow's leftovers.
* Anything else (an unreachable cluster, a cluster-wide capability) is about no flow: ().
"""

from __future__ import annotations

from collections.abc import Iterable

from reconciler.mirror.policy import (
    Mm2InternalKind,
    PolicyKind,
    ReplicationPolicy,
    is_internal_topic_any,
    known_policies,
    parse_mm2_internal_topic,
)
from reconciler.plan.actions import Action, Plan
from reconciler.plan.desired import DesiredState
from reconciler.plan.engine_actions import ReplaceEngine
from reconciler.plan.findings import Finding
from reconciler.plan.job_actions import JobAction
from reconciler.topology.flow_id import FlowId, flow_ends, flow_name
from reconciler.topology.model import Topology


def _separators(topology: Topology) -> list[str]:
    return sorted({f.policy.separator for f in topology.flows if f.policy.kind is PolicyKind.DEFAULT}) or ["."]


def flows_of_topic(cluster: str, topic: str, desired: DesiredState | None, topology: Topology) -> tuple[str, ...]:
    """The flows a topic on `cluster` belongs to (see the module doc); () when none can be told."""
    if desired is not None:
        d = desired.get(cluster, topic)
        if d is not None and d.flows:
            return tuple(d.flows)
    names = {f.name for f in topology.flows}
    policies = known_policies(topology.flows)
    m = parse_mm2_internal_topic(topic, policies)
    if m is not None and m.kind is Mm2InternalKind.CHECKPOINTS:
        return (flow_name(m.alias, cluster),) if m.alias in topology.clusters else ()
    if m is not None:
        other = m.alias
        candidates = [flow_name(cluster, other), flow_name(other, cluster)]
        known = [c for c in candidates if c in names]
        if known:
            return tuple(known)
        return (candidates[0],) if other in topology.clusters else ()
    if is_internal_topic_any(topic, policies):
        return ()
    for sep in _separators(topology):
        alias = ReplicationPolicy(PolicyKind.DEFAULT, sep).topic_source(topic)
        if alias is not None and alias in topology.clusters and alias != cluster:
            return (flow_name(alias, cluster),)
    return ()


def _flow_subject(subject: str, topology: Topology) -> str | None:
    if not FlowId.looks_like(subject):
        return None
    source, target, _ = flow_ends(subject)
    if any(f.name == subject for f in topology.flows) or (source in topology.clusters and target in topology.clusters):
        return subject
    return None


def action_flows(action: Action, desired: DesiredState | None, topology: Topology) -> tuple[str, ...]:
    if isinstance(action, ReplaceEngine) or (isinstance(action, JobAction) and action.flow):
        return action.flows  # an engine replacement: every flow it restarts
    subject = action.subject
    named = _flow_subject(subject, topology)
    if named:
        return (named,)
    return flows_of_topic(action.cluster, subject, desired, topology) if subject else ()


def finding_flows(finding: Finding, desired: DesiredState | None, topology: Topology) -> tuple[str, ...]:
    if not finding.subject:
        return ()
    named = _flow_subject(finding.subject, topology)
    if named:
        return (named,)
    return flows_of_topic(finding.cluster, finding.subject, desired, topology)


def restrict(plan: Plan, flows: Iterable[str], desired: DesiredState | None, topology: Topology) -> Plan:
    """The plan limited to `flows`: their actions, their findings, and findings about no flow
    (an unreachable cluster, a capability) that concern a cluster one of those flows touches.

    Scope and fingerprint stay the full plan's: a limited plan saved with `--out` is refused as
    stale when anything the full plan depended on changed.
    """
    wanted = set(flows)
    ends = {a for name in wanted for a in flow_ends(name)[:2]}
    actions = [a for a in plan.actions if wanted & set(action_flows(a, desired, topology))]
    findings = []
    for f in plan.findings:
        fl = finding_flows(f, desired, topology)
        if (wanted & set(fl)) or (not fl and f.cluster in ends):
            findings.append(f)
    return Plan(
        actions,
        findings,
        list(plan.clusters),
        {k: list(v) for k, v in plan.scope.items()},
        plan.fingerprint,
        plan.topology,
        [r for r in plan.permissions if r.cluster in ends],
        plan.environment,
    )
