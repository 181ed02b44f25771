"""Least privilege, stated and checked (issue 45): the ACLs each principal needs for the declared flows, and which of
them a cluster that enforces ACLs does not grant.

The one home of "who needs what". Derived from the desired state (`plan/desired.py`: the remote topics `route()`
gives over the live topics, and the flows' internal topics), never from a list per command: `reconciler permissions`
prints it, `plan` carries it (its JSON, text and Markdown, for the clusters it checks) and turns every right missing
on an enforcing cluster into an error, so that `apply` refuses and nothing deploys.

Principals, per cluster (`clusters.<alias>`):

* the replication principal (`replication_principal`): the engines of the flows out of the cluster (as source) and
  into it (as target) connect as the principal of *that* cluster;
* the reconciler's principal (`reconciler_principal`): `apply` (topics, configs, ACLs, the lease);
* the read-only plan principal (`plan_principal`): `plan` and `drift` (describe, read the status, lease and MM2
  internal topics; nothing else).

An undeclared principal is listed (`principal` None) but not checked.

Whether a cluster enforces ACLs (`Enforcement`): `acls_enforced: true|false` says so; unset, it does when its ACLs
can be read and at least one of them names one of its declared principals, other than the ACLs the reconciler's own
ACL sync writes (those the plan wants, and any LITERAL ALLOW WRITE on a topic for the replication principal). A
cluster whose ACLs never name the principals is taken not to enforce them (its brokers run without an authorizer,
with `allow.everyone.if.no.acl.found`, or the principals are `super.users`): its rights are listed, not checked.
Nothing is checked while a cluster of the topology cannot be read (the plan has that error already, and the desired
state it would check against is incomplete).

A required right is granted when an ALLOW ACL from any host (`*`) for the principal or `User:*` covers the resource
(LITERAL of its name, LITERAL `*`, or PREFIXED of a prefix of its name; a PREFIXED requirement only by a PREFIXED ACL
of a prefix of it, or `*`) with the operation, ALL, or an operation Kafka takes to imply it (READ, WRITE, DELETE,
ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS), and no DENY for the principal or `User:*`, from any
host, covers it with the operation or ALL.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.contract.spec import LEASE_TOPIC, STATUS_TOPIC, job_group_of, transactional_id_prefix
from reconciler.mirror.filters import PatternFilter
from reconciler.mirror.policy import PolicyKind
from reconciler.plan.desired import DesiredState, TopicRole, internal_topics
from reconciler.state.live import (
    CLUSTER_RESOURCE_NAME,
    AclBinding,
    AclOperation,
    AclPattern,
    AclPermission,
    AclResource,
    ClusterState,
)
from reconciler.topology.choices import OnRefusedRecord
from reconciler.topology.model import Delivery, Flow, Topology
from reconciler.topology.principals import WILDCARD_PRINCIPAL, matches

Op = AclOperation


class Role(str, enum.Enum):
    """Whose right it is: the cluster field that names the principal."""

    REPLICATION = "replication"
    RECONCILER = "reconciler"
    PLAN = "plan"

    @property
    def field(self) -> str:
        return f"{self.value}_principal"


@dataclass(frozen=True)
class RequiredAcl:
    """One right one principal needs on one cluster: an ALLOW of `operation` on a resource, from any host."""

    cluster: str
    role: Role
    principal: str | None  # None: the cluster does not declare the role's principal
    resource_type: AclResource
    pattern_type: AclPattern
    name: str
    operation: AclOperation
    why: str = field(default="", compare=False)
    #: whether the cluster grants it: None until checked (a plan checks the clusters that enforce ACLs)
    granted: bool | None = field(default=None, compare=False)

    def sort_key(self) -> tuple:
        return (
            self.cluster,
            list(Role).index(self.role),
            self.resource_type.value,
            self.name,
            self.pattern_type.value,
            self.operation.value,
        )

    @property
    def who(self) -> str:
        return self.principal or f"<{self.role.field} of {self.cluster}>"

    def resource(self) -> str:
        """`topic west.orders`, `group billing- (prefixed)`, `the cluster`."""
        if self.resource_type is AclResource.CLUSTER:
            return "the cluster"
        pattern = " (prefixed)" if self.pattern_type is AclPattern.PREFIXED else ""
        return f"{self.resource_type.label} {self.name}{pattern}"

    def describe(self) -> str:
        """`ALLOW User:mirror READ on topic orders`: the ACL, as the plan's findings name it."""
        return f"ALLOW {self.who} {self.operation.value} on {self.resource()}"

    def binding(self) -> AclBinding:
        """The ACL that grants exactly this (a principal is needed)."""
        assert self.principal is not None
        return AclBinding(
            self.name,
            self.principal,
            "*",
            self.operation,
            AclPermission.ALLOW,
            self.pattern_type,
            self.resource_type,
        )

    def kafka_acls(self) -> str:
        """The kafka-acls.sh arguments that grant it."""
        flag = {
            AclResource.TOPIC: f"--topic '{self.name}'",
            AclResource.GROUP: f"--group '{self.name}'",
            AclResource.TRANSACTIONAL_ID: f"--transactional-id '{self.name}'",
            AclResource.CLUSTER: "--cluster",
        }.get(self.resource_type, "")
        pattern = " --resource-pattern-type prefixed" if self.pattern_type is AclPattern.PREFIXED else ""
        op = "".join(w.capitalize() for w in self.operation.value.split("_"))
        return f"--add --allow-principal '{self.who}' --operation {op} {flag}{pattern}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "role": self.role.value,
            "principal": self.principal,
            "resource_type": self.resource_type.value,
            "pattern_type": self.pattern_type.value,
            "name": self.name,
            "operation": self.operation.value,
            "why": self.why,
            "granted": self.granted,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RequiredAcl:
        return cls(
            d["cluster"],
            Role(d["role"]),
            d.get("principal"),
            AclResource(d["resource_type"]),
            AclPattern(d["pattern_type"]),
            d["name"],
            AclOperation(d["operation"]),
            d.get("why", ""),
            d.get("granted"),
        )


