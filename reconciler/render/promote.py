"""`reconciler promote`: the differences between two environments as a table (text, Markdown) or JSON, and the
target environment's plan when it was made (`operations/promote.py` `Promotion`, given here as its parts). Every
value goes through `textutil` (`term`, `md_code_span`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from reconciler.plan.actions import Plan
from reconciler.render import plan_markdown, plan_text
from reconciler.textutil import md_code_span, md_inline, plural, term
from reconciler.topology.environments import Difference


@dataclass(frozen=True)
class Shown:
    """What a promotion shows: from which environment to which, of which topology, what differs, and the plan."""

    source: str
    target: str
    topology: str | None
    differences: Sequence[Difference]
    plan: Plan | None = None


def _head(p: Shown) -> str:
    name = f" ({p.topology})" if p.topology else ""
    n = len(p.differences)
    if not n:
        return f"Promote {p.source} -> {p.target}{name}: no declared setting differs."
    return f"Promote {p.source} -> {p.target}{name}: {plural(n, 'setting')} differ{'s' if n == 1 else ''}."


def text(p: Shown) -> str:
    raw = [("setting", p.source, p.target)] + [(d.path, d.before, d.after) for d in p.differences]
    rows = [[term(c) for c in r] for r in raw]
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    lines = [term(_head(p))]
    if p.differences:
        lines.append("")
        lines += [f"  {r[0].ljust(widths[0])}  {r[1].ljust(widths[1])}  {r[2]}".rstrip() for r in rows]
    out = "\n".join(lines) + "\n"
    if p.plan is not None:
        out += f"\nWhat applying {term(p.target)} would change (a plan against its clusters):\n\n"
        out += plan_text.render(p.plan)
    return out


def markdown(p: Shown) -> str:
    out = [f"### {md_inline(_head(p))}", ""]
    if p.differences:
        out += [f"| setting | {md_code_span(p.source, True)} | {md_code_span(p.target, True)} |", "|---|---|---|"]
        out += [
            f"| {md_code_span(d.path, True)} | {md_code_span(d.before, True)} | {md_code_span(d.after, True)} |"
            for d in p.differences
        ]
        out.append("")
    body = "\n".join(out) + "\n"
    if p.plan is not None:
        body += "\n" + plan_markdown.render(p.plan)
    return body


def to_json(p: Shown) -> str:
    doc: dict = {
        "from": p.source,
        "to": p.target,
        "topology": p.topology,
        "differences": [{"path": d.path, "from": d.before, "to": d.after} for d in p.differences],
    }
    if p.plan is not None:
        doc["plan"] = p.plan.to_dict()
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


RENDERERS: dict[str, Callable[[Shown], str]] = {"text": text, "markdown": markdown, "json": to_json}
