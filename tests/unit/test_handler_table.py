"""The executor's handler table (reconciler/operations/handlers.py) has a handler for every action kind the
planners can emit, and it is the only registration: importing a planner registers nothing."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Mapping

from reconciler.adapters.base import ResultCode
from reconciler.adapters.memory_admin import MemoryAdmin, MemoryCluster
from reconciler.apply.executor import ApplyContext, HandlerTable, TypedHandler, execute
from reconciler.operations.handlers import handler_table
from reconciler.plan.actions import ACTION_TYPES, ActionKind, CreateTopic, DeleteTopic, Plan, SetConfig


class _AllowAll:
    """These tests are about handler dispatch: a guard that allows every action (the executor's topology guard is
    tested in test_planfile_signing.py)."""

    def refusal(self, action) -> None:
        return None


ALLOW = _AllowAll()


def kinds_without_handler(table: HandlerTable, kinds: Mapping[ActionKind, object] | None = None) -> list[str]:
    """The action kinds (of `kinds`: every registered action type, default) that `table` has no handler for."""
    kinds = ACTION_TYPES if kinds is None else kinds
    return sorted(k.value for k in kinds if not callable(table.get(k)))


def test_every_action_kind_the_planners_emit_has_a_handler():
    assert sorted(k.value for k in ActionKind if k not in ACTION_TYPES) == [], "an action kind without its type"
    assert kinds_without_handler(handler_table()) == [], "add its handler to operations/handlers.py handler_table"
    assert kinds_without_handler(handler_table(), {k: None for k in ActionKind}) == []


def test_the_checker_names_a_kind_without_a_handler():
    table = dict(handler_table())
    del table[ActionKind.RESTART_JOB]
    assert kinds_without_handler(table) == ["restart_job"]


def test_a_kind_missing_from_the_table_fails_its_actions():
    plan = Plan([CreateTopic("east", "missing", topic="t")], [])
    report = execute(plan, ApplyContext(lambda cluster: None), {}, guard=ALLOW)
    [r] = report.results
    assert r.result.code is ResultCode.FAILED and r.result.message == "no handler for action kind create_topic"


def test_importing_the_planners_registers_no_handler():
    """The planners (topics and jobs) and the plan file reader do not import the executor or any handler."""
    code = (
        "import sys\n"
        "import reconciler.plan.desired, reconciler.plan.diff, reconciler.plan.planfile, reconciler.jobplan.plan\n"
        "print(sorted(m for m in sys.modules if m in ('reconciler.apply.executor', 'reconciler.jobplan.handlers',"
        " 'reconciler.operations.handlers')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_handler_is_typed_with_its_action_type():
    """The topic, config, ACL and engine-replacement handlers take their own action dataclass
    (`Sequence[CreateTopic]`, `Sequence[ReplaceEngine]`, ...), bound to their kind by a TypedHandler (mypy checks the
    pairing); the job handlers narrow each action to a JobAction.
    Every handler's parameters and result are annotated, so mypy checks their bodies."""
    unannotated, mismatched = [], []
    for kind, handler in handler_table().items():
        fn = handler.run if isinstance(handler, TypedHandler) else handler
        sig = inspect.signature(fn)
        if sig.return_annotation is inspect.Signature.empty or any(
            p.annotation is inspect.Parameter.empty for p in sig.parameters.values()
        ):
            unannotated.append(kind.value)
        if isinstance(handler, TypedHandler) and (
            handler.action_type is not ACTION_TYPES[kind]
            or handler.action_type.__name__ not in str(list(sig.parameters.values())[-1].annotation)
        ):
            mismatched.append(kind.value)
    assert unannotated == [] and mismatched == []
    assert (
        sum(isinstance(h, TypedHandler) for h in handler_table().values()) == 9
    )  # topics, configs, ACLs, engines, owners


def test_a_handler_given_another_kinds_actions_fails_the_batch():
    """A batch reaches a typed handler only as its own action type: another kind's action fails the batch (no
    attribute error half-way through an admin call)."""
    cluster = MemoryCluster("east")
    cluster.add_topic("t", 1)
    admin = MemoryAdmin(cluster)
    table = dict(handler_table())
    table[ActionKind.DELETE_TOPIC] = table[ActionKind.SET_CONFIG]
    report = execute(
        Plan([DeleteTopic("east", "extra", topic="t")], []), ApplyContext(lambda c: admin), table, guard=ALLOW
    )
    [r] = report.results
    assert r.result.code is ResultCode.FAILED
    assert r.result.message == "a delete_topic action given to the set_config handler"
    assert "t" in cluster.topics
    ok = execute(
        Plan([SetConfig("east", "tune", topic="t", key="retention.ms", value="1000")], []),
        ApplyContext(lambda c: admin),
        handler_table(),
        guard=ALLOW,
    )
    assert ok.ok and cluster.topics["t"].configs["retention.ms"] == "1000"
