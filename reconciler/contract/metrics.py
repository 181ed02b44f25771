"""The metrics port contract between the deployers and a replication job (docs/monitoring.md).

A deployer hands the job its Prometheus port in $RECONCILER_METRICS_PORT (0: no HTTP server; `auto`: the job
binds a free port itself, so nothing can take the port between a choice and the bind); the job's entry point
serves `reconciler.replication.metrics` there and publishes the port it bound in its status record and in
`runtime.json` in its job directory. The variable is read and checked in `reconciler.settings`
(`settings.metrics_port()`).
"""

from __future__ import annotations

import socket

#: The environment variable the deployers hand a job its metrics port in (0 or unset: no HTTP server).
PORT_ENV = "RECONCILER_METRICS_PORT"
#: The port of a job's metrics on Kubernetes (9404: the JMX exporter's port in Strimzi, where MM2 is scraped).
KUBERNETES_PORT = 9404


#: $RECONCILER_METRICS_PORT's value for "bind any free port" (what the local deployers hand a job).
AUTO = "auto"
#: `metrics_port`'s answer for AUTO: the job binds port 0 and reports the port it got.
AUTO_PORT = -1


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free right now (the local deployer's choice for a job's metrics)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
