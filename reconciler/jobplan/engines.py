"""Engine replacements in a job plan: which engines the plan replaces, each one `ReplaceEngine` action (pure).

`diff_jobs` (jobplan/plan.py) plans each flow's own change (deploy, update in place, restart, nothing) and then the
engines those flows share, here (`plan_engines`). An engine is replaced (plan/engine_actions.py) when a restart of
one of its flows that stays in it (not a move into or out of it, nor between deployer families) has a cause at the
engine's level, its `why`:

  its engine's own settings changed (`engine_settings`)                         job-engine-settings
  it runs more than once                                                        job-duplicated
  it is down, and so is every other flow of the engine: none of them runs       job-down

The replacement of engine E in target cluster C carries out the own changes of E's flows into C that stay in E
(restarts, and hot changes: each is listed in it with its reason and has no action of its own), and lists the
flows of E restarted by it with no change of their own (each in one replacement only: that of its own target
cluster when E is replaced there too). Every other action is kept as its flow planned it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TypeGuard

from reconciler.contract.deployers import deployer_family, local_threads, replaces_engine
from reconciler.jobplan.state import JobState, LiveJobs
from reconciler.plan.actions import Action
from reconciler.plan.engine_actions import EngineFlow, EngineFlowOp, EngineSetting, ReplaceEngine
from reconciler.plan.job_actions import JobAction, RestartJob, UpdateJob
from reconciler.plan.reasons import ReasonKind
from reconciler.topology.flow_id import flow_ends


def engine_settings(a: RestartJob) -> dict[str, list]:
    """Of a restart's changes, the engine's own settings (path -> [current, desired]): a change of one replaces the
    engine."""
    changed = {}
    for k, (old, new) in a.changes.items():
        if k == "engine.master" and local_threads(str(old or "")) is not None and local_threads(str(new)) is not None:
            continue  # one local[N] for another: the engine runs local[max] already
        if replaces_engine(k, a.deployer):  # a setting of the engine's own (scope engine: settings_registry)
            changed[k] = [old, new]
    return changed


#: An engine: (deployer family, engine name).
Engine = tuple[str, str]
#: Which replacement wins when the restarts of an engine's flows give several causes.
_CAUSES = (ReasonKind.JOB_ENGINE_SETTINGS, ReasonKind.JOB_DUPLICATED, ReasonKind.JOB_DOWN)


def _engine_of(a: JobAction) -> Engine:
    return (deployer_family(a.deployer), str(a.options["engine"]))


def _stays(a: Action) -> TypeGuard[RestartJob | UpdateJob]:
    """A flow's own restart or hot change inside its engine (which a replacement of the engine carries out): not a
    move between engines or deployer families, a deploy or a stop."""
    if not isinstance(a, (RestartJob, UpdateJob)) or not a.options.get("engine") or "engine" in a.changes:
        return False
    before = a.previous_deployer if isinstance(a, RestartJob) else None
    return not (before and deployer_family(before) != deployer_family(a.deployer))


def _members(live: LiveJobs) -> dict[Engine, list[str]]:
    """The flows each engine holds now (its deployments that are not stopped), by name."""
    out: dict[Engine, list[str]] = {}
    for lj in sorted(live.jobs.values(), key=lambda j: j.flow):
        dep = lj.deployment
        if dep is not None and dep.options.get("engine") and not dep.stopped:
            out.setdefault((deployer_family(dep.deployer), str(dep.options["engine"])), []).append(lj.flow)
    return out


def _cause(a: RestartJob, live: LiveJobs, members: Iterable[str]) -> ReasonKind | None:
    """Why restart `a` replaces its whole engine (None: the flow restarts in place)."""
    if engine_settings(a):
        return ReasonKind.JOB_ENGINE_SETTINGS
    if a.state == JobState.DUPLICATED.value:
        return ReasonKind.JOB_DUPLICATED
    flows = [live.jobs.get(f) for f in {a.flow, *members}]
    if a.state in (JobState.DOWN.value, JobState.RESTART_REQUIRED.value) and all(
        lj is not None and lj.deployment is not None and lj.deployment.alive is False for lj in flows
    ):
        return ReasonKind.JOB_DOWN
    return None


def _reason(engine: str, why: ReasonKind, settings: tuple[EngineSetting, ...], lead: RestartJob) -> str:
    if why is ReasonKind.JOB_ENGINE_SETTINGS:
        return f"the settings of engine {engine} changed ({', '.join(s.path for s in settings)})"
    if why is ReasonKind.JOB_DUPLICATED:
        return f"engine {engine} runs more than once ({lead.flow}: {lead.reason})"
    return f"engine {engine} is not running: none of its flows runs"


def _carried(a: RestartJob | UpdateJob, settings: set[str], live: LiveJobs) -> EngineFlow:
    """A flow's own change as a flow of its engine's replacement."""
    lj = live.jobs.get(a.flow)
    state = a.state if isinstance(a, RestartJob) else (lj.state.value if lj is not None else "")
    return EngineFlow(
        flow=a.flow,
        why=a.reason_kind,
        reason=a.reason,
        op=EngineFlowOp.RESTART if isinstance(a, RestartJob) else EngineFlowOp.PLACE,
        options=dict(a.options),
        spec=dict(a.spec),
        spec_hash=a.spec_hash,
        current_hash=a.current_hash,
        changes={k: v for k, v in a.changes.items() if k not in settings},
        state=state,
    )


def _replacement(
    cluster: str, engine: str, staying: list[RestartJob | UpdateJob], members: list[str], live: LiveJobs
) -> ReplaceEngine | None:
    """The replacement of `engine` carrying out `staying` (the own changes of its flows into `cluster`), or None
    when none of them replaces it. Its flows restarted with no change of their own are added by `plan_engines`."""
    restarts = [a for a in staying if isinstance(a, RestartJob)]
    causes = {a.flow: c for a in restarts if (c := _cause(a, live, members)) is not None}
    if not causes:
        return None
    why = next(c for c in _CAUSES if c in causes.values())
    lead = next(a for a in restarts if causes.get(a.flow) is why)
    found: dict[str, list] = {}  # the first flow's change of each engine setting (they share the engine's)
    for a in restarts:
        for path, change in engine_settings(a).items():
            found.setdefault(path, change)
    settings = tuple(s for p in sorted(found) for s in EngineSetting.of(p, *found[p]))
    return ReplaceEngine(
        cluster=cluster,
        reason=_reason(engine, why, settings, lead),
        engine=engine,
        deployer=lead.deployer,
        why=why,
        settings=settings,
        restarts=tuple(_carried(a, set(found), live) for a in staying),
    )


def _with_engine(flow: str, engine: str, live: LiveJobs) -> EngineFlow:
    lj = live.jobs.get(flow)
    dep = lj.deployment if lj is not None else None
    return EngineFlow(
        flow=flow,
        why=ReasonKind.JOB_WITH_ENGINE,
        reason=f"restarts with engine {engine} (nothing of its own changes)",
        options=dict(dep.options) if dep is not None else {},
        spec_hash=(dep.spec_hash or "") if dep is not None else "",
        state=lj.state.value if lj is not None else "",
    )


def plan_engines(own: Mapping[str, Action], live: LiveJobs, acting: Iterable[str] = ()) -> list[Action]:
    """The job actions of a plan from each flow's own one (`own`: flow -> its action; `acting`: the flows with
    another action, e.g. a stop): one `ReplaceEngine` per engine and target cluster that is replaced, carrying the own
    changes of its flows there, and every other flow's own action as it is (see the module docstring)."""
    members = _members(live)
    groups: dict[tuple[str, Engine], list[RestartJob | UpdateJob]] = {}
    for flow in sorted(own):
        a = own[flow]
        if _stays(a):
            groups.setdefault((a.cluster, _engine_of(a)), []).append(a)
    replaced: dict[tuple[str, Engine], ReplaceEngine] = {}
    for (cluster, key), staying in sorted(groups.items()):
        r = _replacement(cluster, key[1], staying, members.get(key, []), live)
        if r is not None:
            replaced[(cluster, key)] = r
    busy = {*own, *acting}
    for key, flows in members.items():
        clusters = sorted(c for c, k in replaced if k == key)
        for flow in (f for f in flows if f not in busy and clusters):
            target = flow_ends(flow)[1]
            at = (target if target in clusters else clusters[0], key)
            replaced[at] = dataclasses.replace(
                replaced[at], restarts=(*replaced[at].restarts, _with_engine(flow, key[1], live))
            )
    carried = {e.flow for r in replaced.values() for e in r.handed}
    kept = [a for f, a in sorted(own.items()) if f not in carried]
    return kept + [
        dataclasses.replace(r, restarts=tuple(sorted(r.restarts, key=lambda e: e.flow))) for r in replaced.values()
    ]