# --- what the flows need ---------------------------------------------------------------------------------------------
#: What a role does to a topic of a kind (the replication engines, apply, plan/drift).
_SOURCE_TOPIC = (Op.READ, Op.DESCRIBE)
_REMOTE_TOPIC = (Op.CREATE, Op.WRITE, Op.DESCRIBE)
_JOB_TOPIC = (Op.CREATE, Op.WRITE, Op.READ, Op.DESCRIBE)  # written and read back: offset syncs, checkpoints, status
_EMITTED_TOPIC = (Op.CREATE, Op.WRITE, Op.DESCRIBE)  # heartbeats, dead letters
_MANAGED_TOPIC = (Op.CREATE, Op.ALTER, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)  # apply: topics it owns
_READ_ONLY_TOPIC = (Op.DESCRIBE, Op.DESCRIBE_CONFIGS)


def group_resource(groups: PatternFilter) -> tuple[AclPattern, str]:
    """The narrowest ACL resource that covers a group filter's groups: LITERAL of the name when the filter is one
    literal name, PREFIXED when it is one `<literal>.*`, else LITERAL `*` (a regular expression is no ACL pattern)."""
    if len(groups.include) == 1:
        pattern = groups.include[0]
        literal = re.fullmatch(r"((?:[A-Za-z0-9_-]|\\.)*)(\.\*)?", pattern)
        if literal and literal.group(1):
            name = re.sub(r"\\(.)", r"\1", literal.group(1))
            return (AclPattern.PREFIXED, name) if literal.group(2) else (AclPattern.LITERAL, name)
    return AclPattern.LITERAL, "*"


