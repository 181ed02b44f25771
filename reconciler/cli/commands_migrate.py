"""`verify`, `cutover` and `failback`: what operators do around one flow's replication (issue 38).

Each command parses, calls one operation (`operations/verify.py`, `operations/cutover.py`,
`operations/failback.py`) with the Backend,
and renders what it returns; every printed line goes through the topology's Redactor.
"""

from __future__ import annotations

import json
import sys

from reconciler.cli.commands_failover import run_on_topology
from reconciler.cli.common import EXIT_ERROR, EXIT_OK, add_paths_argument, timeout_argument
from reconciler.mirror.verify import DiffKind
from reconciler.operations import cutover as cutover_op
from reconciler.operations import failback as failback_op
from reconciler.operations import verify as verify_op
from reconciler.operations.backend import Backend
from reconciler.render.failover import table
from reconciler.textutil import term


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

    p = sub.add_parser(
        "failback",
        help="after a failover A->B: count (and truncate) what A accepted that never reached B, and set where the "
        "reverse flow B->A starts so that nothing is copied back into A twice",
    )
    add_paths_argument(p)
    p.add_argument("--from", dest="source", required=True, metavar="B", help="the cluster the groups run on now")
    p.add_argument("--to", dest="target", required=True, metavar="A", help="the cluster they go back to")
    p.add_argument(
        "--record",
        metavar="CUTOVER.json",
        help="the record `cutover` wrote: A is compared from each partition's end at cutover "
        "(default: from past the flow A->B's newest offset sync)",
    )
    p.add_argument(
        "--truncate",
        action="store_true",
        help="delete (DeleteRecords) each partition of A holding divergent records up to its end, where the broker "
        "supports it: the divergent records and the ones before them, which B holds",
    )
    p.add_argument("--dry-run", action="store_true", help="count and show; commit and delete nothing")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument(
        "--timeout", type=timeout_argument, default=30.0, metavar="SECONDS", help="per cluster request (default 30)"
    )
    p.set_defaults(func=cmd_failback)


def cmd_verify(args, backend: Backend) -> int:
    try:
        since = verify_op.parse_since(args.since, backend.clock()) if args.since else None
    except ValueError as exc:
        print(term(f"error: {exc}"), file=sys.stderr)
        return EXIT_ERROR

    def body(topology, redact) -> int:
        report = verify_op.verify(topology, verify_op.VerifyRequest(args.flow, since, args.timeout), backend)
        text = json.dumps(verify_json(report), indent=2) + "\n" if args.format == "json" else verify_text(report)
        sys.stdout.write(term(redact(text), newlines=True))
        return EXIT_OK if report.clean else EXIT_ERROR

    return run_on_topology(args, body)


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
        outcome = cutover_op.cutover(
            topology, request, backend, lambda line: print(term(redact(line)), file=sys.stderr)
        )
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
            print(term(redact(f"error: refused: {refusal}")), file=sys.stderr)
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

    return run_on_topology(args, body)


def cmd_failback(args, backend: Backend) -> int:
    from pathlib import Path

    record = None
    if args.record:
        try:
            record = cutover_op.CutoverRecord.parse(Path(args.record).read_text(), args.record)
        except (OSError, ValueError) as exc:
            print(term(f"error: {exc}"), file=sys.stderr)
            return EXIT_ERROR

    def body(topology, redact) -> int:
        request = failback_op.FailbackRequest(
            args.source, args.target, record, truncate=args.truncate, dry_run=args.dry_run, timeout=args.timeout
        )
        outcome = failback_op.failback(topology, request, backend)
        text = json.dumps(failback_json(outcome), indent=2) + "\n" if args.format == "json" else failback_text(outcome)
        sys.stdout.write(term(redact(text), newlines=True))
        for error in outcome.truncate_errors:
            print(term(redact(f"error: not truncated: {error}")), file=sys.stderr)
        return EXIT_ERROR if outcome.truncate_errors else EXIT_OK

    return run_on_topology(args, body)


def failback_json(o: failback_op.FailbackOutcome) -> dict:
    return {
        "forward": o.forward,
        "reverse": o.reverse,
        "from": o.source,
        "to": o.target,
        "dry_run": o.dry_run,
        "from_record": o.from_record,
        "divergent_records": o.divergent,
        "partitions": [
            {
                "topic": d.topic,
                "partition": d.partition,
                "remote_topic": d.remote_topic,
                "cutover_end": d.cutover_end,
                "end": d.end,
                "copied_after_cutover": d.copied,
                "divergent": d.count,
                "divergent_offsets": [[r.source_first, r.source_last] for r in d.runs],
                "truncated": d.truncated,
                "truncate_error": d.truncate_error,
            }
            for d in o.divergence
        ],
        "reverse_group": o.starts.group,
        "reverse_starts": [
            {
                "topic": p.partition.topic,
                "partition": p.partition.partition,
                "position": p.translated,
                "committed_before": p.committed,
                "action": p.action.value,
            }
            for p in o.starts.partitions
        ],
        "applied": o.applied,
    }


def failback_text(o: failback_op.FailbackOutcome) -> str:
    out = [
        f"failback {o.source} -> {o.target}: {o.target}'s records after the cutover"
        + ("" if o.from_record else " (past the newest offset sync: no --record)")
        + f" that never reached {o.source}"
    ]
    rows = [
        (
            f"{d.topic}-{d.partition}",
            d.cutover_end,
            d.end,
            d.copied,
            d.count,
            ", ".join(_span(r.source_first, r.source_last) for r in d.runs) or "-",
        )
        + ((("yes" if d.truncated else "no" if d.truncate_error else "-"),) if o.truncate else ())
        for d in o.divergence
    ]
    head = ("PARTITION", "FROM", "END", "COPIED", "DIVERGENT", "OFFSETS") + (("TRUNCATED",) if o.truncate else ())
    out.append(table(head, rows).rstrip("\n"))
    out.append("")
    if o.starts.partitions:
        out.append(f"the reverse flow {o.reverse} starts on {o.source} (its job's group {o.starts.group}):")
        starts = [
            (str(p.partition), p.translated, "-" if p.committed is None else p.committed, p.action.value)
            for p in o.starts.partitions
        ]
        out.append(table(("PARTITION", "POSITION", "BEFORE", "ACTION"), starts).rstrip("\n"))
    else:
        out.append(
            f"the reverse flow {o.reverse} writes none of {o.target}'s original topics (its policy names them apart): "
            "no start position to set"
        )
    out.append("")
    n = len(o.starts.commits)
    out.append(
        f"{o.divergent} divergent record(s); "
        + (
            f"dry run: {n} position(s) would be committed{' and partitions truncated' if o.truncate else ''}; "
            "nothing was changed"
            if o.dry_run
            else f"committed {n} position(s)"
            + (f"; truncated {sum(1 for d in o.divergence if d.truncated)} partition(s)" if o.truncate else "")
            + f"; next: enable flow {o.reverse} and apply"
        )
    )
    return "\n".join(out) + "\n"
