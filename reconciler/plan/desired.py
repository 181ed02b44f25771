"""Stage (pure): DesiredState = what the topology wants the clusters to hold, given what they hold now.

* Remote topics: `expand` (the same `route` the jobs use) run on the live topic names. A remote
  topic has its upstream's partition count, the upstream's explicit configs passed through the
  flow's config-property filter, the flow's replication factor, and (ACL sync) READ for every
  principal allowed to READ the upstream, DENY entries copied (except a DENY that would match the
  replication principal: reported, not copied, see `synced_acls`), WRITE for the target cluster's
  replication principal only. The upstream of a multi-hop topic is the previous hop's *desired*
  topic, so a chain converges in one apply.
* Internal topics (MirrorMaker 2's own choices, apache/kafka MirrorUtils.createSinglePartitionCompactedTopic):
  `heartbeats` on the source (KIP-382: "MM2 emits a heartbeat topic in each source cluster, which is
  replicated"; the job writes Heartbeat(source, target) there, so `A.heartbeats` on B and
  `B.A.heartbeats` on C show reachability and hops down a chain; MM2's dedicated driver gets the
  same effect by running a heartbeat connector for the reverse pair), `<source>.checkpoints.internal`
  on the target, and offset syncs
  `mm2-offset-syncs.<target>.internal` on the source, or `mm2-offset-syncs.<source>.internal` on
  the target when `offset_syncs.topic_location: target`. All 1 partition, cleanup.policy=compact,
  the flow's replication factor.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from reconciler import settings
from reconciler.analysis.expansion import Placement, expand
from reconciler.analysis.hazards import multiplication_message
from reconciler.mirror.filters import ConfigPropertyFilter
from reconciler.mirror.policy import HEARTBEATS_TOPIC
from reconciler.plan.findings import Finding, FindingKind, Severity
from reconciler.plan.reasons import ReasonKind
from reconciler.state.live import (
    AclBinding,
    AclOperation,
    AclPattern,
    AclPermission,
    AclResource,
    AclUnavailable,
    LiveState,
)
from reconciler.topology.model import Flow, HeartbeatsLocation, OffsetSyncsLocation, Topology
from reconciler.topology.principals import WILDCARD_PRINCIPAL

INTERNAL_TOPIC_CONFIGS = {"cleanup.policy": "compact"}


class TopicRole(str, enum.Enum):
    REMOTE = "remote"
    HEARTBEATS = "heartbeats"
    CHECKPOINTS = "checkpoints"
    OFFSET_SYNCS = "offset-syncs"


@dataclass(frozen=True)
class DesiredTopic:
    cluster: str
    name: str
    role: TopicRole
    partitions: int
    replication_factor: int  # -1: broker default (not compared)
    configs: Mapping[str, str]
    manage_configs: bool
    # Remote topics own every config key their flow would copy; internal topics only the keys in `configs`.
    config_filter: ConfigPropertyFilter | None = None
    acls: frozenset[AclBinding] | None = None  # None: ACLs of this topic are not managed
    flows: tuple[str, ...] = ()
    upstream: tuple[str, str] | None = None  # (cluster, topic) it replicates
    reason: str = ""

    def owns_config(self, key: str) -> bool:
        if not self.manage_configs:
            return False
        if self.config_filter is None:
            return key in self.configs
        return self.config_filter.should_replicate(key)


@dataclass
class DesiredState:
    topics: dict[str, dict[str, DesiredTopic]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    consulted: dict[str, set[str]] = field(default_factory=dict)  # cluster -> topic names the result depends on

    def get(self, cluster: str, name: str) -> DesiredTopic | None:
        return self.topics.get(cluster, {}).get(name)

    def add(self, t: DesiredTopic) -> None:
        self.topics.setdefault(t.cluster, {})[t.name] = t
        self.consult(t.cluster, t.name)

    def consult(self, cluster: str, name: str) -> None:
        self.consulted.setdefault(cluster, set()).add(name)

    def all(self) -> list[DesiredTopic]:
        return [t for per in self.topics.values() for t in per.values()]


def offset_syncs_placement(flow: Flow) -> tuple[str, str]:
    """(cluster, topic) of a flow's offset-syncs topic, as MirrorSourceConfig.offsetSyncsTopic() names it."""
    if flow.offset_syncs_location is OffsetSyncsLocation.TARGET:
        return flow.target, flow.policy.offset_syncs_topic(flow.source)
    return flow.source, flow.policy.offset_syncs_topic(flow.target)


