"""Helpers for plan/apply tests: topologies from text, memory clusters, plan + apply in one call."""

from __future__ import annotations

from reconciler.adapters.live_read import Connections, clusters_of, read_live
from reconciler.adapters.memory_admin import MemoryCluster, MemoryFactory
from reconciler.apply.executor import ApplyContext, ApplyReport, execute
from reconciler.apply.guard import TopologyGuard
from reconciler.jobplan.backend import JobBackend
from reconciler.operations.backend import Backend
from reconciler.operations.handlers import handler_table
from reconciler.plan.actions import Plan
from reconciler.plan.desired import desired_state
from reconciler.plan.diff import diff
from reconciler.plan.ownership import reads_claims
from reconciler.state.live import LiveState
from reconciler.topology.build import load_topology_text
from reconciler.topology.model import Topology


def memory_backend(factory: MemoryFactory, jobs: JobBackend | None = None, **more) -> Backend:
    """A Backend over memory clusters: no job statuses or heartbeats unless readers are given."""
    if jobs is None:
        more.setdefault("status_reader", lambda cluster: {})
    more.setdefault("heartbeat_reader", lambda cluster, policy: {})
    more.setdefault("admin_factory", factory)
    return Backend(jobs=jobs, **more)


def topology(flows: str, clusters: dict[str, str] | None = None, extra: str = "") -> Topology:
    """A topology with clusters (alias -> bootstrap, default two loopback names) and a `flows:` YAML block."""
    clusters = clusters or {"west": "127.0.0.1:1", "east": "127.0.0.1:2"}
    lines = ["apiVersion: reconciler/v1", "kind: Topology", "metadata: {name: test}", "clusters:"]
    for alias, boot in clusters.items():
        lines.append(f'  {alias}: {{bootstrap_servers: "{boot}", replication_principal: "User:mirror"}}')
    return load_topology_text("\n".join(lines) + "\n" + flows + "\n" + extra)


class World:
    """Memory clusters for a topology, and plan/apply against them."""

    def __init__(self, topo: Topology, **cluster_kwargs):
        self.topology = topo
        self.factory = MemoryFactory({a: MemoryCluster(a, **cluster_kwargs) for a in topo.clusters})

    def backend(self, jobs: JobBackend | None = None, **more) -> Backend:
        return memory_backend(self.factory, jobs, **more)

    def __getitem__(self, alias: str) -> MemoryCluster:
        return self.factory.clusters[alias]

    def live(self, topo: Topology | None = None) -> LiveState:
        topo = topo or self.topology
        with Connections(dict(self.topology.clusters), self.factory) as conns:
            return read_live(conns, clusters_of(self.topology), ownership=reads_claims(topo))

    def plan(self, topo: Topology | None = None) -> Plan:
        topo = topo or self.topology
        self.planned_from = topo
        live = self.live(topo)
        return diff(desired_state(topo, live), live, topo)

    def apply(self, plan: Plan, topo: Topology | None = None) -> ApplyReport:
        """Execute `plan` under the executor's guard of `topo` (default: the topology last planned)."""
        topo = topo or getattr(self, "planned_from", None) or self.topology
        with Connections(dict(self.topology.clusters), self.factory) as conns:
            return execute(plan, ApplyContext(conns.get), handler_table(), guard=TopologyGuard(topo))


def kinds(plan: Plan) -> list[tuple[str, str, str]]:
    return [(a.cluster, a.KIND.value, a.subject) for a in plan.actions]
