"""Run a plan's actions in batches, one batch per (cluster, action kind) in plan order, and report
every result. No retries and no rollback: the plan is idempotent, so a run that failed or was
killed half-way converges when planned and applied again.

The executor is given its handler table (action kind -> handler); nothing registers itself on import.
The one table of every kind's handler is built by `reconciler.operations.handlers.handler_table`:
a new action kind gets its handler there (a unit test names a kind without one). The topic, config and ACL
handlers below take their own action type (`Sequence[CreateTopic]`, ...); `TypedHandler` binds one to its
kind, checking the batch it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import Generic, Protocol, TypeVar

from reconciler.adapters.base import ClusterAdmin, ConfigAlteration, NewTopicSpec, OpResult, ResultCode
from reconciler.apply.guard import ActionGuard, GuardRefused, refusals
from reconciler.deployers import Deployers
from reconciler.plan.actions import (
    Action,
    ActionKind,
    AddPartitions,
    CreateAcl,
    CreateTopic,
    DeleteAcl,
    DeleteConfig,
    DeleteTopic,
    Plan,
    RecordOwnership,
    SetConfig,
)
from reconciler.state.ownership import LEASE_TOPIC, claim_key, claim_value

BATCH_SIZE = 500


@dataclass
class ApplyContext:
    """What handlers need: an adapter per cluster (topic, config and ACL actions) and the job deployers
    (job actions; None: the real ones, built when a job action runs)."""

    admins: Callable[[str], ClusterAdmin | None]
    deployers: Deployers | None = None


#: Runs one batch of actions of one kind on one cluster: a result per action, in order.
Handler = Callable[[ApplyContext, str, Sequence[Action]], list[OpResult]]
#: Which handler runs each action kind.
HandlerTable = Mapping[ActionKind, Handler]

A = TypeVar("A", bound=Action)


@dataclass(frozen=True)
class TypedHandler(Generic[A]):
    """A handler of one action type, as the executor calls it: the batch is checked to hold only `action_type`
    actions (a batch of another kind fails with a TypeError) and handed to `run` as such."""

    action_type: type[A]
    run: Callable[[ApplyContext, str, Sequence[A]], list[OpResult]]

    def __call__(self, ctx: ApplyContext, cluster: str, actions: Sequence[Action]) -> list[OpResult]:
        return self.run(ctx, cluster, only(self.action_type, actions))


def only(action_type: type[A], actions: Sequence[Action]) -> list[A]:
    """`actions`, each checked to be an `action_type`."""
    out: list[A] = []
    for a in actions:
        if not isinstance(a, action_type):
            raise TypeError(f"a {a.KIND.value} action given to the {action_type.KIND.value} handler")
        out.append(a)
    return out


def _admin(ctx: ApplyContext, cluster: str) -> ClusterAdmin:
    admin = ctx.admins(cluster)
    if admin is None:
        raise RuntimeError(f"no connection to cluster {cluster!r}")
    return admin


def create_topics(ctx: ApplyContext, cluster: str, actions: Sequence[CreateTopic]) -> list[OpResult]:
    res = _admin(ctx, cluster).create_topics(
        [NewTopicSpec(a.topic, a.partitions, a.replication_factor, dict(a.configs)) for a in actions]
    )
    return [res[a.topic] for a in actions]


def add_partitions(ctx: ApplyContext, cluster: str, actions: Sequence[AddPartitions]) -> list[OpResult]:
    res = _admin(ctx, cluster).create_partitions({a.topic: a.total for a in actions})
    return [res[a.topic] for a in actions]


def _alter(ctx: ApplyContext, cluster: str, actions: Sequence[SetConfig | DeleteConfig]) -> list[OpResult]:
    per_topic: dict[str, ConfigAlteration] = {}
    for a in actions:
        c = per_topic.get(a.topic, ConfigAlteration(a.topic))
        per_topic[a.topic] = (
            ConfigAlteration(a.topic, {**c.set, a.key: a.value}, c.delete)
            if isinstance(a, SetConfig)
            else ConfigAlteration(a.topic, c.set, c.delete + (a.key,))
        )
    res = _admin(ctx, cluster).alter_configs(list(per_topic.values()))
    return [res[a.topic] for a in actions]


def set_configs(ctx: ApplyContext, cluster: str, actions: Sequence[SetConfig]) -> list[OpResult]:
    return _alter(ctx, cluster, actions)


def delete_configs(ctx: ApplyContext, cluster: str, actions: Sequence[DeleteConfig]) -> list[OpResult]:
    return _alter(ctx, cluster, actions)


def create_acls(ctx: ApplyContext, cluster: str, actions: Sequence[CreateAcl]) -> list[OpResult]:
    res = _admin(ctx, cluster).create_acls([a.acl for a in actions])
    return [res[a.acl] for a in actions]


def delete_acls(ctx: ApplyContext, cluster: str, actions: Sequence[DeleteAcl]) -> list[OpResult]:
    res = _admin(ctx, cluster).delete_acls([a.acl for a in actions])
    return [res[a.acl] for a in actions]


def delete_topics(ctx: ApplyContext, cluster: str, actions: Sequence[DeleteTopic]) -> list[OpResult]:
    res = _admin(ctx, cluster).delete_topics([a.topic for a in actions])
    return [res[a.topic] for a in actions]


def record_ownership(ctx: ApplyContext, cluster: str, actions: Sequence[RecordOwnership]) -> list[OpResult]:
    """Write each owner's claims, and withdraw those of its released topics that are gone from the cluster (one
    whose deletion failed keeps its claim: the next plan deletes it again). The lease topic exists: apply holds
    its lease."""
    admin = _admin(ctx, cluster)
    present = set(admin.list_topics()) if any(a.release for a in actions) else set()
    results = []
    for a in actions:
        for topic in a.claim:
            admin.produce(LEASE_TOPIC, claim_key(a.owner, topic), claim_value(a.owner, topic))
        kept = [t for t in a.release if t in present]
        for topic in a.release:
            if topic not in present:
                admin.produce(LEASE_TOPIC, claim_key(a.owner, topic), None)
        words = [f"claimed {len(a.claim)}" if a.claim else "", f"withdrew {len(a.release) - len(kept)}"]
        note = f" (kept {len(kept)} still present: {', '.join(kept[:3])})" if kept else ""
        results.append(OpResult.success(", ".join(w for w in words if w and w != "withdrew 0") + note))
    return results


@dataclass(frozen=True)
class ActionResult:
    action: Action
    result: OpResult


@dataclass
class ApplyReport:
    results: list[ActionResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.result.ok for r in self.results)

    def counts(self) -> dict[str, int]:
        out = {code.value: 0 for code in ResultCode}
        for r in self.results:
            out[r.result.code.value] += 1
        return out


class Progress(Protocol):
    def batch(self, index: int, total: int, cluster: str, kind: ActionKind, size: int) -> None: ...
    def result(self, r: ActionResult) -> None: ...


class _Silent:
    def batch(self, *a) -> None: ...
    def result(self, r: ActionResult) -> None: ...


def batches(actions: Sequence[Action], size: int = BATCH_SIZE) -> list[tuple[str, ActionKind, list[Action]]]:
    out = []
    for (cluster, kind), group in groupby(actions, key=lambda a: (a.cluster, a.KIND)):
        items = list(group)
        out += [(cluster, kind, items[i : i + size]) for i in range(0, len(items), size)]
    return out


def execute(
    plan: Plan,
    ctx: ApplyContext,
    handlers: HandlerTable,
    progress: Progress | None = None,
    batch_size: int = BATCH_SIZE,
    *,
    guard: ActionGuard,
) -> ApplyReport:
    """Apply every action of `plan` in order, one batch per (cluster, kind) run of actions, each batch by
    the handler `handlers` has for its kind (a kind without one fails its actions).

    First `guard` (reconciler/apply/guard.py, `TopologyGuard` of the topology) is asked about every action: when
    it refuses any, nothing runs and GuardRefused says why (the guard is not optional: defence in depth against a
    planner bug or an edited plan)."""
    refused = refusals(guard, plan.actions)
    if refused:
        raise GuardRefused(refused)
    progress = progress or _Silent()
    report = ApplyReport()
    todo = batches(plan.actions, batch_size)
    for i, (cluster, kind, items) in enumerate(todo, 1):
        progress.batch(i, len(todo), cluster, kind, len(items))
        handler = handlers.get(kind)
        if handler is None:
            results = [OpResult.failed(f"no handler for action kind {kind.value}")] * len(items)
        else:
            try:
                results = handler(ctx, cluster, items)
            except Exception as exc:  # noqa: BLE001 - an adapter-level failure fails the batch, not the run report
                results = [OpResult.failed(str(exc))] * len(items)
        for action, result in zip(items, results):
            r = ActionResult(action, result)
            report.results.append(r)
            progress.result(r)
    return report
