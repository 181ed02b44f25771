"""Executor handlers for the job actions: each goes to the deployer the action names.

They are plain functions: `reconciler.operations.handlers.handler_table` puts them in the executor's
handler table (importing this module registers nothing).

The jobs of one batch (one target cluster, one kind) are handled in parallel, so a restart of
several jobs costs one graceful-stop wait, not one per job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from reconciler.adapters.base import OpResult
from reconciler.apply.executor import ApplyContext
from reconciler.deployers import Deployers
from reconciler.plan.actions import Action
from reconciler.plan.job_actions import JobAction, RestartJob


def _deployers(ctx: ApplyContext) -> Deployers:
    return ctx.deployers if ctx.deployers is not None else Deployers()


def _each(
    ctx: ApplyContext, actions: Sequence[Action], fn: Callable[[Deployers, JobAction], OpResult]
) -> list[OpResult]:
    deployers = _deployers(ctx)

    def one(a: Action) -> OpResult:
        try:
            if not isinstance(a, JobAction):
                raise TypeError(f"{a.KIND.value} is not a job action")
            return fn(deployers, a)
        except Exception as exc:  # noqa: BLE001 - one job's failure is its result, not the batch's
            return OpResult.failed(f"{type(exc).__name__}: {exc}")

    with ThreadPoolExecutor(max_workers=max(1, min(8, len(actions)))) as pool:
        return list(pool.map(one, actions))


def deploy_jobs(ctx: ApplyContext, cluster: str, actions: Sequence[Action]) -> list[OpResult]:
    return _each(ctx, actions, lambda d, a: d.get(a.deployer).deploy(a.job_spec(), a.options))


def update_jobs(ctx: ApplyContext, cluster: str, actions: Sequence[Action]) -> list[OpResult]:
    return _each(ctx, actions, lambda d, a: d.get(a.deployer).update(a.job_spec(), a.options))


def _restart(d: Deployers, a: JobAction) -> OpResult:
    if (
        isinstance(a, RestartJob)
        and a.previous_deployer
        and Deployers.family(a.previous_deployer) != Deployers.family(a.deployer)
    ):
        stopped = d.get(a.previous_deployer).stop(a.flow, a.options)
        if not stopped.ok:
            return OpResult.failed(f"cannot stop the job on {a.previous_deployer}: {stopped.message}")
        res = d.get(a.deployer).deploy(a.job_spec(), a.options)
        return OpResult(res.code, f"stopped on {a.previous_deployer}; {res.message}")
    return d.get(a.deployer).restart(a.job_spec(), a.options)


def restart_jobs(ctx: ApplyContext, cluster: str, actions: Sequence[Action]) -> list[OpResult]:
    return _each(ctx, actions, _restart)


def stop_jobs(ctx: ApplyContext, cluster: str, actions: Sequence[Action]) -> list[OpResult]:
    return _each(ctx, actions, lambda d, a: d.get(a.deployer).stop(a.flow, a.options))
