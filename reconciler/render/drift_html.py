"""DriftReport -> one self-contained HTML page (inline CSS and SVG; no scripts, fonts or links out).

What a person sees first: a status banner with the headline, summary cards (drift items, clusters,
flows, jobs, last reconciled revision), the topology graph with drifted flows highlighted and each
flow's lag on its arrow, bar charts of lag and heartbeat age per flow against the SLOs, then the
drift per cluster (grouped by flow), flows and jobs, clusters and their applied revisions, notes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from reconciler.contract.jobstate import JobState
from reconciler.drift.report import CATEGORY_TITLES, Category, DriftItem, DriftReport, FlowReport, Level
from reconciler.render import svg
from reconciler.render.drift_text import flow_row, verdict_words
from reconciler.topology.model import Topology

CSS = """
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 -apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;color:#1f2328;background:#f6f8fa}
main{max-width:1360px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:24px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 10px} h3{font-size:15px;margin:16px 0 8px}
.banner{border-radius:12px;padding:18px 22px;color:#fff;display:flex;align-items:center;gap:18px}
.banner .badge{font-weight:700;font-size:15px;letter-spacing:.06em;background:rgba(255,255,255,.22);padding:6px 12px;border-radius:999px}
.banner p{margin:2px 0 0;opacity:.95}
.s-in-sync{background:linear-gradient(90deg,#1a7f37,#2da44e)} .s-drift{background:linear-gradient(90deg,#9a6700,#d4a72c)}
.s-error{background:linear-gradient(90deg,#a40e26,#cf222e)}
.cards{display:grid;grid-template-columns:repeat(5,1fr);gap:12px;margin:16px 0}
.card{background:#fff;border:1px solid #d0d7de;border-radius:10px;padding:12px 14px}
.card .k{color:#656d76;font-size:12px;text-transform:uppercase;letter-spacing:.05em}
.card .v{font-size:26px;font-weight:650;margin-top:2px} .card .d{color:#656d76;font-size:12px}
.v.bad{color:#cf222e} .v.warn{color:#9a6700} .v.good{color:#1a7f37}
.grid{display:grid;grid-template-columns:1.15fr 1fr;gap:14px}
.panel{background:#fff;border:1px solid #d0d7de;border-radius:10px;padding:12px 16px}
.panel h2{margin-top:4px}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #d0d7de;border-radius:10px;overflow:hidden}
th,td{text-align:left;padding:7px 10px;border-bottom:1px solid #eaeef2;vertical-align:top}
th{background:#f6f8fa;font-size:12px;text-transform:uppercase;letter-spacing:.04em;color:#656d76}
tr:last-child td{border-bottom:none} td.num{text-align:right;font-variant-numeric:tabular-nums}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#eff1f3;padding:1px 5px;border-radius:5px}
.pill{display:inline-block;font-size:12px;font-weight:600;padding:1px 9px;border-radius:999px;white-space:nowrap}
.p-ok{background:#dafbe1;color:#116329} .p-drift{background:#fff8c5;color:#7d4e00} .p-error{background:#ffebe9;color:#a40e26}
.p-disabled,.p-note{background:#eaeef2;color:#57606a}
.verb{font:600 13px ui-monospace,monospace} .v-plus{color:#1a7f37} .v-tilde{color:#9a6700} .v-minus{color:#cf222e}
.hint{color:#656d76;font-size:12px}
.flowhead td{background:#f6f8fa;font-weight:600}
.swatch{margin-right:14px;font-size:12px;color:#656d76} .swatch i{display:inline-block;width:18px;height:4px;border-radius:2px;margin-right:6px;vertical-align:middle}
details{background:#fff;border:1px solid #d0d7de;border-radius:10px;padding:10px 14px;margin-top:14px}
summary{cursor:pointer;font-weight:600}
footer{color:#656d76;font-size:12px;margin-top:26px}
.empty{color:#656d76;font-style:italic;padding:8px 0}
"""

#: Rows per cluster table (a first report on a large topology can list tens of thousands of topics).
MAX_ROWS_PER_CLUSTER = 500
_STATUS_WORDS = {"in-sync": "IN SYNC", "drift": "DRIFT", "error": "ERROR"}
_VERB_CLASS = {"+": "v-plus", "~": "v-tilde", "-": "v-minus", "-/+": "v-tilde"}  # a replacement: a change


def _e(text) -> str:
    return escape("-" if text is None else str(text), quote=True)


def _pill(status: str, words: str | None = None) -> str:
    return f'<span class="pill p-{_e(status)}">{_e(words or status)}</span>'


def _card(key: str, value: str, detail: str = "", tone: str = "") -> str:
    return (
        f'<div class="card"><div class="k">{_e(key)}</div><div class="v {tone}">{_e(value)}</div>'
        f'<div class="d">{_e(detail)}</div></div>'
    )


def _graph(report: DriftReport, topology: Topology | None) -> str:
    aliases = sorted(
        set(topology.clusters)
        if topology
        else {c.alias for c in report.clusters} | {a for f in report.flows for a in (f.source, f.target)}
    )
    clusters = {c.alias: c for c in report.clusters}
    nodes = []
    for alias in aliases:
        c = clusters.get(alias)
        if c is None:
            nodes.append(svg.Node(alias, alias, "not in any flow", "disabled"))
            continue
        n = sum(1 for i in c.items if i.level is Level.DRIFT)
        sub = "unreachable" if not c.reachable else (f"{n} drift item{'s' if n != 1 else ''}" if n else "in sync")
        tags = topology.clusters[alias].tags if topology and alias in topology.clusters else {}
        tip = alias + (" (" + ", ".join(f"{k}={v}" for k, v in sorted(tags.items())) + ")" if tags else "")
        nodes.append(svg.Node(alias, alias, sub, c.status if c.status in svg.COLORS else "drift", tip + f": {sub}"))
    edges = []
    for f in report.flows:
        edges.append(
            svg.Edge(
                f.source,
                f.target,
                _edge_label(f),
                f.status if f.status in svg.COLORS else "drift",
                dashed=not f.enabled,
                tooltip=f"{f.name}: {f.status}",
            )
        )
    legend = svg.legend({"ok": "in sync", "drift": "drift", "error": "error / unreadable", "disabled": "disabled flow"})
    return svg.topology_graph(nodes, edges) + f"<div>{legend}</div>"


def _edge_label(f: FlowReport) -> str:
    if not f.enabled:
        return "disabled"
    job = f.job
    n = sum(1 for i in f.items if i.level is Level.DRIFT)
    if job is not None and job.last.lag_total is not None and job.running:
        text = f"lag {job.last.lag_total:,}"
    elif job is not None and not job.running:
        text = f"job {job.verdict.value}"
    else:
        text = "ok" if not n else ""
    if n:
        text = f"{text} · {n} drift" if text else f"{n} drift"
    return text


def _charts(report: DriftReport) -> str:
    enabled = [f for f in report.flows if f.enabled]
    if not enabled:
        return '<p class="empty">No enabled flows.</p>'

    def lag_bar(f: FlowReport) -> svg.Bar:
        job = f.job
        if job is None or (not job.reported and job.verdict is JobState.NOT_DEPLOYED):
            return svg.Bar(f.name, None, "no job status")
        if not job.running:
            return svg.Bar(f.name, None, f"job {verdict_words(job)}")
        return svg.Bar(f.name, job.last.lag_total, "no lag reported")

    out = [
        "<h3>Replication lag per flow (records)</h3>",
        svg.bar_chart([lag_bar(f) for f in enabled], report.slo.get("max_lag_records")),
    ]
    hb = [
        svg.Bar(f.name, f.heartbeat_age_seconds, "no heartbeat" if f.heartbeat_topic else "heartbeats disabled")
        for f in enabled
    ]
    out += [
        "<h3>Age of the newest heartbeat on the target (seconds)</h3>",
        svg.bar_chart(hb, report.slo.get("max_heartbeat_age_seconds"), unit="s"),
    ]
    return "".join(out)


def _verb(i: DriftItem) -> str:
    if not i.verb:
        return ""
    return f'<span class="verb {_VERB_CLASS.get(i.verb, "")}">{_e(i.verb)}</span> '


def _item_rows(items: Iterable[DriftItem]) -> str:
    rows = []
    for i in items:
        status = {Level.ERROR: "error", Level.DRIFT: "drift", Level.NOTE: "note"}[i.level]
        hint = f'<div class="hint">{_e(i.reason or i.hint)}</div>' if (i.reason or i.hint) else ""
        rows.append(
            f"<tr><td>{_pill(status, CATEGORY_TITLES[i.category] if i.level is not Level.NOTE else 'note')}</td>"
            f"<td>{f'<code>{_e(i.subject)}</code>' if i.subject else '-'}</td>"
            f"<td>{_verb(i)}{_e(i.message)}{hint}</td></tr>"
        )
    return "".join(rows)


def _clusters_section(report: DriftReport) -> str:
    out = ["<h2>Drift by cluster and flow</h2>"]
    groups = report.by_cluster()
    any_rows = False
    for c in report.clusters:
        per_flow = {
            flow: [i for i in items if i.level is not Level.NOTE] for flow, items in groups.get(c.alias, {}).items()
        }
        per_flow = {k: v for k, v in per_flow.items() if v}
        if not per_flow:
            continue
        any_rows = True
        out.append(f"<h3>Cluster <code>{_e(c.alias)}</code> {_pill(c.status)}</h3>")
        out.append(
            '<table><thead><tr><th style="width:170px">kind</th><th style="width:260px">subject</th>'
            "<th>what differs</th></tr></thead><tbody>"
        )
        budget = MAX_ROWS_PER_CLUSTER
        for flow, items in sorted(per_flow.items(), key=lambda kv: (kv[0] == "", kv[0])):
            label = f"flow {flow}" if flow else "not tied to a flow"
            out.append(f'<tr class="flowhead"><td colspan="3">{_e(label)} ({len(items)})</td></tr>')
            out.append(_item_rows(items[: max(budget, 0)]))
            if len(items) > budget:
                out.append(
                    f'<tr><td colspan="3" class="hint">… and {len(items) - max(budget, 0):,} more '
                    "(all of them: <code>--format json</code>)</td></tr>"
                )
            budget -= len(items)
        out.append("</tbody></table>")
    if not any_rows:
        out.append('<p class="empty">Nothing differs: every topic, config, ACL and job matches the topology.</p>')
    return "".join(out)


def _flows_table(report: DriftReport) -> str:
    if not report.flows:
        return ""
    head = ["flow", "status", "job", "spec", "lag", "p99 record age", "heartbeat age", "records copied", "errors"]
    rows = []
    for f in report.flows:
        name, _, job_state, spec, lag, p99, hb = flow_row(f)
        last = f.job.last if f.job else None
        records = f"{last.records:,}" if last and last.records is not None else "-"
        errors = f"{last.errors:,}" if last and last.errors is not None else "-"
        rows.append(
            f"<tr><td><code>{_e(name)}</code></td><td>{_pill(f.status)}</td><td>{_e(job_state)}</td>"
            f"<td>{_e(spec)}</td><td class=num>{_e(lag)}</td><td class=num>{_e(p99)}</td>"
            f"<td class=num>{_e(hb)}</td><td class=num>{_e(records)}</td><td class=num>{_e(errors)}</td></tr>"
        )
    return (
        "<h2>Flows and jobs</h2><table><thead><tr>"
        + "".join(f"<th>{h}</th>" for h in head)
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )


def _clusters_table(report: DriftReport) -> str:
    rows = []
    for c in report.clusters:
        a = c.applied
        if a:
            rev = f"<code>{_e(a['short'] or 'outside git')}</code>" + (
                " <span class='pill p-drift'>dirty</span>" if a["dirty"] else ""
            )
            subject = _e(a.get("message_subject") or "")
            by = f"{_e(a.get('author') or '?')}, committed {_e(a.get('time_iso') or '?')}"
            applied = f"{_e(a.get('applied_at'))} by {_e(a.get('who'))}"
        else:
            rev, subject, by = ("<i>no apply recorded</i>" if c.reachable else "-"), "", ""
            applied = _e(c.error) if c.error else "-"
        drift = sum(1 for i in c.items if i.level is Level.DRIFT)
        rows.append(
            f"<tr><td><code>{_e(c.alias)}</code></td><td>{_pill(c.status)}</td><td class=num>{drift}</td>"
            f"<td>{rev} {subject}<div class='hint'>{by}</div></td><td>{applied}</td></tr>"
        )
    return (
        "<h2>Clusters and the revision they were last reconciled to</h2><table><thead><tr><th>cluster</th>"
        "<th>status</th><th>drift</th><th>last applied revision</th><th>applied</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )


def _revision_words(rev: Mapping[str, Any] | None) -> str:
    if not rev:
        return "not in git"
    return f"{rev.get('short')} “{rev.get('message_subject', '')}” by {rev.get('author')}" + (
        " + uncommitted changes" if rev.get("dirty") else ""
    )


def _cards(report: DriftReport) -> str:
    """Drift items, readable clusters, flows in sync, jobs running, the revision last reconciled to."""
    enabled = [f for f in report.flows if f.enabled]
    flows_drift = sum(1 for f in report.flows if f.status in ("drift", "error"))
    running = sum(1 for f in enabled if f.job is not None and f.job.running)
    reachable = sum(1 for c in report.clusters if c.reachable)
    applied = sorted(
        {(c.applied["short"], c.applied.get("applied_at") or "") for c in report.clusters if c.applied},
        key=lambda x: x[1],
    )
    last = applied[-1] if applied else None
    n = len(report.drift)
    counts = ", ".join(f"{v} {CATEGORY_TITLES[Category(k)]}" for k, v in report.counts().items())
    return "".join(
        [
            _card("drift items", str(n), counts or "nothing differs", "bad" if n else "good"),
            _card(
                "clusters",
                f"{reachable}/{len(report.clusters)}",
                "readable",
                "good" if reachable == len(report.clusters) else "bad",
            ),
            _card(
                "flows",
                f"{len(report.flows) - flows_drift}/{len(report.flows)}",
                "in sync (or disabled)",
                "good" if not flows_drift else "warn",
            ),
            _card(
                "jobs running",
                f"{running}/{len(enabled)}",
                "of enabled flows",
                "good" if running == len(enabled) else "warn",
            ),
            _card(
                "last reconciled to",
                last[0] if last else "never",
                f"applied {last[1]}" if last else "no apply recorded",
            ),
        ]
    )


def _notes(report: DriftReport) -> str:
    notes = report.notes
    if not notes:
        return ""
    return (
        f"<details><summary>Notes ({len(notes)}): capabilities, kept topics, revisions</summary><table><tbody>"
        + "".join(f"<tr><td><code>{_e(i.cluster)}</code></td><td>{_e(i.message)}</td></tr>" for i in notes)
        + "</tbody></table></details>"
    )


def _slo_words(report: DriftReport) -> str:
    return (
        ", ".join(
            f"{k.replace('_', ' ')} {v:,}" if isinstance(v, int) else f"{k.replace('_', ' ')} {v:g}"
            for k, v in report.slo.items()
            if v is not None
        )
        or "no SLOs set (topology key slo:)"
    )


def render(report: DriftReport, topology: Topology | None = None) -> str:
    status = report.status()
    rev_words = _revision_words(report.revision)
    title = f"Drift report: {report.topology}" if report.topology else "Drift report"
    if report.environment:
        title += f"{',' if report.topology else ':'} environment {report.environment}"
    cards, notes_html, slo = _cards(report), _notes(report), _slo_words(report)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{_e(title)}</title><style>{CSS}</style></head>
<body><main>
<section class="banner s-{_e(status)}"><span class="badge">{_STATUS_WORDS[status]}</span>
<div><h1>{_e(title)}</h1><p>{_e(report.headline())}</p>
<p>Checked {_e(report.generated_at)} against topology revision {_e(rev_words)}. SLOs: {_e(slo)}.</p></div></section>
<section class="cards">{cards}</section>
<section class="grid"><div class="panel"><h2>Topology</h2>{_graph(report, topology)}</div>
<div class="panel"><h2>Lag and heartbeats</h2>{_charts(report)}</div></section>
{_clusters_section(report)}
{_flows_table(report)}
{_clusters_table(report)}
{notes_html}
<footer>Generated by <code>reconciler drift --format html</code>. Machine-readable: <code>--format json</code>.
Nothing was changed: drift reads the clusters and never applies or takes the lease.</footer>
</main></body></html>
"""
