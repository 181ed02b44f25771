"""Prometheus alert rules from a topology's `slo:` thresholds (pure): `reconciler export alerts PATH...`.

The expressions name only what the jobs export (`reconciler.engine.metrics`, under the prefixes of
`reconciler.contract.metrics`) and what
`drift --format prometheus` writes (`reconciler.render.drift_prometheus`); the unit tests check that.

| alert | from | fires when |
|---|---|---|
| MirrorLagHigh | `slo.max_lag_records` | a flow's summed partition lag stays above it for 5m |
| MirrorLagAgeHigh | `slo.max_lag_seconds` | the oldest record a flow has not replicated (by its timestamp: `mirror_lag_seconds`, the one lag in seconds, engine/lag.py) stays older than it for 5m |
| MirrorLatencyP99High | `slo.max_latency_p99_ms` | the 5m p99 of replication latency stays above it for 5m |
| MirrorCheckpointLatencyP99High | `slo.max_latency_p99_ms` | the 15m p99 of checkpoint latency stays above it for 5m |
| MirrorHeartbeatStale | `slo.max_heartbeat_age_seconds` | the scheduled drift run saw an older newest heartbeat |
| MirrorJobDown | always | a job reports no running/degraded state for 2m |
| MirrorJobStalled | always | a job has not finished a micro-batch for 5m |
| MirrorJobMissing | always, per enabled flow (topology export only) | no job of the flow has been scraped for 5m |
| MirrorPartitionFault | always | a partition does not progress (a refused record, out of range, stuck, a cluster unreachable) for 1m |
| MirrorDeadLetters | always | records were written to the dead-letter topic in 15m |
| MirrorOutOfRange | always | a partition went out of range (truncated/recreated source) in 15m |
| MirrorTransactionAborts | always | exactly-once transactions keep aborting |
| TopologyDrift / DriftCheckFailed | always | the scheduled drift run found drift / could not check |
| MirrorJobVerdictDown | always | the scheduled drift run's verdict on a job (the plan's: status record and deployment) is down, duplicated or restart-required |

`deployers/monitoring/prometheus-rules.yaml` is this module's output for `DEFAULT_SLO` (a test keeps it
in sync); `PrometheusRule` wraps the same groups for the Prometheus operator.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

from reconciler.contract.metrics import CHECKPOINT, OWN, SOURCE
from reconciler.render import drift_prometheus as drift
from reconciler.topology.model import Slo, Topology

BY = "flow, family, source, target"
#: The thresholds of the static rules in deploy/monitoring/ (edit them there, or export your topology's).
DEFAULT_SLO = Slo(max_lag_records=10_000, max_lag_seconds=120, max_heartbeat_age_seconds=120, max_latency_p99_ms=30_000)


def _rule(alert: str, expr: str, for_: str, severity: str, summary: str, description: str) -> dict[str, Any]:
    return {
        "alert": alert,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity},
        "annotations": {"summary": summary, "description": description},
    }


def _num(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def groups(slo: Slo, flows: Iterable[str] = (), name: str = "reconciler") -> list[dict[str, Any]]:
    """The rule groups: SLO rules for the thresholds that are set, job and drift rules always."""
    return [
        {"name": f"{name}.slo", "rules": _slo_rules(slo)},
        {"name": f"{name}.jobs", "rules": _job_rules() + [_job_missing(flow) for flow in flows]},
        {"name": f"{name}.drift", "rules": _drift_rules()},
    ]


def _slo_rules(slo: Slo) -> list[dict[str, Any]]:
    """A rule per SLO the topology sets (two for the latency: replication and checkpoints)."""
    slo_rules: list[dict[str, Any]] = []
    if slo.max_lag_records is not None:
        slo_rules.append(
            _rule(
                "MirrorLagHigh",
                f"sum by ({BY}) ({OWN}_partition_lag_records) > {_num(slo.max_lag_records)}",
                "5m",
                "warning",
                "Replication lag of {{ $labels.flow }} is over the SLO",
                f"{{{{ $value }}}} records behind (slo.max_lag_records {_num(slo.max_lag_records)}).",
            )
        )
    if slo.max_lag_seconds is not None:
        slo_rules.append(
            _rule(
                "MirrorLagAgeHigh",
                f"max by ({BY}) ({OWN}_lag_seconds) > {_num(slo.max_lag_seconds)}",
                "5m",
                "warning",
                "The oldest record {{ $labels.flow }} has not replicated is older than the SLO",
                f"{{{{ $value }}}} s old (slo.max_lag_seconds {_num(slo.max_lag_seconds)}).",
            )
        )
    if slo.max_latency_p99_ms is not None:
        slo_rules.append(
            _rule(
                "MirrorLatencyP99High",
                f"histogram_quantile(0.99, sum by ({BY}, le) (rate({SOURCE}_replication_latency_ms_bucket[5m]))) "
                f"> {_num(slo.max_latency_p99_ms)}",
                "5m",
                "warning",
                "p99 replication latency of {{ $labels.flow }} is over the SLO",
                f"p99 {{{{ $value }}}} ms (slo.max_latency_p99_ms {_num(slo.max_latency_p99_ms)}).",
            )
        )
        slo_rules.append(
            _rule(
                "MirrorCheckpointLatencyP99High",
                f"histogram_quantile(0.99, sum by ({BY}, le) (rate({CHECKPOINT}_checkpoint_latency_ms_bucket[15m]))) "
                f"> {_num(slo.max_latency_p99_ms)}",
                "5m",
                "warning",
                "p99 checkpoint latency of {{ $labels.flow }} is over the SLO",
                f"Consumer group offsets take {{{{ $value }}}} ms (p99) from the source to a checkpoint on the target "
                f"(slo.max_latency_p99_ms {_num(slo.max_latency_p99_ms)}); `..._checkpoint_latency_ms_max` by group "
                "shows which.",
            )
        )
    if slo.max_heartbeat_age_seconds is not None:
        slo_rules.append(
            _rule(
                "MirrorHeartbeatStale",
                f"max by ({BY}) ({drift.PREFIX}_heartbeat_age_seconds) > {_num(slo.max_heartbeat_age_seconds)}",
                "0m",
                "critical",
                "Heartbeats of {{ $labels.flow }} are not arriving on {{ $labels.target }}",
                f"Newest heartbeat {{{{ $value }}}}s old (slo.max_heartbeat_age_seconds "
                f"{_num(slo.max_heartbeat_age_seconds)}); from the scheduled `reconciler drift --format prometheus`.",
            )
        )
    return slo_rules


def _job_rules() -> list[dict[str, Any]]:
    """What the jobs' own metrics say: down, stalled, partitions not copied, records refused or lost, aborts."""
    return [
        _rule(
            "MirrorJobDown",
            f'max by ({BY}) ({OWN}_job_state{{state=~"running|degraded"}}) < 1',
            "2m",
            "critical",
            "Replication job {{ $labels.flow }} is not running",
            "The job reports neither running nor degraded; `reconciler status` shows why.",
        ),
        _rule(
            "MirrorJobStalled",
            f"time() - max by ({BY}) ({OWN}_job_last_batch_timestamp_seconds) > 300",
            "0m",
            "critical",
            "Replication job {{ $labels.flow }} has not finished a micro-batch for 5 minutes",
            "The driver is alive but not copying (Spark stuck, brokers unreachable).",
        ),
        _rule(
            "MirrorPartitionFault",
            f"max by ({BY}, topic, partition, kind) ({OWN}_partition_fault_since_seconds) > 0",
            "1m",
            "critical",
            "{{ $labels.topic }}[{{ $labels.partition }}] of {{ $labels.flow }} is not copied ({{ $labels.kind }})",
            "The job is degraded: the partition does not progress; `reconciler status` and `reconciler drift` say why "
            "and since when.",
        ),
        _rule(
            "MirrorDeadLetters",
            f"sum by ({BY}, topic, partition) (increase({OWN}_dead_letters_total[15m])) > 0",
            "0m",
            "warning",
            "{{ $labels.topic }}[{{ $labels.partition }}] of {{ $labels.flow }}: records refused by the target",
            "They were written to the flow's dead-letter topic (on_refused_record: skip), not to the remote topic.",
        ),
        _rule(
            "MirrorOutOfRange",
            f"increase({OWN}_out_of_range_total[15m]) > 0",
            "0m",
            "warning",
            "{{ $labels.topic }}[{{ $labels.partition }}] of {{ $labels.flow }} went out of range",
            "The source partition was truncated or recreated: records may have been skipped (see the job status).",
        ),
        _rule(
            "MirrorTransactionAborts",
            f"sum by ({BY}) (increase({OWN}_transaction_aborts_total[15m])) > 3",
            "0m",
            "warning",
            "Exactly-once transactions of {{ $labels.flow }} keep aborting",
            "Batches are retried; look at the job's last error.",
        ),
    ]


