"""`plan` and `apply`: read the live clusters, diff them against the topology, show or apply the plan.

Exit codes (Terraform's): plan --detailed-exitcode: 0 no changes, 2 changes, 1 error; apply: 0 done,
1 error / refused / any action failed; both: 3 refused by policy (`--policy`: a violation; apply: also changes that
need an approval the plan does not record; docs/policy.md). Every line printed goes through a Redactor of the
resolved `${ENV_VAR}` values of the clusters' configs.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from reconciler import logs, outputs
from reconciler.apply.executor import ActionResult
from reconciler.cli import plan_base
from reconciler.cli.common import (
    EXIT_CHANGES,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_POLICY,
    add_env_argument,
    add_paths_argument,
    add_policy_argument,
    add_revision_argument,
    confirmed,
    duration_argument,
    load_policies,
    load_validated,
    policy_errors,
    relative_diagnostics,
)
from reconciler.gitops.revision import revision_label
from reconciler.gitops.trust import ClusterPin, pin_clusters
from reconciler.operations.apply import ApplyOutcome, ApplyRequest, apply
from reconciler.operations.backend import Backend
from reconciler.operations.plan import plan_topology
from reconciler.plan import planfile
from reconciler.plan.actions import ActionKind, Plan, Verb
from reconciler.plan.policy_record import Approval, PolicyRecord
from reconciler.policy.engine import PolicyError
from reconciler.policy.engine import evaluate as evaluate_policies
from reconciler.render import plan_json, plan_markdown, plan_text
from reconciler.render import policy as policy_render
from reconciler.textutil import plural, term
from reconciler.topology.model import Cluster, Topology
from reconciler.topology.secrets import Redactor

RENDERERS: dict[str, Callable[[Plan], str]] = {
    "text": plan_text.render,
    "json": plan_json.render,
    "markdown": plan_markdown.render,
}


def register(sub) -> None:
    p = sub.add_parser("plan", help="diff the topology against the live clusters and show the plan")
    add_paths_argument(p)
    p.add_argument("--format", choices=sorted(RENDERERS), default="text")
    p.add_argument(
        "--out",
        metavar="FILE",
        help="save the plan, signed with $RECONCILER_PLAN_KEY (required), for `apply FILE TOPOLOGY...`",
    )
    p.add_argument(
        "--detailed-exitcode",
        action="store_true",
        help="exit 0 when there are no changes, 2 when there are, 1 on error",
    )
    add_revision_argument(p)
    p.add_argument(
        "--base",
        metavar="REV",
        help="plan only the flows changed between git revision REV and the "
        "work tree (or --revision), and say which files and flows changed",
    )
    p.add_argument(
        "--clusters-from",
        metavar="REV",
        help="connect with the clusters' connection settings (bootstrap_servers, config) of the topology at git "
        "revision REV, never the work tree's: a pull request's plan (ci/plan-pr.sh); clusters the change adds "
        "are not connected and their flows not planned",
    )
    add_policy_argument(p, "A violation exits 3 and the plan is not saved.")
    p.add_argument(
        "--approved-by",
        metavar="NAME",
        help="record in the saved plan (--out) that NAME approved it: `apply FILE` then carries out the changes a "
        "policy marks as needing an approval (in CI: the approving review)",
    )
    p.add_argument(
        "--approved-at",
        metavar="TIME",
        help="when it was approved, ISO 8601 (e.g. 2026-11-28T22:00:00Z; default: now)",
    )
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("apply", help="apply a topology (plan, confirm, apply) or a saved plan file of it")
    p.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="topology files or directories; or a saved plan file (`plan --out`) followed by the topology it was "
        "planned from",
    )
    p.add_argument(
        "--auto-approve",
        action="store_true",
        help="do not ask for confirmation (a saved plan file needs none: it is the approval)",
    )
    add_env_argument(p)
    p.add_argument(
        "--lock-timeout",
        type=duration_argument,
        default=0.0,
        metavar="DURATION",
        help="wait this long (e.g. 90s, 5m) for a cluster's lease held by another apply, instead of failing at once",
    )
    add_policy_argument(
        p,
        "Refused (exit 3, nothing applied): a violation, or a change a policy (these or the saved plan's) marks as "
        "needing an approval the saved plan does not record.",
    )
    p.set_defaults(func=cmd_apply)


class Console:
    """stdout/stderr through the redactor, and `term` for what a renderer did not escape (issue 44): no
    escape sequence or control character but the newlines between lines reaches the terminal."""

    def __init__(self, clusters: dict[str, Cluster]):
        self.redact = Redactor()
        for c in clusters.values():
            self.redact.add_from(c.config)

    def out(self, text: str = "", end: str = "\n") -> None:
        sys.stdout.write(term(self.redact(text), newlines=True) + end)
        sys.stdout.flush()

    def err(self, text: str) -> None:
        sys.stderr.write(term(self.redact(text), newlines=True) + "\n")
        sys.stderr.flush()


def _render(
    args,
    plan: Plan,
    topology: Topology,
    diags,
    base: plan_base.BaseScope | None,
    pin: ClusterPin | None = None,
    policy: PolicyRecord | None = None,
) -> str:
    if args.format == "markdown":
        return plan_markdown.render(
            plan,
            topology=topology,
            warnings=relative_diagnostics(diags.warnings),
            preface=(policy_render.markdown(policy) if policy is not None else "")
            + plan_markdown.pin_preface(pin)
            + (base.markdown() if base else ""),
        )
    if args.format == "json":
        return plan_json.render(
            plan,
            base=base.to_dict() if base is not None else None,
            clusters_from=pin.to_dict() if pin is not None else None,
            policy=policy.to_dict() if policy is not None else None,
        )
    text = plan_text.pin_preface(pin) + (base.text() if base else "") + RENDERERS[args.format](plan)
    return text + (policy_render.text(policy) if policy is not None else "")


def _approval(args) -> tuple[Approval | None, bool]:
    """(the approval of --approved-by/--approved-at, whether the options are usable); prints why not."""
    if args.approved_at and not args.approved_by:
        print("error: --approved-at needs --approved-by (who approved the plan)", file=sys.stderr)
        return None, False
    if not args.approved_by:
        return None, True
    if not args.out:
        print(
            "error: --approved-by is recorded in a saved plan: give --out FILE, then `apply FILE TOPOLOGY...` "
            "(an approval signed with the plan, that nobody can add afterwards)",
            file=sys.stderr,
        )
        return None, False
    try:
        return Approval.of(args.approved_by, args.approved_at), True
    except ValueError as exc:
        print(term(f"error: {exc}"), file=sys.stderr)
        return None, False


def _pin(args, backend: Backend, topology: Topology) -> tuple[Topology, ClusterPin | None] | None:
    """`--clusters-from REV`: the topology with the connection settings of REV (gitops/trust.py); None when REV's
    topology cannot be read (nothing is then trusted, nothing connects)."""
    if not args.clusters_from:
        return topology, None
    try:
        trusted, tdiags = backend.git.topology_at(args.paths, args.clusters_from, args.env)
    except Exception as exc:  # noqa: BLE001 - RevisionError, a path outside the repository: one message
        trusted, tdiags = None, None
        why = str(exc)
    else:
        why = "; ".join(str(d) for d in tdiags.errors[:3]) if tdiags is not None else ""
    if trusted is None:
        print(
            f"error: --clusters-from {args.clusters_from}: the topology there cannot be read ({why}); "
            "no connection settings can be trusted, nothing was planned",
            file=sys.stderr,
        )
        return None
    return pin_clusters(topology, trusted, args.clusters_from)


def _at(backend: Backend, revision: str | None):
    return (backend.git, revision) if revision is not None else None


def cmd_plan(args, backend: Backend) -> int:
    bad_out = outputs.problems([args.out])
    if bad_out:
        print(bad_out[0], file=sys.stderr)
        return EXIT_ERROR
    if args.out and args.clusters_from:
        print(
            "error: --clusters-from plans a change before merge for review; it cannot be saved with --out",
            file=sys.stderr,
        )
        return EXIT_ERROR
    key = None
    if args.out:  # before any work: a saved plan is signed, or not saved
        try:
            key = planfile.signing_key()
        except planfile.PlanFileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_ERROR
    approval, usable = _approval(args)
    policies, readable = load_policies(args.policy)  # before any cluster is read: a broken policy judges nothing
    if not (usable and readable):
        return EXIT_ERROR
    topology, diags = load_validated(args.paths, at=_at(backend, args.revision), env=args.env)
    if topology is None:
        return EXIT_ERROR
    pinned = _pin(args, backend, topology)
    if pinned is None:
        return EXIT_ERROR
    topology, pin = pinned
    io = Console(dict(topology.clusters))
    base = None
    if args.base:
        base = plan_base.compare(backend.git, args.paths, args.base, args.revision, args.env)
        if base is None:
            return EXIT_ERROR
        if not base.flows:
            io.out(plan_base.no_changes(base, args.format), end="")
            return EXIT_OK
    # git, once: the job specs carry the revision, a saved plan records it
    git = backend.git.revision(args.paths, args.revision) if backend.jobs is not None or args.out else None
    planned = plan_topology(topology, backend, revision_label(git))
    plan, obs = planned.plan, planned.observation
    if base is not None:
        plan = base.restrict(plan, topology, obs.live, obs.desired)
    policy = PolicyRecord(approval=approval) if approval is not None else None
    if policies is not None:
        try:
            policy = evaluate_policies(policies, plan, topology, approval)
        except PolicyError as exc:
            policy_errors(exc)
            return EXIT_ERROR
    if args.out and args.format == "text" and not plan.errors:
        # Terraform-like: the saved plan is shown by `show`
        io.out(plan_text.summary(plan) + (policy_render.text(policy) if policy is not None else ""), end="")
    else:
        io.out(_render(args, plan, topology, diags, base, pin, policy), end="")
    if plan.errors:
        if args.out:
            io.err(f"error: the plan has {plural(len(plan.errors), 'error')}; not saved to {args.out}")
        return EXIT_ERROR
    if policy is not None and policy.violations:
        saved = f"; not saved to {args.out}" if args.out else ""
        io.err(f"error: {plural(len(policy.violations), 'policy violation')}{saved} (exit {EXIT_POLICY})")
        return EXIT_POLICY
    if args.out and key is not None:
        try:
            planfile.save(args.out, plan, topology, key, revision_label(git), git=git, policy=policy)
        except outputs.OutputError as exc:
            io.err(str(exc))
            return EXIT_ERROR
        env = f" --env {args.env}" if args.env else ""
        io.err(
            f"Saved the plan to {args.out} (signed with key {key.id}). Apply exactly this plan with: "
            f"reconciler apply{env} {args.out} {' '.join(args.paths)}"
        )
    return EXIT_CHANGES if args.detailed_exitcode and plan.has_changes else EXIT_OK


class _TextProgress:
    def __init__(self, io: Console):
        self.io = io

    def batch(self, index, total, cluster, kind, size) -> None:
        # one batch holds restarts of running jobs and starts of dead ones: each result line says which
        label = "(re)start job" if kind is ActionKind.RESTART_JOB else kind.value.replace("_", " ")
        self.io.out(f"[{index}/{total}] {term(cluster)}: {label} x{size}")

    def result(self, r: ActionResult) -> None:
        status = {"ok": "done", "already-done": "done (already)", "unsupported": "UNSUPPORTED", "failed": "FAILED"}[
            r.result.code.value
        ]
        show = not r.result.ok or getattr(r.action, "SHOW_RESULT", False)  # e.g. a job's pid
        msg = f": {r.result.message}" if r.result.message and show else ""
        self.io.out(term(f"    {r.action.VERB.value} {r.action.describe()}: {status}{msg}"))
        logs.event(  # a structured line per action with RECONCILER_LOG_FORMAT=json (nothing in text)
            f"{r.action.VERB.value} {r.action.describe()}: {status}{msg}",
            level=logging.INFO if r.result.ok else logging.ERROR,
            flow=getattr(r.action, "flow", None),
            flows=list(getattr(r.action, "flows", ())) or None,  # an engine replacement: every flow it restarts
            cluster=r.action.cluster,
            action=r.action.KIND.value,
            result=r.result.code.value,
        )


class ConsoleApplyUI:
    """The console side of `reconciler.operations.apply`."""

    def __init__(self, io: Console, auto_approve: bool, ask: Callable[[str], str | None]):
        self.io, self.auto_approve, self.ask = io, auto_approve, ask
        self.progress = _TextProgress(io)
        self.out, self.err = io.out, io.err

    def confirm(self, plan: Plan) -> bool:
        return self.auto_approve or confirmed(
            self.ask,
            f"\nApply these {plural(len(plan.actions), 'action')}?",
            self.io.err,
            unattended="Review the plan and run again with --auto-approve, or save it with `plan --out FILE` "
            "and `apply FILE`.",
            cancelled="Apply cancelled.",
        )


def cmd_apply(args, backend: Backend) -> int:
    saved = None
    paths = list(args.paths)
    if planfile.is_plan_file(paths[0]):
        plan_path, paths = paths[0], paths[1:]
        if not paths:
            print(
                f"error: plan file {plan_path}: give the topology it was planned from too: reconciler apply "
                f"{plan_path} TOPOLOGY... (the clusters are reached with the topology's connection settings, never "
                "the file's)",
                file=sys.stderr,
            )
            return EXIT_ERROR
        try:
            saved = planfile.load(plan_path)
        except planfile.PlanFileError as exc:
            print(term(f"error: {exc}"), file=sys.stderr)
            return EXIT_ERROR
    policies, readable = load_policies(args.policy)
    if not readable:
        return EXIT_ERROR
    env = args.env
    if env is None and saved is not None and saved.environment is not None:
        env = saved.environment  # the signed plan's; given, --env is checked against it (planfile.topology_mismatch)
        print(f"Using environment {term(env)}, the one the plan file was planned for.", file=sys.stderr)
    topology, _ = load_validated(paths, env=env)
    if topology is None:
        return EXIT_ERROR
    git = backend.git.revision(paths)
    # A saved plan file is the approval (Terraform applies a saved plan without asking again).
    auto_approve = args.auto_approve or saved is not None
    request = ApplyRequest(topology, saved, revision_label(git), git, auto_approve, args.lock_timeout, policies)
    io = Console(dict(topology.clusters))
    return conclude_apply(io, apply(request, backend, ConsoleApplyUI(io, request.auto_approve, backend.ask)))


def conclude_apply(io: Console, outcome: ApplyOutcome) -> int:
    """The last line of an apply (what was created, changed, deleted) and its exit code."""
    report = outcome.report
    if report is None:
        return EXIT_OK if outcome.ok else (EXIT_POLICY if outcome.policy_refused else EXIT_ERROR)
    counts = report.counts()
    verbs = {v: sum(1 for r in report.results if r.result.ok and r.action.VERB is v) for v in Verb}
    replaced = f"{verbs[Verb.REPLACE]} replaced, " if verbs[Verb.REPLACE] else ""
    line = (
        f"{verbs[Verb.CREATE]} created, {replaced}{verbs[Verb.UPDATE]} changed, {verbs[Verb.DELETE]} deleted "
        f"in {outcome.seconds:.1f}s"
    )
    if report.ok:
        io.out(f"\nApply complete: {line}.")
        return EXIT_OK
    io.err(
        f"\nApply finished with errors: {line}; {counts['failed']} failed, {counts['unsupported']} unsupported. "
        "Fix the cause and run apply again: it only does what is still missing."
    )
    return EXIT_ERROR
