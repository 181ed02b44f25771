"""The report: per flow, per cluster and in all, with the items in sort order."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.drift.certificates import CertificateCheck
from reconciler.drift.report.health import JobHealth
from reconciler.drift.report.items import CATEGORY_TITLES, Category, DriftItem, Level
from reconciler.drift.report.values import rounded
from reconciler.textutil import plural
from reconciler.topology.model import topology_title

FORMAT_VERSION = 1


@dataclass(frozen=True)
class FlowReport:
    name: str
    source: str
    target: str
    enabled: bool
    job: JobHealth | None  # None for a disabled flow
    heartbeat_topic: str | None
    heartbeat_age_seconds: float | None
    items: tuple[DriftItem, ...] = ()

    @property
    def status(self) -> str:
        """`error`, `drift`, `ok` or `disabled`."""
        if any(i.level is Level.ERROR for i in self.items):
            return "error"
        if any(i.level is Level.DRIFT for i in self.items):
            return "drift"
        return "ok" if self.enabled else "disabled"

    def to_dict(self) -> dict:
        return {
            "flow": self.name,
            "source": self.source,
            "target": self.target,
            "enabled": self.enabled,
            "status": self.status,
            "job": self.job.to_dict() if self.job else None,
            "heartbeat": {"topic": self.heartbeat_topic, "age_seconds": rounded(self.heartbeat_age_seconds)},
            "drift": sum(1 for i in self.items if i.level is Level.DRIFT),
        }


@dataclass(frozen=True)
class ClusterReport:
    alias: str
    reachable: bool
    error: str | None
    applied: Mapping[str, Any] | None  # the last `applied/<cluster>` record, normalized (see `applied_view`)
    items: tuple[DriftItem, ...] = ()
    certificates: tuple[CertificateCheck, ...] = ()  # its client and CA certificates (drift/certificates.py)

    @property
    def status(self) -> str:
        if not self.reachable:
            return "error"
        return "drift" if any(i.level is Level.DRIFT for i in self.items) else "ok"

    def to_dict(self) -> dict:
        return {
            "cluster": self.alias,
            "reachable": self.reachable,
            "error": self.error,
            "status": self.status,
            "applied": dict(self.applied) if self.applied else None,
            "drift": sum(1 for i in self.items if i.level is Level.DRIFT),
            "certificates": [c.to_dict() for c in self.certificates],
        }


@dataclass(frozen=True)
class DriftReport:
    topology: str | None
    generated_at: str  # ISO 8601, UTC
    revision: Mapping[str, Any] | None  # RevisionInfo.to_dict() of the topology compared against
    slo: Mapping[str, Any]
    clusters: tuple[ClusterReport, ...]
    flows: tuple[FlowReport, ...]
    items: tuple[DriftItem, ...]
    plan: Mapping[str, Any] = field(default_factory=dict)  # the plan's summary
    environment: str | None = None  # the topology's environment (`--env`), or None

    @property
    def title(self) -> str:
        """What the report is of: `topology NAME, environment ENV` (each part only when known)."""
        return topology_title(self.topology, self.environment)

    @property
    def drift(self) -> list[DriftItem]:
        return [i for i in self.items if i.level is Level.DRIFT]

    @property
    def errors(self) -> list[DriftItem]:
        return [i for i in self.items if i.level is Level.ERROR]

    @property
    def notes(self) -> list[DriftItem]:
        return [i for i in self.items if i.level is Level.NOTE]

    @property
    def has_drift(self) -> bool:
        return bool(self.drift)

    def counts(self) -> dict[str, int]:
        """Drift items per category (only categories with drift)."""
        out: dict[str, int] = {}
        for i in self.drift:
            out[i.category.value] = out.get(i.category.value, 0) + 1
        return dict(sorted(out.items()))

    def status(self) -> str:
        return "error" if self.errors else "drift" if self.drift else "in-sync"

    def headline(self) -> str:
        if self.errors:
            head = f"ERROR: {plural(len(self.errors), 'thing')} could not be checked"
            if self.drift:
                head += f"; {len(self.drift)} drift item(s) in what could"
            return head + "."
        if not self.drift:
            return "No drift: the clusters and jobs match the topology."
        words = ", ".join(f"{n} {CATEGORY_TITLES[Category(c)]}" for c, n in self.counts().items())
        flows = sum(1 for f in self.flows if f.status == "drift")
        clusters = sum(1 for c in self.clusters if c.status == "drift")
        return (
            f"DRIFT: {len(self.drift)} item{'s' if len(self.drift) != 1 else ''} ({words}) "
            f"on {clusters} cluster{'s' if clusters != 1 else ''}, {flows} flow{'s' if flows != 1 else ''}."
        )

    def by_cluster(self) -> dict[str, dict[str, list[DriftItem]]]:
        """cluster -> flow name ('' for none) -> items, items in sort order."""
        out: dict[str, dict[str, list[DriftItem]]] = {c.alias: {} for c in self.clusters}
        for i in self.items:
            out.setdefault(i.cluster, {}).setdefault(i.flows[0] if i.flows else "", []).append(i)
        return out

    def to_dict(self) -> dict:
        return {
            "format_version": FORMAT_VERSION,
            "kind": "reconciler-drift-report",
            "topology": self.topology,
            "environment": self.environment,
            "generated_at": self.generated_at,
            "revision": dict(self.revision) if self.revision else None,
            "status": self.status(),
            "summary": {
                "drift": len(self.drift),
                "errors": len(self.errors),
                "notes": len(self.notes),
                "by_category": self.counts(),
                "headline": self.headline(),
            },
            "slo": dict(self.slo),
            "plan": dict(self.plan),
            "clusters": [c.to_dict() for c in self.clusters],
            "flows": [f.to_dict() for f in self.flows],
            "items": [i.to_dict() for i in self.items],
        }
