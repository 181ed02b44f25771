"""The I/O a job plan needs: the deployers, and a reader of the status records jobs publish.

It is part of the operations' Backend (reconciler.operations.backend), which tests pass in.
`RECONCILER_JOBS=off` leaves jobs out of plans entirely (topics, configs and ACLs only), e.g. where
jobs are run by other tooling.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler import settings
from reconciler.contract.status import StatusRecord
from reconciler.deployers import Deployers
from reconciler.topology.model import Cluster

#: Status records of every flow reporting to a (target) cluster: flow name -> record (a StatusRecord, or
#: its JSON object: in-memory readers in tests; the readers' callers parse it with StatusRecord.of).
StatusReader = Callable[[Cluster], Mapping[str, "StatusRecord | Mapping[str, Any]"]]

STATUS_READ_TIMEOUT = 10.0


def kafka_status_reader(cluster: Cluster) -> Mapping[str, StatusRecord | Mapping[str, Any]]:
    """Raises Unreachable or NotAnswering (adapters/probe.py) within seconds when the cluster is down."""
    from reconciler.adapters.probe import require_reachable
    from reconciler.contract.status import read_all_job_status
    from reconciler.topology.connection import client_config

    require_reachable(cluster.alias, client_config(cluster))  # a cluster that is down: milliseconds, not timeouts
    return read_all_job_status(cluster, timeout=STATUS_READ_TIMEOUT)


@dataclass
class JobBackend:
    deployers: Deployers = field(default_factory=Deployers)
    read_status: StatusReader = kafka_status_reader


def default_factory() -> JobBackend | None:
    return JobBackend() if settings.jobs_enabled() else None