def _job_missing(flow: str) -> dict[str, Any]:
    """An enabled flow of the topology with no job scraped."""
    return _rule(
        "MirrorJobMissing",
        f'absent({OWN}_job_start_time_seconds{{flow="{flow}"}})',
        "5m",
        "critical",
        f"No replication job of flow {flow} is scraped",
        "The flow is enabled in the topology but Prometheus sees no job; run `reconciler apply` or check the "
        "scrape config.",
    )


def _drift_rules() -> list[dict[str, Any]]:
    """What the scheduled `reconciler drift --format prometheus` says: a job's verdict, drift, a failed check."""
    return [
        _rule(
            "MirrorJobVerdictDown",
            f'{drift.PREFIX}_job_verdict{{verdict=~"down|duplicated|restart-required"}} == 1',
            "0m",
            "critical",
            "Replication job {{ $labels.flow }} is {{ $labels.verdict }}",
            "The verdict of the scheduled `reconciler drift --format prometheus` (the same as `reconciler plan`'s: "
            "the job's status record and its deployment); `reconciler apply` restarts it.",
        ),
        _rule(
            "TopologyDrift",
            f'{drift.PREFIX}_status{{status="drift"}} == 1',
            "0m",
            "warning",
            "The clusters and jobs drifted from the topology",
            "Run `reconciler drift` for the items and `reconciler plan` / `apply` to fix them.",
        ),
        _rule(
            "DriftCheckFailed",
            f'{drift.PREFIX}_status{{status="error"}} == 1',
            "0m",
            "warning",
            "The scheduled drift check could not read a cluster or a job status",
            "Run `reconciler drift`.",
        ),
    ]


