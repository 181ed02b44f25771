"""Plan -> Markdown for pull-request comments: a summary, a ```diff block per cluster (GitHub colours
`+`/`-` lines), reasons as comments, findings as a table. Long plans are cut to stay under the
65,536-character limit of a GitHub comment."""

from __future__ import annotations

from reconciler.plan.actions import Plan
from reconciler.render.plan_text import deletion_banner

MAX_ACTIONS = 300
MAX_FINDINGS = 100


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(plan: Plan, max_actions: int = MAX_ACTIONS, max_findings: int = MAX_FINDINGS) -> str:
    title = f"### Reconciler plan: `{plan.topology}`" if plan.topology else "### Reconciler plan"
    out = [title, "", f"**{plan.summary_line()}**", ""]
    banner = deletion_banner(plan)
    if banner:
        out += ["> [!WARNING]", f"> {banner}", ""]
    shown = 0
    for cluster, actions in plan.by_cluster().items():
        out += [f"#### Cluster `{cluster}` ({len(actions)} action{'s' if len(actions) != 1 else ''})", "", "```diff"]
        for a in actions:
            if shown >= max_actions:
                break
            shown += 1
            mark = "!" if a.VERB.value == "~" else a.VERB.value
            out.append(f"{mark} {a.describe()}")
            out += [f"{mark}     {d}" for d in a.details()]
            out.append(f"#     {a.reason}")
        out += ["```", ""]
    if shown < len(plan.actions):
        out += [f"_… and {len(plan.actions) - shown} more actions; run `reconciler plan` for the full list._", ""]
    if plan.findings:
        out += ["#### Findings", "", "| | kind | where | finding | what to do |", "|---|---|---|---|---|"]
        icon = {"error": "❌", "warning": "⚠️", "info": "ℹ️"}
        for f in plan.findings[:max_findings]:
            where = f"`{f.cluster}`" + (f" `{f.subject}`" if f.subject else "")
            out.append(f"| {icon[f.severity.value]} | {f.kind.value} | {where} | {_cell(f.message)} | {_cell(f.hint or '')} |")
        if len(plan.findings) > max_findings:
            out.append(f"\n_… and {len(plan.findings) - max_findings} more findings._")
        out.append("")
    return "\n".join(out)
