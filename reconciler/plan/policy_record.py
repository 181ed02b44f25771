"""What policies said of a plan, and the approval recorded with it: the `policy` object of the plan JSON
(schemas/plan.schema.json `$defs/policy`) and of a saved plan file, where the signature covers it.

The policies themselves are loaded and evaluated by reconciler/policy/; this module holds only the record, so that
a saved plan (plan/planfile.py) carries it and `apply` reads it back without evaluating anything.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.plan.risk import Risk
from reconciler.textutil import cut

#: The longest approver name a plan records (a login, a name, a list of them).
MAX_APPROVER_CHARS = 200


@dataclass(frozen=True)
class Approval:
    """Who approved a plan and when (UTC, ISO 8601): `plan --out FILE --approved-by NAME [--approved-at TIME]`,
    recorded in the signed plan file (in CI: the approving review of the pull request, docs/policy.md)."""

    by: str
    at: str

    @classmethod
    def of(cls, by: str, at: str | None = None, now: float | None = None) -> Approval:
        """The approval of `by` at `at` (ISO 8601; None: now). Raises ValueError saying what is wrong."""
        name = by.strip()
        if not name:
            raise ValueError("--approved-by: give who approved the plan (a name or login)")
        if len(name) > MAX_APPROVER_CHARS or any(not c.isprintable() for c in name):
            raise ValueError(
                f"--approved-by {cut(repr(name), 60)}: a name of at most {MAX_APPROVER_CHARS} printable characters"
            )
        return cls(name, iso_utc(at) if at is not None else _format(time.time() if now is None else now))

    def to_dict(self) -> dict[str, str]:
        return {"by": self.by, "at": self.at}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Approval:
        if not isinstance(d.get("by"), str) or not isinstance(d.get("at"), str):
            raise ValueError("an approval is {by, at}, both strings")
        return cls(d["by"], d["at"])

    def describe(self) -> str:
        return f"approved by {self.by} at {self.at}"


def _format(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_utc(text: str) -> str:
    """`text` (ISO 8601, with an offset or Z; a date and time) as UTC `YYYY-MM-DDTHH:MM:SSZ`; ValueError if it is
    not one."""
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"--approved-at {cut(repr(text), 60)} is not an ISO 8601 time (e.g. 2026-11-28T22:00:00Z)"
        ) from None
    if when.tzinfo is None:
        raise ValueError(f"--approved-at {cut(repr(text), 60)} has no offset: add Z (UTC) or e.g. +01:00")
    return _format(when.timestamp())


@dataclass(frozen=True)
class PolicyFinding:
    """One object a policy rule judged: a violation, a warning, or an action that needs an approval (`risk`)."""

    file: str  # the policy file, as the path given to --policy names it
    line: int | None  # the rule's line (YAML rules); None: a Rego rule
    rule: str  # the YAML rule's name, or the Rego rule (deny, warn, require_approval)
    message: str
    cluster: str | None = None
    object: str | None = None  # `topic T`, `flow A->B`, an action's description
    risk: Risk | None = None

    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def line_text(self) -> str:
        """One line: the rule (file, line, name), the object and the cluster, then the message."""
        what = self.object or ""
        if self.cluster and self.object:
            what += f" on {self.cluster}"
        elif self.cluster:
            what = f"cluster {self.cluster}"
        return f"{self.where()} [{self.rule}] " + (f"{what}: " if what else "") + self.message

    def sort_key(self) -> tuple:
        return (self.file, self.line or 0, self.rule, self.cluster or "", self.object or "", self.message)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "file": self.file,
            "line": self.line,
            "rule": self.rule,
            "cluster": self.cluster,
            "object": self.object,
            "message": self.message,
        }
        if self.risk is not None:
            out["risk"] = self.risk.value
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PolicyFinding:
        return cls(
            str(d["file"]),
            d.get("line"),
            str(d["rule"]),
            str(d["message"]),
            d.get("cluster"),
            d.get("object"),
            Risk(d["risk"]) if d.get("risk") else None,
        )


def _sorted(items: Sequence[PolicyFinding]) -> tuple[PolicyFinding, ...]:
    return tuple(sorted(set(items), key=PolicyFinding.sort_key))


@dataclass(frozen=True)
class PolicyRecord:
    """The policies evaluated against a plan (each file with its sha256) and what they found; the approval."""

    files: tuple[tuple[str, str], ...] = ()
    violations: tuple[PolicyFinding, ...] = ()
    warnings: tuple[PolicyFinding, ...] = ()
    approvals_required: tuple[PolicyFinding, ...] = ()
    approval: Approval | None = None

    def __post_init__(self) -> None:
        for name in ("violations", "warnings", "approvals_required"):
            object.__setattr__(self, name, _sorted(getattr(self, name)))

    @property
    def unapproved(self) -> tuple[PolicyFinding, ...]:
        """The actions that need an approval the plan does not record."""
        return () if self.approval is not None else self.approvals_required

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": [{"file": f, "sha256": digest} for f, digest in self.files],
            "violations": [v.to_dict() for v in self.violations],
            "warnings": [w.to_dict() for w in self.warnings],
            "approvals_required": [a.to_dict() for a in self.approvals_required],
            "approval": self.approval.to_dict() if self.approval is not None else None,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PolicyRecord:
        return cls(
            tuple((str(f["file"]), str(f["sha256"])) for f in d.get("files") or ()),
            tuple(PolicyFinding.from_dict(v) for v in d.get("violations") or ()),
            tuple(PolicyFinding.from_dict(w) for w in d.get("warnings") or ()),
            tuple(PolicyFinding.from_dict(a) for a in d.get("approvals_required") or ()),
            Approval.from_dict(d["approval"]) if d.get("approval") is not None else None,
        )
