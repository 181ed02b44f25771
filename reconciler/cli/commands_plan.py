"""`plan` and `apply`: read the live clusters, diff them against the topology, show or apply the plan.

Exit codes (Terraform's): plan --detailed-exitcode: 0 no changes, 2 changes, 1 error; apply: 0 done,
1 error / refused / any action failed. Every line printed goes through a Redactor of the resolved
`${ENV_VAR}` values of the clusters' configs.
"""

from __future__ import annotations

import sys
import time
from typing import Callable

from reconciler import outputs
from reconciler.adapters.base import AdminError
from reconciler.adapters.kafka_admin import KafkaAdmin
from reconciler.apply.executor import ActionResult, ApplyContext, execute
from reconciler.apply.lock import ClusterLocks, LockHeld
from reconciler.apply.revision import revision_info, revision_label
from reconciler.cli import plan_base
from reconciler.cli.common import (
    EXIT_CHANGES, EXIT_ERROR, EXIT_OK, add_paths_argument, add_revision_argument, load_validated, relative_diagnostics,
)
from reconciler.jobs.plan import with_jobs
from reconciler.plan import planfile
from reconciler.plan.actions import Plan, Verb
from reconciler.plan.diff import diff
from reconciler.render import plan_json, plan_markdown, plan_text
from reconciler.state.desired import desired_state
from reconciler.state.live import LiveState
from reconciler.state.read import AdminFactory, Connections, clusters_of, read_live
from reconciler.topology.model import Cluster, Topology
from reconciler.textutil import plural
from reconciler.topology.secrets import Redactor

RENDERERS: dict[str, Callable[[Plan], str]] = {
    "text": plan_text.render, "json": plan_json.render, "markdown": plan_markdown.render,
}

# Replaced by tests with a MemoryFactory; the real thing otherwise.
admin_factory: AdminFactory = KafkaAdmin


def register(sub) -> None:
    p = sub.add_parser("plan", help="diff the topology against the live clusters and show the plan")
    add_paths_argument(p)
    p.add_argument("--format", choices=sorted(RENDERERS), default="text")
    p.add_argument("--out", metavar="FILE", help="save the plan (with a fingerprint of the live state) for `apply FILE`")
    p.add_argument("--detailed-exitcode", action="store_true",
                   help="exit 0 when there are no changes, 2 when there are, 1 on error")
    add_revision_argument(p)
    p.add_argument("--base", metavar="REV", help="plan only the flows changed between git revision REV and the "
                                                 "work tree (or --revision), and say which files and flows changed")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("apply", help="apply a topology (plan, confirm, apply) or a saved plan file")
    p.add_argument("paths", nargs="+", metavar="PATH", help="topology files or directories, or one saved plan file")
    p.add_argument("--auto-approve", action="store_true", help="do not ask for confirmation")
    p.set_defaults(func=cmd_apply)


class _Console:
    """stdout/stderr through the redactor."""

    def __init__(self, clusters: dict[str, Cluster]):
        self.redact = Redactor()
        for c in clusters.values():
            self.redact.add_from(c.config)

    def out(self, text: str = "", end: str = "\n") -> None:
        sys.stdout.write(self.redact(text) + end)
        sys.stdout.flush()

    def err(self, text: str) -> None:
        sys.stderr.write(self.redact(text) + "\n")
        sys.stderr.flush()


def make_plan(topology: Topology, conns: Connections, live: LiveState | None = None) -> Plan:
    live = live if live is not None else read_live(conns, clusters_of(topology))
    plan = diff(desired_state(topology, live), live, topology)
    return with_jobs(plan, topology, live)  # the replication jobs: deploy / update / restart / stop


def _render(args, plan: Plan, topology: Topology, diags, base: plan_base.BaseScope | None) -> str:
    if args.format == "markdown":
        return plan_markdown.render(plan, topology=topology, warnings=relative_diagnostics(diags.warnings),
                                    preface=base.markdown() if base else "")
    if args.format == "json" and base is not None:
        import json

        return json.dumps({"base": base.to_dict(), **plan.to_dict()}, indent=2) + "\n"
    return (base.text() if base else "") + RENDERERS[args.format](plan)


def cmd_plan(args) -> int:
    bad_out = outputs.problems([args.out])
    if bad_out:
        print(bad_out[0], file=sys.stderr)
        return EXIT_ERROR
    topology, diags = load_validated(args.paths, revision=args.revision)
    if topology is None:
        return EXIT_ERROR
    io = _Console(dict(topology.clusters))
    base = None
    if args.base:
        base = plan_base.compare(args.paths, args.base, args.revision)
        if base is None:
            return EXIT_ERROR
        if not base.flows:
            io.out(plan_base.no_changes(base, args.format), end="")
            return EXIT_OK
    with Connections(dict(topology.clusters), admin_factory) as conns:
        live = read_live(conns, clusters_of(topology))
        plan = make_plan(topology, conns, live)
    if base is not None:
        plan = base.restrict(plan, topology, live)
    if args.out and args.format == "text" and not plan.errors:
        io.out(plan_text.summary(plan), end="")  # Terraform-like: the saved plan is shown by `show`
    else:
        io.out(_render(args, plan, topology, diags, base), end="")
    if plan.errors:
        if args.out:
            io.err(f"error: the plan has {plural(len(plan.errors), 'error')}; not saved to {args.out}")
        return EXIT_ERROR
    if args.out:
        git = revision_info(args.paths, args.revision)
        planfile.save(args.out, plan, dict(topology.clusters), revision_label(git), git=git)
        io.err(f"Saved the plan to {args.out}. Apply exactly this plan with: reconciler apply {args.out}")
    return EXIT_CHANGES if args.detailed_exitcode and plan.has_changes else EXIT_OK


