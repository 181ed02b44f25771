"""Plan -> text for terminals, Terraform-like: `+` create, `~` change, `-` delete, reasons, findings, summary."""

from __future__ import annotations

from reconciler.plan.actions import Plan, Verb
from reconciler.plan.findings import Severity


def deletion_banner(plan: Plan) -> str | None:
    n = sum(1 for a in plan.actions if a.VERB is Verb.DELETE)
    if not n:
        return None
    return f"WARNING: this plan DELETES {n} thing{'s' if n != 1 else ''} (pruning is enabled in the topology); review the lines marked '-'."


def render(plan: Plan) -> str:
    lines: list[str] = []
    name = f" for topology {plan.topology}" if plan.topology else ""
    if plan.actions:
        lines.append(f"Reconciler plan{name}: the following actions would be applied.")
        banner = deletion_banner(plan)
        if banner:
            lines += ["", banner]
        for cluster, actions in plan.by_cluster().items():
            lines += ["", f"cluster {cluster}:"]
            for a in actions:
                lines.append(f"  {a.VERB.value} {a.describe()}")
                lines += [f"        {d}" for d in a.details()]
                lines.append(f"      # {a.reason}")
    if plan.findings:
        lines += ["", "Findings:"]
        for f in plan.findings:
            where = f"{f.cluster}" + (f":{f.subject}" if f.subject else "")
            mark = {Severity.ERROR: "x", Severity.WARNING: "!", Severity.INFO: "i"}[f.severity]
            lines.append(f"  {mark} {f.severity.value} [{f.kind.value}] {where}: {f.message}")
            if f.hint:
                lines.append(f"      hint: {f.hint}")
    lines += ["", plan.summary_line()]
    return "\n".join(lines).lstrip("\n") + "\n"
