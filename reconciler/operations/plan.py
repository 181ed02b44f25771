"""Plan: the desired state (computed once, in observe) diffed against the observation, plus the jobs.

`plan_of(observation, backend, git_revision)` is pure apart from the deployers' view of their jobs (a local
listing; the status records come from the observation); the git revision is data, read by the command once
through `backend.git`. `make_plan` reads and plans in one step.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from reconciler.adapters.live_read import Connections
from reconciler.contract.jobstate import LiveJobs
from reconciler.jobplan.plan import plan_with_jobs
from reconciler.operations.backend import Backend
from reconciler.operations.observe import Observation, observe
from reconciler.plan.actions import Plan
from reconciler.plan.backlog import retention_findings
from reconciler.plan.diff import diff
from reconciler.state.live import LiveState
from reconciler.topology.model import Topology


def plan_of(obs: Observation, backend: Backend, git_revision: str | None = None) -> Plan:
    """`git_revision`: `<sha>[-dirty]` of the topology (`revision_label` of what `backend.git` read once for
    the command), carried by the desired job specs; None outside git."""
    return plan_and_jobs(obs, backend, git_revision)[0]


def plan_and_jobs(
    obs: Observation, backend: Backend, git_revision: str | None = None, stale_after: float | None = None
) -> tuple[Plan, LiveJobs | None]:
    """`plan_of`, and the live jobs (the one verdict per job) it planned from: None when jobs are off.
    `stale_after`: an explicit status threshold (drift's --job-stale-seconds), None: the one rule."""
    plan = diff(obs.desired, obs.live, obs.topology)
    statuses = obs.statuses.records if obs.statuses is not None else None
    outruns = retention_findings(obs.topology, obs.live, obs.backlogs, statuses)
    if outruns:
        plan = dataclasses.replace(plan, findings=plan.findings + outruns)
    if backend.jobs is None:
        return plan, None
    # the replication jobs: deploy / update / restart / stop
    return plan_with_jobs(
        plan,
        obs.topology,
        obs.live,
        backend.jobs,
        git_revision,
        statuses=obs.statuses,
        now_ms=obs.now_ms,
        stale_after=stale_after,
    )


def observe_for_plan(
    topology: Topology, conns: Connections, backend: Backend, live: LiveState | None = None, **more: bool
) -> Observation:
    """What a plan reads: the clusters, the job statuses when jobs are planned, and the backlogs of the flows with a
    rate limit (their retention check)."""
    return observe(topology, conns, backend, live=live, statuses=backend.jobs is not None, backlogs=True, **more)


@dataclass(frozen=True)
class Planned:
    plan: Plan
    observation: Observation  # what it was planned from (live state, desired state: `plan --base` restricts)


def plan_topology(topology: Topology, backend: Backend, git_revision: str | None = None) -> Planned:
    """`reconciler plan`: connect to the topology's clusters, observe, plan."""
    with Connections(dict(topology.clusters), backend.admin_factory) as conns:
        obs = observe_for_plan(topology, conns, backend)
        return Planned(plan_of(obs, backend, git_revision), obs)


def make_plan(
    topology: Topology,
    conns: Connections,
    backend: Backend,
    live: LiveState | None = None,
    git_revision: str | None = None,
) -> Plan:
    return plan_of(observe_for_plan(topology, conns, backend, live), backend, git_revision)
