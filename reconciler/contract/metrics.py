"""The metrics contract between the deployers, a replication job and the alert rules (docs/monitoring.md).

A deployer hands the job its Prometheus port in $RECONCILER_METRICS_PORT (0: no HTTP server; `auto`: the job
binds a free port itself, so nothing can take the port between a choice and the bind); the job's entry point
serves `reconciler.engine.metrics` there and publishes the port it bound in its status record and in
`runtime.json` in its job directory. The variable, its values (`PORT_ENV`, `AUTO`, `AUTO_PORT`) and the port on
Kubernetes (`KUBERNETES_PORT`) are named, read and checked in `reconciler.settings` (`settings.metrics_port()`).
"""

from __future__ import annotations

#: The metric name prefixes a job exports (`reconciler.engine.metrics` defines the families under them) and the
#: alert rules name (`reconciler.render.alert_rules`): MirrorMaker 2's source and checkpoint connectors' names,
#: as Strimzi's JMX exporter publishes them, and `mirror_*` for what MM2 lacks.
SOURCE = "kafka_connect_mirror_source_connector"
CHECKPOINT = "kafka_connect_mirror_checkpoint_connector"
OWN = "mirror"
