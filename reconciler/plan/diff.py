"""Stage (pure): DesiredState x LiveState -> Plan.

What the reconciler owns, and so may change: the desired topics (remote topics of enabled flows,
MM2 internal topics), on those the config keys their flow copies (internal topics: only the keys
we set) and, with ACL sync, their literal ACLs. Deletion candidates are "remote-looking" topics:
`<alias><sep>...` where alias is another cluster of the topology (default policy; identity-policy
topics cannot be told from local ones and are never pruned) that no enabled flow wants. They are
deleted only with `prune.topics: true` and when a flow alias->cluster exists (else also
`prune.flows: true`: the flow was removed), and kept anyway when a disabled flow would produce
them, while they still feed a desired topic, or while any cluster cannot be read. Nothing is
ever recreated.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from reconciler.mirror.policy import PolicyKind, ReplicationPolicy, is_internal_topic_any, known_policies
from reconciler.plan import ownership
from reconciler.plan.actions import (
    Action,
    AddPartitions,
    CreateAcl,
    CreateTopic,
    DeleteAcl,
    DeleteConfig,
    DeleteTopic,
    Plan,
    SetConfig,
)
from reconciler.plan.desired import DesiredState, DesiredTopic, TopicRole
from reconciler.plan.findings import Finding, FindingKind, Severity
from reconciler.plan.permissions import RequiredAcl, Role, enforcement, missing, required_acls
from reconciler.plan.reasons import ReasonKind
from reconciler.state.live import (
    AclBinding,
    AclOperation,
    AclPattern,
    AclPermission,
    AclResource,
    AclUnavailable,
    ClusterState,
    LiveState,
)
from reconciler.topology.model import Topology
from reconciler.topology.principals import WILDCARD_PRINCIPAL


@dataclass
class _Out:
    actions: list[Action] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def find(
        self,
        severity: Severity,
        kind: FindingKind,
        cluster: str,
        subject: str,
        message: str,
        hint: str | None = None,
        why: ReasonKind | None = None,
    ) -> None:
        self.findings.append(Finding(severity, kind, cluster, subject, message, hint, why))


def _create(t: DesiredTopic, out: _Out) -> None:
    configs = tuple(sorted(t.configs.items())) if t.manage_configs else ()
    out.actions.append(
        CreateTopic(t.cluster, t.reason, t.name, t.partitions, t.replication_factor, configs, t.role.value)
    )


def _partitions(t: DesiredTopic, live_partitions: int, c: ClusterState, out: _Out) -> None:
    where = f"{t.cluster}:{t.name}"
    if t.partitions > live_partitions:
        if c.capabilities.create_partitions:
            src = f"{t.upstream[0]}:{t.upstream[1]}" if t.upstream else "MirrorMaker 2"
            out.actions.append(
                AddPartitions(t.cluster, f"{src} has {t.partitions} partitions", t.name, live_partitions, t.partitions)
            )
        else:
            out.find(
                Severity.WARNING,
                FindingKind.UNSUPPORTED,
                t.cluster,
                t.name,
                f"{where} has {live_partitions} partitions but needs {t.partitions}; "
                f"cluster {t.cluster} does not support CreatePartitions",
                hint="add the partitions with the platform's own tooling; records of the new source partitions "
                "cannot be replicated until then",
                why=ReasonKind.PARTITIONS,
            )
    elif t.partitions < live_partitions and t.role is TopicRole.REMOTE:
        out.find(
            Severity.WARNING,
            FindingKind.IMPOSSIBLE,
            t.cluster,
            t.name,
            f"{where} has {live_partitions} partitions, more than its source's {t.partitions}; "
            "Kafka cannot remove partitions",
            hint="the extra partitions stay empty and can be ignored; to match exactly, delete the remote topic "
            "(losing its records) and let the next apply recreate it",
        )


def _replication_factor(t: DesiredTopic, live_rf: int, out: _Out) -> None:
    if t.replication_factor != -1 and live_rf != t.replication_factor:
        out.find(
            Severity.WARNING,
            FindingKind.IMPOSSIBLE,
            t.cluster,
            t.name,
            f"{t.cluster}:{t.name} has replication factor {live_rf}, the flow wants {t.replication_factor}; "
            "a replication factor cannot be changed by an admin API call",
            hint="reassign the partitions with kafka-reassign-partitions.sh (or your platform's tooling)",
        )


def _configs(t: DesiredTopic, live_configs: dict, c: ClusterState, prune: bool, out: _Out) -> None:
    if not t.manage_configs:
        return
    src = f"{t.upstream[0]}:{t.upstream[1]}" if t.upstream else "MirrorMaker 2 internal topic"
    for key, value in sorted(t.configs.items()):
        if live_configs.get(key) != value:
            if not c.capabilities.alter_configs:
                out.find(
                    Severity.WARNING,
                    FindingKind.UNSUPPORTED,
                    t.cluster,
                    t.name,
                    f"{t.cluster}:{t.name} should have {key}={value}; cluster {t.cluster} does not support "
                    "IncrementalAlterConfigs",
                    why=ReasonKind.CONFIG,
                )
                continue
            out.actions.append(
                SetConfig(t.cluster, f"{src} sets {key}={value}", t.name, key, value, live_configs.get(key))
            )
    for key in sorted(set(live_configs) - set(t.configs)):
        if not t.owns_config(key):
            continue
        if prune:
            out.actions.append(
                DeleteConfig(
                    t.cluster, f"{src} does not set {key} (prune.configs is on)", t.name, key, live_configs[key]
                )
            )
        else:
            out.find(
                Severity.INFO,
                FindingKind.PRUNE_DISABLED,
                t.cluster,
                t.name,
                f"{t.cluster}:{t.name} sets {key}={live_configs[key]!r}, which {src} does not; kept",
                hint="set `prune: {configs: true}` to remove configs the source no longer sets",
                why=ReasonKind.CONFIG,
            )


def _acls(t: DesiredTopic, c: ClusterState, live_acls: dict, writer: str | None, prune: bool, out: _Out) -> None:
    if t.acls is None or c.acls is None or c.acls_unavailable is not None:
        return
    have = {a for a in live_acls.get(t.name, ()) if a.pattern is AclPattern.LITERAL}
    src = f"{t.upstream[0]}:{t.upstream[1]}" if t.upstream else "the flow"
    for a in sorted(t.acls - have):
        why = (
            "only the replication principal may write remote topics"
            if a.operation is AclOperation.WRITE
            else f"ACL sync from {src}"
        )
        out.actions.append(CreateAcl(t.cluster, why, a))
    for a in sorted(have - t.acls):
        foreign_writer = _is_foreign_writer(a, writer)
        if prune:
            why = (
                "nobody but the replication principal may write a remote topic"
                if foreign_writer
                else f"not granted on {src} (prune.acls is on)"
            )
            out.actions.append(DeleteAcl(t.cluster, why, a))
        elif foreign_writer:
            out.find(
                Severity.WARNING,
                FindingKind.SECURITY,
                t.cluster,
                t.name,
                f"{a.principal} may {a.operation.value} remote topic {t.cluster}:{t.name}; only the replication "
                "principal should write it",
                hint="set `prune: {acls: true}` to let apply remove this ACL",
            )
        else:
            out.find(
                Severity.INFO,
                FindingKind.PRUNE_DISABLED,
                t.cluster,
                t.name,
                f"ACL {a.describe()} is not granted on {src}; kept",
                hint="set `prune: {acls: true}` to remove ACLs the source does not grant",
                why=ReasonKind.ACL,
            )


def _is_foreign_writer(a: AclBinding, writer: str | None) -> bool:
    """An ALLOW of WRITE (or ALL) on a topic for anyone but the replication principal (`User:*` is anyone)."""
    return (
        a.resource is AclResource.TOPIC
        and a.permission is AclPermission.ALLOW
        and a.operation in (AclOperation.WRITE, AclOperation.ALL)
        and a.principal != writer
    )


def _covers(a: AclBinding, topic: str) -> bool:
    """Whether a topic ACL's resource pattern covers `topic`: its name, the wildcard `*`, or a matching prefix."""
    if a.pattern is AclPattern.PREFIXED:
        return topic.startswith(a.topic)
    return a.pattern is AclPattern.LITERAL and a.topic in (topic, "*")


