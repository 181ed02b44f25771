"""Jobs in the plan: desired jobs x live jobs -> actions and findings (`diff_jobs`, pure), and
`with_jobs`, which reads the live jobs (the deployers' view) and adds them to a topic plan (used by reconciler.operations.plan).

Per enabled flow:
  not deployed / stopped          -> deploy
  running, same spec              -> nothing
  running, only hot fields differ -> update in place (the job re-reads its spec file; no restart)
  running, other fields differ    -> restart (graceful stop, start; resumes from committed offsets)
  down / restart-required         -> restart (with the desired spec); "start" when nothing of it runs
  duplicated (2+ instances)       -> restart: every instance stopped, then exactly one started
  deployer or its settings changed-> restart (stop on the old deployer, start on the new)
  running elsewhere               -> a finding (nothing here can update it)
  pending sync (rendered, never   -> a finding (a warning past PENDING_SYNC_WARN_SECONDS), never a restart: a
    started: GitOps)                 changed spec or deployment setting replaces what was rendered (update)
  deployed for another owner      -> an error (`conflict`): two topologies declare the flow (JobSpec.owner)
Per job no enabled flow wants:
  another owner's                 -> left alone (a finding): prune is scoped to the owner (docs/environments.md)
  flow disabled                   -> stop (`enabled: false` is MM2's "do not replicate")
  flow removed from the topology  -> stop with `prune: {flows: true}` (of a topology with an owner: only a job of that
                                     owner's), else an `unmanaged` finding
Per engine (jobplan/engines.py): a restart of one of its flows replaces the whole engine (one `ReplaceEngine`, `-/+`,
listing every flow it restarts with its reason, carrying out their own restarts and updates) when the engine's own
settings change (`engine.master` but for one `local[N]` for another, `engine.spark_conf`, the metrics port; on
kubernetes the settings of its SparkApplication), when it runs twice (duplicated), or when it is down as a whole
(none of its flows runs); any other restart is in place (a `RestartJob`: the engine's other flows keep running).
The spec compared is the one the deployer handed to the job (not the hash in its status, which
lags a hot update by up to one refresh interval), so a plan right after apply is empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.contract.deployers import KUBERNETES, SLO_OPTION
from reconciler.contract.jobstate import Deployment
from reconciler.contract.spec import JobSpec, restart_fields_of, rotated_sides
from reconciler.jobplan import backend as job_backend
from reconciler.jobplan.engines import plan_engines
from reconciler.jobplan.state import (
    PENDING_SYNC_WARN_SECONDS,
    DesiredJob,
    JobState,
    JobStatuses,
    LiveJob,
    LiveJobs,
    desired_jobs,
    iso,
    pending_seconds,
    read_jobs,
)
from reconciler.plan.actions import Action, Plan
from reconciler.plan.findings import Finding, FindingKind, Severity
from reconciler.plan.job_actions import DeployJob, RestartJob, StopJob, UpdateJob
from reconciler.plan.reasons import ReasonKind
from reconciler.state.live import LiveState
from reconciler.topology.flow_id import flow_ends
from reconciler.topology.model import Topology


def _changes(current: JobSpec, desired: JobSpec) -> dict[str, list]:
    """Path of each changed setting ("settings.topics.include", "engine.parallelism") -> [current, desired]."""
    return {k: [old, new] for k, (old, new) in current.changes(desired).items()}


def _fields(names) -> str:
    return ", ".join(sorted(names))


def _job_action_args(d: DesiredJob) -> dict:
    return dict(
        cluster=d.cluster,
        flow=d.flow,
        deployer=d.deployer,
        options=dict(d.options),
        spec=d.spec.to_dict(),
        spec_hash=d.spec.spec_hash(),
    )


def _option_changes(d: DesiredJob, dep) -> dict[str, list]:
    """Deployment settings the flow's deployment differs in (every kubernetes setting; else only the engine)."""
    return {
        k: [dep.options.get(k), v]
        for k, v in d.options.items()
        if dep.options.get(k) != v and (d.deployer == KUBERNETES or k == "engine")
    }


