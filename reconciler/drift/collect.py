"""Drift (I/O edge): read the clusters, the jobs' status records, heartbeats and applied records, then
build the report with the pure `reconciler.drift.report.build_report`.

Read-only by construction: the cluster adapters are only asked to list, describe and read; no
lease is taken and nothing is created (a cluster without the lease topic simply has no applied
record). The plan is made by the same function as `reconciler plan` (passed in as `make_plan`), so
whatever the plan learns to compare (for example job actions) shows up in drift too.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from reconciler.adapters.base import AdminError
from reconciler.apply.lock import read_applied
from reconciler.drift.report import DEFAULT_JOB_STALE_SECONDS, DriftReport, build_report
from reconciler.mirror.policy import ReplicationPolicy
from reconciler.mirror.records import Heartbeat
from reconciler.plan.actions import Plan
from reconciler.state.desired import desired_state
from reconciler.state.live import LiveState
from reconciler.state.read import AdminFactory, Connections, clusters_of, read_live
from reconciler.topology.model import Cluster, Topology

StatusReader = Callable[[Cluster], Mapping[str, Mapping[str, Any]]]
HeartbeatReader = Callable[[Cluster, ReplicationPolicy], Mapping[str, Heartbeat | None]]
MakePlan = Callable[[Topology, Connections, LiveState], Plan]


def kafka_status_reader(cluster: Cluster) -> Mapping[str, Mapping[str, Any]]:
    """Every flow's latest status record on a (target) cluster."""
    from reconciler.contract.status import read_all_job_status

    return read_all_job_status(cluster)


def kafka_heartbeat_reader(cluster: Cluster, policy: ReplicationPolicy) -> Mapping[str, Heartbeat | None]:
    """The newest heartbeat of every heartbeat topic on a cluster (MirrorClient.heartbeatTopics)."""
    from reconciler.adapters.mirror_kafka import MirrorKafka
    from reconciler.mirror.mirror_client import latest_heartbeats
    from reconciler.topology.connection import client_config

    return latest_heartbeats(MirrorKafka(client_config(cluster), timeout=15.0), policy)


@dataclass
class Readers:
    admin_factory: AdminFactory
    status_reader: StatusReader = kafka_status_reader
    heartbeat_reader: HeartbeatReader = kafka_heartbeat_reader


def _policy_into(topology: Topology, target: str) -> ReplicationPolicy:
    from reconciler.mirror.mirror_client import policy_between

    return policy_between([f.policy for f in topology.flows if f.target == target and f.enabled])


def _message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def collect(topology: Topology, readers: Readers, make_plan: MakePlan, *, revision: Mapping[str, Any] | None = None,
            check_jobs: bool = True, job_stale_seconds: float = DEFAULT_JOB_STALE_SECONDS,
            clock: Callable[[], float] = time.time) -> DriftReport:
    with Connections(dict(topology.clusters), readers.admin_factory) as conns:
        live = read_live(conns, clusters_of(topology))
        plan = make_plan(topology, conns, live)
        applied: dict[str, Mapping[str, Any] | None] = {}
        for alias, c in sorted(live.clusters.items()):
            admin = conns.get(alias) if c.reachable else None
            if admin is None:
                continue
            try:
                applied[alias] = read_applied(admin)
            except AdminError:
                applied[alias] = None

    targets = sorted({f.target for f in topology.active_flows if live.cluster(f.target).reachable})
    statuses: dict[str, Mapping[str, Any]] = {}
    status_errors: dict[str, str] = {}
    heartbeats: dict[str, Mapping[str, Heartbeat | None]] = {}
    heartbeat_errors: dict[str, str] = {}

    def read_target(alias: str) -> None:
        cluster = topology.clusters[alias]
        if check_jobs:
            try:
                found = readers.status_reader(cluster)
                statuses.update({flow: s for flow, s in found.items()
                                 if any(f.name == flow and f.target == alias for f in topology.flows)})
            except Exception as exc:  # noqa: BLE001 - any client failure: reported, never a crash
                status_errors[alias] = _message(exc)
        try:
            heartbeats[alias] = readers.heartbeat_reader(cluster, _policy_into(topology, alias))
        except Exception as exc:  # noqa: BLE001
            heartbeat_errors[alias] = _message(exc)

    with ThreadPoolExecutor(max_workers=max(1, min(4, len(targets)))) as pool:
        list(pool.map(read_target, targets))

    return build_report(topology, live, plan, desired=desired_state(topology, live), job_statuses=statuses,
                        job_status_errors=status_errors, heartbeats=heartbeats, heartbeat_errors=heartbeat_errors,
                        applied=applied, revision=revision, now_ms=int(clock() * 1000),
                        job_stale_seconds=job_stale_seconds, check_jobs=check_jobs)
