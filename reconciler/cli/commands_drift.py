"""`reconciler drift`: compare the live clusters and jobs with the topology (at a git revision) and report.

Read + diff + report, never apply, never take the lease. Exit 0 no drift, 2 drift, 1 error (an
invalid topology, an unknown revision, a cluster or job status that could not be read). Reports go to
stdout in `--format`, or to files with `--out FILE` (repeatable; each file's format follows its
suffix: .html, .md, .json, .txt, .prom, else `--format`), in which case stdout gets the text summary.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from reconciler import outputs
from reconciler.cli.common import (
    EXIT_CHANGES,
    EXIT_ERROR,
    EXIT_OK,
    add_paths_argument,
    add_revision_argument,
    load_validated,
    timeout_argument,
)
from reconciler.drift.report import DriftReport
from reconciler.operations.backend import Backend
from reconciler.operations.drift import drift
from reconciler.render import drift_html, drift_markdown, drift_prometheus, drift_text
from reconciler.topology.connection import redactor_for
from reconciler.topology.model import Topology

FORMATS = ("text", "json", "markdown", "html", "prometheus")
SUFFIXES = {
    ".html": "html",
    ".htm": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".json": "json",
    ".txt": "text",
    ".prom": "prometheus",
}


def register(sub) -> None:
    p = sub.add_parser(
        "drift", help="compare the live clusters and jobs with the topology and report the drift (never applies)"
    )
    add_paths_argument(p)
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument(
        "--out",
        metavar="FILE",
        action="append",
        default=[],
        help="write the report to FILE (repeatable; format from the suffix .html/.md/.json/.txt/.prom, else "
        "--format); stdout then gets the text summary",
    )
    add_revision_argument(p)
    p.add_argument(
        "--no-jobs",
        action="store_true",
        help="do not check job status, lag and latency (flows replicated by something that publishes no "
        "reconciler status records, e.g. MirrorMaker 2 itself); heartbeats are still checked",
    )
    p.add_argument(
        "--job-stale-seconds",
        type=timeout_argument,
        default=None,
        metavar="SECONDS",
        help="a job whose last status is older than this is down (default: three of the job's status intervals, "
        "at least 15 s, the rule plan, apply and status use)",
    )
    p.set_defaults(func=cmd_drift)


def renderer(fmt: str, topology: Topology) -> Callable[[DriftReport], str]:
    return {
        "text": drift_text.render,
        "json": drift_text.render_json,
        "markdown": drift_markdown.render,
        "html": lambda r: drift_html.render(r, topology),
        "prometheus": drift_prometheus.render,
    }[fmt]


def _format_of(path: str, default: str) -> str:
    return SUFFIXES.get(Path(path).suffix.lower(), default)


def cmd_drift(args, backend: Backend) -> int:
    bad_out = outputs.problems(args.out)
    if bad_out:
        print(bad_out[0], file=sys.stderr)
        return EXIT_ERROR
    at = (backend.git, args.revision) if args.revision is not None else None
    topology, _ = load_validated(args.paths, quiet_warnings=True, at=at, env=args.env)
    if topology is None:
        return EXIT_ERROR
    redact = redactor_for(topology)
    revision = backend.git.revision(args.paths, args.revision)
    report = drift(
        topology, backend, revision=revision, check_jobs=not args.no_jobs, job_stale_seconds=args.job_stale_seconds
    )
    for path in args.out:
        try:
            outputs.write_text(path, redact(renderer(_format_of(path, args.format), topology)(report)))
        except outputs.OutputError as exc:
            print(exc, file=sys.stderr)
            return EXIT_ERROR
    if args.out:
        sys.stdout.write(redact(drift_text.render(report)))
        print(f"Wrote the drift report to {', '.join(args.out)}", file=sys.stderr)
    else:
        sys.stdout.write(redact(renderer(args.format, topology)(report)))
    sys.stdout.flush()
    if report.errors:
        return EXIT_ERROR
    return EXIT_CHANGES if report.has_drift else EXIT_OK