def _foreign_writers(cluster: str, c: ClusterState, topics: list[DesiredTopic], writer: str | None, out: _Out) -> None:
    """ "Only the replicator writes remote topics": the ACLs that let anyone else WRITE (or ALL) a remote topic through
    a wildcard (`*`) or PREFIXED resource, or (without ACL sync, which handles them in `_acls`) a literal one; a
    `User:*` principal is anyone. One warning per ACL, naming the remote topics it opens. Apply never deletes them
    (a PREFIXED or `*` ACL covers other topics too; without ACL sync the topic's ACLs are not the reconciler's)."""
    if c.acls is None or c.acls_unavailable is not None:
        return
    remote = [t for t in topics if t.role is TopicRole.REMOTE and (writer is not None or t.acls is not None)]
    for a in sorted(c.acls):
        if not _is_foreign_writer(a, writer):
            continue
        literal = a.pattern is AclPattern.LITERAL and a.topic != "*"
        opened = [t.name for t in remote if _covers(a, t.name) and not (literal and t.acls is not None)]
        if not opened:
            continue
        shown = ", ".join(opened[:3]) + (f" and {len(opened) - 3} more" if len(opened) > 3 else "")
        who = "anyone" if a.principal == WILDCARD_PRINCIPAL else a.principal
        out.find(
            Severity.WARNING,
            FindingKind.SECURITY,
            cluster,
            opened[0] if literal else a.topic,
            f"{a.describe()} lets {who} {a.operation.value} {len(opened)} remote topic(s) on {cluster} ({shown}); only "
            f"the replication principal {writer or '(none declared)'} should write them",
            hint="narrow the ACL so that it does not cover the remote topics (they start with `<source alias>.`), or "
            "remove it; apply does not delete it (docs/security.md, ACL sync)",
            why=ReasonKind.ACL,
        )


