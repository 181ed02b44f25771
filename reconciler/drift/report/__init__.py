"""Drift report (pure): what differs between the live clusters and jobs and the topology.

`build_report(topology, live, plan, ...)` turns a plan (computed exactly as `reconciler plan`
computes it) plus what the jobs and heartbeats say into a `DriftReport`: a flat list of
`DriftItem`s, each tied to a cluster and to the flows it concerns, plus per-flow health (the one verdict on the
job, its lag, latency, heartbeat age) and per-cluster provenance (the revision last applied there).

Where each kind of drift comes from, and the module that makes its items:

| category | from | module |
|---|---|---|
| missing-topic | CreateTopic actions (remote or MM2 internal topic absent) | `plan_items.py` |
| extra-topic | DeleteTopic actions; `retained` findings (notes) | `plan_items.py` |
| partitions | AddPartitions actions; `impossible` and `unsupported` findings about a topic's partitions | `plan_items.py` |
| config | SetConfig / DeleteConfig actions; `unsupported` findings about a topic's config; `prune-disabled` findings (a key the source does not set, kept because `prune.configs` is off) | `plan_items.py` |
| acl | CreateAcl / DeleteAcl actions; `security` findings; `prune-disabled` ACL findings | `plan_items.py` |
| unmanaged | `unmanaged` findings; MM2 checkpoint / offset-sync topics no enabled flow uses | `plan_items.py` |
| job | any other action kind whose name mentions a job (the job issue's deploy/update/restart/stop, subject = flow); else the verdict on the job (`health.py`: `reconciler.contract.jobstate`'s, from its status record and deployment): unknown, stopped, duplicated, down or not deployed, not reporting (stale by the one rule, or `job_stale_seconds`), degraded (partitions not copied), a spec hash other than `JobSpec.from_flow(...).spec_hash()` | `plan_items.py`, `job_items.py` |
| lag, lag-age, latency, heartbeat | the job status's `lag_total`, `lag_seconds` and `latency_ms.p99`, and the age of the newest heartbeat in the flow's remote heartbeats topic on the target, against the topology's `slo` (one check per SLO kind) | `slo.py` |
| cluster | a cluster that could not be read (an error: exit 1) | `plan_items.py` |
| certificate | a cluster's client or CA certificate (`ssl.certificate.location`, `ssl.ca.location`, `ssl.certificate.pem`, `ssl.ca.pem`: `drift/certificates.py`) expired or expiring within `slo.certificate_expiry_days`; one that cannot be read is a note | `clusters.py` |
| revision | the `applied/<cluster>` record: the revision the reconciler last applied (a note) | `clusters.py` |

Levels: `error` (something could not be checked), `drift` (counts: exit 2), `note` (shown, not
counted: capability limits, topics kept for safety, revisions). `build.py` puts it together; `model.py` holds the
report's types, `items.py` the item's.
"""

from reconciler.drift.report.build import build_report
from reconciler.drift.report.clusters import applied_view, certificate_item
from reconciler.drift.report.health import JobHealth, job_health
from reconciler.drift.report.items import CATEGORY_TITLES, Category, DriftItem, Level
from reconciler.drift.report.job_items import FAULT_HINTS, GROUP_SYNC_AT_RISK, GROUP_SYNC_HINTS
from reconciler.drift.report.model import FORMAT_VERSION, ClusterReport, DriftReport, FlowReport
from reconciler.drift.report.slo import SLO_CHECKS, SloKind, heartbeat_topic
from reconciler.drift.report.values import iso_ms

__all__ = [
    "CATEGORY_TITLES",
    "FAULT_HINTS",
    "FORMAT_VERSION",
    "GROUP_SYNC_AT_RISK",
    "GROUP_SYNC_HINTS",
    "SLO_CHECKS",
    "Category",
    "ClusterReport",
    "DriftItem",
    "DriftReport",
    "FlowReport",
    "JobHealth",
    "Level",
    "SloKind",
    "applied_view",
    "build_report",
    "certificate_item",
    "heartbeat_topic",
    "iso_ms",
    "job_health",
]
