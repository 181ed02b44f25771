"""Force-unlock: withdraw one apply lease left on a cluster by a killed apply (`reconciler force-unlock`).

The lease store is the cluster itself (the lease topic, `apply/lock.py`), reached through the Backend's
admin factory. The operation finds the live claim, asks `confirm` (the CLI shows the claim and asks the
person, unless --force) and removes exactly that claim; what happened comes back as an `UnlockOutcome`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.adapters.base import AdminError
from reconciler.apply.lock import force_unlock, live_claims
from reconciler.operations.backend import Backend
from reconciler.topology.model import Topology


@dataclass(frozen=True)
class LeaseClaim:
    cluster: str
    lock_id: str
    holder: Mapping[str, Any] = field(default_factory=dict)  # who, acquired_at, expires_at, ...

    @property
    def who(self) -> str:
        return str(self.holder.get("who", "?"))

    @property
    def acquired_at(self) -> float:
        return float(self.holder.get("acquired_at", 0))


@dataclass(frozen=True)
class UnlockOutcome:
    removed: bool
    claim: LeaseClaim | None = None  # the live claim found (None: none, or the cluster could not be read)
    error: str | None = None  # why nothing was removed, when it is not the person's "no"


def remove_lease(
    topology: Topology, alias: str, lock_id: str, backend: Backend, confirm: Callable[[LeaseClaim], bool]
) -> UnlockOutcome:
    cluster = topology.clusters.get(alias)
    if cluster is None:
        return UnlockOutcome(
            False,
            error=f"no cluster {alias!r} in the topology (clusters: {', '.join(sorted(topology.clusters))})",
        )
    try:
        admin = backend.admin_factory(cluster)
    except AdminError as exc:
        return UnlockOutcome(False, error=str(exc))
    claim: LeaseClaim | None = None
    try:
        admin.capabilities()  # the probe: a cluster that is down says so now, not after the read's timeout
        claims = live_claims(admin, backend.clock())
        holder = claims.get(lock_id)
        if holder is None:
            held = "; ".join(f"{owner} by {c.get('who', '?')}" for owner, c in sorted(claims.items())) or "none"
            return UnlockOutcome(False, error=f"cluster {alias!r} has no live lease {lock_id!r} (live leases: {held})")
        claim = LeaseClaim(alias, lock_id, holder)
        if not confirm(claim):
            return UnlockOutcome(False, claim)
        force_unlock(admin, lock_id)
        return UnlockOutcome(True, claim)
    except AdminError as exc:
        return UnlockOutcome(False, claim, str(exc))
    finally:
        close = getattr(admin, "close", None)
        if close is not None:
            close()
