"""What an engine on Kubernetes says of itself to Argo CD and Flux: its `ReplicationEngine` (pure).

The kubernetes deployer renders, per engine, a `ReplicationEngine` (GROUP/VERSION, a namespaced custom resource with
a status subresource; its CRD: `crd()`) whose spec names what the engine must run: each flow with the hash of its
wanted spec, and the topology's lag SLOs. The engine's driver reads it, judges its flows, and writes the verdict into
the resource's status (reconciler/engine/health_writer.py); Argo CD (deploy/argocd/health.lua) and Flux (the
`healthCheckExprs` in deploy/flux/) read that status. docs/gitops-controllers.md says why a resource of its own.

The judgement is drift's, flow by flow (`reconciler.drift.engines`): the one verdict on a job
(`reconciler.contract.jobstate.classify`: the flow's own status record and what the engine knows of its driver
thread), then drift's items of a job that runs (`reconciler.drift.report`: partitions it does not copy, data lost at
the source, a spec other than the wanted one, lag, lag age and p99 record age over the SLOs). A flow is

    Ready        running its wanted spec, every partition copied, within the SLOs
    Progressing  starting, waiting for its flow file, restarting for a change, running an older spec than wanted
                 (the ConfigMap has not reached the pod yet), or leaving the engine
    Degraded     down (failed, backing off, not reporting), duplicated, a partition not copied, data lost at the
                 source, lag or record age over an SLO
    Suspended    stopped on purpose (superseded by a newer instance of the flow elsewhere)

and the engine takes its worst flow (Degraded, then Progressing, then Ready; Suspended only when every flow is, or
the engine itself stops). The status holds three conditions, Ready, Progressing and Degraded, exactly one of them True
but for Suspended (all False, reason `Suspended`), each with the engine's message, and `observedGeneration`: the
generation of the spec it was judged against. Nothing in it changes while the verdict does not (no timestamp but a
condition's `lastTransitionTime`), so the engine writes it only when it changes.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.contract.jobstate import Deployment, JobState
from reconciler.contract.status import StatusRecord
from reconciler.topology.model import Slo

GROUP = "replication.reconciler.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "ReplicationEngine"
PLURAL = "replicationengines"
SINGULAR = "replicationengine"
SHORT_NAMES = ("repengine",)
#: The key of Argo CD's health customization (`resource.customizations.health.<group>_<kind>` in argocd-cm).
ARGOCD_KEY = f"resource.customizations.health.{GROUP}_{KIND}"
#: The spec's SLO fields and the topology's `slo` settings they come from.
SLO_FIELDS = {
    "maxLagRecords": "max_lag_records",
    "maxLagSeconds": "max_lag_seconds",
    "maxLatencyP99Ms": "max_latency_p99_ms",
}
#: How many flows' messages the engine's message names (the others are counted).
SHOWN = 3


class Phase(str, enum.Enum):
    READY = "Ready"
    PROGRESSING = "Progressing"
    DEGRADED = "Degraded"
    SUSPENDED = "Suspended"


#: Each phase's reason word, on every condition.
REASONS = {
    Phase.READY: "Replicating",
    Phase.PROGRESSING: "Progressing",
    Phase.DEGRADED: "Degraded",
    Phase.SUSPENDED: "Suspended",
}


def slo_spec(slo: Slo) -> dict[str, float]:
    """The lag SLOs the engine judges against, as the spec holds them (only those set)."""
    return {key: getattr(slo, attr) for key, attr in SLO_FIELDS.items() if getattr(slo, attr) is not None}


def slo_of(spec: Mapping[str, Any]) -> Slo:
    """The lag SLOs of a spec.slo (`slo_spec`'s inverse; the other SLOs are drift's)."""
    records, seconds, p99 = (spec.get(key) for key in SLO_FIELDS)
    return Slo(
        max_lag_records=int(records) if isinstance(records, (int, float)) else None,
        max_lag_seconds=float(seconds) if isinstance(seconds, (int, float)) else None,
        max_latency_p99_ms=float(p99) if isinstance(p99, (int, float)) else None,
    )


@dataclass(frozen=True)
class Wanted:
    """A ReplicationEngine's spec as the engine reads it: the generation, each flow's wanted spec hash, the SLOs."""

    generation: int | None
    flows: Mapping[str, str | None]
    slo: Slo = Slo()

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Wanted:
        spec = obj.get("spec") or {}
        slo = spec.get("slo") or {}
        generation = (obj.get("metadata") or {}).get("generation")
        return cls(
            int(generation) if isinstance(generation, int) else None,
            {str(f["name"]): f.get("specHash") for f in spec.get("flows") or [] if isinstance(f, Mapping)},
            slo_of(slo),
        )


@dataclass(frozen=True)
class Seen:
    """What the engine knows of one flow: its latest status record and its driver thread as a `Deployment`."""

    record: StatusRecord | None = None
    deployment: Deployment | None = None


@dataclass(frozen=True)
class FlowVerdict:
    flow: str
    verdict: JobState
    phase: Phase
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.flow, "phase": self.phase.value, "verdict": self.verdict.value}
        return {**out, "message": self.message} if self.message else out


def _phase(verdicts: list[FlowVerdict], stopping: bool) -> Phase:
    phases = {v.phase for v in verdicts}
    if stopping:
        return Phase.SUSPENDED
    for phase in (Phase.DEGRADED, Phase.PROGRESSING):
        if phase in phases:
            return phase
    return Phase.READY if Phase.READY in phases else Phase.SUSPENDED


def _message(phase: Phase, verdicts: list[FlowVerdict], stopping: bool) -> str:
    total = len(verdicts)
    if stopping:
        return "the engine is stopping (its driver was asked to stop): its flows finish their batch and commit"
    if not verdicts:
        return "the engine has no flows"
    if phase is Phase.READY:
        return f"{total} of {total} flow{'s' if total != 1 else ''} replicating within the SLOs"
    these = [v for v in verdicts if v.phase is phase]
    shown = "; ".join(v.message for v in these[:SHOWN])
    more = f" (and {len(these) - SHOWN} more)" if len(these) > SHOWN else ""
    return f"{len(these)} of {total} flow{'s' if total != 1 else ''} {phase.value.lower()}: {shown}{more}"


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def status_of(
    wanted: Wanted,
    verdicts: list[FlowVerdict],
    now_ms: int,
    *,
    stopping: bool = False,
    previous: Mapping[str, Any] | None = None,
    instance: str | None = None,
) -> dict[str, Any]:
    """The status of a ReplicationEngine (pure), from the verdict on each of its flows (drift's judgement:
    `reconciler.drift.engines.engine_status`); `stopping` once its driver was asked to stop, `previous` the status it
    holds (a condition whose status is unchanged keeps its lastTransitionTime)."""
    if stopping:
        verdicts = [
            FlowVerdict(v.flow, v.verdict, Phase.SUSPENDED, f"flow {v.flow} stops with its engine") for v in verdicts
        ]
    phase = _phase(verdicts, stopping)
    message = _message(phase, verdicts, stopping)
    before = {c.get("type"): c for c in (previous or {}).get("conditions") or [] if isinstance(c, Mapping)}
    conditions = []
    for kind, true in (
        (Phase.READY, phase is Phase.READY),
        (Phase.PROGRESSING, phase is Phase.PROGRESSING),
        (Phase.DEGRADED, phase is Phase.DEGRADED),
    ):
        status = "True" if true else "False"
        old = before.get(kind.value) or {}
        since = old.get("lastTransitionTime") if old.get("status") == status else None
        condition: dict[str, Any] = {"type": kind.value, "status": status, "reason": REASONS[phase], "message": message}
        if wanted.generation is not None:
            condition["observedGeneration"] = wanted.generation
        condition["lastTransitionTime"] = since or _iso(now_ms)
        conditions.append(condition)
    out: dict[str, Any] = {}
    if wanted.generation is not None:
        out["observedGeneration"] = wanted.generation
    out.update(phase=phase.value, message=message, conditions=conditions, flows=[v.to_dict() for v in verdicts])
    if instance:
        out["instance"] = instance
    return out


# --- the resource and its CRD --------------------------------------------------------------------------------
def resource(
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    engine: str,
    app: str,
    flows: Mapping[str, str | None],
    slo: Slo,
) -> dict[str, Any]:
    """The ReplicationEngine the deployer renders (no status: the engine writes it)."""
    spec: dict[str, Any] = {
        "engine": engine,
        "sparkApplication": app,
        "flows": [{"name": f, "specHash": h} if h else {"name": f} for f, h in sorted(flows.items())],
    }
    if slo_spec(slo):
        spec["slo"] = slo_spec(slo)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "annotations": {"reconciler/engine": engine},
        },
        "spec": spec,
    }


def _condition_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": {"type": "string"},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": {"type": "string"},
            "message": {"type": "string"},
            "observedGeneration": {"type": "integer", "format": "int64"},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
        },
    }


def _schema() -> dict[str, Any]:
    phases = [p.value for p in Phase]
    number = {"type": "number"}
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "required": ["engine", "flows"],
                "properties": {
                    "engine": {"type": "string"},
                    "sparkApplication": {"type": "string"},
                    "flows": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {"name": {"type": "string"}, "specHash": {"type": "string"}},
                        },
                    },
                    "slo": {
                        "type": "object",
                        "properties": {
                            "maxLagRecords": {"type": "integer", "format": "int64"},
                            "maxLagSeconds": number,
                            "maxLatencyP99Ms": number,
                        },
                    },
                },
            },
            "status": {
                "type": "object",
                "properties": {
                    "observedGeneration": {"type": "integer", "format": "int64"},
                    "phase": {"type": "string", "enum": phases},
                    "message": {"type": "string"},
                    "instance": {"type": "string"},
                    "conditions": {
                        "type": "array",
                        "items": _condition_schema(),
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["type"],
                    },
                    "flows": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["name", "phase"],
                            "properties": {
                                "name": {"type": "string"},
                                "phase": {"type": "string", "enum": phases},
                                "verdict": {"type": "string"},
                                "message": {"type": "string"},
                            },
                        },
                    },
                },
            },
        },
    }


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition of ReplicationEngine. It holds every field the API server would otherwise default
    and store (`conversion`, `names.singular`, `names.listKind`), so what is applied is what is stored and a compare
    after sync is empty."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}", "labels": {"app.kubernetes.io/managed-by": "reconciler"}},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": list(SHORT_NAMES),
            },
            "scope": "Namespaced",
            "conversion": {"strategy": "None"},
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                        {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {"openAPIV3Schema": _schema()},
                }
            ],
        },
    }
