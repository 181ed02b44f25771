"""A rate-limited flow's backlog against its source's retention (issue 47): at the flow's `rate_limit`, copying what
it has not copied yet would take longer than a source topic keeps its records, so the source deletes records before
the flow copies them. The plan says so with the numbers (`RetentionOutrun`, a warning of kind `retention`).

Pure: the backlog is read by operations/observe.py (`read_backlogs`, only for the enabled flows with a rate limit:
the source partitions' log start and end, two ListOffsets requests per source broker, and the job's committed
positions); the retention is the live state's (a topic's `retention.ms`, else Kafka's default); the records' mean
size, for a bytes cap, the flow's status record's (bytes over records copied), when its job has copied.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.contract.status import StatusRecord
from reconciler.plan.findings import Finding, FindingKind, Severity
from reconciler.state.live import LiveState
from reconciler.topology.model import Flow, RateLimit, Topology

#: What a topic without `retention.ms` keeps: Kafka's default (`log.retention.hours` 168). A broker configured
#: otherwise is not read (its default is the broker's config, not the topic's).
DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000
#: Topics named in a finding's message (the others counted).
TOPICS_SHOWN = 3


@dataclass(frozen=True)
class FlowBacklog:
    """What a flow has not copied yet, by source topic: each partition's log end less the job's committed position
    (the log start where it has none, or where the position is below it), as read for the plan."""

    flow: str
    by_topic: Mapping[str, int]
    error: str | None = None  # why it could not be read (`by_topic` empty)

    @property
    def records(self) -> int:
        return sum(self.by_topic.values())


@dataclass(frozen=True)
class Retention:
    """How long a source topic keeps its records: `ms` (None: forever, `retention.ms` -1), and whether it is Kafka's
    default (the topic does not set it)."""

    ms: int | None
    default: bool = False

    @classmethod
    def of(cls, live: LiveState, cluster: str, topic: str) -> Retention:
        state = live.topic(cluster, topic)
        text = (state.configs if state is not None else {}).get("retention.ms")
        if text is None or not text.lstrip("-").isdigit():
            return cls(DEFAULT_RETENTION_MS, default=True)
        ms = int(text)
        return cls(ms if ms >= 0 else None)


@dataclass(frozen=True)
class RetentionOutrun:
    """A rate-limited flow whose backlog, copied at its `rate_limit`, outlives the retention of source topics that
    hold part of it (`topics`, shortest retention first): the typed warning the plan shows."""

    flow: str
    source: str
    limit: RateLimit
    records: int  # the flow's backlog
    mean_bytes: float | None  # the records' mean size (key and value), where a bytes cap needs it; None: not known
    seconds: float  # copying the backlog at the cap
    topics: tuple[tuple[str, int, Retention], ...]  # (topic, its backlog, its retention)

    def finding(self) -> Finding:
        shortest = self.topics[0][2]
        assert shortest.ms is not None
        named = ", ".join(
            f"{topic} ({_count(records)} records, retention.ms {_count(r.ms or 0)}"
            + (": not set, Kafka's default assumed" if r.default else "")
            + ")"
            for topic, records, r in self.topics[:TOPICS_SHOWN]
        )
        more = len(self.topics) - TOPICS_SHOWN
        rates = []
        if self.limit.records_per_second is not None:
            needed = math.ceil(self.records / (shortest.ms / 1000))
            rates.append(f"records_per_second to at least {_rate(needed)}")
        if self.limit.bytes_per_second is not None and self.mean_bytes is not None:
            needed = math.ceil(self.records * self.mean_bytes / (shortest.ms / 1000))
            rates.append(f"bytes_per_second to at least {_rate(needed)}")
        return Finding(
            Severity.WARNING,
            FindingKind.RETENTION,
            self.source,
            self.flow,
            f"flow {self.flow} has {_count(self.records)} records to copy"
            + (f" (about {_count(self.records * self.mean_bytes)} bytes)" if self.mean_bytes is not None else "")
            + f"; at its rate_limit ({_limit(self.limit)}) that takes {_span(self.seconds)}, longer than "
            f"{self.source} keeps the records of {named}{f' and {more} more topics' if more > 0 else ''}: records "
            "would be deleted before they are copied",
            hint=f"raise the flow's rate_limit ({' and '.join(rates)}: the backlog within the shortest retention), or "
            f"the topics' retention.ms to at least {_count(self.seconds * 1000)}, until the backlog is copied; what "
            "the job does with records deleted before it copies them is `job.offset_reset`'s",
        )


def outrun(flow: Flow, backlog: FlowBacklog, live: LiveState, status: StatusRecord | None) -> RetentionOutrun | None:
    """The warning for `flow` (None: its backlog is copied within every retention, or how long it takes is not
    known: a bytes cap alone and no record copied yet to size the records by)."""
    limit = flow.rate_limit
    mean = status.bytes / status.records if status and status.records and status.bytes is not None else None
    times = []
    if limit.records_per_second is not None:
        times.append(backlog.records / limit.records_per_second)
    if limit.bytes_per_second is not None and mean is not None:
        times.append(backlog.records * mean / limit.bytes_per_second)
    if not times:
        return None
    seconds = max(times)
    outlived = []
    for topic, records in sorted(backlog.by_topic.items()):
        retention = Retention.of(live, flow.source, topic)
        if records > 0 and retention.ms is not None and seconds * 1000 > retention.ms:
            outlived.append((topic, records, retention))
    if not outlived:
        return None
    outlived.sort(key=lambda t: (t[2].ms or 0, t[0]))
    return RetentionOutrun(flow.name, flow.source, limit, backlog.records, mean, seconds, tuple(outlived))


def retention_findings(
    topology: Topology,
    live: LiveState,
    backlogs: Mapping[str, FlowBacklog],
    statuses: Mapping[str, StatusRecord] | None = None,
) -> list[Finding]:
    """A warning per rate-limited flow whose backlog at its cap outlives a source topic's retention (a note when its
    backlog could not be read)."""
    out = []
    for flow in topology.active_flows:
        backlog = backlogs.get(flow.name)
        if backlog is None or not flow.rate_limit.limited:
            continue
        if backlog.error is not None:
            out.append(
                Finding(
                    Severity.INFO,
                    FindingKind.RETENTION,
                    flow.source,
                    flow.name,
                    f"the backlog of flow {flow.name} could not be read ({backlog.error}): not checked against its "
                    "source topics' retention at its rate_limit",
                )
            )
            continue
        found = outrun(flow, backlog, live, (statuses or {}).get(flow.name))
        if found is not None:
            out.append(found.finding())
    return out


def _count(n: float) -> str:
    return f"{round(n):,}"


def _rate(n: float) -> str:
    return f"{n:,.0f}" if n >= 10 else f"{n:g}"


def _limit(limit: RateLimit) -> str:
    parts = []
    if limit.records_per_second is not None:
        parts.append(f"{_rate(limit.records_per_second)} records/s")
    if limit.bytes_per_second is not None:
        parts.append(f"{_rate(limit.bytes_per_second)} bytes/s")
    return ", ".join(parts)


def _span(seconds: float) -> str:
    """`seconds` as a person reads it: 45 s, 12.5 min, 3.2 h, 9.1 days."""
    for unit, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"