class _TextProgress:
    def __init__(self, io: _Console):
        self.io = io

    def batch(self, index, total, cluster, kind, size) -> None:
        self.io.out(f"[{index}/{total}] {cluster}: {kind.value.replace('_', ' ')} x{size}")

    def result(self, r: ActionResult) -> None:
        status = {"ok": "done", "already-done": "done (already)", "unsupported": "UNSUPPORTED",
                  "failed": "FAILED"}[r.result.code.value]
        show = not r.result.ok or getattr(r.action, "SHOW_RESULT", False)  # e.g. a job's pid
        msg = f": {r.result.message}" if r.result.message and show else ""
        self.io.out(f"    {r.action.VERB.value} {r.action.describe()}: {status}{msg}")


def _confirm(io: _Console, plan: Plan, auto_approve: bool) -> bool:
    if auto_approve:
        return True
    if not sys.stdin.isatty():
        io.err("error: refusing to ask for confirmation: stdin is not a terminal. "
               "Review the plan and run again with --auto-approve (or apply a saved plan file with --auto-approve).")
        return False
    n = len(plan.actions)
    answer = input(f"\nApply these {n} action{'s' if n != 1 else ''}? Only 'yes' will be accepted: ")
    if answer.strip() != "yes":
        io.err("Apply cancelled.")
        return False
    return True


def _unlocked(plan: Plan, locked: list[str]) -> str | None:
    """Why `plan` cannot run under the leases of `locked` clusters (it touches others), or None."""
    extra = sorted({a.cluster for a in plan.actions} - set(locked))
    return f"it now also changes {', '.join(extra)}, whose lease is not held; run apply again" if extra else None


def cmd_apply(args) -> int:
    saved = None
    if len(args.paths) == 1 and planfile.is_plan_file(args.paths[0]):
        try:
            saved = planfile.load(args.paths[0])
        except planfile.PlanFileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        clusters, topology, revision, git = saved.clusters, None, saved.revision, saved.git
    else:
        topology, _ = load_validated(args.paths)
        if topology is None:
            return EXIT_ERROR
        git = revision_info(args.paths)
        clusters, revision = dict(topology.clusters), revision_label(git)
    io = _Console(clusters)

    with Connections(clusters, admin_factory) as conns:
        plan = saved.plan if saved else make_plan(topology, conns)
        io.out(plan_text.render(plan), end="")
        if plan.errors:
            io.err("error: the plan has errors (see above); nothing was applied")
            return EXIT_ERROR
        if not plan.actions:
            return EXIT_OK
        if not _confirm(io, plan, args.auto_approve):
            return EXIT_ERROR
        touched = sorted({a.cluster for a in plan.actions})
        admins = [conns.get(a) for a in touched]
        if any(a is None for a in admins):
            io.err("error: " + "; ".join(conns.errors.values()))
            return EXIT_ERROR
        started = time.monotonic()
        try:
            with ClusterLocks(admins) as locks:
                live = read_live(conns, plan.clusters)
                stale = planfile.stale_reason(plan, live)
                if stale and saved is None and args.auto_approve:
                    # Nothing to refuse: --auto-approve approved whatever the plan is, so plan again
                    # from what the lease now protects (Terraform plans under its lock the same way).
                    plan = make_plan(topology, conns, live)
                    io.out(f"\nThe clusters changed while planning ({stale}); planned again under the lease:\n")
                    io.out(plan_text.render(plan), end="")
                    stale = _unlocked(plan, touched) or (plan.errors and "the new plan has errors")
                if stale:
                    io.err(f"error: refusing to apply a stale plan: {stale}")
                    return EXIT_ERROR
                io.out(f"\nApplying {plural(len(plan.actions), 'action')} on {', '.join(touched)} (lease held) ...")
                report = execute(plan, ApplyContext(conns.get), _TextProgress(io))
                if report.ok:
                    for lease in locks.leases:
                        lease.record_applied({"fingerprint": plan.fingerprint, "revision": revision, "git": git,
                                              "clusters": touched,
                                              "actions": sum(1 for a in plan.actions if a.cluster == lease.admin.alias)})
        except LockHeld as exc:
            io.err(f"error: {exc}")
            return EXIT_ERROR
        except AdminError as exc:
            io.err(f"error: {exc}")
            return EXIT_ERROR
    counts = report.counts()
    verbs = {v: sum(1 for r in report.results if r.result.ok and r.action.VERB is v) for v in Verb}
    line = (f"{verbs[Verb.CREATE]} created, {verbs[Verb.UPDATE]} changed, {verbs[Verb.DELETE]} deleted "
            f"in {time.monotonic() - started:.1f}s")
    if report.ok:
        io.out(f"\nApply complete: {line}.")
        return EXIT_OK
    io.err(f"\nApply finished with errors: {line}; {counts['failed']} failed, {counts['unsupported']} unsupported. "
           "Fix the cause and run apply again: it only does what is still missing.")
    return EXIT_ERROR
