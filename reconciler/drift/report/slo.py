"""The topology's `slo:` thresholds, checked per flow: one table, one check.

| SLO kind (`slo:` key) | category | measured | judged when |
|---|---|---|---|
| max_lag_records | lag | the job's `lag_total` | the verdict is running (here or elsewhere) |
| max_lag_seconds | lag-age | the job's `lag_seconds` (the age of the oldest record not replicated yet) | the same |
| max_latency_p99_ms | latency | the job's `latency_ms.p99` | the same |
| max_heartbeat_age_seconds | heartbeat | the age of the newest heartbeat in the flow's remote heartbeats topic on the target (none there: drift too) | the flow emits heartbeats and its target's were read |

A measured value over its threshold is drift; a threshold not set judges nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from reconciler.drift.report.health import JobHealth
from reconciler.drift.report.items import Category, DriftItem
from reconciler.mirror.policy import HEARTBEATS_TOPIC
from reconciler.textutil import RECORD_AGE
from reconciler.topology.model import Flow, Slo


class SloKind(str, enum.Enum):
    """An SLO drift checks each flow against; its value is the `slo:` key of its threshold."""

    LAG = "max_lag_records"
    LAG_AGE = "max_lag_seconds"
    LATENCY = "max_latency_p99_ms"
    HEARTBEAT_AGE = "max_heartbeat_age_seconds"

    def threshold(self, slo: Slo) -> float | None:
        value: float | None = getattr(slo, self.value)
        return value


def heartbeat_topic(flow: Flow) -> str:
    """The flow's heartbeats as they arrive on its target (`<source>.heartbeats` with the default policy)."""
    return flow.policy.format_remote_topic(flow.source, HEARTBEATS_TOPIC)


@dataclass(frozen=True)
class Measured:
    """What drift measured of one enabled flow, to check against its SLOs."""

    flow: Flow
    job: JobHealth | None  # None: jobs not checked
    heartbeat_topic: str | None  # None: the flow emits no heartbeats
    heartbeat_age: float | None  # seconds; None: no heartbeat found (or not read)
    heartbeats_read: bool  # the heartbeats on the flow's target were read

    @property
    def replicating(self) -> bool:
        return self.job is not None and self.job.running

    @property
    def heartbeats_judged(self) -> bool:
        return self.flow.heartbeats.enabled and self.heartbeats_read and bool(self.heartbeat_topic)


@dataclass(frozen=True)
class SloCheck:
    """How one SLO kind is checked: whether it applies to a flow, the value measured, and what an item says."""

    category: Category
    judged: Callable[[Measured], bool]
    measure: Callable[[Measured], float | None]  # None: nothing measured
    over: Callable[[Measured, float, float], str]  # (measured, value, threshold) -> the message
    hint: str
    #: the message and hint when the SLO applies but nothing was measured (None: no item)
    unmeasured: tuple[Callable[[Measured], str], str] | None = None


_FASTER = "raise the job's parallelism or max_records_per_partition, or check the target cluster"


def _replicating(m: Measured) -> bool:
    return m.replicating


#: Every SLO kind's check, in the order the report lists them.
SLO_CHECKS: dict[SloKind, SloCheck] = {
    SloKind.LAG: SloCheck(
        Category.LAG,
        _replicating,
        lambda m: m.job.last.lag_total if m.job else None,
        lambda m, value, limit: f"flow {m.flow.name} is {value:,} records behind (SLO {limit:,})",
        _FASTER,
    ),
    SloKind.LAG_AGE: SloCheck(
        Category.LAG_AGE,
        _replicating,
        lambda m: m.job.last.lag_seconds if m.job else None,
        lambda m, value, limit: (
            f"flow {m.flow.name}: its oldest record not replicated yet is {value:,.1f}s old "
            f"(SLO max_lag_seconds {limit:g}s)"
        ),
        _FASTER,
    ),
    SloKind.LATENCY: SloCheck(
        Category.LATENCY,
        _replicating,
        lambda m: m.job.last.latency_ms.p99 if m.job else None,
        lambda m, value, limit: (
            f"flow {m.flow.name}: records reach the target with p99 {RECORD_AGE} "
            f"{value:,.0f} ms (SLO max_latency_p99_ms {limit:,.0f} ms)"
        ),
        "lower the job's trigger_interval_ms or raise its parallelism",
    ),
    SloKind.HEARTBEAT_AGE: SloCheck(
        Category.HEARTBEAT,
        lambda m: m.heartbeats_judged,
        lambda m: m.heartbeat_age,
        lambda m, value, limit: (
            f"newest heartbeat from {m.flow.source} in {m.flow.target}:{m.heartbeat_topic} is "
            f"{value:,.1f}s old (SLO {limit:g}s)"
        ),
        "the flow's job is stalled or down, or the path from the source is broken",
        (
            lambda m: f"no heartbeat from {m.flow.source} in {m.flow.target}:{m.heartbeat_topic}",
            "heartbeats are emitted by the flow's job; check that it runs",
        ),
    ),
}


def slo_items(measured: Measured, slo: Slo) -> list[DriftItem]:
    """The flow's SLO breaches (drift), each SLO kind checked by its entry in SLO_CHECKS."""
    out = []
    for kind, check in SLO_CHECKS.items():
        limit = kind.threshold(slo)
        if limit is None or not check.judged(measured):
            continue
        value = check.measure(measured)
        if value is None:
            if check.unmeasured is not None:
                message, hint = check.unmeasured
                out.append(DriftItem.of_flow(measured.flow, check.category, message(measured), hint))
        elif value > limit:
            out.append(DriftItem.of_flow(measured.flow, check.category, check.over(measured, value, limit), check.hint))
    return out
