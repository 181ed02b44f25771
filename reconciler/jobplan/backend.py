"""The I/O a job plan needs: the deployers, and a reader of the status records jobs publish.

It is part of the operations' Backend (reconciler.operations.backend), which tests pass in.
`RECONCILER_JOBS=off` leaves jobs out of plans entirely (topics, configs and ACLs only), e.g. where
jobs are run by other tooling.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler import logs, settings
from reconciler.contract.spec import STATUS_TOPIC
from reconciler.contract.status import StatusRecord
from reconciler.deployers import Deployers
from reconciler.topology.model import Cluster

#: Status records of every flow reporting to a (target) cluster: flow name -> record (a StatusRecord, or
#: its JSON object: in-memory readers in tests; the readers' callers parse it with StatusRecord.of).
StatusReader = Callable[[Cluster], Mapping[str, "StatusRecord | Mapping[str, Any]"]]

STATUS_READ_TIMEOUT = 10.0


def kafka_status_reader(cluster: Cluster) -> Mapping[str, StatusRecord | Mapping[str, Any]]:
    """Raises Unreachable or NotAnswering (adapters/probe.py) within seconds when the cluster is down."""
    from reconciler.adapters.connect_errors import ConnectionFailed, message
    from reconciler.adapters.probe import HandshakeFailed, require_reachable
    from reconciler.topology.connection import client_config

    config = client_config(cluster)
    require_reachable(cluster.alias, config)  # a cluster that is down: milliseconds, not timeouts
    try:
        return read_all_job_status(cluster, timeout=STATUS_READ_TIMEOUT)
    except ConnectionFailed as exc:  # e.g. SASL credentials refused: ApiVersions (the probe) needs no login
        raise HandshakeFailed(message(cluster.alias, str(config.get("bootstrap.servers", "")), exc.cause)) from None


def _client_config(cluster_config: Any) -> dict[str, Any]:
    if hasattr(cluster_config, "client_config"):  # ClusterSpec
        return dict(cluster_config.client_config())
    if hasattr(cluster_config, "bootstrap_servers"):  # topology Cluster: its ${ENV_VAR} references resolved here
        from reconciler.topology.connection import client_config

        return client_config(cluster_config)
    return dict(cluster_config)


def read_all_job_status(cluster_config: Any, timeout: float = 10.0) -> dict[str, StatusRecord]:
    """Latest status of every flow that reports to this (target) cluster: flow name -> status. `cluster_config`:
    librdkafka settings ({"bootstrap.servers": ...}, resolved), a ClusterSpec, or a topology Cluster."""
    from reconciler.adapters.status_read import read_latest_objects

    found = read_latest_objects(logs.client_config(_client_config(cluster_config)), STATUS_TOPIC, timeout)
    return {flow: StatusRecord.from_dict(value, flow) for flow, value in found.items()}


def read_job_status(cluster_config: Any, flow_name: str, timeout: float = 10.0) -> StatusRecord | None:
    """The latest status the job of `flow_name` published on its target cluster, or None."""
    return read_all_job_status(cluster_config, timeout).get(flow_name)


@dataclass
class JobBackend:
    deployers: Deployers = field(default_factory=Deployers)
    read_status: StatusReader = kafka_status_reader


def default_factory() -> JobBackend | None:
    return JobBackend() if settings.jobs_enabled() else None
