"""Observe: read everything an operation looks at, once, into one Observation.

The clusters (topics, configs, ACLs, groups: `adapters.live_read.read_live`), the status records the jobs
publish on their target clusters, the newest heartbeats and the records of the last apply. Each part
is read only when asked for; what could not be read is recorded next to what was (a cluster that is
down is an observation, not a crash). The desired state is computed here once, from the topology and
the live state, and shared by plan and drift.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from reconciler.adapters.base import AdminError
from reconciler.adapters.live_read import Connections, clusters_of, read_live
from reconciler.analysis.expansion import route
from reconciler.apply.lock import read_applied
from reconciler.contract.spec import job_group_of
from reconciler.drift.certificates import CERTIFICATE_SETTINGS, FILE_SETTINGS, CertificateSource
from reconciler.jobplan.state import JobStatuses, read_statuses
from reconciler.mirror.mirror_client import TopicPartition
from reconciler.mirror.policy import ReplicationPolicy
from reconciler.mirror.records import Heartbeat
from reconciler.operations.backend import Backend, MirrorCluster
from reconciler.plan.backlog import FlowBacklog
from reconciler.plan.desired import DesiredState, desired_state
from reconciler.plan.ownership import reads_claims
from reconciler.state.live import LiveState
from reconciler.topology.connection import client_config
from reconciler.topology.diagnostics import TopologyError
from reconciler.topology.model import Cluster, Delivery, Flow, Topology

#: The per-request timeout of the backlog read of a rate-limited flow (`read_backlogs`).
BACKLOG_READ_TIMEOUT = 15.0


@dataclass
class Observation:
    topology: Topology
    live: LiveState
    desired: DesiredState
    statuses: JobStatuses | None = None
    heartbeats: dict[str, Mapping[str, Heartbeat | None]] = field(default_factory=dict)
    heartbeat_errors: dict[str, str] = field(default_factory=dict)
    applied: dict[str, Mapping[str, Any] | None] = field(default_factory=dict)
    now_ms: int = 0
    certificates: tuple[CertificateSource, ...] = ()  # each cluster's certificate settings, as read (drift)
    #: what each enabled flow with a rate limit has not copied yet (`read_backlogs`): the plan's retention check
    backlogs: dict[str, FlowBacklog] = field(default_factory=dict)


def message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _policy_into(topology: Topology, target: str) -> ReplicationPolicy:
    from reconciler.mirror.mirror_client import policy_between

    return policy_between([f.policy for f in topology.flows if f.target == target and f.enabled])


def heartbeat_targets(topology: Topology, live: LiveState) -> list[str]:
    return sorted({f.target for f in topology.active_flows if live.cluster(f.target).reachable})


def observe(
    topology: Topology,
    conns: Connections,
    backend: Backend,
    *,
    live: LiveState | None = None,
    statuses: bool = False,
    heartbeats: bool = False,
    applied: bool = False,
    certificates: bool = False,
    backlogs: bool = False,
) -> Observation:
    """Read the live clusters (unless `live` is given) and whichever other parts are asked for."""
    live = live if live is not None else read_live(conns, clusters_of(topology), ownership=reads_claims(topology))
    obs = Observation(topology, live, desired_state(topology, live), now_ms=int(backend.clock() * 1000))
    if applied:
        for alias, c in sorted(live.clusters.items()):
            admin = conns.get(alias) if c.reachable else None
            if admin is None:
                continue
            try:
                obs.applied[alias] = read_applied(admin)
            except AdminError:
                obs.applied[alias] = None
    if statuses:
        skip = {a: c.error or "unreachable" for a, c in live.clusters.items() if not c.reachable}
        obs.statuses = read_statuses(topology, backend, skip)
    if heartbeats:
        targets = heartbeat_targets(topology, live)

        def one(alias: str) -> None:
            try:
                obs.heartbeats[alias] = backend.read_heartbeats(topology.clusters[alias], _policy_into(topology, alias))
            except Exception as exc:  # noqa: BLE001 - any client failure: reported, never a crash
                obs.heartbeat_errors[alias] = message(exc)

        with ThreadPoolExecutor(max_workers=max(1, min(4, len(targets)))) as pool:
            list(pool.map(one, targets))
    if certificates:
        obs.certificates = read_certificates(topology)
    if backlogs:
        obs.backlogs = read_backlogs(topology, live, backend)
    return obs


def read_backlogs(topology: Topology, live: LiveState, backend: Backend) -> dict[str, FlowBacklog]:
    """What each enabled flow with a rate limit has not copied yet (plan/backlog.py), by source topic: the log end
    of each partition it copies (`route` over the live source topics) less the job's committed position (its group
    on the source at-least-once; on the target exactly-once, with the source's for partitions it lacks, as the job
    loads them), the log start where there is none or it is below. One pair of ListOffsets requests per source
    cluster, whatever the number of partitions, and one offsets request per flow; nothing at all without a rate
    limit. A flow whose clusters cannot be read has its `error`."""
    flows = [f for f in topology.active_flows if f.rate_limit.limited]
    clients: dict[str, MirrorCluster | BaseException] = {}

    def client(alias: str) -> MirrorCluster:
        if alias not in clients:
            try:
                clients[alias] = backend.mirror_client(topology.clusters[alias], BACKLOG_READ_TIMEOUT)
            except Exception as exc:  # noqa: BLE001 - reported with the flow: its backlog is not judged
                clients[alias] = exc
        got = clients[alias]
        if isinstance(got, BaseException):
            raise got
        return got

    out: dict[str, FlowBacklog] = {}
    by_source: dict[str, list[tuple[Flow, dict[TopicPartition, str]]]] = {}
    for flow in flows:
        source = live.cluster(flow.source)
        if not source.reachable:
            out[flow.name] = FlowBacklog(flow.name, {}, error=f"cluster {flow.source} could not be read")
            continue
        copied: dict[TopicPartition, str] = {}
        for name, topic in sorted(source.topics.items()):
            remote = route(flow, name)
            if remote is not None:
                copied.update({TopicPartition(name, p): remote for p in range(topic.partitions)})
        by_source.setdefault(flow.source, []).append((flow, copied))
    for alias, wanted in by_source.items():
        try:
            ends = client(alias).log_offsets([tp for _, copied in wanted for tp in copied])
        except Exception as exc:  # noqa: BLE001 - reported with each flow
            out.update({f.name: FlowBacklog(f.name, {}, error=message(exc)) for f, _ in wanted})
            continue
        for flow, copied in wanted:
            try:
                positions = _job_positions(flow, copied, client)
            except Exception as exc:  # noqa: BLE001
                out[flow.name] = FlowBacklog(flow.name, {}, error=message(exc))
                continue
            by_topic: dict[str, int] = {}
            for tp in copied:
                if tp in ends:
                    start, end = ends[tp]
                    by_topic[tp.topic] = by_topic.get(tp.topic, 0) + max(0, end - max(start, positions.get(tp, start)))
            out[flow.name] = FlowBacklog(flow.name, by_topic)
    return out


def _job_positions(
    flow: Flow, copied: Mapping[TopicPartition, str], client: Callable[[str], MirrorCluster]
) -> dict[TopicPartition, int]:
    """The job's committed positions of the partitions `copied` (source partition -> remote topic), where the job
    keeps them (contract/spec.py `job_group_of`; engine/delivery.py `load`)."""
    group, out = job_group_of(flow.name), {}
    if flow.delivery is Delivery.EXACTLY_ONCE:
        remote = {TopicPartition(r, tp.partition): tp for tp, r in copied.items()}
        out = {remote[k]: v for k, v in client(flow.target).committed_offsets(group, remote).items()}
    missing = [tp for tp in copied if tp not in out]
    return out | (client(flow.source).committed_offsets(group, missing) if missing else {})


def _certificate_sources(cluster: Cluster) -> list[CertificateSource]:
    present = [k for k in CERTIFICATE_SETTINGS if cluster.config.get(k)]
    if not present:
        return []
    try:
        config = client_config(cluster)  # the one path: ${NAME} references resolved
    except TopologyError:
        return [CertificateSource(cluster.alias, k, error="its settings reference unset variables") for k in present]
    out = []
    for key in present:
        value = config.get(key) or ""
        if key not in FILE_SETTINGS:  # the PEM text itself: never shown
            out.append(CertificateSource(cluster.alias, key, data=value.encode("utf-8", "replace")))
            continue
        shown = str(cluster.config[key])  # the topology's value (a reference stays unresolved)
        try:
            with open(value, "rb") as fh:
                data = fh.read(1 << 20)  # a certificate bundle is kilobytes; no more than a MiB is read
        except OSError as exc:
            out.append(CertificateSource(cluster.alias, key, shown, error=exc.strerror or type(exc).__name__))
            continue
        out.append(CertificateSource(cluster.alias, key, shown, data=data))
    return out


def read_certificates(topology: Topology) -> tuple[CertificateSource, ...]:
    """Every cluster's certificate settings (`drift/certificates.py` `CERTIFICATE_SETTINGS`) as the clients would
    read them: the files read, the PEM texts taken as they are, whatever the cluster's reachability."""
    return tuple(s for alias in sorted(topology.clusters) for s in _certificate_sources(topology.clusters[alias]))
