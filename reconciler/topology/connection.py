"""Client settings for a cluster, at the edge where a command connects.

Resolution itself has one path, `secrets.client_settings` (errors: UnresolvedReference, RefusedReference),
also used by the admin adapter and the job's ClusterSpec; this module is where a command turns a
missing variable into a topology diagnostic. Validation
does not need the variables, a command that connects does, and reports every missing one at
the cluster's position in the topology.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from reconciler.topology import secrets
from reconciler.topology.diagnostics import Diagnostics, TopologyError
from reconciler.topology.model import Cluster, Topology


def _unresolved(cluster: Cluster, environ: Mapping[str, str] | None) -> list[str]:
    try:
        secrets.client_settings(cluster.alias, cluster.bootstrap_servers, cluster.config, environ)
    except secrets.UnresolvedReference as exc:
        return list(exc.names)
    except secrets.RefusedReference:
        return []  # validation reports each at its key (topology/build.py)
    return []


def check_references(
    topology: Topology, aliases: Iterable[str] | None = None, environ: Mapping[str, str] | None = None
) -> Diagnostics:
    """An error per cluster (of `aliases`, default all) whose settings reference unset variables."""
    diags = Diagnostics()
    for alias in sorted(aliases if aliases is not None else topology.clusters):
        cluster = topology.clusters[alias]
        missing = _unresolved(cluster, environ)
        if missing:
            diags.error(
                f"cluster {alias!r} needs environment variable{'s' if len(missing) > 1 else ''} "
                f"{', '.join(missing)}, which {'are' if len(missing) > 1 else 'is'} not set",
                cluster.where,
                hint=f"export {missing[0]}=... (e.g. from your CI's secret store) and run again",
            )
    return diags


def client_config(cluster: Cluster, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """librdkafka settings (bootstrap.servers + config) with references resolved; TopologyError if any is unset."""
    try:
        return secrets.client_settings(cluster.alias, cluster.bootstrap_servers, cluster.config, environ)
    except secrets.UnresolvedReference as exc:
        diags = Diagnostics()
        diags.error(f"cluster {cluster.alias!r} needs environment variables {', '.join(exc.names)}", cluster.where)
        raise TopologyError(diags) from None
    except secrets.RefusedReference as exc:
        diags = Diagnostics()
        for problem in exc.problems:
            diags.error(f"cluster {cluster.alias!r}: {problem.message}", cluster.where, hint=problem.hint)
        raise TopologyError(diags) from None


def redactor_for(topology: Topology, environ: Mapping[str, str] | None = None) -> secrets.Redactor:
    """A Redactor that knows every secret value the topology's clusters resolve to."""
    r = secrets.Redactor()
    for cluster in topology.clusters.values():
        r.add_from({k: v for k, v in cluster.config.items() if secrets.is_secret_key(k)}, environ)
    return r
