"""Text and JSON for the failover commands: translated offsets, failover plans, reachability.

Pure: every function takes results of `reconciler.mirror.mirror_client` and returns a string or
JSON-ready data; the JSON shapes are documented in docs/failover.md.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.mirror.mirror_client import (
    CheckpointScan,
    FailoverPlan,
    GroupState,
    Reachability,
    upstream_topic_name,
)
from reconciler.mirror.policy import ReplicationPolicy
from reconciler.textutil import term


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns, two spaces apart; `-` for None; every cell shown through `term` (issue 44)."""
    cells = [[("-" if c is None else term(c)) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines) + "\n"


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _seconds(age: float | None) -> str | None:
    return None if age is None else f"{age:.1f}s"


@dataclass(frozen=True)
class Translation:
    """What `offsets translate` shows: a group's checkpoints from `source`, read on `target`."""

    group: str
    source: str
    target: str
    policy: ReplicationPolicy
    scan: CheckpointScan


def translation_json(t: Translation) -> dict:
    return {
        "group": t.group,
        "source": t.source,
        "target": t.target,
        "checkpoints_topic": t.policy.checkpoints_topic(t.source),
        "skipped_records": t.scan.skipped,
        "offsets": [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "offset": c.downstream_offset,
                "upstream_topic": upstream_topic_name(tp.topic, t.source, t.target, t.policy),
                "upstream_offset": c.upstream_offset,
                "metadata": c.metadata,
            }
            for tp, c in sorted(t.scan.checkpoints.items())
        ],
    }


def translation_text(t: Translation) -> str:
    head = (
        f"group {term(t.group)}: offsets on {term(t.target)} translated from {term(t.source)} "
        f"(checkpoints in {term(t.policy.checkpoints_topic(t.source))} on {term(t.target)})\n"
    )
    rows = [
        (o["topic"], o["partition"], o["offset"], o["upstream_topic"], o["upstream_offset"])
        for o in translation_json(t)["offsets"]
    ]
    body = table(
        [f"TOPIC ({term(t.target)})", "PARTITION", "OFFSET", f"UPSTREAM TOPIC ({term(t.source)})", "UPSTREAM OFFSET"],
        rows,
    )
    return head + body + _skipped_note(t.scan)


def _skipped_note(scan: CheckpointScan) -> str:
    return (
        f"note: {scan.skipped} record(s) in the checkpoints topic were not MM2 checkpoints and were skipped\n"
        if scan.skipped
        else ""
    )


@dataclass(frozen=True)
class Failover:
    """What `failover` shows and, with --apply, did."""

    translation: Translation
    group_state: GroupState
    plan: FailoverPlan
    applied: bool = False


def failover_json(f: Failover) -> dict:
    return {
        **{k: v for k, v in translation_json(f.translation).items() if k != "offsets"},
        "group_state": f.group_state.state,
        "group_members": f.group_state.members,
        "group_active": f.group_state.active,
        "applied": f.applied,
        "partitions": [
            {
                "topic": p.partition.topic,
                "partition": p.partition.partition,
                "translated": p.translated,
                "committed": p.committed,
                "action": p.action.value,
            }
            for p in f.plan.partitions
        ],
    }


def failover_text(f: Failover) -> str:
    t = f.translation
    gs = f.group_state
    lines = [
        f"failover of group {term(t.group)} from {term(t.source)} to {term(t.target)}",
        f"group {term(t.group)} on {term(t.target)}: state {term(gs.state)}, {gs.members} member(s) reported"
        + (" -> ACTIVE" if gs.active else ""),
    ]
    rows = [
        (p.partition.topic, p.partition.partition, p.translated, p.committed, p.action.value) for p in f.plan.partitions
    ]
    body = table([f"TOPIC ({term(t.target)})", "PARTITION", "TRANSLATED", "COMMITTED", "ACTION"], rows)
    return "\n".join(lines) + "\n" + body + _skipped_note(t.scan)


def reachability_json(r: Reachability) -> dict:
    return {
        "cluster": r.cluster,
        "upstream": [
            {
                "cluster": u.alias,
                "hops": u.hops,
                "via": u.via,
                "last_heartbeat": _iso(u.last_heartbeat_ms),
                "age_seconds": u.age_seconds,
            }
            for u in r.upstream
        ],
        "heartbeat_topics": [
            {
                "topic": h.topic,
                "sources": list(h.sources),
                "last_heartbeat": _iso(h.latest.timestamp) if h.latest else None,
                "heartbeat": f"{h.latest.source_cluster_alias}->{h.latest.target_cluster_alias}" if h.latest else None,
                "age_seconds": h.age_seconds,
            }
            for h in r.topics
        ],
    }


def reachability_text(r: Reachability, max_age_seconds: float | None = None) -> str:
    """Upstream clusters first (what operators ask), then the heartbeat topics behind them."""

    def status(age: float | None) -> str:
        if age is None:
            return "no heartbeat"
        return "STALE" if max_age_seconds is not None and age > max_age_seconds else "ok"

    if not r.upstream:
        head = f"cluster {term(r.cluster)}: no upstream clusters (no replicated heartbeat topics)\n"
    else:
        head = f"cluster {term(r.cluster)}: upstream clusters from heartbeats\n" + table(
            ["UPSTREAM", "HOPS", "VIA", "LAST HEARTBEAT", "AGE", "STATUS"],
            [
                (u.alias, u.hops, u.via, _iso(u.last_heartbeat_ms), _seconds(u.age_seconds), status(u.age_seconds))
                for u in r.upstream
            ],
        )
    if not r.topics:
        return head
    topics = table(
        ["HEARTBEAT TOPIC", "PATH", "LAST HEARTBEAT", "AGE"],
        [
            (
                h.topic,
                " -> ".join([*reversed(h.sources), r.cluster]) if h.sources else "(local)",
                _iso(h.latest.timestamp) if h.latest else None,
                _seconds(h.age_seconds),
            )
            for h in r.topics
        ],
    )
    return head + "\n" + topics
