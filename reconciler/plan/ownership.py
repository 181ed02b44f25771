"""Ownership in the plan (pure): which remote topics a topology's `owner:` claims, and which deletions the owners'
claims forbid (state/ownership.py holds the records; docs/environments.md, "Ownership").

* A topology with an owner claims every remote topic it wants (a `record_ownership` action per cluster while a
  claim is missing), and withdraws the claims of the topics it deletes (or that are gone). Remote heartbeats topics
  are shared by every flow of their pair, whoever owns it: nobody claims them.
* Prune (plan/diff.py `_prune_topics`) deletes a remote topic only when no other owner claims it and, for a topology
  with an owner, when that owner does: two teams' topologies applied alternately to one cluster never delete each
  other's topics. A topology without an owner prunes as before, but never a topic an owner claims.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from reconciler.plan.actions import Action, RecordOwnership
from reconciler.plan.desired import DesiredState, DesiredTopic, TopicRole
from reconciler.plan.findings import Finding, FindingKind, Severity
from reconciler.plan.reasons import ReasonKind
from reconciler.state.live import ClusterState, LiveState
from reconciler.topology.model import Flow, Topology


def reads_claims(topology: Topology) -> bool:
    """Whether planning `topology` needs the owners' claims: it has an owner, or it may delete topics."""
    return topology.owner is not None or topology.prune.topics


def others(topology: Topology, claims: frozenset[str]) -> list[str]:
    """The owners but the topology's that claim a topic (sorted)."""
    return sorted(claims - {topology.owner} if topology.owner else claims)


def _owned(flows: Mapping[str, Flow], t: DesiredTopic) -> bool:
    """Whether an owner claims a desired topic: a remote topic, but for a remote heartbeats topic (every flow of a
    pair replicates its source's heartbeats, whoever owns it: shared, never claimed)."""
    if t.role is not TopicRole.REMOTE:
        return False
    return not any(flows[f].policy.is_heartbeats_topic(t.name) for f in t.flows if f in flows)


def foreign(topology: Topology, c: ClusterState, name: str) -> Finding | None:
    """An unwanted remote topic of cluster `c` that another owner claims: left alone, whatever prune says."""
    theirs = others(topology, c.owners.get(name, frozenset())) if c.owners is not None else []
    if not theirs:
        return None
    return Finding(
        Severity.INFO,
        FindingKind.RETAINED,
        c.alias,
        name,
        f"{c.alias}:{name} belongs to owner {', '.join(theirs)} (another topology); left alone",
        why=ReasonKind.OWNERSHIP,
    )


def unclaimed(topology: Topology, c: ClusterState, name: str, src: str) -> Finding | None:
    """An unwanted remote topic prune may not delete for want of a claim: the claims of `c` cannot be read (and the
    topology reads them), or the topology has an owner that does not claim it."""
    where = f"{c.alias}:{name}"
    if c.owners is None and reads_claims(topology):
        return Finding(
            Severity.INFO,
            FindingKind.RETAINED,
            c.alias,
            name,
            f"{where} looks unwanted, but nothing is pruned while the owners' claims on {c.alias} cannot be read",
            why=ReasonKind.OWNERSHIP,
        )
    if topology.owner is None or c.owners is None or topology.owner in c.owners.get(name, frozenset()):
        return None
    return Finding(
        Severity.WARNING,
        FindingKind.UNMANAGED,
        c.alias,
        name,
        f"{where} looks replicated from {src} but owner {topology.owner} does not claim it (it was created before "
        "the topology had an owner, or by another topology or tool); left alone",
        hint="prune deletes only what its owner created: delete it by hand if nobody needs it",
        why=ReasonKind.OWNERSHIP,
    )


def claim_actions(
    topology: Topology, desired: DesiredState, live: LiveState, deleted: Iterable[tuple[str, str]]
) -> tuple[list[Action], list[Finding]]:
    """The `record_ownership` actions of a topology with an owner: per reachable cluster, the remote topics it wants
    and has not claimed, and its claims of the topics this plan deletes (`deleted`: (cluster, topic)) or that are
    gone from the cluster."""
    owner = topology.owner
    if owner is None:
        return [], []
    flows = {f.name: f for f in topology.flows}
    gone: dict[str, set[str]] = {}
    for cluster, topic in deleted:
        gone.setdefault(cluster, set()).add(topic)
    actions: list[Action] = []
    findings: list[Finding] = []
    for alias, c in sorted(live.clusters.items()):
        if not c.reachable:
            continue
        wanted = sorted(t.name for t in desired.topics.get(alias, {}).values() if _owned(flows, t))
        if c.owners is None:
            if wanted:
                findings.append(
                    Finding(
                        Severity.WARNING,
                        FindingKind.UNSUPPORTED,
                        alias,
                        "",
                        f"the owners' claims on cluster {alias} cannot be read: the {len(wanted)} remote topics of "
                        f"owner {owner} there are not recorded as its own, and nothing is pruned there",
                        hint="grant the reconciler's principal READ on the topic reconciler.lease.internal",
                        why=ReasonKind.OWNERSHIP,
                    )
                )
            continue
        for name in wanted:
            shared = others(topology, c.owners.get(name, frozenset()))
            if shared:
                findings.append(
                    Finding(
                        Severity.WARNING,
                        FindingKind.CONFLICT,
                        alias,
                        name,
                        f"{alias}:{name} is wanted by owner {owner} and claimed by {', '.join(shared)} too: two "
                        "topologies replicate into it (their jobs write it twice), and neither prunes it",
                        hint="leave the topic to one of the topologies (narrow the other's topic filter)",
                        why=ReasonKind.OWNERSHIP,
                    )
                )
        mine = {t for t, owners in c.owners.items() if owner in owners}
        claim = tuple(t for t in wanted if t not in mine)
        release = tuple(
            sorted(t for t in mine if t in gone.get(alias, ()) or (t not in c.topics and desired.get(alias, t) is None))
        )
        if claim or release:
            reason = " and ".join(
                p
                for p in (
                    f"owner {owner} has not claimed {len(claim)} of its remote topics yet" if claim else "",
                    f"{len(release)} of its claimed topics are deleted" if release else "",
                )
                if p
            )
            actions.append(RecordOwnership(alias, reason, owner, claim, release))
    return actions, findings