def internal_topics(flow: Flow) -> list[tuple[str, str, TopicRole, str]]:
    out = []
    if flow.heartbeats.enabled:
        where = flow.source if flow.heartbeats.location is HeartbeatsLocation.SOURCE else flow.target
        out.append((where, HEARTBEATS_TOPIC, TopicRole.HEARTBEATS, f"heartbeats emitted by flow {flow.name}"))
    if flow.checkpoints.enabled:
        out.append(
            (
                flow.target,
                flow.policy.checkpoints_topic(flow.source),
                TopicRole.CHECKPOINTS,
                f"consumer-group checkpoints of flow {flow.name}",
            )
        )
    cluster, name = offset_syncs_placement(flow)
    out.append((cluster, name, TopicRole.OFFSET_SYNCS, f"offset syncs of flow {flow.name}"))
    return out


def _add_internal(state: DesiredState, flows: tuple[Flow, ...]) -> None:
    for flow in flows:
        for cluster, name, role, reason in internal_topics(flow):
            have = state.get(cluster, name)
            if have is not None:
                state.add(replace(have, flows=have.flows + (flow.name,), reason=f"{have.reason}; {reason}"))
                continue
            state.add(
                DesiredTopic(
                    cluster,
                    name,
                    role,
                    1,
                    flow.replication_factor,
                    dict(INTERNAL_TOPIC_CONFIGS),
                    True,
                    None,
                    None,
                    (flow.name,),
                    None,
                    reason + " (MM2: 1 partition, compacted)",
                )
            )


def _upstream_name(p: Placement) -> str:
    """The topic name on the last hop's source cluster (the path was already routed by `expand`)."""
    name = p.origin_topic
    for f in p.path[:-1]:
        name = f.policy.format_remote_topic(f.source, name)
    return name


class _Upstream:
    """The properties of a desired topic's upstream: its desired spec if it is ours, else what is live."""

    def __init__(self, state: DesiredState, live: LiveState, topology: Topology):
        self.state, self.live, self.topology = state, live, topology
        self._acls = {alias: c.acls_by_topic() for alias, c in live.clusters.items() if c.acls is not None}
        self.unreadable_acls: set[str] = set()

    def partitions(self, cluster: str, name: str) -> int | None:
        d = self.state.get(cluster, name)
        if d is not None:
            return d.partitions
        t = self.live.topic(cluster, name)
        return t.partitions if t else None

    def configs(self, cluster: str, name: str) -> Mapping[str, str]:
        d = self.state.get(cluster, name)
        if d is not None and d.manage_configs:
            return d.configs
        t = self.live.topic(cluster, name)
        return t.configs if t else {}

    def acls(self, cluster: str, name: str) -> list[AclBinding] | None:
        d = self.state.get(cluster, name)
        if d is not None and d.acls is not None:
            return list(d.acls)
        if d is not None and self.live.topic(cluster, name) is None:
            return []  # not created yet: nobody has ACLs on it
        if cluster not in self._acls:
            self.unreadable_acls.add(cluster)
            return None
        return self._acls[cluster].get(name, [])


def _denies_replicator(a: AclBinding, writer: str | None) -> bool:
    """A source DENY that, copied to a remote topic, would apply to the target's replication principal: its own
    principal or Kafka's wildcard `User:*` (any host and operation: a DENY of READ or DESCRIBE, copied, would
    stop the next hop of a chain or the job's own describe; safest is not to copy it at all)."""
    return a.permission is AclPermission.DENY and (a.principal == writer or a.principal == WILDCARD_PRINCIPAL)


def replicator_denies(upstream: list[AclBinding], writer: str | None) -> list[AclBinding]:
    """The literal source DENY entries ACL sync does not copy because they would deny the replication principal
    (reported as a plan finding by `_source`)."""
    return sorted(a for a in upstream if a.pattern is AclPattern.LITERAL and _denies_replicator(a, writer))


