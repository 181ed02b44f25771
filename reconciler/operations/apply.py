"""Apply: plan (or take a saved plan), confirm, lease, re-read, stale check, re-plan under the lease,
execute, record what was applied.

The operation talks to the person through an `ApplyUI` (the CLI's console: redacted output, the
confirmation prompt, progress lines) and returns an `ApplyOutcome`; it never prints by itself.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from reconciler.adapters.base import AdminError
from reconciler.adapters.live_read import Connections, read_live
from reconciler.apply.executor import ApplyContext, ApplyReport, Progress, execute
from reconciler.apply.guard import GuardRefused, TopologyGuard, refusals
from reconciler.apply.lock import ClusterLocks, LockHeld
from reconciler.operations.backend import Backend
from reconciler.operations.handlers import handler_table
from reconciler.operations.plan import make_plan
from reconciler.plan import planfile
from reconciler.plan.actions import Plan
from reconciler.plan.ownership import reads_claims
from reconciler.policy.engine import PolicyError, PolicySet, combine
from reconciler.policy.engine import evaluate as evaluate_policies
from reconciler.render import plan_text
from reconciler.render import policy as policy_render
from reconciler.textutil import plural, term
from reconciler.topology.model import Topology


class ApplyUI(Protocol):
    @property
    def progress(self) -> Progress: ...

    def out(self, text: str = "", end: str = "\n") -> None: ...

    def err(self, text: str) -> None: ...

    def confirm(self, plan: Plan) -> bool: ...


@dataclass(frozen=True)
class ApplyRequest:
    """What to apply: the topology (always: the clusters are reached with its connection settings, never a saved
    plan's), planned now, or a verified saved plan (`planfile.load`) of it."""

    topology: Topology
    saved: planfile.SavedPlan | None = None  # apply exactly these actions, each checked against a fresh plan
    revision: str | None = None  # `<sha>[-dirty]` of `git`: recorded, and carried by the job specs planned
    git: Mapping[str, Any] | None = None
    auto_approve: bool = False
    lock_timeout: float = 0.0  # seconds to wait for a lease held elsewhere (0: fail at once)
    #: `apply --policy`: judge the plan with these too (a saved plan's own record is always enforced)
    policies: PolicySet | None = None


@dataclass(frozen=True)
class ApplyOutcome:
    ok: bool
    report: ApplyReport | None = None  # None: nothing was executed (no changes, refused, error)
    seconds: float = 0.0
    policy_refused: bool = False  # refused by policy: a violation, or changes needing an approval not recorded


def policy_refusal(request: ApplyRequest, plan: Plan) -> list[str]:
    """Why policies refuse `plan` (the lines to print), or []: the saved plan's record (what `plan --policy` found
    and the approval it records) and, with `apply --policy`, what those policies say of the plan now."""
    saved = request.saved.policy if request.saved is not None else None
    try:
        fresh = evaluate_policies(request.policies, plan, request.topology) if request.policies else None
    except PolicyError as exc:
        return [f"error: the policies cannot judge the plan; nothing was applied\n{exc}"]
    record = combine(saved, fresh)
    return policy_render.refusal(record) if record is not None else []


def unlocked(plan: Plan, locked: list[str]) -> str | None:
    """Why `plan` cannot run under the leases of `locked` clusters (it touches others), or None."""
    extra = sorted({a.cluster for a in plan.actions} - set(locked))
    return f"it now also changes {', '.join(extra)}, whose lease is not held; run apply again" if extra else None


def _saved_refusal(saved: planfile.SavedPlan, fresh: Plan) -> str | None:
    """Why the saved plan may not run, given the topology planned again now (`fresh`), or None."""
    if fresh.errors:
        return f"plan file {saved.path}: the topology, planned again against the clusters, has errors; plan again"
    extra = planfile.unexpected(saved.plan, fresh)
    return planfile.unexpected_reason(saved.path, extra) if extra else None


def _refused_before_asking(request: ApplyRequest, plan: Plan, guard: TopologyGuard, ui: ApplyUI) -> ApplyOutcome | None:
    """The guard's and the policies' refusals of a plan, before anyone is asked to approve it; the approval a saved
    plan records is shown."""
    refused = refusals(guard, plan.actions)
    if refused:
        ui.err(f"error: {GuardRefused(refused)}")
        return ApplyOutcome(False)
    judged = policy_refusal(request, plan)
    if judged:
        ui.err("\n".join(judged))
        return ApplyOutcome(False, policy_refused=True)
    saved = request.saved
    approval = saved.policy.approval if saved is not None and saved.policy is not None else None
    if approval is not None:
        ui.out(f"The saved plan records: {term(approval.describe())}.")
    return None


def apply(request: ApplyRequest, backend: Backend, ui: ApplyUI) -> ApplyOutcome:
    topology, saved = request.topology, request.saved
    guard = TopologyGuard(topology)
    revision = saved.revision if saved is not None else request.revision
    with Connections(dict(topology.clusters), backend.admin_factory) as conns:
        if saved is not None:
            mismatch = planfile.topology_mismatch(saved, topology, request.git)
            if mismatch is None:  # what the topology would do now: every saved action must be among it
                mismatch = _saved_refusal(saved, make_plan(topology, conns, backend, git_revision=revision))
            if mismatch:
                ui.err(f"error: {mismatch}")
                return ApplyOutcome(False)
            plan = saved.plan
        else:
            plan = make_plan(topology, conns, backend, git_revision=revision)
        ui.out(plan_text.render(plan), end="")
        if plan.errors:
            ui.err("error: the plan has errors (see above); nothing was applied")
            return ApplyOutcome(False)
        if not plan.actions:
            return ApplyOutcome(True)
        refusal = _refused_before_asking(request, plan, guard, ui)
        if refusal is not None:
            return refusal
        if not ui.confirm(plan):
            return ApplyOutcome(False)
        touched = sorted({a.cluster for a in plan.actions})
        admins = [admin for admin in (conns.get(a) for a in touched) if admin is not None]
        if len(admins) != len(touched):
            ui.err("error: " + "; ".join(term(e) for e in conns.errors.values()))
            return ApplyOutcome(False)
        started = time.monotonic()
        try:

            def waiting(held: LockHeld, left: float) -> None:
                ui.err(
                    f"waiting for the lease on {term(held.cluster)}: held by {term(held.holder.get('who', '?'))} "
                    f"({left:.0f}s left of --lock-timeout)"
                )

            with ClusterLocks(admins, timeout=request.lock_timeout, on_wait=waiting) as locks:
                live = read_live(conns, plan.clusters, ownership=reads_claims(topology))
                stale = planfile.stale_reason(plan, live)
                if stale is None and saved is not None:  # again under the lease: what the clusters hold now
                    stale = _saved_refusal(saved, make_plan(topology, conns, backend, live, revision))
                elif stale and saved is None and request.auto_approve:
                    # Nothing to refuse: --auto-approve approved whatever the plan is, so plan again
                    # from what the lease now protects (Terraform plans under its lock the same way).
                    plan = make_plan(topology, conns, backend, live, revision)
                    ui.out(f"\nThe clusters changed while planning ({term(stale)}); planned again under the lease:\n")
                    ui.out(plan_text.render(plan), end="")
                    stale = unlocked(plan, touched) or ("the new plan has errors" if plan.errors else None)
                    judged = policy_refusal(request, plan) if stale is None else []
                    if judged:  # what the lease protects now may be what a policy forbids
                        ui.err("\n".join(judged))
                        return ApplyOutcome(False, policy_refused=True)
                if stale:
                    ui.err(f"error: refusing to apply a stale plan: {term(stale)}")
                    return ApplyOutcome(False)
                ui.out(f"\nApplying {plural(len(plan.actions), 'action')} on {', '.join(touched)} (lease held) ...")
                ctx = ApplyContext(conns.get, backend.jobs_or_default().deployers)
                report = execute(plan, ctx, handler_table(), ui.progress, guard=guard)
                if report.ok:
                    for lease in locks.leases:
                        lease.record_applied(
                            {
                                "fingerprint": plan.fingerprint,
                                "revision": revision,
                                "git": saved.git if saved is not None else request.git,
                                "clusters": touched,
                                "actions": sum(1 for a in plan.actions if a.cluster == lease.admin.alias),
                            }
                        )
        except (LockHeld, AdminError, GuardRefused) as exc:
            ui.err(term(f"error: {exc}"))
            return ApplyOutcome(False)
    return ApplyOutcome(report.ok, report, time.monotonic() - started)
