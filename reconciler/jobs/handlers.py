"""Executor handlers for the job actions: each goes to the deployer the action names.

The jobs of one batch (one target cluster, one kind) are handled in parallel, so a restart of
several jobs costs one graceful-stop wait, not one per job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from reconciler.adapters.base import OpResult
from reconciler.apply.executor import ApplyContext, register_handler
from reconciler.deploy import Deployers
from reconciler.plan.actions import ActionKind
from reconciler.plan.job_actions import JobAction


def _deployers(ctx: ApplyContext) -> Deployers:
    return ctx.deployers if ctx.deployers is not None else Deployers()


def _each(
    ctx: ApplyContext, actions: Sequence[JobAction], fn: Callable[[Deployers, JobAction], OpResult]
) -> list[OpResult]:
    deployers = _deployers(ctx)

    def one(a: JobAction) -> OpResult:
        try:
            return fn(deployers, a)
        except Exception as exc:  # noqa: BLE001 - one job's failure is its result, not the batch's
            return OpResult.failed(f"{type(exc).__name__}: {exc}")

    with ThreadPoolExecutor(max_workers=max(1, min(8, len(actions)))) as pool:
        return list(pool.map(one, actions))


@register_handler(ActionKind.DEPLOY_JOB)
def _deploy(ctx, cluster, actions):
    return _each(ctx, actions, lambda d, a: d.get(a.deployer).deploy(a.job_spec(), a.options))


@register_handler(ActionKind.UPDATE_JOB)
def _update(ctx, cluster, actions):
    return _each(ctx, actions, lambda d, a: d.get(a.deployer).update(a.job_spec(), a.options))


def _restart(d: Deployers, a) -> OpResult:
    if a.previous_deployer and Deployers.family(a.previous_deployer) != Deployers.family(a.deployer):
        stopped = d.get(a.previous_deployer).stop(a.flow, a.options)
        if not stopped.ok:
            return OpResult.failed(f"cannot stop the job on {a.previous_deployer}: {stopped.message}")
        res = d.get(a.deployer).deploy(a.job_spec(), a.options)
        return OpResult(res.code, f"stopped on {a.previous_deployer}; {res.message}")
    return d.get(a.deployer).restart(a.job_spec(), a.options)


@register_handler(ActionKind.RESTART_JOB)
def _restart_jobs(ctx, cluster, actions):
    return _each(ctx, actions, _restart)


@register_handler(ActionKind.STOP_JOB)
def _stop(ctx, cluster, actions):
    return _each(ctx, actions, lambda d, a: d.get(a.deployer).stop(a.flow, a.options))