def synced_acls(topic: str, upstream: list[AclBinding], writer: str | None) -> frozenset[AclBinding]:
    """READ for whoever may READ upstream (ALLOW READ/ALL -> ALLOW READ), DENY entries copied, WRITE only for `writer`.

    A DENY that would match `writer` (its principal, or `User:*`) is never copied (`replicator_denies`): copied, it
    would stop the replication itself. Its effect on readers is kept instead: the ALLOW READ grants it overrides on
    the source (a DENY of READ or ALL, for the same principal or `User:*`, from any host) are not copied either,
    so a remote topic is never more readable than its source (issue 45)."""
    denied = [a for a in replicator_denies(upstream, writer) if a.operation in (AclOperation.READ, AclOperation.ALL)]
    out = set()
    for a in upstream:
        if a.pattern is not AclPattern.LITERAL or a.resource is not AclResource.TOPIC:
            continue
        if a.permission is AclPermission.ALLOW and a.operation in (AclOperation.READ, AclOperation.ALL):
            if any(d.principal in (a.principal, WILDCARD_PRINCIPAL) for d in denied):
                continue  # nobody it names may read the source: the remote topic grants nothing either
            out.add(AclBinding(topic, a.principal, a.host, AclOperation.READ, AclPermission.ALLOW))
        elif a.permission is AclPermission.DENY and not _denies_replicator(a, writer):
            out.add(AclBinding(topic, a.principal, a.host, a.operation, AclPermission.DENY))
    if writer:
        out.add(AclBinding(topic, writer, "*", AclOperation.WRITE, AclPermission.ALLOW))
    return frozenset(out)


class _Source(NamedTuple):
    """What one placement (one lineage) asks of a remote topic."""

    placement: Placement
    flow: Flow
    upstream: tuple[str, str]
    partitions: int
    configs: dict[str, str]
    acls: frozenset[AclBinding] | None


def _source(p: Placement, name: str, up: _Upstream, topology: Topology, state: DesiredState) -> _Source | None:
    flow = p.path[-1]
    upstream = (flow.source, _upstream_name(p))
    state.consult(*upstream)
    partitions = up.partitions(*upstream)
    if partitions is None:
        return None
    configs = flow.config_properties.apply(dict(up.configs(*upstream))) if flow.sync.topic_configs else {}
    acls = None
    if flow.sync.acls:
        upstream_acls = up.acls(*upstream)
        if upstream_acls is not None:
            writer = topology.clusters[flow.target].replication_principal
            acls = synced_acls(name, upstream_acls, writer)
            for a in replicator_denies(upstream_acls, writer):
                state.findings.append(
                    Finding(
                        Severity.WARNING,
                        FindingKind.SECURITY,
                        flow.target,
                        name,
                        f"ACL sync does not copy {a.describe()} from {upstream[0]} to {flow.target}:{name}: it would "
                        f"deny the replication principal {writer or '(none declared)'}"
                        + (
                            "; the READ grants it overrides are not copied either"
                            if a.operation in (AclOperation.READ, AclOperation.ALL)
                            else ""
                        ),
                        hint="deny the principals you mean by name instead of `User:*` (docs/security.md, ACL sync)",
                        why=ReasonKind.ACL,
                    )
                )
    return _Source(p, flow, upstream, partitions, configs, acls)


def _remote_topic(
    cluster: str, name: str, placements: list[Placement], up: _Upstream, topology: Topology, state: DesiredState
) -> DesiredTopic | None:
    """One remote topic from its lineages; several only when identity-policy flows write one topic (a conflict)."""
    sources = [s for s in (_source(p, name, up, topology, state) for p in placements) if s is not None]
    if not sources:
        return None
    first = sources[0]
    partitions, acls = first.partitions, first.acls
    if len({(s.partitions, tuple(sorted(s.configs.items()))) for s in sources}) > 1:
        state.findings.append(
            Finding(
                Severity.WARNING,
                FindingKind.CONFLICT,
                cluster,
                name,
                f"{cluster}:{name} is written by several flows with different sources ("
                + ", ".join(f"{s.upstream[0]}:{s.upstream[1]} with {s.partitions} partitions" for s in sources)
                + ")",
                hint="use the default replication policy (it keeps remote topics apart), or make the topic filters disjoint",
            )
        )
        partitions = max(s.partitions for s in sources)
    if len(sources) > 1 and all(s.acls is not None for s in sources):
        acls = frozenset().union(*(s.acls for s in sources if s.acls is not None))
    p, flow = first.placement, first.flow
    reason = (
        f"replicates {first.upstream[0]}:{first.upstream[1]} (flow {flow.name})"
        if p.hops == 1
        else f"replicates {p.origin_cluster}:{p.origin_topic} via {p.describe_path()}"
    )
    _record_size_findings(cluster, name, first, up)
    flows = tuple(dict.fromkeys(s.flow.name for s in sources))
    return DesiredTopic(
        cluster,
        name,
        TopicRole.REMOTE,
        partitions,
        flow.replication_factor,
        first.configs,
        flow.sync.topic_configs,
        flow.config_properties,
        acls,
        flows,
        first.upstream,
        reason,
    )


