"""Typed plan actions and the Plan: an ordered, serializable list of them, with findings.

Extending: add a member to `ActionKind` (plan/action_base.py), subclass `Action` with `KIND`, `PHASE`,
`VERB`, `RISK` (plan/risk.py) and its fields, list the class in `ACTION_TYPES` below, describe its kind and
fields in schemas/plan.schema.json (`$defs/kinds`) and docs/plan-json.md, and give the executor a handler for
the kind (reconciler/operations/handlers.py). (The job actions, plan/job_actions.py, and the engine
replacement, plan/engine_actions.py, are built this way.)
Nothing registers itself on import. Order is deterministic: per cluster, creates, config changes,
partition changes, ACLs, then every deletion last.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from reconciler.plan.action_base import Action, ActionKind, Phase, Verb
from reconciler.plan.engine_actions import ReplaceEngine
from reconciler.plan.findings import Finding, Severity
from reconciler.plan.job_actions import DeployJob, RestartJob, StopJob, UpdateJob
from reconciler.plan.permissions import RequiredAcl
from reconciler.plan.reasons import ReasonKind
from reconciler.plan.risk import Risk
from reconciler.state.live import AclBinding
from reconciler.textutil import plural
from reconciler.topology.model import topology_title

#: 2: an engine replacement is its own action, `replace_engine` (verb `-/+`, `summary.replace`); `restart_job` lost
#: `engine_restart`, `engine_flows` and `joined`; every action has its `risk` (plan/risk.py) and a plan judged by
#: `plan --policy` its `policy` object (format_version 1, minor 0-5: docs/plan-json.md).
FORMAT_VERSION = 2
#: Fields added within format_version 2 (docs/plan-json.md): 1 = `environment` (the topology's `--env`) and the
#: `record_ownership` action (issue 48); 2 = finding kind `retention` (a rate-limited flow's backlog, issue 47).
FORMAT_MINOR = 2


@dataclass(frozen=True)
class CreateTopic(Action):
    KIND = ActionKind.CREATE_TOPIC
    RISK = Risk.CREATE
    REASON_KIND = ReasonKind.TOPIC_MISSING
    PHASE = Phase.CREATE
    VERB = Verb.CREATE
    topic: str = ""
    partitions: int = 1
    replication_factor: int = -1
    configs: tuple[tuple[str, str], ...] = ()
    role: str = "remote"

    def describe(self) -> str:
        rf = "broker default" if self.replication_factor == -1 else str(self.replication_factor)
        return f"create topic {self.topic} ({self.partitions} partition{'s' if self.partitions != 1 else ''}, replication factor {rf})"

    def details(self) -> list[str]:
        return [f"{k} = {v}" for k, v in self.configs]


@dataclass(frozen=True)
class SetConfig(Action):
    KIND = ActionKind.SET_CONFIG
    RISK = Risk.CONFIG
    REASON_KIND = ReasonKind.CONFIG
    PHASE = Phase.CONFIG
    VERB = Verb.UPDATE
    topic: str = ""
    key: str = ""
    value: str = ""
    current: str | None = None

    def tiebreak(self) -> tuple:
        return (self.key,)

    def describe(self) -> str:
        was = "(not set)" if self.current is None else repr(self.current)
        return f"set config {self.key} on {self.topic}: {was} -> {self.value!r}"


@dataclass(frozen=True)
class AddPartitions(Action):
    KIND = ActionKind.ADD_PARTITIONS
    RISK = Risk.GROW
    REASON_KIND = ReasonKind.PARTITIONS
    PHASE = Phase.PARTITIONS
    VERB = Verb.UPDATE
    topic: str = ""
    current: int = 0
    total: int = 0

    def describe(self) -> str:
        return f"add partitions to {self.topic}: {self.current} -> {self.total}"


@dataclass(frozen=True)
class _AclAction(Action):
    """Base of the two ACL actions: one literal topic ACL."""

    LABEL: ClassVar[str]
    acl: AclBinding = None  # type: ignore[assignment]

    @property
    def subject(self) -> str:
        return self.acl.topic

    def tiebreak(self) -> tuple:
        return (self.acl,)

    def describe(self) -> str:
        return f"{self.LABEL} ACL {self.acl.describe()}"


@dataclass(frozen=True)
class CreateAcl(_AclAction):
    KIND = ActionKind.CREATE_ACL
    RISK = Risk.ACL
    REASON_KIND = ReasonKind.ACL
    PHASE = Phase.ACL
    VERB = Verb.CREATE
    LABEL = "create"


@dataclass(frozen=True)
class DeleteAcl(_AclAction):
    KIND = ActionKind.DELETE_ACL
    RISK = Risk.DELETE
    REASON_KIND = ReasonKind.ACL
    PHASE = Phase.DELETE_ACL
    VERB = Verb.DELETE
    LABEL = "DELETE"


@dataclass(frozen=True)
class DeleteConfig(Action):
    KIND = ActionKind.DELETE_CONFIG
    RISK = Risk.DELETE
    REASON_KIND = ReasonKind.CONFIG
    PHASE = Phase.DELETE_CONFIG
    VERB = Verb.DELETE
    topic: str = ""
    key: str = ""
    current: str | None = None

    def tiebreak(self) -> tuple:
        return (self.key,)

    def describe(self) -> str:
        return f"DELETE config {self.key} from {self.topic} (was {self.current!r})"


@dataclass(frozen=True)
class DeleteTopic(Action):
    KIND = ActionKind.DELETE_TOPIC
    RISK = Risk.DELETE
    REASON_KIND = ReasonKind.TOPIC_EXTRA
    PHASE = Phase.DELETE_TOPIC
    VERB = Verb.DELETE
    topic: str = ""
    partitions: int = 0

    def describe(self) -> str:
        return f"DELETE topic {self.topic} ({self.partitions} partitions, all its records)"


@dataclass(frozen=True)
class RecordOwnership(Action):
    """An owner's claims of remote topics of one cluster (state/ownership.py): `claim` the topics its topology
    wants that it has not claimed yet, withdraw the claims of `release` once each topic is gone. Last on its
    cluster: a claim of a topic this plan deletes is withdrawn after the deletion."""

    KIND = ActionKind.RECORD_OWNERSHIP
    RISK = Risk.CONFIG  # a record of who owns what: it changes no topic, ACL or job
    REASON_KIND = ReasonKind.OWNERSHIP
    PHASE = Phase.OWNERSHIP
    VERB = Verb.UPDATE
    owner: str = ""
    claim: tuple[str, ...] = ()
    release: tuple[str, ...] = ()

    @property
    def subject(self) -> str:
        return self.owner

    def describe(self) -> str:
        parts = [f"claim {plural(len(self.claim), 'topic')}" if self.claim else "", ""]
        if self.release:
            parts[1] = f"withdraw the claims of {plural(len(self.release), 'deleted topic')}"
        return f"record owner {self.owner}: " + " and ".join(p for p in parts if p)

    def details(self) -> list[str]:
        return [f"claim {t}" for t in self.claim] + [f"withdraw {t}" for t in self.release]

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "claim": list(self.claim), "release": list(self.release)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Action:
        action = super().from_dict(d)
        assert isinstance(action, RecordOwnership)
        return replace(action, claim=tuple(action.claim), release=tuple(action.release))


#: Every action type, by kind: what a saved plan's actions are read back as (`action_from_dict`).
ACTION_TYPES: dict[ActionKind, type[Action]] = {
    cls.KIND: cls
    for cls in (
        CreateTopic,
        SetConfig,
        AddPartitions,
        CreateAcl,
        DeleteAcl,
        DeleteConfig,
        DeleteTopic,
        RecordOwnership,
        DeployJob,
        UpdateJob,
        RestartJob,
        StopJob,
        ReplaceEngine,
    )
}


def action_from_dict(d: Mapping[str, Any]) -> Action:
    """The action `Action.to_dict` wrote, of the type its `kind` names."""
    return ACTION_TYPES[ActionKind(d["kind"])].from_dict(d)


#: The `summary` count each verb adds to (`Plan.counts`).
VERB_COUNTS = {Verb.CREATE: "create", Verb.UPDATE: "update", Verb.DELETE: "delete", Verb.REPLACE: "replace"}


@dataclass
class Plan:
    """What apply would do (actions), what it cannot or will not do (findings), and what it was computed from."""

    actions: list[Action] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    clusters: list[str] = field(default_factory=list)
    scope: dict[str, list[str]] = field(default_factory=dict)  # cluster -> topic names the plan depends on
    fingerprint: str = ""
    topology: str | None = None
    #: the ACLs the flows need on the clusters that enforce ACLs (plan/permissions.py), checked against them
    permissions: list[RequiredAcl] = field(default_factory=list)
    #: the environment the topology was planned for (`--env`, topology/environments.py); None: it declares none
    environment: str | None = None

    def __post_init__(self) -> None:
        self.actions = sorted(self.actions, key=lambda a: a.sort_key())
        self.findings = sorted(set(self.findings), key=lambda f: f.sort_key())
        self.permissions = sorted(self.permissions, key=RequiredAcl.sort_key)

    @property
    def has_changes(self) -> bool:
        return bool(self.actions)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]

    def counts(self) -> dict[str, int]:
        """Actions per verb: create, update, delete, and replace (engines replaced: neither created nor deleted)."""
        out = {"create": 0, "update": 0, "delete": 0, "replace": 0}
        for a in self.actions:
            out[VERB_COUNTS[a.VERB]] += 1
        return out

    @property
    def title(self) -> str:
        """What the plan is of: `topology NAME, environment ENV` (each part only when known)."""
        return topology_title(self.topology, self.environment)

    def summary_line(self) -> str:
        c = self.counts()
        if self.errors:
            head = "Plan incomplete: nothing can be applied until the errors are fixed."
        elif not self.actions:
            head = "No changes. The clusters match the topology."
        else:
            replace = f"{c['replace']} to replace, " if c["replace"] else ""
            head = f"Plan: {c['create']} to create, {replace}{c['update']} to change, {c['delete']} to delete."
        n_err, n_other = len(self.errors), len(self.findings) - len(self.errors)
        tail = []
        if n_err:
            tail.append(f"{n_err} error{'s' if n_err != 1 else ''}")
        if n_other:
            tail.append(f"{n_other} finding{'s' if n_other != 1 else ''}")
        return head + (f" ({', '.join(tail)})" if tail else "")

    def by_cluster(self) -> dict[str, list[Action]]:
        out: dict[str, list[Action]] = {}
        for a in self.actions:
            out.setdefault(a.cluster, []).append(a)
        return out

    def to_dict(self, include_scope: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "format_minor": FORMAT_MINOR,
            "topology": self.topology,
            "environment": self.environment,
            "clusters": list(self.clusters),
            "fingerprint": self.fingerprint,
            "summary": {
                **self.counts(),
                "findings": len(self.findings),
                "errors": len(self.errors),
                "changes": self.has_changes,
            },
            "actions": [a.to_dict() for a in self.actions],
            "findings": [f.to_dict() for f in self.findings],
            "permissions": [r.to_dict() for r in self.permissions],
        }
        if include_scope:
            out["scope"] = {k: list(v) for k, v in self.scope.items()}
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Plan:
        if d.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"plan format_version {d.get('format_version')!r} is not {FORMAT_VERSION}")
        return cls(
            [action_from_dict(a) for a in d["actions"]],
            [Finding.from_dict(f) for f in d["findings"]],
            list(d["clusters"]),
            {k: list(v) for k, v in d.get("scope", {}).items()},
            d["fingerprint"],
            d.get("topology"),
            [RequiredAcl.from_dict(r) for r in d.get("permissions", ())],
            d.get("environment"),
        )