class _Needs:
    def __init__(self, topology: Topology):
        self.topology = topology
        self.out: dict[tuple, RequiredAcl] = {}

    def add(
        self,
        cluster: str,
        role: Role,
        resource: AclResource,
        name: str,
        ops: Iterable[AclOperation],
        why: str,
        pattern: AclPattern = AclPattern.LITERAL,
    ) -> None:
        c = self.topology.clusters.get(cluster)
        if c is None:
            return
        principal = getattr(c, role.field)
        for op in ops:
            r = RequiredAcl(cluster, role, principal, resource, pattern, name, op, why)
            self.out.setdefault((cluster, role, resource, pattern, name, op), r)

    def topic(self, cluster: str, role: Role, name: str, ops: Iterable[AclOperation], why: str) -> None:
        self.add(cluster, role, AclResource.TOPIC, name, ops, why)

    def cluster(self, cluster: str, role: Role, ops: Iterable[AclOperation], why: str) -> None:
        self.add(cluster, role, AclResource.CLUSTER, CLUSTER_RESOURCE_NAME, ops, why)


def _flow_needs(flow: Flow, needs: _Needs) -> None:
    """What one flow's engine needs, beyond its topics: groups, transactional ids, the cluster, internal topics."""
    s, t, rep = flow.source, flow.target, Role.REPLICATION
    name = flow.name
    needs.cluster(s, rep, (Op.DESCRIBE,), f"flow {name} lists the source's topics and groups")
    needs.cluster(t, rep, (Op.DESCRIBE,), f"flow {name} describes the target")
    exactly_once = flow.delivery is Delivery.EXACTLY_ONCE
    group_at = t if exactly_once else s
    needs.add(
        group_at,
        rep,
        AclResource.GROUP,
        job_group_of(name),
        (Op.READ, Op.DESCRIBE),
        f"flow {name} commits its source positions in its group"
        + (" (exactly-once: on the target, in its transactions)" if exactly_once else ""),
    )
    if exactly_once:
        needs.add(
            t,
            rep,
            AclResource.TRANSACTIONAL_ID,
            transactional_id_prefix(name),
            (Op.WRITE, Op.DESCRIBE),
            f"flow {name} writes exactly-once, one transactional id per slot",
            AclPattern.PREFIXED,
        )
    if (flow.checkpoints.enabled or flow.sync.group_offsets) and flow.groups.include:
        pattern, group = group_resource(flow.groups)
        needs.add(s, rep, AclResource.GROUP, group, (Op.DESCRIBE,), f"flow {name} reads the groups' offsets", pattern)
        if flow.sync.group_offsets:
            needs.add(
                t,
                rep,
                AclResource.GROUP,
                group,
                (Op.READ, Op.DESCRIBE),
                f"flow {name} syncs the groups' offsets to the target",
                pattern,
            )
    needs.topic(t, rep, STATUS_TOPIC, _JOB_TOPIC, f"flow {name} publishes its status")
    if flow.on_refused_record == OnRefusedRecord.SKIP:
        needs.topic(
            t, rep, flow.policy.dead_letters_topic(s), _EMITTED_TOPIC, f"flow {name} writes refused records there"
        )
    for cluster, topic, role, _ in internal_topics(flow):
        kind = role.value
        ops = _EMITTED_TOPIC if role is TopicRole.HEARTBEATS else _JOB_TOPIC
        needs.topic(cluster, rep, topic, ops, f"flow {name} writes its {kind}")


