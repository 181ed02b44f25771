"""`reconciler plan --base REV`: plan only what changed between REV and the work tree (or --revision).

`compare_with_base` (reconciler.gitops) says which topology files changed and which flows a change
can affect; the full plan is then limited to those flows (`reconciler.plan.attribution.restrict`),
and every output format says what changed: text and Markdown in a preface, JSON in a `base` object.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reconciler.gitops import RevisionComparison, RevisionError
from reconciler.plan.actions import Plan
from reconciler.plan.attribution import restrict
from reconciler.plan.desired import DesiredState, desired_state
from reconciler.render import plan_json
from reconciler.state.live import LiveState
from reconciler.textutil import md_code_span, md_inline, term
from reconciler.topology.model import Topology

if TYPE_CHECKING:
    from reconciler.operations.backend import GitRepository

_MARK = {"added": "+", "removed": "-", "changed": "~", "modified": "~", "deleted": "-"}


@dataclass(frozen=True)
class BaseScope:
    """What `--base` compared and which flows the plan covers."""

    rev: str
    comparison: RevisionComparison
    flows: tuple[str, ...]  # affected flows, sorted
    all_flows: tuple[str, ...]  # flows of the head topology

    @property
    def head_label(self) -> str:
        head = self.comparison.head
        if self.comparison.head_is_worktree:
            return f"the work tree (HEAD {head.short}{', with uncommitted changes' if head.dirty else ''})"
        return f"{head.short}"

    def restrict(self, plan: Plan, topology: Topology, live: LiveState, desired: DesiredState | None = None) -> Plan:
        return restrict(plan, self.flows, desired if desired is not None else desired_state(topology, live), topology)

    def to_dict(self) -> dict:
        c = self.comparison
        changes = c.changes
        return {
            "revision": self.rev,
            "base": c.base.to_dict(),
            "head": {**c.head.to_dict(), "worktree": c.head_is_worktree},
            "files": c.files.to_dict(),
            "changes": changes.to_dict() if changes is not None else None,
            "base_valid": c.old is not None,
            "planned_flows": list(self.flows),
        }

    # --- words ---------------------------------------------------------------------------
    def lines(self) -> list[tuple[str, str]]:
        """(label, text) pairs shared by the text and Markdown renderings."""
        c = self.comparison
        out: list[tuple[str, str]] = []
        files = c.files
        file_words = (
            [f"{_MARK['added']} {f}" for f in files.added]
            + [f"{_MARK['modified']} {f}" for f in files.modified]
            + [f"{_MARK['deleted']} {f}" for f in files.deleted]
        )
        out.append(("files", ", ".join(file_words) if file_words else "none"))
        changes = c.changes
        if changes is None:
            out.append(("flows", "the topology at the base revision is invalid: every flow is planned"))
        else:
            if changes.flows:
                out.append(
                    (
                        "flows",
                        "; ".join(
                            f"{_MARK[f.kind.value]} {f.name}" + (f" ({', '.join(f.settings)})" if f.settings else "")
                            for f in changes.flows
                        ),
                    )
                )
            if changes.clusters:
                out.append(
                    (
                        "clusters",
                        "; ".join(
                            f"{_MARK[k.kind.value]} {k.alias}" + (f" ({', '.join(k.settings)})" if k.settings else "")
                            for k in changes.clusters
                        ),
                    )
                )
            if changes.settings:
                out.append(("settings", ", ".join(changes.settings)))
        return out

    def summary(self) -> str:
        if not self.flows:
            return "no flow is affected: nothing to plan"
        kept = [f for f in self.flows if f in self.all_flows]
        removed = [f for f in self.flows if f not in self.all_flows]
        words = f"planning {len(kept)} of {len(self.all_flows)} flows"
        if removed:
            words += f" and {len(removed)} removed flow{'s' if len(removed) != 1 else ''} (their leftovers)"
        return words + f": {', '.join(self.flows)}"

    def text(self) -> str:
        head = f"Changes between {term(self.rev)} ({self.comparison.base.short}) and {self.head_label}:"
        body = [f"  {label}: {term(words)}" for label, words in self.lines()]
        summary = term(self.summary())
        return "\n".join([head, *body, summary[0].upper() + summary[1:] + "."]) + "\n\n"

    def markdown(self) -> str:
        rev, short = md_code_span(self.rev), md_code_span(self.comparison.base.short)
        out = [f"**Changes since {rev} ({short})** in {self.head_label}:", ""]  # our words and a hex sha
        out += [f"- {label}: {md_inline(words)}" for label, words in self.lines()]
        summary = md_inline(self.summary()[0].upper() + self.summary()[1:])
        out += [
            "",
            f"_{summary}; the rest of the topology is not part of this plan._" if self.flows else f"_{summary}._",
        ]
        return "\n".join(out) + "\n"


def compare(
    git: GitRepository, paths: Sequence[str], base_rev: str, head_rev: str | None, env: str | None = None
) -> BaseScope | None:
    """The comparison (read by the Backend's git repository; both sides for environment `env`), or None after
    printing why it cannot be made."""
    try:
        comparison = git.compare(paths, base_rev, head_rev, env)
    except RevisionError as exc:
        print(term(f"error: --base {base_rev}: {exc}"), file=sys.stderr)
        return None
    if comparison.old is None:
        print(term(f"note: the topology at {base_rev} does not load or validate; planning every flow"), file=sys.stderr)
    all_flows = tuple(sorted(f.name for f in comparison.new.flows)) if comparison.new is not None else ()
    return BaseScope(base_rev, comparison, tuple(sorted(comparison.affected_flows())), all_flows)


def no_changes(scope: BaseScope, fmt: str) -> str:
    """The output of `plan --base` when no flow is affected (nothing is read from the clusters)."""
    files = scope.comparison.files
    if files.empty:
        what = f"No topology changes between {scope.rev} ({scope.comparison.base.short}) and {scope.head_label}."
    else:
        what = (
            f"{len(files.files)} topology file(s) changed since {scope.rev} ({scope.comparison.base.short}), "
            "but no flow is affected"
            + (
                f" (settings changed: {', '.join(scope.comparison.changes.settings)})"
                if scope.comparison.changes and scope.comparison.changes.settings
                else ""
            )
            + "."
        )
    if fmt == "json":
        return plan_json.render(Plan(), base=scope.to_dict(), message=what + " Nothing to plan.")
    if fmt == "markdown":
        return f"### Reconciler plan\n\n**{md_inline(what)} Nothing to plan\\.**\n\n" + scope.markdown()
    return scope.text() + term(what) + " Nothing to plan.\n"