def _pending_finding(d: DesiredJob, lj: LiveJob, now_ms: int) -> Finding:
    waited = pending_seconds(lj, now_ms)
    long = waited is not None and waited >= PENDING_SYNC_WARN_SECONDS
    if long:
        hint = (
            "the reconciler never restarts a flow that never started: check that the change was merged and the "
            "GitOps controller synced the engine's manifest (Argo CD: ServerSideApply=true), then the "
            "SparkApplication's state and its driver's log"
        )
    else:
        hint = "nothing to do: it starts when the cluster syncs the engine's manifest"
    return Finding(
        Severity.WARNING if long else Severity.INFO,
        FindingKind.PENDING,
        d.cluster,
        d.flow,
        f"job of flow {d.flow} is pending sync: {lj.why}",
        hint=hint,
        why=ReasonKind.JOB_PENDING_SYNC,
    )


def _plan_desired(d: DesiredJob, lj: LiveJob | None, findings: list[Finding], now_ms: int = 0) -> Action | None:
    """The flow's own action (None: nothing to do; what cannot be planned is a finding)."""
    args = _job_action_args(d)
    if lj is None:
        return DeployJob(reason=f"no job runs flow {d.flow}", why=None, **args)
    state = lj.state
    theirs = _foreign_owner(lj.deployment, d.spec.owner)
    if theirs is not None:
        findings.append(_owner_conflict(d, theirs))
        return None
    if state is JobState.UNKNOWN:
        findings.append(
            Finding(
                Severity.WARNING,
                FindingKind.UNREACHABLE,
                d.cluster,
                d.flow,
                f"job of flow {d.flow} not planned: {lj.why}",
                hint="fix access to the cluster's status topic reconciler.status.internal",
                why=ReasonKind.JOB_STATUS_UNKNOWN,
            )
        )
        return None
    if state is JobState.ELSEWHERE:
        if lj.running_hash != d.spec.spec_hash():
            findings.append(_elsewhere_finding(d, lj))
        return None
    if state in (JobState.NOT_DEPLOYED, JobState.STOPPED):
        return _plan_not_running(d, lj, args)
    dep = lj.deployment
    changes = _changes(dep.spec, d.spec) if dep is not None and dep.spec is not None else {}
    if state in (JobState.DUPLICATED, JobState.DOWN, JobState.RESTART_REQUIRED):
        return _plan_down(lj, changes, args)
    if state is JobState.PENDING_SYNC:
        findings.append(_pending_finding(d, lj, now_ms))
        if dep is None or dep.deployer == d.deployer:
            return _plan_pending(d, lj, changes, args)
    return _plan_running(d, lj, changes, args)  # running or starting (or pending sync on another deployer: it moves)


def _elsewhere_finding(d: DesiredJob, lj: LiveJob) -> Finding:
    return Finding(
        Severity.WARNING,
        FindingKind.CONFLICT,
        d.cluster,
        d.flow,
        f"a job of flow {d.flow} runs spec {(lj.running_hash or '?')[:12]} (desired "
        f"{d.spec.spec_hash()[:12]}) but was not deployed from this state directory; "
        "it is not changed from here",
        hint="apply from where the job was deployed (same RECONCILER_STATE_DIR), or stop it there and apply again",
    )


def _plan_not_running(d: DesiredJob, lj: LiveJob, args: dict) -> Action:
    """Not deployed or stopped: deploy it, or move it from the deployer that still runs it."""
    moved = next((o for o in lj.others if not o.stopped and o.alive is not False), None)
    if moved is not None:
        return RestartJob(
            reason=f"the flow's deployer changed from {moved.deployer} to {d.deployer}",
            current_hash=moved.spec_hash,
            state=lj.state.value,
            previous_deployer=moved.deployer,
            why=ReasonKind.JOB_DEPLOYMENT,
            **args,
        )
    if lj.state is JobState.NOT_DEPLOYED:
        return DeployJob(reason=f"no job runs flow {d.flow}", why=None, **args)
    reason = f"the job of flow {d.flow} was stopped ({lj.why}) and the flow is enabled"
    return DeployJob(reason=reason, why=ReasonKind.JOB_DOWN, **args)


