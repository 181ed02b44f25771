"""An engine's verdict on its flows, for its ReplicationEngine's status (pure): drift's judgement, flow by flow.

Each flow the engine's ReplicationEngine wants is judged as `drift` judges a flow: the one verdict on its job
(`reconciler.contract.jobstate.classify`, from the flow's own status record and what the engine knows of its driver
thread), then the items drift reports of a job that runs (`reconciler.drift.report`: `job_items`, and `slo_items` of
the lag SLOs; the heartbeat age is drift's alone, it reads the target's heartbeats topic). The verdicts become the
status by `reconciler.contract.engine_status.status_of`; the engine's driver writes it
(`reconciler.engine.health_writer`).

    not deployed (its flow file not in the pod yet), starting, pending sync, restart-required, running elsewhere
                                                          Progressing
    stopped (superseded by a newer instance elsewhere)     Suspended
    down, duplicated, unknown; running with a drift item  Degraded (the items' messages, drift's words)
    running an older spec than wanted, nothing else       Progressing (the new spec is on its way)
    running, no item                                      Ready
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from reconciler.contract.engine_status import FlowVerdict, Phase, Seen, Wanted, status_of
from reconciler.contract.jobstate import JobState, LiveJob, classify
from reconciler.contract.spec import JobSpec
from reconciler.drift.report import job_health
from reconciler.drift.report.job_items import job_items
from reconciler.drift.report.slo import Measured, slo_items
from reconciler.topology.defaults import BUILTIN_FLOW_DEFAULTS
from reconciler.topology.model import Flow, FlowSettings, JobSettings, Slo

#: Verdicts of a flow that is on its way (not down): started, waiting for its file, restarting, moving in.
ON_ITS_WAY = frozenset({JobState.STARTING, JobState.PENDING_SYNC, JobState.RESTART_REQUIRED, JobState.ELSEWHERE})


def _flow(spec: JobSpec) -> Flow:
    """The flow of a job spec, as drift's items name it (its ends and settings; the job's settings are not read)."""
    job = BUILTIN_FLOW_DEFAULTS["job"]
    return Flow(
        **{f.name: getattr(spec.settings, f.name) for f in fields(FlowSettings)},
        source=spec.source.alias,
        target=spec.target.alias,
        enabled=True,
        job=JobSettings(**{f.name: job[f.name] for f in fields(JobSettings) if f.name in job}),
    )


def judge_flow(flow: str, want_hash: str | None, seen: Seen, slo: Slo, now_ms: int) -> FlowVerdict:
    """One flow of the engine (the module's table)."""
    dep = seen.deployment
    state, why = classify(flow, seen.record, dep, now_ms)
    if state is JobState.NOT_DEPLOYED:
        return FlowVerdict(
            flow,
            state,
            Phase.PROGRESSING,
            f"flow {flow} is not in the engine yet: its flow file has not reached the pod (the kubelet updates a "
            "mounted ConfigMap within about a minute)",
        )
    if state in ON_ITS_WAY:
        return FlowVerdict(
            flow, state, Phase.PROGRESSING, f"flow {flow} is {state.value}" + (f": {why}" if why else "")
        )
    if state is JobState.STOPPED:
        return FlowVerdict(flow, state, Phase.SUSPENDED, f"flow {flow} is stopped: {why or 'on purpose'}")
    if dep is None or dep.spec is None:  # its spec cannot be read: the verdict's words
        return FlowVerdict(flow, state, Phase.DEGRADED, f"flow {flow} is {state.value}: {why}")
    interval = dep.spec.engine.status_interval_seconds
    live = LiveJob(flow, state, why, seen.record, dep)
    as_is = job_health(seen.record, None, now_ms, status_interval_seconds=interval, live=live)  # spec not compared
    target = _flow(dep.spec)
    wrong = job_items(target, as_is) + slo_items(Measured(target, as_is, None, None, False), slo)
    if state is not JobState.RUNNING or wrong:
        said = "; ".join(i.message for i in wrong) or f"flow {flow} is {state.value}: {why}"
        return FlowVerdict(flow, state, Phase.DEGRADED, said)
    wanted = job_health(seen.record, want_hash, now_ms, status_interval_seconds=interval, live=live)
    if wanted.spec_current is False:  # an older spec than wanted: the new one is on its way (or waits for an apply)
        [old] = job_items(target, wanted)
        return FlowVerdict(flow, state, Phase.PROGRESSING, old.message)
    return FlowVerdict(flow, state, Phase.READY)


def engine_status(
    wanted: Wanted,
    seen: Mapping[str, Seen],
    now_ms: int,
    *,
    stopping: bool = False,
    previous: Mapping[str, Any] | None = None,
    instance: str | None = None,
) -> dict[str, Any]:
    """The status of a ReplicationEngine (pure): `wanted` its spec, `seen` what the engine knows of each flow it runs
    (a flow it runs that `wanted` does not name is leaving it), `stopping` once its driver was asked to stop,
    `previous` the status the resource holds."""
    verdicts = [judge_flow(f, h, seen.get(f, Seen()), wanted.slo, now_ms) for f, h in sorted(wanted.flows.items())]
    for flow, s in sorted(seen.items()):
        if flow not in wanted.flows and s.deployment is not None and s.deployment.alive:
            leaving = f"flow {flow} is no longer wanted: it stops once its flow file leaves the pod"
            verdicts.append(FlowVerdict(flow, JobState.RUNNING, Phase.PROGRESSING, leaving))
    return status_of(wanted, verdicts, now_ms, stopping=stopping, previous=previous, instance=instance)
