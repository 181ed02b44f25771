"""The plan JSON document: the one place a plan becomes the JSON machines read.

Every plan JSON the reconciler makes is made by `document`: `plan --format json` (render/plan_json.py, with
`--base`, `--clusters-from`, `--policy`), `show --format json` of a saved plan, the `plan` object of a saved plan
file (plan/planfile.py) and the input policies judge (reconciler/policy/). The shape is schemas/plan.schema.json
(format_version 2, format_minor 2), described in docs/plan-json.md.

With RECONCILER_TEST_PLAN_SCHEMA on (the test suite sets it for its whole session, tests/conftest.py), each
document is checked against the schema here, where it is made, and one that does not follow it raises
`PlanSchemaError`: the suite fails on any plan it makes, in its own process or in a CLI it starts, whose JSON
drifted from the schema.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator

from reconciler import settings
from reconciler.plan.actions import Plan
from reconciler.resources import plan_schema_path


class PlanSchemaError(Exception):
    """A plan JSON document that does not follow schemas/plan.schema.json: a bug of the reconciler."""


@lru_cache(maxsize=1)
def validator() -> Draft202012Validator:
    schema = json.loads(plan_schema_path().read_text(encoding="utf-8"))
    # Checked against the metaschema by tests/unit/test_plan_schema.py, not at every run (0.2-0.9 s a command)
    return Draft202012Validator(schema)


def problems(doc: Any) -> list[str]:
    """Where and why `doc` does not follow the plan schema, one line each (none: it does)."""
    out = []
    for err in sorted(validator().iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))):
        where = "/".join(str(p) for p in err.absolute_path) or "(document)"
        out.append(f"{where}: {err.message}")
    return out


def check(doc: Any) -> None:
    """Raise PlanSchemaError when `doc` does not follow the plan schema."""
    found = problems(doc)
    if found:
        raise PlanSchemaError(
            f"plan JSON does not follow schemas/plan.schema.json ({len(found)} problem(s)): " + "; ".join(found[:5])
        )


def document(
    plan: Plan,
    *,
    scope: bool = False,
    base: dict[str, Any] | None = None,
    clusters_from: dict[str, Any] | None = None,
    policy: dict[str, Any] | None = None,
    saved: dict[str, Any] | None = None,
    message: str | None = None,
) -> dict[str, Any]:
    """The plan's JSON document: the plan (`Plan.to_dict`, with `scope` for a saved plan) and what the command
    adds: `base` (`plan --base`), `clusters_from` (`plan --clusters-from`), `policy` (`plan --policy`), `saved`
    (`show`), `message` (`plan --base` when nothing was planned)."""
    doc: dict[str, Any] = {}
    if base is not None:
        doc["base"] = base
    if clusters_from is not None:
        doc["clusters_from"] = clusters_from
    doc.update(plan.to_dict(include_scope=scope))
    for key, value in (("policy", policy), ("saved", saved), ("message", message)):
        if value is not None:
            doc[key] = value
    if settings.plan_schema_check():
        check(doc)
    return doc
