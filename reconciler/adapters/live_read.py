"""Stage (I/O): read every cluster once, in bulk, into a LiveState.

Per cluster: probe capabilities, one metadata request for all topics, describe_configs in
batches, ACLs once (only when the cluster supports the ACL APIs) and whether they can be changed (an
authorizer, and a principal allowed to). Clusters are read in parallel.
A cluster that cannot be read becomes a ClusterState with `error`, not an exception.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from reconciler.adapters.base import AclsUnavailableError, AdminError, ClusterAdmin
from reconciler.state.configs import detect_mode, explicit_configs
from reconciler.state.live import AclUnavailable, ClusterState, LiveState, TopicState
from reconciler.state.ownership import LEASE_TOPIC, parse_claims
from reconciler.topology.model import Cluster, Topology

AdminFactory = Callable[[Cluster], ClusterAdmin]
CONFIG_BATCH = 500


def read_cluster(admin: ClusterAdmin, config_batch: int = CONFIG_BATCH, ownership: bool = False) -> ClusterState:
    """One cluster; with `ownership`, the owners' claims of its topics too (state/ownership.py)."""
    try:
        caps = admin.capabilities()
        metas = admin.list_topics()
        names = sorted(n for n in metas if not n.startswith("__"))
        described: dict = {}
        if caps.describe_configs:
            for i in range(0, len(names), config_batch):
                described.update(admin.describe_topic_configs(names[i : i + config_batch]))
        mode = detect_mode(described)
        topics = {
            n: TopicState(
                n, metas[n].partitions, metas[n].replication_factor, explicit_configs(described.get(n, []), mode)
            )
            for n in names
        }
        acls: tuple | None = None
        unavailable = admin.acls_unavailable() if caps.acls else AclUnavailable.NO_API
        if caps.acls:
            try:
                acls = tuple(sorted(admin.describe_acls()))
            except AclsUnavailableError as exc:  # the rest of the cluster is read; its ACLs are not
                unavailable = unavailable or exc.reason
    except AdminError as exc:
        return ClusterState(admin.alias, error=str(exc))
    owners: dict[str, frozenset[str]] | None = {}
    if ownership and LEASE_TOPIC in metas:
        try:
            owners = parse_claims(admin.read_to_end(LEASE_TOPIC))
        except AdminError:  # the rest of the cluster is read; what it owns is not known (nothing is pruned)
            owners = None
    return ClusterState(admin.alias, topics, acls, caps, mode, acls_unavailable=unavailable, owners=owners)


class Connections:
    """One adapter per cluster for the whole run (read, then apply), closed together."""

    def __init__(self, topology_clusters: dict[str, Cluster], factory: AdminFactory):
        self._clusters = topology_clusters
        self._factory = factory
        self._admins: dict[str, ClusterAdmin] = {}
        self.errors: dict[str, str] = {}

    def get(self, alias: str) -> ClusterAdmin | None:
        if alias not in self._admins and alias not in self.errors:
            try:
                self._admins[alias] = self._factory(self._clusters[alias])
            except AdminError as exc:
                self.errors[alias] = str(exc)
        return self._admins.get(alias)

    def close(self) -> None:
        for admin in self._admins.values():
            admin.close()
        self._admins.clear()

    def __enter__(self) -> Connections:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_live(connections: Connections, aliases: Iterable[str], ownership: bool = False) -> LiveState:
    """Every cluster of `aliases`, in parallel; with `ownership`, the owners' claims of their topics too (what a
    topology with an owner, or one that prunes topics, plans with: plan/ownership.py `reads_claims`)."""
    aliases = sorted(set(aliases))

    def one(alias: str) -> ClusterState:
        admin = connections.get(alias)
        if admin is None:
            return ClusterState(alias, error=connections.errors[alias])
        return read_cluster(admin, ownership=ownership)

    with ThreadPoolExecutor(max_workers=max(1, min(8, len(aliases)))) as pool:
        states = list(pool.map(one, aliases))
    return LiveState({s.alias: s for s in states})


def clusters_of(topology: Topology) -> list[str]:
    """The clusters a plan reads: every end of an enabled or disabled flow."""
    return sorted({f.source for f in topology.flows} | {f.target for f in topology.flows})