def _dump(doc: Any) -> str:
    return yaml.safe_dump(doc, sort_keys=False, width=120, allow_unicode=True)


HEADER = "# Generated by `reconciler export alerts` from the topology's slo: thresholds; do not edit by hand.\n"


def render_rules(slo: Slo, flows: Iterable[str] = (), name: str = "reconciler") -> str:
    """A Prometheus rule file (`rule_files:`)."""
    return HEADER + _dump({"groups": groups(slo, flows, name)})


def render_prometheus_rule(
    slo: Slo, flows: Iterable[str] = (), name: str = "reconciler", namespace: str = "monitoring"
) -> str:
    """The same groups as a Prometheus operator `PrometheusRule`."""
    doc = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": f"{name}-alerts",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "reconciler-mirror", "role": "alert-rules"},
        },
        "spec": {"groups": groups(slo, flows, name)},
    }
    return HEADER + _dump(doc)


def export_alerts(topology: Topology, origin: str) -> str:
    """`EXPORTERS["alerts"]`: the topology's rules, with a MirrorJobMissing rule per enabled flow."""
    name = topology.name or "reconciler"
    text = render_rules(topology.slo, [f.name for f in topology.active_flows], name)
    return text.replace(HEADER, HEADER.rstrip("\n") + f" Source: {origin}\n", 1)
