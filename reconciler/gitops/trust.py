"""The pull-request boundary: a plan of untrusted topology connects only with trusted connection settings.

A pull request's author controls its topology files. If `plan` connected with the pull request's
`clusters:`, the author could name a bootstrap server of their own and have CI send it the credentials
of the cluster (`sasl.password` goes to whatever `bootstrap_servers` says). `plan --clusters-from REV`
(ci/plan-pr.sh passes the base branch) takes every cluster's connection settings — `bootstrap_servers`
and `config` — from the topology at REV, a reviewed commit, and keeps the rest of the pull request's
topology (flows, filters, policies, tags) to plan. A cluster whose settings the pull request changed is
planned with the base's settings and the plan says so; a cluster the base does not have is not connected
at all: the flows that use it are left out of the plan, which says so too. Both take effect after merge,
when `apply` runs on the reviewed topology.

Pure: `pin_clusters(head, base)` is a function of two topologies; the command reads the base from git.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from reconciler.topology.model import Topology

#: The cluster fields that say where and how to connect (and with which credentials).
CONNECTION_FIELDS = ("bootstrap_servers", "config")


@dataclass(frozen=True)
class ChangedCluster:
    alias: str
    fields: tuple[str, ...]  # `bootstrap_servers`, `config.<key>` (names only: values may be references)


@dataclass(frozen=True)
class ClusterPin:
    """What `pin_clusters` did: the base revision, clusters changed (planned with the base's settings),
    clusters new in the head (not connected) and the flows left out because they use one."""

    rev: str
    changed: tuple[ChangedCluster, ...] = ()
    new: tuple[str, ...] = ()
    skipped_flows: tuple[str, ...] = ()

    @property
    def clean(self) -> bool:
        return not (self.changed or self.new)

    def lines(self) -> list[str]:
        """Plain sentences (the renderers escape and format them)."""
        out = []
        for c in self.changed:
            out.append(
                f"cluster {c.alias!r}: this change sets {', '.join(c.fields)}; planned with the settings of "
                f"{self.rev} (connection settings of a change take effect only after merge)"
            )
        for alias in self.new:
            out.append(f"cluster {alias!r} is new in this change: not connected before merge")
        if self.skipped_flows:
            out.append(f"not planned (they use a new cluster): {', '.join(self.skipped_flows)}")
        return out

    def to_dict(self) -> dict:
        return {
            "rev": self.rev,
            "changed": [{"alias": c.alias, "fields": list(c.fields)} for c in self.changed],
            "new": list(self.new),
            "skipped_flows": list(self.skipped_flows),
        }


def _changed_fields(head_cluster, base_cluster) -> tuple[str, ...]:
    out = []
    if head_cluster.bootstrap_servers != base_cluster.bootstrap_servers:
        out.append("bootstrap_servers")
    keys = sorted(set(head_cluster.config) | set(base_cluster.config))
    out += [f"config.{k}" for k in keys if head_cluster.config.get(k) != base_cluster.config.get(k)]
    return tuple(out)


def pin_clusters(head: Topology, base: Topology, rev: str) -> tuple[Topology, ClusterPin]:
    """`head` with every cluster's connection settings taken from `base`, and the flows using a cluster that
    `base` does not have left out."""
    clusters = {}
    changed: list[ChangedCluster] = []
    new: list[str] = []
    for alias, cluster in sorted(head.clusters.items()):
        trusted = base.clusters.get(alias)
        if trusted is None:
            new.append(alias)
            continue
        fields = _changed_fields(cluster, trusted)
        if fields:
            changed.append(ChangedCluster(alias, fields))
        clusters[alias] = replace(cluster, **{name: getattr(trusted, name) for name in CONNECTION_FIELDS})
    kept = tuple(f for f in head.flows if f.source in clusters and f.target in clusters)
    skipped = tuple(sorted(f.name for f in head.flows if f not in kept))
    pinned = replace(head, clusters=clusters, flows=kept)
    return pinned, ClusterPin(rev, tuple(changed), tuple(new), skipped)
