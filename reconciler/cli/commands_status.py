"""`reconciler status PATH...`: every replication job of a topology, as the jobs report themselves.

Per job: the flow, its deployer and where it runs, the state (running, starting, pending sync, down,
restart-required, stopped, not deployed, running elsewhere), the spec hash it runs against the
desired one, lag in records and seconds (the age of the oldest record not replicated yet), latency p50/p99, throughput, records copied and when it was last seen. Jobs the
topology does not want any more (removed or disabled flows) are listed too.

Exit codes: 0, or with --detailed-exitcode 2 when a job of an enabled flow is not running the
desired spec (1: the topology is invalid).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from reconciler.cli.common import EXIT_CHANGES, EXIT_ERROR, EXIT_OK, add_paths_argument, load_validated
from reconciler.jobplan.state import iso
from reconciler.mirror.group_sync import GroupSyncReason, GroupTally
from reconciler.operations.backend import Backend
from reconciler.operations.status import status
from reconciler.textutil import LAG_AGE, RECORD_AGE, plural, term
from reconciler.topology.connection import redactor_for

FILTERED_GROUPS_SHOWN = 5  # groups named on the line of those a flow does not copy for (`status`, text)


def register(sub) -> None:
    p = sub.add_parser("status", help="show every replication job: where, state, spec, lag, latency, throughput")
    add_paths_argument(p)
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument(
        "--detailed-exitcode",
        action="store_true",
        help="exit 2 when a job of an enabled flow is not running the desired spec",
    )
    p.set_defaults(func=cmd_status)


def _age(ms: int | None, now_ms: int, unreadable: bool = False) -> str:
    if ms is None:
        return "unknown" if unreadable else "no status"
    s = max(0.0, (now_ms - ms) / 1000.0)
    if s < 120:
        return f"{s:.0f}s ago"
    if s < 7200:
        return f"{s / 60:.0f}m ago"
    return f"{s / 3600:.0f}h ago"


def _ms(v: Any) -> str:
    return "-" if v is None else f"{v:.0f}ms"


def _seconds(v: Any) -> str:
    return "-" if v is None else f"{v:.1f}s" if v < 10 else f"{v:.0f}s"


def _spec_cell(r: dict) -> str:
    want = (r["desired_hash"] or "")[:8]
    run = (r["running_hash"] or "")[:8]
    if not r["wanted"]:
        return f"{run or '-'} (not wanted)"
    if not run:
        return f"- / {want}"
    if r["running_hash"] == r["desired_hash"]:
        return f"{run} = desired"
    if r["deployed_hash"] == r["desired_hash"]:
        return f"{run} -> {want} (pending)"
    return f"{run} != {want}"


COLUMNS = [
    "FLOW",
    "DEPLOYER",
    "WHERE",
    "STATE",
    "SPEC (running / desired)",
    "LAG",
    "LAG AGE",
    "AGE P50",
    "AGE P99",
    "REC/S",
    "RECORDS",
    "LAST SEEN",
]


def render_text(rows: list[dict], now_ms: int) -> str:
    """The table of `status`, from the rows' JSON form (`JobRow.to_dict()`)."""
    lines = _table(rows, now_ms)
    notes = _notes(rows)
    if notes:
        lines += ["", *(term(n) for n in notes)]
    groups = _group_lines(rows, now_ms)
    if groups:
        lines += ["", "Consumer groups (offset syncs to the target):", *(term(g) for g in groups)]
    wanted = [r for r in rows if r["wanted"]]
    ok = sum(1 for r in wanted if r["in_sync"])
    lines += [
        "",
        "LAG: records not replicated yet (the source's end offsets now - the job's positions); "
        f"LAG AGE: {LAG_AGE} (its timestamp)",
        f"AGE: {RECORD_AGE} when the target acknowledges a record (backlog included; the figure "
        "slo.max_latency_p99_ms is checked against)",
    ]
    lines += ["", f"{ok} of {plural(len(wanted), 'job')} run the desired spec."]
    return "\n".join(lines) + "\n"


def _row(r: dict, now_ms: int) -> list[str]:
    lat = r["latency_ms"] or {}
    state = r["state"] + (f" ({r['job_state']})" if r["job_state"] not in (None, "running") else "")
    return [
        r["flow"],
        r["deployer"] or "-",
        r["where"],
        state,
        _spec_cell(r),
        "-" if r["lag_total"] is None else str(r["lag_total"]),
        _seconds(r["lag_seconds"]),
        _ms(lat.get("p50")),
        _ms(lat.get("p99")),
        "-" if r["records_per_second"] is None else f"{r['records_per_second']:.0f}",
        "-" if r["records"] is None else f"{r['records']}{' (stale)' if r['records_stale'] else ''}",
        _age(r["heartbeat_at"], now_ms, bool(r["unreadable"])),
    ]


def _table(rows: list[dict], now_ms: int) -> list[str]:
    """One line per job under the header, columns aligned."""
    table = [COLUMNS] + [_row(r, now_ms) for r in rows]
    table = [[term(c) for c in row] for row in table]  # names and job messages read from the clusters (issue 44)
    widths = [max(len(row[i]) for row in table) for i in range(len(COLUMNS))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]


