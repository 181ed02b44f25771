"""The metrics port contract between the deployers and a replication job (docs/monitoring.md).

A deployer hands the job its Prometheus port in $RECONCILER_METRICS_PORT (0: no HTTP server; `auto`: the job
binds a free port itself, so nothing can take the port between a choice and the bind); the job's entry point
serves `reconciler.engine.metrics` there and publishes the port it bound in its status record and in
`runtime.json` in its job directory. The variable, its values (`PORT_ENV`, `AUTO`, `AUTO_PORT`) and the port on
Kubernetes (`KUBERNETES_PORT`) are named, read and checked in `reconciler.settings` (`settings.metrics_port()`).
"""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free right now (the local deployer's choice for a job's metrics)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
