"""Executor handlers for the job actions: each goes to the deployer the action names, an engine at a time.

They are plain functions: `reconciler.operations.handlers.handler_table` puts them in the executor's
handler table (importing this module registers nothing).

The actions of one batch (one target cluster, one kind) are grouped by deployer and engine: each engine gets one
`Deployer.apply` with the changes of its flows (the deployer's unit is the engine, reconciler.deployers.base). An
engine replacement (`ReplaceEngine`) is one such unit by itself: the flows it carries out changes for (restarted,
or their spec handed over) in one `EngineChange`, and its result is theirs together, each flow's named. The engines
of a batch are handled in parallel, and so are the flows within an engine, so a restart of several jobs costs one
graceful-stop wait, not one per job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from reconciler.adapters.base import OpResult, ResultCode
from reconciler.apply.executor import ApplyContext
from reconciler.contract.spec import JobSpec
from reconciler.deployers import Deployers
from reconciler.deployers.base import EngineChange, FlowChange, FlowOp, engine_of
from reconciler.plan.actions import Action
from reconciler.plan.engine_actions import ReplaceEngine
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


def _one_result(flows: Sequence[str], results: Sequence[OpResult]) -> OpResult:
    """One action's result from its flows' results: the worst code; each flow's message named when there are several."""
    if len(results) != len(flows):
        return OpResult.failed(f"the deployer gave {len(results)} results for {len(flows)} flows")
    if len(results) == 1:
        return results[0]
    order = [ResultCode.FAILED, ResultCode.UNSUPPORTED, ResultCode.OK, ResultCode.ALREADY_DONE]
    code = min((r.code for r in results), key=order.index)
    return OpResult(code, "; ".join(f"{flow}: {r.message}" for flow, r in zip(flows, results)))


def _by_engine(ctx: ApplyContext, actions: Sequence[Action], op: FlowOp) -> list[OpResult]:
    """One `apply` per (deployer, engine) of the actions, with `op` for each of their flows; one result per action,
    in action order."""
    deployers = _deployers(ctx)
    results: list[OpResult | None] = [None] * len(actions)
    groups: dict[tuple[str, str], list[int]] = {}
    for i, a in enumerate(actions):
        if not isinstance(a, JobAction):
            results[i] = OpResult.failed(f"TypeError: {a.KIND.value} is not a job action")
            continue
        groups.setdefault((a.deployer, engine_of(a.flow, a.options)), []).append(i)

    def one(key: tuple[str, str], indexes: list[int]) -> list[OpResult]:
        mine = [a for a in (actions[i] for i in indexes) if isinstance(a, JobAction)]
        try:
            changes = [FlowChange(op, a.flow, None if op is FlowOp.REMOVE else a.job_spec(), a.options) for a in mine]
            got = deployers.get(key[0]).apply(EngineChange(key[1], tuple(changes)))
        except Exception as exc:  # noqa: BLE001 - one engine's failure is its flows' result, not the batch's
            return [OpResult.failed(f"{type(exc).__name__}: {exc}")] * len(indexes)
        return list(got)

    with ThreadPoolExecutor(max_workers=max(1, min(8, len(groups)))) as pool:
        for indexes, got in zip(groups.values(), pool.map(one, groups.keys(), groups.values())):
            for i, res in zip(indexes, got):
                results[i] = res
    return [r if r is not None else OpResult.failed("no result") for r in results]


def deploy_jobs(ctx: ApplyContext, cluster: str, actions: Sequence[Action]) -> list[OpResult]:
    return _by_engine(ctx, actions, FlowOp.PLACE)


def update_jobs(ctx: ApplyContext, cluster: str, actions: Sequence[Action]) -> list[OpResult]:
    return _by_engine(ctx, actions, FlowOp.PLACE)


def _moves(a: Action) -> bool:
    """A restart onto another deployer family: stopped on the old one, then started on the new."""
    return (
        isinstance(a, RestartJob)
        and bool(a.previous_deployer)
        and Deployers.family(a.previous_deployer or "") != Deployers.family(a.deployer)
    )


def _move(d: Deployers, a: JobAction) -> OpResult:
    assert isinstance(a, RestartJob) and a.previous_deployer
    stopped = d.get(a.previous_deployer).stop(a.flow, a.options)
    if not stopped.ok:
        return OpResult.failed(f"cannot stop the job on {a.previous_deployer}: {stopped.message}")
    res = d.get(a.deployer).deploy(a.job_spec(), a.options)
    return OpResult(res.code, f"stopped on {a.previous_deployer}; {res.message}")


def restart_jobs(ctx: ApplyContext, cluster: str, actions: Sequence[Action]) -> list[OpResult]:
    moving = [i for i, a in enumerate(actions) if _moves(a)]
    staying = [i for i in range(len(actions)) if i not in moving]
    results: dict[int, OpResult] = {}
    if moving:
        results.update(zip(moving, _each(ctx, [actions[i] for i in moving], _move)))
    if staying:
        results.update(zip(staying, _by_engine(ctx, [actions[i] for i in staying], FlowOp.RESTART)))
    return [results[i] for i in range(len(actions))]


def stop_jobs(ctx: ApplyContext, cluster: str, actions: Sequence[Action]) -> list[OpResult]:
    return _by_engine(ctx, actions, FlowOp.REMOVE)


def _replace(d: Deployers, a: ReplaceEngine) -> OpResult:
    """One engine replacement, one `Deployer.apply`: each flow whose own change it carries out, restarted (`restart`)
    or its spec handed over (`place`), in one change of the engine; the engine's replacement restarts the others."""
    handed = a.handed
    if not handed:
        return OpResult.failed(f"replacement of engine {a.engine} hands no flow to its deployer")
    changes = tuple(FlowChange(FlowOp(e.op.value), e.flow, JobSpec.from_dict(e.spec), e.options) for e in handed)
    got = d.get(a.deployer).apply(EngineChange(a.engine, changes))
    return _one_result([e.flow for e in handed], got)


def replace_engines(ctx: ApplyContext, cluster: str, actions: Sequence[ReplaceEngine]) -> list[OpResult]:
    """The engine replacements of a batch, in parallel: each one deployer unit (`_replace`)."""
    deployers = _deployers(ctx)

    def one(a: ReplaceEngine) -> OpResult:
        try:
            return _replace(deployers, a)
        except Exception as exc:  # noqa: BLE001 - one engine's failure is its result, not the batch's
            return OpResult.failed(f"{type(exc).__name__}: {exc}")

    with ThreadPoolExecutor(max_workers=max(1, min(8, len(actions)))) as pool:
        return list(pool.map(one, actions))