def _capability_findings(cluster: str, c: ClusterState, topics: list[DesiredTopic], out: _Out) -> None:
    acl_topics = [t for t in topics if t.acls]
    if acl_topics and (c.acls is None or c.acls_unavailable is not None):
        why = c.acls_unavailable or AclUnavailable.NO_API
        out.find(
            Severity.WARNING,
            FindingKind.UNSUPPORTED,
            cluster,
            "",
            f"ACL sync for {len(acl_topics)} topic(s) on {cluster} skipped: {why.explain(cluster)}"
            + (f"; probe: {c.capabilities.probe_error}" if c.capabilities.probe_error else ""),
            hint=why.hint(),
            why=ReasonKind.ACL,
        )
    if any(t.manage_configs for t in topics) and not c.capabilities.describe_configs:
        out.find(
            Severity.WARNING,
            FindingKind.UNSUPPORTED,
            cluster,
            "",
            f"cluster {cluster} does not support DescribeConfigs: topic configs are not compared",
            why=ReasonKind.CONFIG,
        )


def _separators(topology: Topology) -> list[str]:
    return sorted({f.policy.separator for f in topology.flows if f.policy.kind is PolicyKind.DEFAULT}) or ["."]


def remote_source(name: str, cluster: str, topology: Topology, separators: list[str] | None = None) -> str | None:
    """The alias a topic claims to come from (`<alias><sep>...`), when it is another cluster of the topology: the
    one rule of which topics are deletion candidates (the planner's `_prune_topics`, and the executor's guard,
    reconciler/apply/guard.py)."""
    separators = _separators(topology) if separators is None else separators
    if is_internal_topic_any(name, known_policies(topology.flows)):
        return None
    for sep in separators:
        alias = ReplicationPolicy(PolicyKind.DEFAULT, sep).topic_source(name)
        if alias in topology.clusters and alias != cluster:
            return alias
    return None


@dataclass(frozen=True)
class _Prune:
    """What the deletion candidates of one plan are judged against."""

    upstreams: set[tuple[str, str] | None]  # (cluster, topic) of every desired topic's upstream
    disabled: set[tuple[str, str]]  # (source, target) of the disabled flows
    enabled: set[tuple[str, str]]
    blind: list[str]  # the clusters that could not be read


