"""Saved plans (`plan --out FILE`, `apply FILE`): the plan, the scope and fingerprint of the live
state it was computed from, and the clusters' connection settings exactly as written in the
topology (`${ENV_VAR}` references unresolved, so a saved plan never holds a secret).

`apply FILE` re-reads the scoped live state under the lock and refuses the plan when its
fingerprint changed.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from reconciler import outputs
from reconciler.plan.actions import FORMAT_VERSION, Plan
from reconciler.state.live import LiveState
from reconciler.textutil import cut
from reconciler.topology.model import Cluster

KIND = "reconciler-saved-plan"
LATEST_TIME = 253402300799  # 9999-12-31T23:59:59Z: the last `saved_at` a time can be shown for


class PlanFileError(Exception):
    pass


@dataclass
class SavedPlan:
    plan: Plan
    clusters: dict[str, Cluster]
    revision: str | None = None
    saved_at: float = 0.0
    git: dict | None = None  # RevisionInfo.to_dict() of the topology's commit (reconciler.gitops.revision)


def save(
    path: str | Path, plan: Plan, clusters: dict[str, Cluster], revision: str | None = None, git: dict | None = None
) -> None:
    used = {a: clusters[a] for a in plan.clusters if a in clusters}
    doc = {
        "kind": KIND,
        "format_version": FORMAT_VERSION,
        "saved_at": time.time(),
        "revision": revision,
        "git": git,
        "clusters": {
            a: {
                "bootstrap_servers": c.bootstrap_servers,
                "config": dict(c.config),
                "replication_principal": c.replication_principal,
                "reconciler_principal": c.reconciler_principal,
                "plan_principal": c.plan_principal,
                "acls_enforced": c.acls_enforced,
            }
            for a, c in sorted(used.items())
        },
        "plan": plan.to_dict(include_scope=True),
    }
    outputs.write_text(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")  # OutputError when it cannot


def is_plan_file(path: str | Path) -> bool:
    p = Path(path)
    if not p.is_file():
        return False
    try:
        data = p.read_bytes()
    except OSError:
        return False
    return data.lstrip().startswith(b"{") and KIND.encode() in data


def load(path: str | Path) -> SavedPlan:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise PlanFileError(f"{path}: not a readable saved plan: {cut(str(exc))}") from None
    except RecursionError:  # json recurses once per level: a plan is a few levels deep
        raise PlanFileError(f"{path}: damaged saved plan: nested too deeply to be a plan") from None
    if not isinstance(doc, dict):
        raise PlanFileError(f"{path}: damaged saved plan: a JSON object was expected")
    if doc.get("kind") != KIND:
        raise PlanFileError(f"{path}: not a saved plan (kind {cut(repr(doc.get('kind')), 60)})")
    if doc.get("format_version") != FORMAT_VERSION:
        raise PlanFileError(
            f"{path}: saved plan format_version {cut(repr(doc.get('format_version')), 60)}, this reconciler "
            f"reads {FORMAT_VERSION}; plan again with this version"
        )
    try:
        clusters = {
            a: Cluster(
                a,
                c["bootstrap_servers"],
                c.get("config") or {},
                {},
                c.get("replication_principal"),
                reconciler_principal=c.get("reconciler_principal"),
                plan_principal=c.get("plan_principal"),
                acls_enforced=c.get("acls_enforced"),
            )
            for a, c in doc["clusters"].items()
        }
        plan = Plan.from_dict(doc["plan"])
    except (KeyError, ValueError, TypeError, AttributeError, RecursionError) as exc:
        raise PlanFileError(f"{path}: damaged saved plan: {cut(str(exc) or type(exc).__name__)}") from None
    saved_at = doc.get("saved_at", 0.0)
    if isinstance(saved_at, bool) or not isinstance(saved_at, (int, float)) or not 0 <= saved_at <= LATEST_TIME:
        raise PlanFileError(
            f"{path}: damaged saved plan: saved_at {cut(repr(saved_at), 60)} is not a time "
            "(seconds since 1970, as `plan --out` writes)"
        )
    for key, kinds in (("revision", str), ("git", dict)):
        if doc.get(key) is not None and not isinstance(doc[key], kinds):
            raise PlanFileError(
                f"{path}: damaged saved plan: {key} {cut(repr(doc[key]), 60)} is not a {kinds.__name__}"
            )
    return SavedPlan(plan, clusters, doc.get("revision"), float(saved_at), doc.get("git"))


def stale_reason(plan: Plan, live: LiveState) -> str | None:
    """Why the plan no longer matches the clusters, or None when it is fresh."""
    now = live.fingerprint(plan.scope)
    if now == plan.fingerprint:
        return None
    return (
        "the clusters changed since this plan was made (live-state fingerprint "
        f"{plan.fingerprint[:19]}... is now {now[:19]}...); run `reconciler plan` again and apply the new plan"
    )
