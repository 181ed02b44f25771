"""Plan -> JSON for machines (`plan --format json`, `show --format json`): the document of plan/document.py, the
one place a plan becomes JSON (schemas/plan.schema.json, docs/plan-json.md)."""

from __future__ import annotations

import json
from typing import Any

from reconciler.plan.actions import Plan
from reconciler.plan.document import document


def render(plan: Plan, **extra: Any) -> str:
    """The plan's JSON document (`document`: `base`, `clusters_from`, `policy`, `saved`, `message`) as text."""
    return json.dumps(document(plan, **extra), indent=2) + "\n"
