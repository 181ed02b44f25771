"""Plan -> Markdown for pull-request comments.

In order: the summary; what changed since the base revision (`plan --base`, given as `preface`);
a WARNING alert naming the engines the plan replaces (`-/+`: every flow of each restarts);
the destructive actions first and loudly (a CAUTION alert and their own section, per cluster);
the other actions grouped per cluster in ```diff blocks (GitHub colours `+`/`-` lines; `!` marks
changes), each with its reason; the plan's findings as a table; the topology's validation
warnings; and the topology graph as a ```mermaid block (GitHub draws it).

Every value read from the topology or a cluster goes through `reconciler.textutil` (`md_inline`,
`md_code_span`, `md_fence`): a hostile name forms no link, image, HTML, heading or early fence end
(issue 44, docs/security.md).

Whatever the plan's size, the result fits a GitHub comment (65,536 characters): the action and
finding lists are cut first (saying how many were left out), then the graph is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.gitops.trust import ClusterPin
from reconciler.plan.actions import Action, Plan, Verb
from reconciler.plan.engine_actions import ReplaceEngine
from reconciler.render.permissions import markdown_table
from reconciler.textutil import md_code_span, md_fence, md_inline, term
from reconciler.topology.diagnostics import Diagnostic
from reconciler.topology.model import Topology

MAX_ACTIONS = 300
MAX_FINDINGS = 100
MAX_WARNINGS = 50
#: GitHub refuses comments over 65,536 characters; leave room for a marker and a footer added by CI.
MAX_CHARS = 60_000


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _diff_lines(a: Action) -> list[str]:
    """An action in a ```diff block: `+`/`-` lines as GitHub colours them, `!` for a change; a replacement keeps its
    own symbol after the `!` (`! -/+ replace engine E`)."""
    mark = "!" if a.VERB in (Verb.UPDATE, Verb.REPLACE) else a.VERB.value
    head = f"{Verb.REPLACE.value} " if a.VERB is Verb.REPLACE else ""
    out = [f"{mark} {head}{term(a.describe())}"]
    out += [f"{mark}     {term(d)}" for d in a.details()]
    out.append(f"#     {term(a.reason)}")
    return out


def _by_cluster(actions: Sequence[Action]) -> dict[str, list[Action]]:
    out: dict[str, list[Action]] = {}
    for a in actions:
        out.setdefault(a.cluster, []).append(a)
    return out


def _sections(title_fmt: str, actions: Sequence[Action], budget: list[int]) -> list[str]:
    """One ```diff block per cluster; `budget[0]` is how many more actions may be shown."""
    out: list[str] = []
    for cluster, group in _by_cluster(actions).items():
        if budget[0] <= 0:
            break
        lines = [line for a in group[: budget[0]] for line in _diff_lines(a)]
        out += [title_fmt.format(cluster=md_code_span(cluster), n=_plural(len(group), "action")), ""]
        out += [md_fence("\n".join(lines), "diff"), ""]
        budget[0] -= min(len(group), budget[0])
    return out


def _render(
    plan: Plan,
    max_actions: int,
    max_findings: int,
    topology: Topology | None,
    warnings: Sequence[Diagnostic],
    preface: str,
    with_graph: bool,
) -> str:
    title = f"### Reconciler plan: {md_code_span(plan.topology)}" if plan.topology else "### Reconciler plan"
    if plan.environment:
        title += f"{',' if plan.topology else ':'} environment {md_code_span(plan.environment)}"
    out = [title, "", f"**{plan.summary_line()}**", ""]
    if preface:
        out += [preface.rstrip(), ""]
    out += _actions(plan, max_actions)
    out += _findings(plan, max_findings)
    out += _permissions(plan, max_findings)
    out += _warnings(warnings, max_findings)
    out += _graph(topology, with_graph)
    return "\n".join(out)


def _actions(plan: Plan, max_actions: int) -> list[str]:
    """The engine replacements said first, the destructive actions loudly in their own section, then the others,
    each a ```diff block per cluster; at most `max_actions` shown."""
    destructive = [a for a in plan.actions if a.VERB is Verb.DELETE]
    others = [a for a in plan.actions if a.VERB is not Verb.DELETE]
    budget = [max_actions]
    out = _replacements(plan)
    if destructive:
        clusters = sorted({a.cluster for a in destructive})
        out += [
            "> [!CAUTION]",
            f"> **This plan DELETES {_plural(len(destructive), 'thing')}** on {', '.join(md_code_span(c) for c in clusters)} "
            "(pruning is enabled in the topology). Deleted topics lose their records. Review the `-` lines below "
            "before merging.",
            "",
        ]
        out += [f"#### 🛑 Destructive changes ({len(destructive)})", ""]
        out += _sections("##### Cluster {cluster} ({n})", destructive, budget)
    if others:
        if destructive:
            out += [f"#### Other changes ({len(others)})", ""]
        out += _sections("#### Cluster {cluster} ({n})", others, budget)
    shown = max_actions - budget[0] if plan.actions else 0
    if shown < len(plan.actions):
        out += [f"_… and {len(plan.actions) - shown} more actions; run `reconciler plan` for the full list._", ""]
    return out


def _replacements(plan: Plan) -> list[str]:
    """A warning naming the engines the plan replaces (every flow of each restarts), or nothing."""
    replaced = [a for a in plan.actions if isinstance(a, ReplaceEngine)]
    if not replaced:
        return []
    engines = ", ".join(
        f"{md_code_span(a.engine)} ({_plural(len(a.flows), 'flow')} into {md_code_span(a.cluster)})" for a in replaced
    )
    return [
        "> [!WARNING]",
        f"> **This plan REPLACES {_plural(len(replaced), 'engine')}**: {engines}. Every flow of a replaced engine "
        "restarts and resumes from its committed offsets. Review the `-/+` lines below.",
        "",
    ]


def _findings(plan: Plan, max_findings: int) -> list[str]:
    if not plan.findings:
        return []
    out = ["#### Findings", "", "| | kind | where | finding | what to do |", "|---|---|---|---|---|"]
    icon = {"error": "❌", "warning": "⚠️", "info": "ℹ️"}
    for f in plan.findings[:max_findings]:
        where = md_code_span(f.cluster, in_table=True) + (
            f" {md_code_span(f.subject, in_table=True)}" if f.subject else ""
        )
        out.append(
            f"| {icon[f.severity.value]} | {f.kind.value} | {where} | {md_inline(f.message)} "
            f"| {md_inline(f.hint or '')} |"
        )
    if len(plan.findings) > max_findings:
        out.append(f"\n_… and {len(plan.findings) - max_findings} more findings._")
    out.append("")
    return out


def _permissions(plan: Plan, max_findings: int) -> list[str]:
    if not plan.permissions:
        return []
    missing = [r for r in plan.permissions if r.granted is False]
    head = f"{len(missing)} missing" if missing else "all granted"
    return [
        f"<details{' open' if missing else ''}><summary>ACLs the flows need on the clusters that enforce ACLs "
        f"({len(plan.permissions)}, {head})</summary>",
        "",
        *markdown_table(plan.permissions[: max_findings * 5], missing),
        "",
        "</details>",
        "",
    ]


def _warnings(warnings: Sequence[Diagnostic], max_findings: int) -> list[str]:
    if not warnings:
        return []
    limit = min(MAX_WARNINGS, max(max_findings, 1))
    out = [f"#### Validation warnings ({len(warnings)})", ""]
    for d in list(warnings)[:limit]:
        where = f"{md_code_span(d.where)} " if d.where else ""
        hint = f" _({md_inline(d.hint)})_" if d.hint else ""
        out.append(f"- ⚠️ {where}{md_inline(d.message)}{hint}")
    if len(warnings) > limit:
        out.append(f"- _… and {len(warnings) - limit} more._")
    out.append("")
    return out


def _graph(topology: Topology | None, with_graph: bool) -> list[str]:
    if topology is None:
        return []
    if not with_graph:
        return ["_The topology graph is too large for a comment; run `reconciler graph` to see it._", ""]
    from reconciler.render.graph import mermaid

    return [
        "<details open><summary>Topology graph</summary>",
        "",
        md_fence(mermaid(topology), "mermaid"),
        "",
        "</details>",
        "",
    ]


def render(
    plan: Plan,
    max_actions: int = MAX_ACTIONS,
    max_findings: int = MAX_FINDINGS,
    *,
    topology: Topology | None = None,
    warnings: Sequence[Diagnostic] = (),
    preface: str = "",
    max_chars: int = MAX_CHARS,
) -> str:
    """The comment body. `topology` adds the Mermaid graph; `warnings` are the topology's validation
    warnings; `preface` is Markdown shown after the summary (what changed since the base revision)."""
    with_graph = True
    while True:
        text = _render(plan, max_actions, max_findings, topology, warnings, preface, with_graph)
        if len(text) <= max_chars:
            return text
        if max_actions > 0 or max_findings > 0:
            max_actions, max_findings = max_actions // 2, max_findings // 2
        elif with_graph and topology is not None:
            with_graph = False
        else:
            cut = "\n\n_… cut to fit a comment; run `reconciler plan` for the full plan._\n"
            return text[: max_chars - len(cut)] + cut


def pin_preface(pin: ClusterPin | None) -> str:
    """What `plan --clusters-from` did with the change's connection settings (gitops/trust.py), as Markdown."""
    if pin is None or pin.clean:
        return ""
    items = "\n".join(f"- {md_inline(line)}" for line in pin.lines())
    return f"**Connection settings come from {md_code_span(pin.rev)}, not from this change:**\n\n{items}\n\n"