def required_acls(topology: Topology, desired: DesiredState) -> list[RequiredAcl]:
    """Every right every principal needs for the topology's enabled flows, given the desired state (its remote
    topics are those of the topics that exist now: a topic created later adds its rights to the next plan)."""
    needs = _Needs(topology)
    flows = {f.name: f for f in topology.active_flows}
    for flow in flows.values():
        _flow_needs(flow, needs)
    rec, ro = Role.RECONCILER, Role.PLAN
    targets_with_acl_sync = {f.target for f in flows.values() if f.sync.acls}
    touched = sorted({a for f in flows.values() for a in (f.source, f.target)})
    for alias in touched:
        needs.cluster(alias, rec, (Op.DESCRIBE,), "apply reads the cluster, its topics and ACLs")
        needs.cluster(alias, ro, (Op.DESCRIBE,), "plan reads the cluster, its topics and ACLs")
        needs.topic(alias, rec, LEASE_TOPIC, _JOB_TOPIC, "apply takes its lease and records what it applied")
        needs.topic(
            alias, ro, LEASE_TOPIC, (Op.READ, Op.DESCRIBE), "plan reads the owners' claims, drift the applied revision"
        )
    for alias in sorted(targets_with_acl_sync):
        needs.cluster(alias, rec, (Op.ALTER,), "ACL sync creates (and with prune.acls deletes) the remote topics' ACLs")
    for flow in flows.values():
        needs.topic(flow.target, ro, STATUS_TOPIC, (Op.READ, Op.DESCRIBE), f"plan reads the status of flow {flow.name}")
        if topology.prune.topics and flow.policy.kind is PolicyKind.DEFAULT:  # identity-policy topics: never pruned
            needs.add(
                flow.target,
                rec,
                AclResource.TOPIC,
                flow.policy.format_remote_topic(flow.source, ""),
                (Op.DELETE,),
                f"prune.topics deletes the remote topics of flow {flow.name} no flow wants",
                AclPattern.PREFIXED,
            )
    for t in desired.all():
        on = [flows[n] for n in t.flows if n in flows]
        if t.role is TopicRole.REMOTE:
            for flow in on:
                why = f"flow {flow.name} replicates {t.upstream[0]}:{t.upstream[1]}" if t.upstream else ""
                ops = _REMOTE_TOPIC + ((Op.ALTER_CONFIGS,) if flow.sync.topic_configs else ())
                needs.topic(t.cluster, Role.REPLICATION, t.name, ops, why)
                if t.upstream and t.upstream[0] == flow.source:
                    src_ops = _SOURCE_TOPIC + ((Op.DESCRIBE_CONFIGS,) if flow.sync.topic_configs else ())
                    needs.topic(flow.source, Role.REPLICATION, t.upstream[1], src_ops, why)
                    needs.topic(flow.source, rec, t.upstream[1], _READ_ONLY_TOPIC, f"apply reads it ({why})")
                    needs.topic(flow.source, ro, t.upstream[1], _READ_ONLY_TOPIC, f"plan reads it ({why})")
        needs.topic(t.cluster, rec, t.name, _MANAGED_TOPIC, f"apply creates and configures it ({t.role.value})")
        # the internal topics' records, and the remote heartbeats (drift reads how old they are) are read
        heartbeats = any(f.policy.is_heartbeats_topic(t.name) for f in on)
        reads = _READ_ONLY_TOPIC + ((Op.READ,) if t.role is not TopicRole.REMOTE or heartbeats else ())
        needs.topic(t.cluster, ro, t.name, reads, f"plan and drift read it ({t.role.value})")
    return sorted(needs.out.values(), key=RequiredAcl.sort_key)


# --- what a cluster grants -------------------------------------------------------------------------------------------
_IMPLIED = {
    Op.DESCRIBE: (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER),
    Op.DESCRIBE_CONFIGS: (Op.ALTER_CONFIGS,),
}


def _covers(a: AclBinding, req: RequiredAcl) -> bool:
    if a.resource is not req.resource_type:
        return False
    if a.pattern is AclPattern.LITERAL and a.topic == "*":
        return True
    if a.pattern is AclPattern.PREFIXED:
        return req.name.startswith(a.topic)
    return a.pattern is AclPattern.LITERAL and req.pattern_type is AclPattern.LITERAL and a.topic == req.name


