"""DriftReport -> Markdown (a GitHub issue or comment): summary, clusters, drift per cluster and flow,
flows with their jobs, notes folded away. Cut to fit GitHub's 65,536-character limit. Every value read from
the topology or a cluster goes through `reconciler.textutil` (`md_inline`, `md_code_span`: issue 44)."""

from __future__ import annotations

from reconciler.drift.report import DriftReport, Level
from reconciler.render.drift_text import FLOW_HEADERS, flow_row, revision_words
from reconciler.textutil import md_code_span, md_inline

MAX_ITEMS = 200
MAX_CHARS = 60_000
_ICON = {Level.ERROR: "❌", Level.DRIFT: "⚠️", Level.NOTE: "ℹ️"}
_STATUS = {"ok": "✅ ok", "drift": "⚠️ drift", "error": "❌ error", "disabled": "⏸ disabled", "in-sync": "✅ in sync"}


def _cell(text) -> str:
    return "-" if text is None else md_inline(text)


def _code(text) -> str:
    return md_code_span(text, in_table=True)


def _render(report: DriftReport, max_items: int) -> str:
    title = f"### Drift report: {md_code_span(report.topology)}" if report.topology else "### Drift report"
    if report.environment:
        title += f"{',' if report.topology else ':'} environment {md_code_span(report.environment)}"
    out = [
        title,
        "",
        f"**{md_inline(report.headline())}**",
        "",
        f"Checked {md_inline(report.generated_at)} against topology revision {md_inline(revision_words(report.revision))}.",
        "",
    ]
    out += ["| cluster | status | drift items | last reconciled to |", "|---|---|---:|---|"]
    for c in report.clusters:
        a = c.applied
        applied = (
            f"{_code(a['short'] or 'outside git')}{' (dirty)' if a['dirty'] else ''} by {_cell(a.get('who') or '?')} "
            f"at {_cell(a.get('applied_at') or '?')}"
            if a
            else ("no apply recorded" if c.reachable else _cell(c.error))
        )
        out.append(
            f"| {_code(c.alias)} | {_STATUS[c.status]} | {sum(1 for i in c.items if i.level is Level.DRIFT)} | {applied} |"
        )
    out.append("")
    shown = 0
    for c in report.clusters:
        items = [i for i in c.items if i.level is not Level.NOTE]
        if not items:
            continue
        out += [
            f"#### Cluster {md_code_span(c.alias)}",
            "",
            "| | what | flow | subject | details | what to do |",
            "|---|---|---|---|---|---|",
        ]
        for i in items:
            if shown >= max_items:
                break
            shown += 1
            flows = ", ".join(_code(f) for f in i.flows) or "-"
            verb = f"{_code(i.verb)} " if i.verb else ""
            out.append(
                f"| {_ICON[i.level]} | {i.category.value} | {flows} | {_cell(i.subject) if i.subject else '-'} | "
                f"{verb}{_cell(i.message)}{' _(' + _cell(i.reason) + ')_' if i.reason else ''} | {_cell(i.hint or '')} |"
            )
        out.append("")
    total = len(report.drift) + len(report.errors)
    if shown < total:
        out += [f"_… and {total - shown} more; see the HTML report or `reconciler drift`._", ""]
    if report.flows:
        out += [
            "#### Flows",
            "",
            "| " + " | ".join(h.lower() for h in FLOW_HEADERS) + " |",
            "|" + "---|" * len(FLOW_HEADERS),
        ]
        for f in report.flows:
            row = list(flow_row(f))
            cells = [_code(row[0]), _STATUS.get(f.status) or _cell(f.status), *(_cell(x) for x in row[2:])]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    if report.notes:
        out += [f"<details><summary>Notes ({len(report.notes)})</summary>", ""]
        out += [f"- {md_code_span(i.cluster)} {_cell(i.message)}" for i in report.notes[:max_items]]
        out += ["", "</details>", ""]
    return "\n".join(out)


def render(report: DriftReport, max_items: int = MAX_ITEMS, max_chars: int = MAX_CHARS) -> str:
    while True:
        text = _render(report, max_items)
        if len(text) <= max_chars or max_items == 0:
            return text[:max_chars]
        max_items //= 2