def _plan_down(lj: LiveJob, changes: dict[str, list], args: dict) -> RestartJob:
    """Duplicated, down or asking for a restart: a restart (which may replace its engine: jobplan/engines.py)."""
    dep = lj.deployment
    current = dep.spec if dep else None
    common = dict(
        current_hash=current.spec_hash() if current else None,
        changes=changes,
        state=lj.state.value,
        previous_deployer=dep.deployer if dep else None,
        **args,
    )
    if lj.state is JobState.DUPLICATED:
        return RestartJob(reason=lj.why, why=ReasonKind.JOB_DUPLICATED, **common)
    reason = f"the job is {lj.state.value}: {lj.why}"
    if changes:
        reason += f"; and {_fields(changes)} changed"
    return RestartJob(reason=reason, why=ReasonKind.JOB_DOWN, running=bool(dep and dep.alive is not False), **common)


def _plan_pending(d: DesiredJob, lj: LiveJob, changes: dict[str, list], args: dict) -> UpdateJob | None:
    """Rendered, never started (GitOps), on the flow's deployer: whatever changed replaces what was rendered;
    there is nothing to restart."""
    dep = lj.deployment
    current = dep.spec if dep else None
    option_changes = _option_changes(d, dep) if dep is not None else {}
    if not (changes or option_changes or current is None):
        return None
    what = _fields({**changes, **option_changes}) if changes or option_changes else "unreadable spec"
    return UpdateJob(
        reason=f"the job has not started yet (pending sync): {what} changed in what was rendered, "
        "which is replaced (nothing to restart)",
        current_hash=current.spec_hash() if current else "",
        changes={**changes, **option_changes},
        **args,
    )


def _plan_running(d: DesiredJob, lj: LiveJob, changes: dict[str, list], args: dict) -> Action | None:
    """Running or starting: moved to another deployer, restarted for its deployment settings or a field it cannot
    take live, or updated in place (hot, or a credential rotation); None: it runs the desired spec."""
    dep, state = lj.deployment, lj.state.value
    if dep is None or dep.spec is None:
        where = dep.where if dep else "no deployment record"
        return RestartJob(reason=f"the spec the job runs cannot be read ({where})", state=state, **args)
    current_hash = dep.spec.spec_hash()
    if dep.deployer != d.deployer:
        return RestartJob(
            reason=f"the flow's deployer changed from {dep.deployer} to {d.deployer}",
            current_hash=current_hash,
            changes=changes,
            state=state,
            previous_deployer=dep.deployer,
            why=ReasonKind.JOB_DEPLOYMENT,
            **args,
        )
    option_changes = _option_changes(d, dep)
    slo_changed = option_changes.pop(SLO_OPTION, None)  # the engine's ReplicationEngine is rewritten, nothing restarts
    if option_changes:
        option_changes.update({SLO_OPTION: slo_changed} if slo_changed else {})
        if "engine" in option_changes:
            before = option_changes["engine"][0]
            reason = (
                f"flow {d.flow} moves {f'from engine {before}' if before else 'from its own Spark application'} "
                f"into engine {d.options['engine']}"
            )
        else:
            reason = f"deployment settings changed: {_fields(option_changes)}"
        return RestartJob(
            reason=reason,
            current_hash=current_hash,
            changes={**changes, **option_changes},
            state=state,
            why=ReasonKind.JOB_DEPLOYMENT,
            **args,
        )
    if not changes and slo_changed:
        return UpdateJob(
            reason="the lag SLOs its engine judges it by changed: its ReplicationEngine is rewritten, no restart",
            current_hash=current_hash,
            changes={SLO_OPTION: slo_changed},
            **args,
        )
    if not changes:
        return None
    rotated = rotated_sides(changes)
    restart_fields = restart_fields_of(changes, rotated)
    if restart_fields:
        return RestartJob(
            reason=f"{_fields(restart_fields)} changed, which a running job cannot take without a restart",
            current_hash=current_hash,
            changes=changes,
            state=state,
            **args,
        )
    if rotated:  # credentials alone: a rotation, taken in place (the flow reconnects; contract/spec.py)
        reason = _rotation(d, changes, rotated)
    else:
        reason = (
            f"{_fields(changes)} changed: the running job applies it within its refresh "
            f"interval ({d.spec.settings.refresh_interval_seconds:g}s), no restart, no data loss"
        )
    return UpdateJob(reason=reason, current_hash=current_hash, changes=changes, **args)


