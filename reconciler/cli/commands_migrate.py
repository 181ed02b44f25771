"""`verify` and `cutover`: what operators do around one flow's replication (issue 38).

Each command parses, calls one operation (`operations/verify.py`, `operations/cutover.py`) with the Backend,
and renders what it returns; every printed line goes through the topology's Redactor.
"""

from __future__ import annotations

import json
import sys

from reconciler.cli.common import EXIT_ERROR, EXIT_OK, add_paths_argument, load_validated, timeout_argument
from reconciler.mirror.verify import DiffKind
from reconciler.operations import cutover as cutover_op
from reconciler.operations import offsets
from reconciler.operations import verify as verify_op
from reconciler.operations.backend import Backend
from reconciler.render.mirror import table
from reconciler.topology.connection import redactor_for


def register(sub) -> None:
    p = sub.add_parser(
        "verify",
        help="compare a flow's source topics with their remote topics record by record (exit 1 on any difference)",
    )
    add_paths_argument(p)
    p.add_argument("--flow", required=True, metavar="A->B", help="the flow to verify")
    p.add_argument(
        "--since",
        metavar="TIME",
        help="compare from the first record at or after TIME (ISO 8601, epoch ms, or 15m/2h/1d back); "
        "default: each partition from its beginning",
    )
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument(
        "--timeout",
        type=timeout_argument,
        default=30.0,
        metavar="SECONDS",
        help="per cluster request (default 30; reading a partition to its end gets 20 of them)",
    )
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser(
        "cutover",
        help="move a flow's consumer groups to its target once it is caught up (refused while they are active)",
    )
    add_paths_argument(p)
    p.add_argument("--flow", required=True, metavar="A->B", help="the flow whose target the groups move to")
    p.add_argument(
        "--group",
        action="append",
        default=[],
        metavar="G",
        help="a consumer group to move (repeatable; default: every group of the flow with a checkpoint on B)",
    )
    p.add_argument("--dry-run", action="store_true", help="wait and show what would be committed; commit nothing")
    p.add_argument(
        "--wait",
        type=timeout_argument,
        default=300.0,
        metavar="SECONDS",
        help="for the lag to reach 0 and for the final checkpoints (default 300), then fail naming what is behind",
    )
    p.add_argument(
        "--record", metavar="FILE", help="where to write the cutover record (default: cutover-A.B-TIME.json)"
    )
    p.add_argument(
        "--timeout", type=timeout_argument, default=30.0, metavar="SECONDS", help="per cluster request (default 30)"
    )
    p.set_defaults(func=cmd_cutover)


def _run(args, body) -> int:
    topology, _ = load_validated(args.paths, quiet_warnings=True)
    if topology is None:
        return EXIT_ERROR
    redact = redactor_for(topology)
    try:
        return body(topology, redact)
    except offsets.Refused as exc:
        print(redact(f"error: {exc}"), file=sys.stderr)
        return EXIT_ERROR


def cmd_verify(args, backend: Backend) -> int:
    try:
        since = verify_op.parse_since(args.since, backend.clock()) if args.since else None
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR

    def body(topology, redact) -> int:
        report = verify_op.verify(topology, verify_op.VerifyRequest(args.flow, since, args.timeout), backend)
        text = json.dumps(verify_json(report), indent=2) + "\n" if args.format == "json" else verify_text(report)
        sys.stdout.write(redact(text))
        return EXIT_OK if report.clean else EXIT_ERROR

    return _run(args, body)


def verify_json(report: verify_op.VerifyReport) -> dict:
    return {
        "flow": report.flow,
        "since_ms": report.since_ms,
        "clean": report.clean,
        "records_compared": report.compared,
        "seconds": round(report.seconds, 3),
        "missing_topics": list(report.missing_topics),
        "partitions": [
            {
                "topic": v.topic,
                "partition": v.partition,
                "remote_topic": v.remote_topic,
                "source_start": v.source_start,
                "target_start": v.target_start,
                "source_records": v.source_records,
                "target_records": v.target_records,
                "matched": v.alignment.matched,
                "pending": v.alignment.pending,
                "not_compared": v.not_compared,
                "differences": [d.to_dict() for d in v.alignment.differences],
                "duplicates": [d.to_dict() for d in v.alignment.duplicates],
            }
            for v in report.partitions
        ],
    }


