"""Plan -> JSON for machines. The shape is documented in docs/plan-json.md (format_version 2)."""

from __future__ import annotations

import json

from reconciler.plan.actions import Plan


def render(plan: Plan) -> str:
    return json.dumps(plan.to_dict(), indent=2) + "\n"
