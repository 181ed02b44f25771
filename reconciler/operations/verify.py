"""`reconciler verify`: does the target hold what the source holds, for one flow (`verify` -> `VerifyReport`).

Per source topic the flow replicates (heartbeats left out: they never stop growing) and per partition: the
window starts at the partition's beginning, or at the first record at or after `since_ms` (ListOffsets by
time); the offset syncs (read where the job writes them) give where the target side starts; both sides are
read to their end, one partition at a time, as one digest per record (`adapters/mirror_kafka.read_digests`),
and aligned by `mirror/verify.align`. Reads nothing else, writes nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from reconciler.analysis.expansion import route
from reconciler.contract.spec import offset_syncs_place
from reconciler.mirror.records import OffsetSync, RecordFormatError
from reconciler.mirror.verify import Alignment, PartitionDigests, SyncAnchor, align
from reconciler.operations.backend import Backend
from reconciler.operations.offsets import Refused, cluster_errors, connect, find_flow
from reconciler.topology.model import Topology

#: A partition read to its end is given this many per-request timeouts.
READ_TIMEOUTS = 20


@dataclass(frozen=True)
class VerifyRequest:
    flow: str  # a flow id, `A->B[:family]`
    since_ms: int | None = None
    timeout: float = 30.0  # per cluster request; a partition's read gets READ_TIMEOUTS of them


@dataclass(frozen=True)
class PartitionVerdict:
    topic: str
    partition: int
    remote_topic: str
    source_start: int  # the first source offset compared
    target_start: int | None  # None: the partition is not on the target
    source_records: int
    target_records: int
    not_compared: int  # source records in the window before the flow's first offset sync
    alignment: Alignment

    @property
    def clean(self) -> bool:
        return self.alignment.clean


@dataclass(frozen=True)
class VerifyReport:
    flow: str
    since_ms: int | None
    partitions: tuple[PartitionVerdict, ...]
    missing_topics: tuple[str, ...]  # remote topics absent from the target
    seconds: float

    @property
    def clean(self) -> bool:
        return not self.missing_topics and all(p.clean for p in self.partitions)

    @property
    def compared(self) -> int:
        return sum(p.source_records for p in self.partitions)


def read_syncs(raw) -> list[OffsetSync]:
    """The offset syncs among a topic's records (anything else skipped): verify and failback."""
    out = []
    for key, value in raw:
        try:
            out.append(OffsetSync.deserialize(key, value))
        except RecordFormatError:
            continue
    return out


def verify(topology: Topology, request: VerifyRequest, backend: Backend) -> VerifyReport:
    started = time.monotonic()
    flow = find_flow(topology, request.flow)
    read_timeout = request.timeout * READ_TIMEOUTS
    with cluster_errors():
        source = connect(topology, flow.source, backend, request.timeout)
        target = connect(topology, flow.target, backend, request.timeout)
        syncs_alias, syncs_topic = offset_syncs_place(flow, flow.source, flow.target)
        syncs_cluster = source if syncs_alias == flow.source else target
        syncs_parts = syncs_cluster.topics().get(syncs_topic, 0)
        syncs = read_syncs(syncs_cluster.read_all(syncs_topic, syncs_parts)) if syncs_parts else []
        on_source, on_target = source.topics(), target.topics()
        verdicts: list[PartitionVerdict] = []
        missing_topics: list[str] = []
        for topic in sorted(on_source):
            remote = route(flow, topic)
            if remote is None or flow.policy.is_heartbeats_topic(topic):
                continue
            if remote not in on_target:
                missing_topics.append(remote)
                continue
            for p in range(on_source[topic]):
                verdicts.append(
                    _partition(source, target, topic, p, remote, on_target[remote], syncs, request, read_timeout)
                )
    return VerifyReport(
        request.flow, request.since_ms, tuple(verdicts), tuple(missing_topics), time.monotonic() - started
    )


def _partition(source, target, topic, p, remote, remote_partitions, syncs, request, read_timeout) -> PartitionVerdict:
    return compare_partition(
        source, target, topic, p, remote, remote_partitions, syncs, read_timeout, since_ms=request.since_ms
    )[0]


def compare_partition(
    source,
    target,
    topic: str,
    p: int,
    remote: str,
    remote_partitions: int,
    syncs: list[OffsetSync],
    read_timeout: float,
    *,
    since_ms: int | None = None,
    start_offset: int | None = None,
) -> tuple[PartitionVerdict, PartitionDigests, PartitionDigests]:
    """One partition compared from its window start (its beginning, the first record at or after `since_ms`, or
    `start_offset`: `reconciler failback` compares from each partition's end at cutover); with both sides' digests
    (what failback locates the divergent and the copied records with)."""
    low, _ = source.watermarks(topic, p)
    window = low if start_offset is None else max(low, start_offset)
    if since_ms is not None:  # a hint only (brokers differ); the records' timestamps decide below
        at = source.offset_for_time(topic, p, since_ms)
        window = max(low, at if at is not None else low)
    anchor = SyncAnchor.fold(syncs, topic, p, window)
    on_target = p < remote_partitions
    target_low = target.watermarks(remote, p)[0] if on_target else 0
    s_start, t_start = anchor.starts(window, target_low)
    src = source.read_digests(topic, p, s_start, read_timeout, since_ms)
    if since_ms is not None:
        window = src.first_since if src.first_since is not None else (src.offsets[-1] + 1 if src else s_start)
    # before the first sync: the flow never copied these (it started later)
    not_compared = max(0, s_start - window) if s_start > window else 0
    tgt = target.read_digests(remote, p, t_start, read_timeout) if on_target else PartitionDigests()
    alignment = align(src, tgt, anchor.replicated_through, window)
    in_window = sum(1 for o in src.offsets if o >= window) if s_start < window else len(src)
    verdict = PartitionVerdict(
        topic,
        p,
        remote,
        max(s_start, window),
        t_start if on_target else None,
        in_window,
        len(tgt),
        not_compared,
        alignment,
    )
    return verdict, src, tgt


def parse_since(text: str, now: float) -> int:
    """`--since`: an ISO 8601 time (`2024-05-01T12:00:00Z`), epoch milliseconds, or a duration back from now
    (`90s`, `15m`, `2h`, `1d`); epoch ms. ValueError with what is accepted."""
    import datetime as dt

    t = text.strip()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if len(t) > 1 and t[-1] in units and t[:-1].replace(".", "", 1).isdigit():
        return int((now - float(t[:-1]) * units[t[-1]]) * 1000)
    if t.isdigit():
        return int(t)
    try:
        parsed = dt.datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"--since {text!r}: give an ISO 8601 time (2024-05-01T12:00:00Z), epoch milliseconds, "
            "or a duration back from now (90s, 15m, 2h, 1d)"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return int(parsed.timestamp() * 1000)


__all__ = ["Refused", "VerifyReport", "VerifyRequest", "parse_since", "verify"]