#: librdkafka's default `message.max.bytes`: the job's producer refuses a larger record unless the target
#: cluster's config raises it.
PRODUCER_MAX_MESSAGE_BYTES = 1_000_000


def _record_size_findings(cluster: str, name: str, source: _Source, up: _Upstream) -> None:
    """A source topic that takes records larger than its remote topic (as the live target has it, where the flow does
    not copy `max.message.bytes`) or the job's producer (`message.max.bytes` of the target cluster's config) takes:
    such a record would be refused (`on_refused_record`)."""
    upstream = up.live.topic(*source.upstream)
    try:
        allowed = int((upstream.configs if upstream is not None else {}).get("max.message.bytes", ""))
    except ValueError:
        return  # not set on the source (its broker's default): nothing known to compare
    flow = source.flow
    limits = []
    copied = flow.sync.topic_configs and flow.config_properties.should_replicate("max.message.bytes")
    remote = up.live.topic(cluster, name) if not copied else None
    if remote is not None and remote.configs.get("max.message.bytes", "").isdigit():
        if int(remote.configs["max.message.bytes"]) < allowed:
            limits.append(f"the remote topic's max.message.bytes {remote.configs['max.message.bytes']}")
    target = up.topology.clusters.get(cluster)
    configured = str(target.config.get("message.max.bytes", "")) if target is not None else ""
    producer = int(configured) if configured.isdigit() else PRODUCER_MAX_MESSAGE_BYTES
    if producer < allowed:
        limits.append(f"the job's producer message.max.bytes {producer}")
    if limits:
        up.state.findings.append(
            Finding(
                Severity.WARNING,
                FindingKind.RECORD_SIZE,
                cluster,
                name,
                f"{source.upstream[0]}:{source.upstream[1]} takes records of up to {allowed} bytes, more than "
                + " and ".join(limits)
                + f": a larger record is refused (flow {flow.name}, on_refused_record: {flow.on_refused_record.value})",
                hint="raise the remote topic's max.message.bytes and the target cluster's message.max.bytes (its "
                "config), or lower the source topic's",
            )
        )


def desired_state(topology: Topology, live: LiveState, max_remote_topics: int | None = None) -> DesiredState:
    """What the topology wants; refuses (an error finding, no remote topics) past `max_remote_topics`
    remote topics (RECONCILER_MAX_REMOTE_TOPICS by default): MM2 would re-replicate along every path."""
    state = DesiredState()
    flows = topology.active_flows
    _add_internal(state, flows)

    local: dict[str, list[str]] = {}
    for alias, c in live.clusters.items():
        if c.reachable:
            local[alias] = sorted(c.topics)
    for t in state.all():
        if t.role is TopicRole.HEARTBEATS and t.name not in live.cluster(t.cluster).topics:
            local.setdefault(t.cluster, []).append(t.name)

    limit = settings.max_remote_topics() if max_remote_topics is None else max_remote_topics
    exp = expand(topology, local, flows, limit=limit)
    if exp.multiplied is not None:
        message, hint = multiplication_message(exp.multiplied)
        state.findings.append(
            Finding(
                Severity.ERROR,
                FindingKind.MULTIPLIED,
                exp.multiplied.origin_cluster,
                "",
                f"refusing to plan remote topics: {message}",
                hint=hint,
            )
        )
        return state
    todo = []
    for cluster, per_topic in exp.topics.items():
        for name, placements in per_topic.items():
            remote = [p for p in placements if p.path]
            if remote:
                longest = max(p.hops for p in remote)
                todo.append((longest, cluster, name, [p for p in remote if p.hops == longest]))
    todo.sort(key=lambda item: (item[0], item[1], item[2]))

    up = _Upstream(state, live, topology)
    for _, cluster, name, placements in todo:
        if state.get(cluster, name) is not None:
            continue  # an internal topic of the same name wins (cannot happen with MM2 names)
        remote_topic = _remote_topic(cluster, name, placements, up, topology, state)
        if remote_topic is not None:
            state.add(remote_topic)
    for alias in sorted(up.unreadable_acls):
        c = live.cluster(alias)
        why = (
            (c.acls_unavailable or AclUnavailable.NO_API).explain(alias).removeprefix(f"cluster {alias} ")
            if c.reachable
            else "it could not be read"
        )
        state.findings.append(
            Finding(
                Severity.WARNING,
                FindingKind.ACLS_UNKNOWN,
                alias,
                "",
                f"ACL sync from {alias} skipped: its ACLs cannot be read ({why})",
                hint="ACLs of remote topics replicated from it are left as they are; set `sync.acls: false` on its flows to silence this",
            )
        )
    return state
