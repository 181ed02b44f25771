"""The ACLs the flows need (plan/permissions.py) as text, Markdown and JSON: `reconciler permissions` and the
permissions section of a plan (for the clusters the plan checked). Names read from the topology or a cluster go
through `reconciler.textutil` (`term` for a terminal, `md_code_span`/`md_inline` for Markdown; issue 44)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from reconciler.plan.permissions import Enforcement, RequiredAcl, by_principal
from reconciler.textutil import md_code_span, md_inline, plural, term


def _resources(rs: Sequence[RequiredAcl]) -> dict[str, list[str]]:
    per: dict[str, list[str]] = {}
    for r in rs:
        per.setdefault(r.resource(), []).append(r.operation.value)
    return per


def summary_lines(required: Iterable[RequiredAcl], missing: Iterable[RequiredAcl]) -> list[str]:
    """One line per cluster and principal: how many rights, how many missing (the plan's text section)."""
    gone = set(missing)
    lines = []
    for (cluster, role, who), rs in by_principal(required).items():
        lack = [r for r in rs if r in gone]
        state = f"{len(lack)} missing (see the errors)" if lack else "all granted"
        lines.append(
            f"  {term(cluster)}: {role.value} principal {term(who)}: {plural(len(rs), 'ACL')} on "
            f"{plural(len(_resources(rs)), 'resource')}, {state}"
        )
    return lines


def text(
    required: Sequence[RequiredAcl],
    enforcement: Mapping[str, Enforcement],
    missing: Sequence[RequiredAcl],
    unreadable: Mapping[str, str],
) -> str:
    """`reconciler permissions`: per cluster and principal, each resource and its operations."""
    gone = set(missing)
    lines = []
    for (cluster, role, who), rs in by_principal(required).items():
        e = enforcement.get(cluster)
        checked = f"checked: {e.why}" if e is not None and e.checked else f"not checked: {e.why if e else 'not read'}"
        lines.append(f"cluster {term(cluster)}, {role.value} principal {term(who)} ({term(checked)}):")
        per: dict[str, list[str]] = {}
        for r in rs:
            per.setdefault(r.resource(), []).append(r.operation.value + (" (MISSING)" if r in gone else ""))
        lines += [f"  ALLOW {term(res)}: {', '.join(ops)}" for res, ops in per.items()]
    for alias, why in sorted(unreadable.items()):
        lines.append(f"cluster {term(alias)} {term(why)}")
    n = len(missing)
    lines += [
        "",
        f"{plural(len(required), 'ACL')} for {plural(len(by_principal(required)), 'principal')}"
        + (f"; {n} missing on clusters that enforce ACLs." if n else "; none missing on the clusters checked."),
    ]
    return "\n".join(lines) + "\n"


def markdown_table(required: Sequence[RequiredAcl], missing: Iterable[RequiredAcl] = ()) -> list[str]:
    """| cluster | principal | resource | operations | lines (the plan's Markdown, `permissions --format markdown`)."""
    gone = set(missing)
    out = ["| cluster | principal | resource | operations |", "|---|---|---|---|"]
    for (cluster, role, who), rs in by_principal(required).items():
        per: dict[str, list[str]] = {}
        for r in rs:
            per.setdefault(r.resource(), []).append(r.operation.value + (" ❌" if r in gone else ""))
        for res, ops in per.items():
            out.append(
                f"| {md_code_span(cluster, in_table=True)} | {role.value} {md_code_span(who, in_table=True)} "
                f"| {md_inline(res)} | {', '.join(ops)} |"
            )
    return out


def markdown(required: Sequence[RequiredAcl], missing: Sequence[RequiredAcl]) -> str:
    head = ["### ACLs the flows need", ""]
    if missing:
        head += [f"**{plural(len(missing), 'ACL')} missing** on clusters that enforce ACLs (❌).", ""]
    return "\n".join(head + markdown_table(required, missing)) + "\n"


def to_json(
    required: Sequence[RequiredAcl],
    enforcement: Mapping[str, Enforcement],
    missing: Sequence[RequiredAcl],
    unreadable: Mapping[str, str],
) -> str:
    doc = {
        "required": [r.to_dict() for r in required],
        "missing": [r.to_dict() for r in missing],
        "clusters": {
            a: {"checked": e.checked, "why": e.why, "acls_readable": e.readable} for a, e in sorted(enforcement.items())
        },
        "unreadable": dict(sorted(unreadable.items())),
    }
    return json.dumps(doc, indent=2) + "\n"
