"""The executor's handler table (reconciler/operations/handlers.py) has a handler for every action kind the
planners can emit, and it is the only registration: importing a planner registers nothing."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping

from reconciler.adapters.base import ResultCode
from reconciler.apply.executor import ApplyContext, HandlerTable, execute
from reconciler.operations.handlers import handler_table
from reconciler.plan.actions import ACTION_TYPES, ActionKind, CreateTopic, Plan


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
    report = execute(plan, ApplyContext(lambda cluster: None), {})
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
