"""`reconciler permissions`: the ACLs each principal needs for the topology's flows (plan/permissions.py, the same
rights `plan` checks), per cluster, and which of them the clusters that enforce ACLs do not grant. Reads the
clusters once (their topics decide the remote topics); changes nothing."""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.adapters.live_read import Connections
from reconciler.operations.backend import Backend
from reconciler.operations.observe import observe
from reconciler.plan.permissions import Enforcement, RequiredAcl, enforcement, missing, required_acls
from reconciler.topology.model import Topology


@dataclass(frozen=True)
class PermissionsReport:
    required: list[RequiredAcl]
    enforcement: dict[str, Enforcement] = field(default_factory=dict)
    missing: list[RequiredAcl] = field(default_factory=list)  # on the clusters that enforce ACLs
    unreadable: dict[str, str] = field(default_factory=dict)  # cluster -> what could not be read there

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unreadable


def permissions(topology: Topology, backend: Backend) -> PermissionsReport:
    with Connections(dict(topology.clusters), backend.admin_factory) as conns:
        obs = observe(topology, conns, backend)
    live, desired = obs.live, obs.desired
    required = required_acls(topology, desired)
    own: dict[str, set] = {}
    for t in desired.all():
        if t.acls is not None:
            own.setdefault(t.cluster, set()).update(t.acls)
    enf: dict[str, Enforcement] = {}
    lacking: list[RequiredAcl] = []
    unreadable: dict[str, str] = {}
    for alias in sorted(topology.clusters):
        c = live.cluster(alias)
        if not c.reachable:
            unreadable[alias] = (
                f"could not be read ({c.error or 'unreachable'}): the rights on the topics it holds are not listed"
            )
            continue
        enf[alias] = e = enforcement(alias, topology, c, frozenset(own.get(alias, ())))
        if e.checked and e.readable:
            lacking += missing([r for r in required if r.cluster == alias], c.acls or ())
        elif e.checked:  # acls_enforced: true, and the ACLs cannot be read: nothing can be said to be granted
            why = c.acls_unavailable.explain(alias) if c.acls_unavailable else "its ACLs cannot be read"
            unreadable[alias] = f"enforces ACLs ({e.why}) but they cannot be read: {why}; nothing is checked there"
    return PermissionsReport(required, enf, lacking, unreadable)
