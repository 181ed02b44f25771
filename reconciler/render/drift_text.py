"""DriftReport -> text (terminal) and JSON. Grouped by cluster, then by flow; notes last. Values read from
the topology or a cluster are shown through `reconciler.textutil.term` (issue 44)."""

from __future__ import annotations

import json

from reconciler.drift.report import DriftItem, DriftReport, FlowReport, JobHealth, Level
from reconciler.render.failover import table
from reconciler.textutil import term

_MARK = {Level.ERROR: "x", Level.DRIFT: "!", Level.NOTE: "i"}


def render_json(report: DriftReport) -> str:
    return json.dumps(report.to_dict(), indent=2) + "\n"


def revision_words(rev) -> str:
    if not rev:
        return "(not in a git repository)"
    dirty = ", with uncommitted changes" if rev.get("dirty") else ""
    return (
        f'{rev.get("short")} "{rev.get("message_subject", "")}" by {rev.get("author")} ({rev.get("time_iso")}{dirty})'
    )


def _item_line(i: DriftItem) -> str:
    verb = f"{i.verb} " if i.verb else ""
    return f"{_MARK[i.level]} {i.category.value:<13} {term(verb)}{term(i.message)}"


def _num(x, unit: str = "") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not x.is_integer():
        return f"{x:,.1f}{unit}"
    return f"{int(x):,}{unit}"


def verdict_words(job: JobHealth) -> str:
    """The one verdict on a job (`reconciler.contract.jobstate`), with what the job last said of itself where
    that adds to it: `running`, `running (degraded)`, `down (last: running, stale)`, `duplicated`."""
    verdict, state = job.verdict.value, job.last.state_name
    if state is None:
        return verdict
    if job.running:
        return verdict if state == "running" else f"{verdict} ({state})"
    return f"{verdict} (last: {state}{', stale' if job.stale else ''})"


def flow_row(f: FlowReport) -> tuple:
    job = f.job
    if job is None:
        state, spec = "(disabled)", "-"
    elif job.unknown:
        state, spec = "unknown", "-"
    else:
        state = verdict_words(job)
        spec = {True: "current", False: "OLD", None: "-"}[job.spec_current] if job.reported else "-"
    return (
        f.name,
        f.status.upper() if f.status in ("drift", "error") else f.status,
        state,
        spec,
        _num(job.last.lag_total if job else None),
        _num(job.last.latency_ms.p99 if job else None, " ms"),
        _num(f.heartbeat_age_seconds, "s"),
    )


FLOW_HEADERS = ["FLOW", "STATUS", "JOB", "SPEC", "LAG", "P99 RECORD AGE", "HEARTBEAT AGE"]


def render(report: DriftReport) -> str:
    name = f" for {term(report.title)}" if report.title else ""
    lines = [
        f"Drift report{name}, {term(report.generated_at)}",
        f"topology revision: {term(revision_words(report.revision))}",
        "",
        term(report.headline()),
        "",
    ]
    for cluster in report.clusters:
        groups = report.by_cluster().get(cluster.alias, {})
        shown = {flow: [i for i in items if i.level is not Level.NOTE] for flow, items in groups.items()}
        head = f"cluster {term(cluster.alias)}: {cluster.status.upper() if cluster.status != 'ok' else 'ok'}"
        if cluster.error:
            head += f" ({term(cluster.error)})"
        a = cluster.applied
        if a:
            head += (
                f"; last reconciled to {term(a['short'] or 'an unknown revision (applied outside git)')}{' (dirty)' if a['dirty'] else ''}"
                + (f" at {term(a['applied_at'])}" if a.get("applied_at") else "")
                + (f" by {term(a['who'])}" if a.get("who") else "")
            )
        elif cluster.reachable:
            head += "; no apply recorded"
        lines.append(head)
        for flow, items in sorted(shown.items(), key=lambda kv: (kv[0] == "", kv[0])):
            if not items:
                continue
            lines.append(f"  flow {term(flow)}:" if flow else "  (no flow):")
            for i in items:
                lines.append(f"    {_item_line(i)}")
                if i.reason:
                    lines.append(f"        # {term(i.reason)}")
                elif i.hint:
                    lines.append(f"        hint: {term(i.hint)}")
        lines.append("")
    if report.flows:
        lines.append("flows:")
        lines += ["  " + row for row in table(FLOW_HEADERS, [flow_row(f) for f in report.flows]).splitlines()]
        lines.append("")
    notes = report.notes
    if notes:
        lines.append("notes:")
        lines += [f"  i {term(i.cluster)}: {term(i.message)}" for i in notes]
        lines.append("")
    slo = {k: v for k, v in report.slo.items() if v is not None}
    lines.append(
        "SLO: " + (", ".join(f"{k}={term(v)}" for k, v in slo.items()) if slo else "none set (`slo:` in the topology)")
    )
    return "\n".join(lines) + "\n"
