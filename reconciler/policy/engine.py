"""Policies: read the files of `--policy PATH` and judge a plan with them.

`load(paths)` reads every policy file of each path (a directory: its `*.rego`, `*.yaml` and `*.yml` files, not its
subdirectories, nor OPA's `*_test.rego`; or one file) and checks them: a problem is an error at its FILE:LINE:COL,
raised together as `PolicyError`. `evaluate(policies, plan, topology)` judges the plan JSON (plan/document.py) with
every rule, YAML (policy/rules.py) and Rego (policy/rego.py), and returns the `PolicyRecord` (plan/policy_record.py)
that the plan JSON, the saved plan and `apply` carry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.contract.spec import JobSpec
from reconciler.plan.actions import Plan
from reconciler.plan.document import document as plan_document
from reconciler.plan.policy_record import Approval, PolicyFinding, PolicyRecord
from reconciler.policy import rules as yaml_rules
from reconciler.policy.rego import REQUIRE_APPROVAL, RegoFile, RegoPolicies, package_of
from reconciler.topology.diagnostics import Diagnostics, SourceLocation
from reconciler.topology.loader import YAML_SUFFIXES, load_text
from reconciler.topology.model import Topology

REGO_SUFFIX = ".rego"
SUFFIXES = (REGO_SUFFIX, *YAML_SUFFIXES)
#: OPA's unit tests of policies (`opa test`): not policies.
TEST_SUFFIX = "_test.rego"


class PolicyError(Exception):
    """Policy files that cannot be read or evaluated: every problem, each at its FILE:LINE:COL."""

    def __init__(self, diags: Diagnostics):
        super().__init__(diags.render())
        self.diags = diags


@dataclass(frozen=True)
class PolicySet:
    files: tuple[tuple[str, str], ...]  # (path as shown, sha256 of its bytes)
    rules: tuple[yaml_rules.Rule, ...] = ()
    rego: RegoPolicies | None = field(default=None, compare=False)


def _files_of(given: str, diags: Diagnostics) -> list[Path]:
    path = Path(given)
    if path.is_dir():
        found = sorted(
            p for p in path.iterdir() if p.is_file() and p.suffix in SUFFIXES and not p.name.endswith(TEST_SUFFIX)
        )
        if not found:
            diags.error(
                f"--policy {given}: no policy file (*.rego, *.yaml, *.yml) in this directory",
                SourceLocation(given, 1, 1),
            )
        return found
    if path.is_file():
        if path.suffix not in SUFFIXES:
            diags.error(f"--policy {given}: not a policy file (*.rego, *.yaml, *.yml)", SourceLocation(given, 1, 1))
            return []
        return [path]
    diags.error(f"--policy {given}: no such file or directory", SourceLocation(given, 1, 1))
    return []


def load(paths: Sequence[str]) -> PolicySet:
    """The policies of `paths`; PolicyError with every problem found."""
    diags = Diagnostics()
    seen: set[Path] = set()
    files: list[tuple[str, str]] = []
    rules: list[yaml_rules.Rule] = []
    rego_files: list[RegoFile] = []
    for given in paths:
        for path in _files_of(given, diags):
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            shown = str(path)
            try:
                data = path.read_bytes()
                text = data.decode("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                diags.error(f"cannot read this policy file: {exc}", SourceLocation(shown, 1, 1))
                continue
            files.append((shown, hashlib.sha256(data).hexdigest()))
            if path.suffix == REGO_SUFFIX:
                package = package_of(text)
                if package is None:
                    diags.error(
                        "a Rego file starts with its package (`package reconciler`)", SourceLocation(shown, 1, 1)
                    )
                    continue
                rego_files.append(RegoFile(shown, text, package))
            else:
                for doc in load_text(text, shown, diags):
                    rules += yaml_rules.read(doc, diags)
    rego = RegoPolicies(rego_files, diags) if rego_files else None
    if rego_files and not any(f.is_rules for f in rego_files) and not rules:
        diags.error(
            "no Rego file of `package reconciler`: nothing would be judged (the other packages are libraries)",
            SourceLocation(rego_files[0].path, 1, 1),
        )
    if diags.errors:
        raise PolicyError(diags)
    return PolicySet(tuple(files), tuple(rules), rego)


def topology_document(topology: Topology) -> dict[str, Any]:
    """The resolved topology as Rego policies read it (`data.topology`): each cluster's tags and principals (no
    connection settings), each flow with its effective settings as the job spec holds them (docs/policy.md)."""
    return {
        "name": topology.name,
        "clusters": {
            alias: {
                "tags": dict(c.tags),
                "replication_principal": c.replication_principal,
                "reconciler_principal": c.reconciler_principal,
            }
            for alias, c in sorted(topology.clusters.items())
        },
        "flows": [
            {
                "name": f.name,
                "source": f.source,
                "target": f.target,
                "enabled": f.enabled,
                "engine": f.engine,
                "deployer": f.job.deployer,
                "settings": JobSpec.from_flow(topology, f).to_dict()["settings"],
            }
            for f in topology.flows
        ],
        "prune": {"topics": topology.prune.topics, "configs": topology.prune.configs, "acls": topology.prune.acls},
    }


def evaluate(policies: PolicySet, plan: Plan, topology: Topology, approval: Approval | None = None) -> PolicyRecord:
    """What `policies` say of `plan` (planned from `topology`), with `approval` recorded; PolicyError when a Rego
    file cannot be evaluated."""
    doc = plan_document(plan)
    actions: list[Mapping[str, Any]] = doc["actions"]

    def tags_of(alias: str) -> Mapping[str, str]:
        cluster = topology.clusters.get(alias)
        return cluster.tags if cluster is not None else {}

    violations, warnings, approvals = yaml_rules.evaluate(list(policies.rules), actions, tags_of)
    if policies.rego is not None:
        diags = Diagnostics()
        denied, warned, required = policies.rego.evaluate(doc, topology_document(topology), diags)
        if diags.errors:
            raise PolicyError(diags)
        violations += denied
        warnings += warned
        for file, risk in required:
            for a in actions:
                if a.get("risk") == risk.value:
                    t = yaml_rules.Target(a)
                    message = yaml_rules.approval_message(t)
                    approvals.append(PolicyFinding(file, None, REQUIRE_APPROVAL, message, t.cluster, t.object, risk))
    return PolicyRecord(policies.files, tuple(violations), tuple(warnings), tuple(approvals), approval)


def combine(*records: PolicyRecord | None) -> PolicyRecord | None:
    """One record of several (a saved plan's and a fresh evaluation's): every file, finding and approval."""
    present = [r for r in records if r is not None]
    if not present:
        return None
    files = tuple(dict.fromkeys(f for r in present for f in r.files))
    approval = next((r.approval for r in present if r.approval is not None), None)
    return PolicyRecord(
        files,
        tuple(v for r in present for v in r.violations),
        tuple(w for r in present for w in r.warnings),
        tuple(a for r in present for a in r.approvals_required),
        approval,
    )