def _rotation(d: DesiredJob, changes: dict[str, list], rotated: Mapping[str, tuple[str, ...]]) -> str:
    """Why a credential rotation is taken in place (names the settings, never their values)."""
    rotation = "; ".join(
        f"credentials of cluster {(d.spec.source if side == 'source' else d.spec.target).alias!r} rotated "
        f"({', '.join(keys)})"
        for side, keys in sorted(rotated.items())
    )
    others = sorted(set(changes) - set(rotated))
    return (
        f"{rotation}{'; and ' + _fields(others) + ' changed' if others else ''}: the running flow "
        "reconnects with them in place (no restart of its engine, nothing copied twice or skipped)"
    )


def _owner_conflict(d: DesiredJob, theirs: str) -> Finding:
    """A flow of the topology whose job another owner runs: an error, the job is not changed."""
    return Finding(
        Severity.ERROR,
        FindingKind.CONFLICT,
        d.cluster,
        d.flow,
        f"the job of flow {d.flow} belongs to owner {theirs} (another topology declares the flow), not to "
        f"{'owner ' + d.spec.owner if d.spec.owner else 'this topology, which has no owner'}; not changed",
        hint="give the flow another name (`name:`, a topic family) in one of the topologies, or, if the flow moved "
        "between teams, stop its job in the old owner's topology (remove it there with prune.flows)",
        why=ReasonKind.CONFLICT,
    )


def _foreign_owner(dep: Deployment | None, owner: str | None) -> str | None:
    """The owner of a deployed job (its spec's, `JobSpec.owner`) when it is another than `owner`, else None."""
    theirs = dep.spec.owner if dep is not None and dep.spec is not None else None
    return theirs if theirs is not None and theirs != owner else None


def _plan_unwanted(lj: LiveJob, topology: Topology, out: list[Action], findings: list[Finding]) -> None:
    flow = lj.flow
    source, target, _ = flow_ends(flow)
    in_topology = next((f for f in topology.flows if f.name == flow), None)
    cluster = target if target in topology.clusters else source if source in topology.clusters else ""
    live_deps = [
        d for d in ((lj.deployment,) if lj.deployment else ()) + lj.others if not d.stopped and d.alive is not False
    ]
    if not live_deps:
        if lj.state is JobState.ELSEWHERE:
            why = "is disabled" if in_topology else "is not in the topology"
            findings.append(
                Finding(
                    Severity.WARNING,
                    FindingKind.UNMANAGED,
                    cluster or target,
                    flow,
                    f"a job of flow {flow} still reports ({lj.why}), but the flow {why}; it was not "
                    "deployed from this state directory, so it is left alone",
                    hint="stop it where it was started",
                )
            )
        return
    for dep in live_deps:
        running = f"{dep.deployer}, {dep.where}"
        theirs = _foreign_owner(dep, topology.owner)
        unowned = topology.owner is not None and dep.spec is not None and dep.spec.owner is None
        if theirs is not None or (unowned and in_topology is None and topology.prune.flows):
            whose = f"belongs to owner {theirs}" if theirs else f"is not owner {topology.owner}'s (it has no owner)"
            findings.append(
                Finding(
                    Severity.INFO if theirs else Severity.WARNING,
                    FindingKind.RETAINED if theirs else FindingKind.UNMANAGED,
                    cluster or target,
                    flow,
                    f"the job of flow {flow} ({running}) {whose}; left alone",
                    hint=None if theirs else "prune stops only its owner's jobs: stop it by hand if nobody needs it",
                    why=ReasonKind.JOB_UNWANTED,
                )
            )
            continue
        args: dict[str, Any] = dict(
            cluster=cluster,
            flow=flow,
            deployer=dep.deployer,
            options=dict(dep.options),
            spec=dep.spec.to_dict() if dep.spec else {},
            spec_hash=dep.spec_hash or "",
            where=dep.where,
        )
        if in_topology is not None:
            out.append(StopJob(reason=f"flow {flow} is disabled (enabled: false)", **args))
        elif not topology.prune.flows:
            findings.append(
                Finding(
                    Severity.WARNING,
                    FindingKind.UNMANAGED,
                    cluster or target,
                    flow,
                    f"the job of flow {flow} still runs ({running}), but the flow is no longer in the "
                    "topology; left running",
                    hint="set `prune: {flows: true}` to let apply stop it, disable the flow instead "
                    "of removing it, or stop it by hand",
                )
            )
        elif not cluster:
            findings.append(
                Finding(
                    Severity.WARNING,
                    FindingKind.UNMANAGED,
                    target,
                    flow,
                    f"the job of flow {flow} still runs ({running}); neither of its clusters is in the "
                    "topology, so apply cannot take a lease for it: left running",
                    hint="stop it by hand",
                )
            )
        else:
            out.append(StopJob(reason=f"flow {flow} was removed from the topology (prune.flows is on)", **args))


