"""What policies said of a plan (plan/policy_record.py), for a terminal and for a pull-request comment: one line per
violation, warning and change that needs an approval, each naming the rule (file, line, name) and the object.
Every value read from a policy, the topology or a cluster goes through `term` or `md_inline` / `md_code_span`."""

from __future__ import annotations

from collections.abc import Callable

from reconciler.plan.policy_record import PolicyFinding, PolicyRecord
from reconciler.textutil import md_code_span, md_inline, plural, term

#: How many lines of each list a pull-request comment shows.
MAX_MARKDOWN_LINES = 100
APPROVE_HINT = (
    "save the plan with its approval, `reconciler plan TOPOLOGY --policy PATH --out FILE --approved-by NAME`, and apply "
    "that file (in CI: the approving review of the pull request, docs/policy.md)"
)


def headline(record: PolicyRecord, escape: Callable[[str], str] = term) -> str:
    """`Policy (N files): ...`; `escape` is applied to the one value from outside, the approver."""
    parts = []
    if record.violations:
        parts.append(plural(len(record.violations), "violation"))
    if record.warnings:
        parts.append(plural(len(record.warnings), "warning"))
    if record.approvals_required:
        state = escape(record.approval.describe()) if record.approval is not None else "not approved"
        parts.append(f"{plural(len(record.approvals_required), 'change')} needing an approval ({state})")
    return f"Policy ({plural(len(record.files), 'file')}): " + (", ".join(parts) if parts else "no violation")


def lines(items: tuple[PolicyFinding, ...], mark: str) -> list[str]:
    return [f"  {mark} {term(f.line_text())}" for f in items]


def text(record: PolicyRecord) -> str:
    """The policy section after a plan's text."""
    out = ["", headline(record) + "."]
    out += lines(record.violations, "x")
    out += lines(record.warnings, "!")
    out += lines(record.approvals_required, "?")
    if record.unapproved:
        out.append(f"  `apply` refuses these changes until the plan records an approval: {APPROVE_HINT}.")
    elif record.approval is not None:
        out.append(f"  The plan records: {term(record.approval.describe())}.")
    return "\n".join(out) + "\n"


def refusal(record: PolicyRecord) -> list[str]:
    """Why `apply` refuses a plan (its violations, or its changes that need an approval it lacks), one line per
    object; [] when it does not."""
    if record.violations:
        return [
            f"error: refused by policy: {plural(len(record.violations), 'violation')}; nothing was applied",
            *lines(record.violations, "x"),
        ]
    if record.unapproved:
        n = len(record.unapproved)
        return [
            f"error: refused by policy: {plural(n, 'change')} {'needs' if n == 1 else 'need'} an approval this plan "
            "does not record; nothing was applied",
            *lines(record.unapproved, "?"),
            f"  {APPROVE_HINT}",
        ]
    return []


def _md_items(items: tuple[PolicyFinding, ...], icon: str) -> list[str]:
    out = []
    for f in items[:MAX_MARKDOWN_LINES]:
        what = md_inline(f.object or "") + (f" on {md_code_span(f.cluster)}" if f.cluster else "")
        out.append(
            f"- {icon} {md_code_span(f.where())} **{md_inline(f.rule)}**"
            + (f" {what}" if what else "")
            + f": {md_inline(f.message)}"
        )
    if len(items) > MAX_MARKDOWN_LINES:
        out.append(f"- _… and {len(items) - MAX_MARKDOWN_LINES} more; run `reconciler plan --policy` for all._")
    return out


def markdown(record: PolicyRecord) -> str:
    """The policy section of a pull-request comment (shown after the plan's summary)."""
    icon = "⛔" if record.violations else ("⚠️" if record.warnings or record.unapproved else "✅")
    out = [f"#### {icon} {headline(record, md_inline)}", ""]
    out += _md_items(record.violations, "❌")
    out += _md_items(record.warnings, "⚠️")
    out += _md_items(record.approvals_required, "✋")
    if record.unapproved:
        out += [
            "",
            "_`apply` refuses these changes until the plan records an approval: saved with "
            "`reconciler plan TOPOLOGY --policy PATH --out FILE --approved-by NAME` and applied from that file; in CI, "
            "the approving review of this pull request records it at merge (docs/policy.md)._",
        ]
    return "\n".join(out) + "\n\n"  # a paragraph of its own, whatever follows