def _prune_topics(
    topology: Topology, desired: DesiredState, live: LiveState, scope: dict[str, set[str]], out: _Out
) -> None:
    separators = _separators(topology)
    judge = _Prune(
        {t.upstream for t in desired.all() if t.upstream},
        {(f.source, f.target) for f in topology.flows if not f.enabled},
        {(f.source, f.target) for f in topology.flows if f.enabled},
        sorted(a for a, c in live.clusters.items() if not c.reachable),
    )
    for cluster, c in sorted(live.clusters.items()):
        if not c.reachable:
            continue
        for name in sorted(c.topics):
            if desired.get(cluster, name) is not None:
                continue
            src = remote_source(name, cluster, topology, separators)
            if src is None:
                continue
            scope.setdefault(cluster, set()).add(name)
            _prune_candidate(topology, judge, c, name, src, out)


def _retained(judge: _Prune, cluster: str, name: str, src: str) -> Finding | None:
    """Why an unwanted remote topic is kept for safety, whatever prune says: its flow is disabled, it feeds another
    flow, or a cluster cannot be read."""
    where = f"{cluster}:{name}"
    if (src, cluster) in judge.disabled:
        why = f"{where} belongs to disabled flow {src}->{cluster}; kept while the flow is disabled"
    elif (cluster, name) in judge.upstreams:
        why = f"{where} is no longer replicated from {src} but still feeds a flow out of {cluster}; kept"
    elif judge.blind:
        why = f"{where} looks unwanted, but nothing is pruned while {', '.join(judge.blind)} cannot be read"
    else:
        return None
    return Finding(Severity.INFO, FindingKind.RETAINED, cluster, name, why)


def _prune_candidate(topology: Topology, judge: _Prune, c: ClusterState, name: str, src: str, out: _Out) -> None:
    """Delete a remote topic no enabled flow wants (prune.topics), or say why it is left alone: another owner's
    (plan/ownership.py), kept for safety, not its owner's, not a flow's of the topology, or prune is off."""
    cluster, where = c.alias, f"{c.alias}:{name}"
    kept = (
        ownership.foreign(topology, c, name)
        or _retained(judge, cluster, name, src)
        or ownership.unclaimed(topology, c, name, src)
    )
    if kept is not None:
        out.findings.append(kept)
    elif (src, cluster) not in judge.enabled and not (topology.prune.topics and topology.prune.flows):
        out.find(
            Severity.WARNING,
            FindingKind.UNMANAGED,
            cluster,
            name,
            f"{where} looks replicated from {src}, but there is no flow {src}->{cluster}; left alone",
            hint="the topics of a flow removed from the topology are deleted only with "
            "`prune: {topics: true, flows: true}`; or delete it by hand",
        )
    elif topology.prune.topics:
        out.actions.append(
            DeleteTopic(
                cluster,
                f"no enabled flow replicates it from {src} (prune.topics is on)",
                name,
                c.topics[name].partitions,
            )
        )
    else:
        out.find(
            Severity.WARNING,
            FindingKind.UNMANAGED,
            cluster,
            name,
            f"{where} looks replicated from {src} but no enabled flow wants it; it would be deleted with "
            "`prune: {topics: true}`",
            hint="delete it by hand, or enable prune.topics to let apply delete it",
        )