def _span(first: int | None, last: int | None) -> str:
    return "-" if first is None else str(first) if first == last else f"{first}..{last}"


def verify_text(report: verify_op.VerifyReport) -> str:
    out = [f"flow {report.flow}: {report.compared} source record(s) compared in {report.seconds:.1f}s"]
    out += [f"remote topic {t} is missing on the target" for t in report.missing_topics]
    rows = [
        (
            f"{v.topic}-{v.partition}",
            v.remote_topic,
            v.source_records,
            v.target_records,
            v.alignment.matched,
            sum(d.count for d in v.alignment.duplicates),
            v.alignment.pending,
            sum(d.count for d in v.alignment.differences),
        )
        for v in report.partitions
    ]
    out.append(
        table(
            ("PARTITION", "REMOTE", "SOURCE", "TARGET", "MATCHED", "DUPLICATES", "PENDING", "DIFFERENCES"), rows
        ).rstrip("\n")
    )
    diffs = [
        (
            f"{v.topic}-{v.partition}",
            d.kind.value,
            _span(d.source_first, d.source_last),
            _span(d.target_first, d.target_last),
            d.count,
        )
        for v in report.partitions
        for d in v.alignment.differences + v.alignment.duplicates
    ]
    if diffs:
        out.append("")
        out.append(table(("PARTITION", "KIND", "SOURCE OFFSETS", "TARGET OFFSETS", "RECORDS"), diffs).rstrip("\n"))
    n = sum(d.count for v in report.partitions for d in v.alignment.differences)
    out.append("")
    out.append(
        "clean: the target holds every source record compared"
        if report.clean
        else f"{n} record(s) differ ({', '.join(k.value for k in (DiffKind.MISSING, DiffKind.EXTRA, DiffKind.CHANGED))})"
        + (f"; {len(report.missing_topics)} remote topic(s) missing" if report.missing_topics else "")
    )
    return "\n".join(out) + "\n"


def cmd_cutover(args, backend: Backend) -> int:
    import datetime as dt
    from pathlib import Path

    from reconciler.topology.flow_id import FlowId

    def body(topology, redact) -> int:
        request = cutover_op.CutoverRequest(
            args.flow, tuple(args.group), dry_run=args.dry_run, wait_seconds=args.wait, timeout=args.timeout
        )
        outcome = cutover_op.cutover(topology, request, backend, lambda line: print(redact(line), file=sys.stderr))
        rows = [
            (g.group, str(p.partition), p.translated, p.committed, p.action.value)
            for g in outcome.groups
            for p in g.outcome.plan.partitions
        ]
        sys.stdout.write(redact(table(("GROUP", "PARTITION (target)", "OFFSET", "COMMITTED", "ACTION"), rows)))
        stamp = dt.datetime.fromtimestamp(outcome.started_ms / 1000, dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        path = Path(args.record or f"cutover-{FlowId.parse(outcome.flow).slug()}-{stamp}.json")
        path.write_text(json.dumps(outcome.to_dict(), indent=2) + "\n")
        print(f"wrote the cutover record to {path}", file=sys.stderr)
        for refusal in outcome.refusals:
            print(redact(f"error: refused: {refusal}"), file=sys.stderr)
        if outcome.refusals:
            return EXIT_ERROR
        n = sum(len(g.outcome.plan.commits) for g in outcome.groups)
        print(
            f"dry run: {n} offset(s) would be committed on {outcome.target}; nothing was changed"
            if outcome.dry_run
            else f"committed {n} offset(s) for {len(outcome.groups)} group(s) on {outcome.target}",
            file=sys.stderr,
        )
        return EXIT_OK

    return _run(args, body)
