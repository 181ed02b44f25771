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
A restart replaces the flow's whole engine (`_engine_restarts`: every other flow of the engine restarts with it, the
action names them and carries the restarts planned for them, so one engine replacement is one action) when the engine's own Spark settings change (`engine.master` but for one `local[N]` for
another, `engine.spark_conf`, the metrics port; on kubernetes the settings of its SparkApplication), when it runs
twice (duplicated), or when it is down as a whole (none of its flows runs); any other restart is in place.
The spec compared is the one the deployer handed to the job (not the hash in its status, which
lags a hot update by up to one refresh interval), so a plan right after apply is empty.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from reconciler.contract.deployers import KUBERNETES, deployer_family, local_threads, replaces_engine
from reconciler.contract.jobstate import Deployment
from reconciler.contract.spec import JobSpec, restart_fields_of, rotated_sides
from reconciler.jobplan import backend as job_backend
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


def _plan_desired(
    d: DesiredJob, lj: LiveJob | None, out: list[Action], findings: list[Finding], now_ms: int = 0
) -> None:
    args = _job_action_args(d)
    if lj is None:
        out.append(DeployJob(reason=f"no job runs flow {d.flow}", why=None, **args))
        return
    state = lj.state
    dep = lj.deployment
    theirs = _foreign_owner(dep, d.spec.owner)
    if theirs is not None:
        findings.append(
            Finding(
                Severity.ERROR,
                FindingKind.CONFLICT,
                d.cluster,
                d.flow,
                f"the job of flow {d.flow} belongs to owner {theirs} (another topology declares the flow), not to "
                f"{'owner ' + d.spec.owner if d.spec.owner else 'this topology, which has no owner'}; not changed",
                hint="give the flow another name (`name:`, a topic family) in one of the topologies, or, if the flow "
                "moved between teams, stop its job in the old owner's topology (remove it there with prune.flows)",
                why=ReasonKind.CONFLICT,
            )
        )
        return
    moved = next((o for o in lj.others if not o.stopped and o.alive is not False), None)
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
        return
    if state is JobState.ELSEWHERE:
        if lj.running_hash != d.spec.spec_hash():
            findings.append(
                Finding(
                    Severity.WARNING,
                    FindingKind.CONFLICT,
                    d.cluster,
                    d.flow,
                    f"a job of flow {d.flow} runs spec {(lj.running_hash or '?')[:12]} (desired "
                    f"{d.spec.spec_hash()[:12]}) but was not deployed from this state directory; "
                    "it is not changed from here",
                    hint="apply from where the job was deployed (same RECONCILER_STATE_DIR), or stop it "
                    "there and apply again",
                )
            )
        return
    if state in (JobState.NOT_DEPLOYED, JobState.STOPPED):
        if moved is not None:
            out.append(
                RestartJob(
                    reason=f"the flow's deployer changed from {moved.deployer} to {d.deployer}",
                    current_hash=moved.spec_hash,
                    state=state.value,
                    previous_deployer=moved.deployer,
                    why=ReasonKind.JOB_DEPLOYMENT,
                    **args,
                )
            )
            return
        reason = (
            f"no job runs flow {d.flow}"
            if state is JobState.NOT_DEPLOYED
            else f"the job of flow {d.flow} was stopped ({lj.why}) and the flow is enabled"
        )
        out.append(
            DeployJob(reason=reason, why=None if state is JobState.NOT_DEPLOYED else ReasonKind.JOB_DOWN, **args)
        )
        return
    current = dep.spec if dep else None
    changes = _changes(current, d.spec) if current is not None else {}
    rotated = rotated_sides(changes)
    restart_fields = restart_fields_of(changes, rotated)
    if state is JobState.DUPLICATED:
        out.append(
            RestartJob(
                reason=lj.why,
                current_hash=current.spec_hash() if current else None,
                changes=changes,
                state=state.value,
                previous_deployer=dep.deployer if dep else None,
                why=ReasonKind.JOB_DUPLICATED,
                **args,
            )
        )
        return
    if state in (JobState.DOWN, JobState.RESTART_REQUIRED):
        reason = f"the job is {state.value}: {lj.why}"
        if changes:
            reason += f"; and {_fields(changes)} changed"
        out.append(
            RestartJob(
                reason=reason,
                current_hash=current.spec_hash() if current else None,
                changes=changes,
                state=state.value,
                previous_deployer=dep.deployer if dep else None,
                why=ReasonKind.JOB_DOWN,
                running=bool(dep and dep.alive is not False),
                **args,
            )
        )
        return
    if state is JobState.PENDING_SYNC:
        findings.append(_pending_finding(d, lj, now_ms))
        if dep is None or dep.deployer == d.deployer:
            # Never started: whatever changed replaces what was rendered; there is nothing to restart.
            option_changes = _option_changes(d, dep) if dep is not None else {}
            if changes or option_changes or current is None:
                what = _fields({**changes, **option_changes}) if changes or option_changes else "unreadable spec"
                out.append(
                    UpdateJob(
                        reason=f"the job has not started yet (pending sync): {what} changed in what was rendered, "
                        "which is replaced (nothing to restart)",
                        current_hash=current.spec_hash() if current else "",
                        changes={**changes, **option_changes},
                        **args,
                    )
                )
            return
    # running or starting (or pending sync on another deployer: it moves)
    if dep is None or current is None:
        where = dep.where if dep else "no deployment record"
        out.append(RestartJob(reason=f"the spec the job runs cannot be read ({where})", state=state.value, **args))
        return
    if dep.deployer != d.deployer:
        out.append(
            RestartJob(
                reason=f"the flow's deployer changed from {dep.deployer} to {d.deployer}",
                current_hash=current.spec_hash(),
                changes=changes,
                state=state.value,
                previous_deployer=dep.deployer,
                why=ReasonKind.JOB_DEPLOYMENT,
                **args,
            )
        )
        return
    option_changes = _option_changes(d, dep)
    if option_changes:
        if "engine" in option_changes:
            before = option_changes["engine"][0]
            reason = (
                f"flow {d.flow} moves {f'from engine {before}' if before else 'from its own Spark application'} "
                f"into engine {d.options['engine']}"
            )
        else:
            reason = f"deployment settings changed: {_fields(option_changes)}"
        out.append(
            RestartJob(
                reason=reason,
                current_hash=current.spec_hash(),
                changes={**changes, **option_changes},
                state=state.value,
                why=ReasonKind.JOB_DEPLOYMENT,
                **args,
            )
        )
        return
    if not changes:
        return
    if restart_fields:
        out.append(
            RestartJob(
                reason=f"{_fields(restart_fields)} changed, which a running job cannot take without a restart",
                current_hash=current.spec_hash(),
                changes=changes,
                state=state.value,
                **args,
            )
        )
        return
    if rotated:  # credentials alone: a rotation, taken in place (the flow reconnects; contract/spec.py)
        rotation = "; ".join(
            f"credentials of cluster {(d.spec.source if side == 'source' else d.spec.target).alias!r} rotated "
            f"({', '.join(keys)})"
            for side, keys in sorted(rotated.items())
        )
        others = sorted(set(changes) - set(rotated))
        out.append(
            UpdateJob(
                reason=f"{rotation}{'; and ' + _fields(others) + ' changed' if others else ''}: the running flow "
                "reconnects with them in place (no restart of its engine, nothing copied twice or skipped)",
                current_hash=current.spec_hash(),
                changes=changes,
                **args,
            )
        )
        return
    out.append(
        UpdateJob(
            reason=f"{_fields(changes)} changed: the running job applies it within its refresh "
            f"interval ({d.spec.settings.refresh_interval_seconds:g}s), no restart, no data loss",
            current_hash=current.spec_hash(),
            changes=changes,
            **args,
        )
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


def _engine_restart(a: RestartJob, live: LiveJobs, mates: list[str]) -> str:
    """Why restart `a` replaces its whole engine ('': the flow restarts in place; a move between deployers or
    engines is a move, not a replacement)."""
    if "engine" in a.changes or (
        a.previous_deployer and deployer_family(a.previous_deployer) != deployer_family(a.deployer)
    ):
        return ""
    if a.state == JobState.DUPLICATED.value:
        return "it runs more than once"
    changed = []
    for k, (old, new) in a.changes.items():
        if k == "engine.master" and local_threads(str(old or "")) is not None and local_threads(str(new)) is not None:
            continue  # one local[N] for another: the engine runs local[max] already
        if replaces_engine(k, a.deployer):  # a setting of the engine's own (scope engine: settings_registry)
            changed.append(k)
    if changed:
        return f"its Spark settings changed: {_fields(changed)}"
    flows = [live.jobs.get(f) for f in [a.flow, *mates]]
    if a.state in (JobState.DOWN.value, JobState.RESTART_REQUIRED.value) and all(
        lj is not None and lj.deployment is not None and lj.deployment.alive is False for lj in flows
    ):
        return "it is not running"
    return ""


def _engine_key(a: RestartJob) -> tuple[str, str]:
    return (deployer_family(a.deployer), str(a.options["engine"]))


def _joins_a_replacement(a: Action) -> bool:
    """A restart of a flow that stays in its engine and deployer family (not a move), so an engine replacement
    restarts it anyway."""
    return (
        isinstance(a, RestartJob)
        and bool(a.options.get("engine"))
        and "engine" not in a.changes
        and not (a.previous_deployer and deployer_family(a.previous_deployer) != deployer_family(a.deployer))
    )


def _engine_restarts(actions: list[Action], live: LiveJobs) -> list[Action]:
    """The restarts, marked where they replace the flow's whole engine, with the engine's other flows (pure). One
    engine replacement is one action: the first restart that replaces an engine carries (`joined`) every other
    restart of that engine into the same target cluster (each cluster's lease covers its own actions, so an engine
    holding flows into two clusters has one replacement action per cluster)."""
    engines: dict[tuple[str, str], set[str]] = {}
    for lj in live.jobs.values():
        dep = lj.deployment
        if dep is not None and dep.options.get("engine") and not dep.stopped:
            engines.setdefault((deployer_family(dep.deployer), str(dep.options["engine"])), set()).add(lj.flow)
    marked: list[Action] = []
    for a in actions:
        if isinstance(a, RestartJob) and a.options.get("engine"):
            mates = sorted(engines.get(_engine_key(a), set()) - {a.flow})
            why = _engine_restart(a, live, mates)
            if why:
                a = dataclasses.replace(a, engine_restart=why, engine_flows=mates)
        marked.append(a)
    leads: dict[tuple[str, str, str], RestartJob] = {}
    for a in marked:
        if isinstance(a, RestartJob) and a.engine_restart:
            leads.setdefault((a.cluster, *_engine_key(a)), a)
    joined: dict[tuple[str, str, str], list[RestartJob]] = {}
    for a in marked:
        if _joins_a_replacement(a):
            assert isinstance(a, RestartJob)
            key = (a.cluster, *_engine_key(a))
            if key in leads and leads[key] is not a:
                joined.setdefault(key, []).append(dataclasses.replace(a, engine_restart="", engine_flows=[]))
    out: list[Action] = []
    for a in marked:
        if isinstance(a, RestartJob) and a.options.get("engine"):
            key = (a.cluster, *_engine_key(a))
            if leads.get(key) is a:
                a = dataclasses.replace(a, joined=tuple(joined.get(key, ())))
            elif any(j.flow == a.flow for j in joined.get(key, ())):
                continue  # carried by its engine's replacement
        out.append(a)
    return out


def diff_jobs(
    topology: Topology, desired: Mapping[str, DesiredJob], live: LiveJobs
) -> tuple[list[Action], list[Finding]]:
    """Pure: what to deploy, update, restart and stop so the jobs match the topology."""
    actions: list[Action] = []
    findings: list[Finding] = []
    for flow, d in sorted(desired.items()):
        _plan_desired(d, live.jobs.get(flow), actions, findings, live.now_ms)
    for flow, lj in sorted(live.jobs.items()):
        if flow not in desired:
            _plan_unwanted(lj, topology, actions, findings)
    return _engine_restarts(actions, live), findings


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
