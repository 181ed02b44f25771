"""Plan -> text for terminals, Terraform-like: `+` create, `~` change, `-` delete, reasons, findings, summary.
Every value read from the topology or a cluster is shown through `reconciler.textutil.term` (issue 44): no
escape sequence, control character or bidi override reaches the terminal, and a name's newline is `\\x0a`."""

from __future__ import annotations

from reconciler.gitops.trust import ClusterPin
from reconciler.plan.actions import Plan, Verb
from reconciler.plan.findings import Finding, Severity
from reconciler.render.permissions import summary_lines
from reconciler.textutil import plural, term


def deletion_banner(plan: Plan) -> str | None:
    n = sum(1 for a in plan.actions if a.VERB is Verb.DELETE)
    if not n:
        return None
    return f"WARNING: this plan DELETES {plural(n, 'thing')} (pruning is enabled in the topology); review the lines marked '-'."


def _finding_lines(findings: list[Finding]) -> list[str]:
    lines = []
    for f in findings:
        where = term(f.cluster) + (f":{term(f.subject)}" if f.subject else "")
        mark = {Severity.ERROR: "x", Severity.WARNING: "!", Severity.INFO: "i"}[f.severity]
        lines.append(f"  {mark} {f.severity.value} [{f.kind.value}] {where}: {term(f.message)}")
        if f.hint:
            lines.append(f"      hint: {term(f.hint)}")
    return lines


def _permission_lines(plan: Plan) -> list[str]:
    """The ACLs the flows need on the clusters that enforce ACLs (checked), one line per principal; none when no
    cluster enforces ACLs (`reconciler permissions` lists them all)."""
    if not plan.permissions:
        return []
    missing = [r for r in plan.permissions if r.granted is False]
    return [
        "",
        "Permissions (the ACLs the flows need on the clusters that enforce ACLs; `reconciler permissions` lists them):",
    ] + summary_lines(plan.permissions, missing)


def render(plan: Plan) -> str:
    """The plan for a terminal. With errors it leads with them and lists no actions: they were
    computed from incomplete state (e.g. a cluster that could not be read) and none can be applied."""
    lines: list[str] = []
    name = f" for {term(plan.title)}" if plan.title else ""
    if plan.errors:
        lines.append(f"Reconciler plan{name}: {plan.summary_line()}")
        lines += ["", "Errors:"] + _finding_lines([f for f in plan.findings if f.severity is Severity.ERROR])
        others = [f for f in plan.findings if f.severity is not Severity.ERROR]
        if others:
            lines += ["", "Other findings:"] + _finding_lines(others)
        lines += _permission_lines(plan)
        if plan.actions:
            lines += [
                "",
                f"{plural(len(plan.actions), 'action')} planned from the state that could be read "
                f"{'is' if len(plan.actions) == 1 else 'are'} not shown: they may depend on what could not "
                "be read. Fix the errors and plan again (`--format json` lists them).",
            ]
        return "\n".join(lines) + "\n"
    if plan.actions:
        lines.append(f"Reconciler plan{name}: the following actions would be applied.")
        banner = deletion_banner(plan)
        if banner:
            lines += ["", banner]
        for cluster, actions in plan.by_cluster().items():
            lines += ["", f"cluster {term(cluster)}:"]
            for a in actions:
                lines.append(f"  {a.VERB.value} {term(a.describe())}")
                lines += [f"        {term(d)}" for d in a.details()]
                lines.append(f"      # {term(a.reason)}")
    if plan.findings:
        lines += ["", "Findings:"] + _finding_lines(plan.findings)
    lines += _permission_lines(plan)
    lines += ["", plan.summary_line()]
    return "\n".join(lines).lstrip("\n") + "\n"


def summary(plan: Plan) -> str:
    """What `plan --out FILE` prints (Terraform-like): the counts per cluster, not every action."""
    lines: list[str] = []
    banner = deletion_banner(plan)
    if banner:
        lines.append(banner)
    for cluster, actions in plan.by_cluster().items():
        counts: dict[str, int] = {}
        for a in actions:
            counts[a.VERB.value] = counts.get(a.VERB.value, 0) + 1
        lines.append(f"  {term(cluster)}: " + ", ".join(f"{v} {n}" for v, n in counts.items()))
    warnings = [f for f in plan.findings if f.severity is Severity.WARNING]
    if warnings:
        lines.append(f"  {plural(len(warnings), 'warning')} (plan without --out to see them)")
    lines.append(plan.summary_line())
    return "\n".join(lines) + "\n"


def pin_preface(pin: ClusterPin | None) -> str:
    """What `plan --clusters-from` did with the change's connection settings (gitops/trust.py)."""
    if pin is None or pin.clean:
        return ""
    lines = [f"Connection settings come from {term(pin.rev)}, not from this change:"]
    lines += [f"  {term(line)}" for line in pin.lines()]
    return "\n".join(lines) + "\n\n"