def granted(req: RequiredAcl, acls: Iterable[AclBinding]) -> bool:
    """Whether `acls` (a cluster's, every resource type) grant `req` to its principal (the module's rule)."""
    assert req.principal is not None
    allowed = False
    for a in acls:
        if not matches(a.principal, req.principal) or not _covers(a, req):
            continue
        if a.permission is AclPermission.DENY and a.operation in (req.operation, Op.ALL):
            return False
        if (
            a.permission is AclPermission.ALLOW
            and a.host == "*"
            and (a.operation in (req.operation, Op.ALL) or a.operation in _IMPLIED.get(req.operation, ()))
        ):
            allowed = True
    return allowed


@dataclass(frozen=True)
class Enforcement:
    """Whether a cluster's rights are checked, and why (or why not)."""

    checked: bool
    why: str
    readable: bool = True


def _acl_sync_grant(a: AclBinding, writer: str | None) -> bool:
    """An ACL of the kind ACL sync writes for the replication principal: LITERAL ALLOW WRITE on a topic."""
    return (
        a.principal == writer
        and a.resource is AclResource.TOPIC
        and a.pattern is AclPattern.LITERAL
        and a.permission is AclPermission.ALLOW
        and a.operation is Op.WRITE
    )


def enforcement(alias: str, topology: Topology, c: ClusterState, own: frozenset[AclBinding]) -> Enforcement:
    """The module's rule. `own`: the ACLs the plan's ACL sync wants on the cluster (they name the replication
    principal without saying that the cluster enforces anything)."""
    cluster = topology.clusters[alias]
    readable = c.reachable and c.acls is not None
    if cluster.acls_enforced is False:
        return Enforcement(False, "acls_enforced: false", readable)
    if cluster.acls_enforced:
        return Enforcement(True, "acls_enforced: true", readable)
    if not readable:
        return Enforcement(False, "its ACLs cannot be read", False)
    declared = {getattr(cluster, r.field) for r in Role} - {None}
    naming = [
        a
        for a in c.acls or ()
        if a.principal in declared and a not in own and not _acl_sync_grant(a, cluster.replication_principal)
    ]
    if naming:
        return Enforcement(True, f"its ACLs name {naming[0].principal} ({naming[0].describe()})")
    return Enforcement(False, "no ACL of it names a declared principal")


def missing(required: Sequence[RequiredAcl], acls: Iterable[AclBinding]) -> list[RequiredAcl]:
    """The required rights (of declared principals) that `acls` do not grant."""
    index: dict[str, list[AclBinding]] = {}
    for a in acls:
        index.setdefault(a.principal, []).append(a)
    out = []
    for r in required:
        if r.principal is None:
            continue
        relevant = index.get(r.principal, []) + [
            a for a in index.get(WILDCARD_PRINCIPAL, []) if r.principal != a.principal
        ]
        if not granted(r, relevant):
            out.append(r)
    return out


def by_principal(required: Iterable[RequiredAcl]) -> dict[tuple[str, Role, str], list[RequiredAcl]]:
    """(cluster, role, principal shown) -> its rights, in order: the rendering's grouping."""
    out: dict[tuple[str, Role, str], list[RequiredAcl]] = {}
    for r in sorted(required, key=RequiredAcl.sort_key):
        out.setdefault((r.cluster, r.role, r.who), []).append(r)
    return out


def grouped_lines(required: Iterable[RequiredAcl]) -> list[str]:
    """One line per principal and resource: `topic orders: READ, DESCRIBE`, under `cluster west, replication
    principal User:mirror:` headings (the text and Markdown renderings)."""
    lines: list[str] = []
    for (cluster, role, who), rs in by_principal(required).items():
        lines.append(f"cluster {cluster}, {role.value} principal {who}:")
        per: dict[str, list[str]] = {}
        for r in rs:
            per.setdefault(r.resource(), []).append(r.operation.value)
        lines += [f"  {res}: {', '.join(ops)}" for res, ops in per.items()]
    return lines