def diff_jobs(
    topology: Topology, desired: Mapping[str, DesiredJob], live: LiveJobs
) -> tuple[list[Action], list[Finding]]:
    """Pure: what to deploy, update, restart, replace and stop so the jobs match the topology: each flow's own
    action (`_plan_desired`), the engines replaced with the changes of their flows they carry out (`plan_engines`,
    jobplan/engines.py), and the jobs no enabled flow wants (`_plan_unwanted`)."""
    findings: list[Finding] = []
    own: dict[str, Action] = {}
    for flow, d in sorted(desired.items()):
        a = _plan_desired(d, live.jobs.get(flow), findings, live.now_ms)
        if a is not None:
            own[flow] = a
    stops: list[Action] = []
    for flow, lj in sorted(live.jobs.items()):
        if flow not in desired:
            _plan_unwanted(lj, topology, stops, findings)
    return plan_engines(own, live, {a.subject for a in stops}) + stops, findings


def with_jobs(
    plan: Plan,
    topology: Topology,
    live: LiveState,
    backend: job_backend.JobBackend | None = None,
    git_revision: str | None = None,
    statuses: JobStatuses | None = None,
    now_ms: int | None = None,
) -> Plan:
    """`plan` plus the job actions and findings (unchanged when jobs are off: `backend` None).

    `git_revision` (`<sha>[-dirty]`, None outside git) is data: the Backend read it once for the command; the
    desired job specs carry it (their hash leaves it out)."""
    if backend is None:
        return plan
    return plan_with_jobs(plan, topology, live, backend, git_revision, statuses, now_ms)[0]


def plan_with_jobs(
    plan: Plan,
    topology: Topology,
    live: LiveState,
    backend: job_backend.JobBackend,
    git_revision: str | None = None,
    statuses: JobStatuses | None = None,
    now_ms: int | None = None,
    stale_after: float | None = None,
) -> tuple[Plan, LiveJobs]:
    """`with_jobs`, and the live jobs it planned from (the one verdict per job, which drift shows as it is);
    `stale_after`: an explicit status threshold (drift's --job-stale-seconds), None: the one rule."""
    desired = desired_jobs(topology, git_revision)
    skip = {a: c.error or "unreachable" for a, c in live.clusters.items() if not c.reachable}
    jobs = read_jobs(topology, backend, desired, skip, now_ms=now_ms, statuses=statuses, stale_after=stale_after)
    actions, findings = diff_jobs(topology, desired, jobs)
    if not actions and not findings:
        return plan, jobs
    return (
        Plan(
            plan.actions + actions,
            plan.findings + findings,
            plan.clusters,
            plan.scope,
            plan.fingerprint,
            plan.topology,
            plan.permissions,
            plan.environment,
        ),
        jobs,
    )


__all__ = ["diff_jobs", "with_jobs", "plan_with_jobs", "iso"]
