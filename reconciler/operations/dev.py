"""`dev up|down|status`: the dev brokers (and local jobs) of the state directory, through the Backend.

`dev_up` starts a broker per loopback cluster of a topology (`Backend.dev_brokers`; nothing starts when a
cluster's settings reference unset environment variables); `dev_down` stops the local jobs first (they
would only retry against stopped brokers), then the brokers; `dev_status` lists the brokers. The command
(and the demo) render what comes back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.adapters.base import OpResult
from reconciler.dev.brokers import DevClusterError, Engine
from reconciler.dev.clusters import DevClusterStatus
from reconciler.operations.backend import Backend
from reconciler.topology.connection import check_references
from reconciler.topology.diagnostics import Diagnostics
from reconciler.topology.model import Topology


@dataclass(frozen=True)
class DevUp:
    clusters: list[DevClusterStatus] = field(default_factory=list)  # each cluster's broker: started, running, foreign
    unresolved: Diagnostics | None = None  # settings reference unset variables: nothing was started
    error: str | None = None  # a cluster could not be started (not on loopback, its port taken, ...)

    @property
    def ok(self) -> bool:
        return self.unresolved is None and self.error is None


@dataclass(frozen=True)
class DevDown:
    jobs: list[tuple[str, OpResult]] = field(default_factory=list)  # (engine or leftover job, what stopping it did)
    clusters: list[DevClusterStatus] = field(default_factory=list)  # the brokers stopped


def dev_up(topology: Topology, backend: Backend, engine: Engine | None = None) -> DevUp:
    """A broker for every loopback cluster of `topology` on `engine` (default: $RECONCILER_DEV_ENGINE, else
    Tansu); running ones are left alone (idempotent)."""
    unresolved = check_references(topology)
    if not unresolved.ok:
        return DevUp(unresolved=unresolved)
    try:
        return DevUp(backend.dev_brokers().up(topology, engine))
    except DevClusterError as exc:
        return DevUp(error=str(exc))


def dev_down(backend: Backend) -> DevDown:
    """Stop every local job (engine) of the state directory, then every dev broker."""
    jobs = backend.local_jobs().stop_all()
    return DevDown(jobs, backend.dev_brokers().down())


def dev_status(backend: Backend) -> list[DevClusterStatus]:
    return backend.dev_brokers().status()