def _check_permissions(
    topology: Topology, desired: DesiredState, live: LiveState, actions: list[Action], out: _Out
) -> list[RequiredAcl]:
    """The rights the flows need on each cluster that enforces ACLs (plan/permissions.py), checked against its ACLs
    as this plan leaves them (its own ACL creations and deletions counted): each one missing is an error naming the
    ACL, so apply refuses and nothing deploys. Returns the rights checked (the plan's `permissions`)."""
    own: dict[str, set[AclBinding]] = {}
    for t in desired.all():
        if t.acls is not None:
            own.setdefault(t.cluster, set()).update(t.acls)
    created: dict[str, set[AclBinding]] = {}
    deleted: dict[str, set[AclBinding]] = {}
    for a in actions:
        if isinstance(a, CreateAcl):
            created.setdefault(a.cluster, set()).add(a.acl)
        elif isinstance(a, DeleteAcl):
            deleted.setdefault(a.cluster, set()).add(a.acl)
    required: list[RequiredAcl] | None = None
    checked: list[RequiredAcl] = []
    if any(not live.cluster(a).reachable for a in topology.clusters):
        return checked  # an error already; the desired state is incomplete
    for alias in sorted(topology.clusters):
        c = live.clusters.get(alias)
        if c is None or not c.reachable:
            continue
        enf = enforcement(alias, topology, c, frozenset(own.get(alias, ())))
        if not enf.checked:
            continue
        if required is None:
            required = required_acls(topology, desired)
        mine = [r for r in required if r.cluster == alias]
        if not mine:
            continue
        if not enf.readable:
            checked += mine
            why = (c.acls_unavailable or AclUnavailable.NO_API).explain(alias)
            out.find(
                Severity.ERROR,
                FindingKind.PERMISSION,
                alias,
                "",
                f"cluster {alias} enforces ACLs ({enf.why}) but they cannot be read ({why}): the "
                f"{len(mine)} rights the flows need there cannot be checked",
                hint="grant the reconciler's principal DESCRIBE on the cluster, or set `acls_enforced: false` on the "
                "cluster if it does not enforce ACLs",
                why=ReasonKind.ACL,
            )
            continue
        for role in sorted({r.role for r in mine if r.principal is None and r.role is Role.REPLICATION}):
            out.find(
                Severity.WARNING,
                FindingKind.PERMISSION,
                alias,
                "",
                f"cluster {alias} enforces ACLs ({enf.why}) but declares no {role.field}: the rights of its "
                "replication jobs are not checked",
                hint=f"set `clusters.{alias}.{role.field}` (docs/security.md)",
                why=ReasonKind.ACL,
            )
        acls = (set(c.acls or ()) | created.get(alias, set())) - deleted.get(alias, set())
        lacking = missing(mine, acls)
        gone = set(lacking)
        checked += [replace(r, granted=r not in gone) if r.principal is not None else r for r in mine]
        for r in lacking:
            out.find(
                Severity.ERROR,
                FindingKind.PERMISSION,
                alias,
                r.name,
                f"{r.describe()} is missing on cluster {alias}, which enforces ACLs ({enf.why}): "
                f"{r.who} ({r.role.value} principal) needs it: {r.why}",
                hint=f"kafka-acls.sh --bootstrap-server <{alias}> {r.kafka_acls()}; `reconciler permissions` lists "
                "every right the flows need (docs/security.md)",
                why=ReasonKind.ACL,
            )
    return checked


def diff(desired: DesiredState, live: LiveState, topology: Topology) -> Plan:
    out = _Out(findings=list(desired.findings))
    scope = {k: set(v) for k, v in desired.consulted.items()}
    for alias, c in sorted(live.clusters.items()):
        scope.setdefault(alias, set())
        if not c.reachable:
            out.find(
                Severity.ERROR,
                FindingKind.UNREACHABLE,
                alias,
                "",
                f"cluster {alias} could not be read: {c.error}",
                hint="check bootstrap_servers, credentials (${ENV_VAR}s) and network; nothing can be planned for it",
            )
    for cluster in sorted(desired.topics):
        c = live.cluster(cluster)
        if not c.reachable:
            continue
        topics = [desired.topics[cluster][n] for n in sorted(desired.topics[cluster])]
        _capability_findings(cluster, c, topics, out)
        acls = c.acls_by_topic()
        writer = topology.clusters[cluster].replication_principal if cluster in topology.clusters else None
        _foreign_writers(cluster, c, topics, writer, out)
        for t in topics:
            lt = c.topics.get(t.name)
            if lt is None:
                _create(t, out)
            else:
                _partitions(t, lt.partitions, c, out)
                _replication_factor(t, lt.replication_factor, out)
                if c.capabilities.describe_configs:
                    _configs(t, dict(lt.configs), c, topology.prune.configs, out)
            _acls(t, c, acls, writer, topology.prune.acls, out)  # ACLs may exist before their topic does
    _prune_topics(topology, desired, live, scope, out)
    deleted = [(a.cluster, a.topic) for a in out.actions if isinstance(a, DeleteTopic)]
    claims, claim_findings = ownership.claim_actions(topology, desired, live, deleted)
    out.actions += claims
    out.findings += claim_findings
    permissions = _check_permissions(topology, desired, live, out.actions, out)
    scope_lists = {k: sorted(v) for k, v in sorted(scope.items())}
    return Plan(
        out.actions,
        out.findings,
        sorted(live.clusters),
        scope_lists,
        live.fingerprint(scope_lists),
        topology.name,
        permissions,
        topology.environment,
    )
