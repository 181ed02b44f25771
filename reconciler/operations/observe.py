"""Observe: read everything an operation looks at, once, into one Observation.

The clusters (topics, configs, ACLs, groups: `adapters.live_read.read_live`), the status records the jobs
publish on their target clusters, the newest heartbeats and the records of the last apply. Each part
is read only when asked for; what could not be read is recorded next to what was (a cluster that is
down is an observation, not a crash). The desired state is computed here once, from the topology and
the live state, and shared by plan and drift.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from reconciler.adapters.base import AdminError
from reconciler.adapters.live_read import Connections, clusters_of, read_live
from reconciler.apply.lock import read_applied
from reconciler.jobplan.state import JobStatuses, read_statuses
from reconciler.mirror.policy import ReplicationPolicy
from reconciler.mirror.records import Heartbeat
from reconciler.operations.backend import Backend
from reconciler.plan.desired import DesiredState, desired_state
from reconciler.state.live import LiveState
from reconciler.topology.model import Topology


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
) -> Observation:
    """Read the live clusters (unless `live` is given) and whichever other parts are asked for."""
    live = live if live is not None else read_live(conns, clusters_of(topology))
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
    return obs