def _notes(rows: list[dict]) -> list[str]:
    """Why a job is in its state, its last error, the partitions it does not copy (its faults, and its topic refresh's
    findings), its dead letters and losses."""
    notes = [f"  {r['flow']}: {r['why']}" for r in rows if r["why"]]
    notes += [
        f"  {r['flow']}: last error: {r['last_error']}" for r in rows if r["last_error"] and r["state"] != "running"
    ]
    notes += [
        f"  {r['flow']}: {f['topic']}:{f['partition']} not copied since {iso(f['since'])} ({f['kind']}): {f['reason']}"
        for r in rows
        for f in r.get("faults") or ()
    ]
    notes += [f"  {r['flow']}: {f}" for r in rows for f in r.get("findings") or ()]  # routed, not copied now
    notes += [
        f"  {r['flow']}: {r['dead_lettered']} record(s) refused by the target, in the dead-letter topic"
        for r in rows
        if r.get("dead_lettered")
    ]
    notes += [
        f"  {r['flow']}: the source lost records at {c['topic']}:{c['partition']} ({c.get('kind') or 'out-of-range'}, "
        f"{c['count']} time(s)"
        + (f", {c['reused']} copied offsets given to new records, copied again" if c.get("reused") else "")
        + "); see the job's out_of_range events"
        for r in rows
        for c in r.get("data_loss") or ()
    ]
    return notes


def _group_lines(rows: list[dict], now_ms: int) -> list[str]:
    """Each consumer group of each flow: synced (its last checkpoint) or why not."""
    filtered = GroupSyncReason.TOPIC_FILTERED.name.lower()
    groups = [
        f"  {r['flow']}: group {g['group']}: "
        + (
            f"not synced: {GroupSyncReason[g['reason'].upper()].value}"
            + (f" ({g['partition']})" if g["partition"] else "")
            if g["reason"]
            else f"last checkpoint {_age(g['last_checkpoint_ms'], now_ms)}"
        )
        for r in rows
        for g in r.get("groups", ())
        if g["reason"] != filtered
    ]
    # A group that reads only topics the flow does not copy is another flow's business (in a mesh, most groups are
    # that for most flows): one line per flow, not one per group; `--format json` has each.
    for r in rows:
        names = sorted(g["group"] for g in r.get("groups", ()) if g["reason"] == filtered)
        tally = GroupTally.from_dict(r["group_tally"]) if r.get("group_tally") else None
        n = tally.count(GroupSyncReason.TOPIC_FILTERED) if tally is not None else len(names)
        if n:
            shown = ", ".join(names[:FILTERED_GROUPS_SHOWN]) + (
                ", ..." if n > min(len(names), FILTERED_GROUPS_SHOWN) else ""
            )
            groups.append(
                f"  {r['flow']}: groups that read only topics the flow does not copy ({n})"
                + (f": {shown}" if names else "")
            )
        if tally is not None and tally.total > len(r.get("groups", ())):
            groups.append(_group_summary(r["flow"], tally, len(r["groups"]), now_ms))
    return groups


def _group_summary(flow: str, tally: GroupTally, listed: int, now_ms: int) -> str:
    """One line for a flow with more groups than its status record lists: every group counted."""
    oldest = f" (oldest checkpoint {_age(tally.oldest_checkpoint_ms, now_ms)})" if tally.oldest_checkpoint_ms else ""
    missing = "; ".join(f"{n:,} {r.value}" for r, n in tally.not_synced)
    return (
        f"  {flow}: {tally.total:,} groups in all: {tally.synced:,} synced{oldest}"
        + (f", not synced: {missing}" if missing else "")
        + f" (the {listed:,} listed are those not synced first, then the oldest checkpoints)"
    )


def cmd_status(args, backend: Backend) -> int:
    topology, _ = load_validated(args.paths, quiet_warnings=True, env=args.env)
    if topology is None:
        return EXIT_ERROR
    redact = redactor_for(topology)
    report = status(topology, backend)
    unreadable = report.unreadable
    for alias, why in unreadable.items():  # lead with it: the table below cannot say what runs there
        print(term(f"error: cannot read job statuses on cluster {alias}: {why}"), file=sys.stderr)
    if args.format == "json":
        text = json.dumps(report.to_dict(), indent=2) + "\n"
    else:
        rows = [r.to_dict() for r in report.rows]
        text = render_text(rows, report.now_ms) if rows else "No flows, no jobs.\n"
    sys.stdout.write(redact(text))
    if unreadable:
        print(
            f"error: {plural(len(unreadable), 'cluster')} could not be read; job states that depend on them are unknown "
            "where they depend on them (run with -v for the Kafka clients' own log lines)",
            file=sys.stderr,
        )
        return EXIT_ERROR
    if args.detailed_exitcode and report.out_of_sync:
        return EXIT_CHANGES
    return EXIT_OK
