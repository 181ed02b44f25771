"""Typed plan actions and the Plan: an ordered, serializable list of them, with findings.

Extending: add a member to `ActionKind`, subclass `Action` with `KIND`, `PHASE`, `VERB` and its
fields, decorate it with `@register`, and give the executor a handler for the kind. (The job
issue adds deploy/update/restart/stop job this way.) Order is deterministic: per cluster,
creates, config changes, partition changes, ACLs, then every deletion last.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from reconciler.plan.findings import Finding, Severity
from reconciler.plan.reasons import ReasonKind
from reconciler.state.live import AclBinding

FORMAT_VERSION = 1
#: Fields added within format_version 1 (docs/plan-json.md): 1 = `reason_kind` on actions and findings.
FORMAT_MINOR = 2


class ActionKind(str, enum.Enum):
    CREATE_TOPIC = "create_topic"
    SET_CONFIG = "set_config"
    ADD_PARTITIONS = "add_partitions"
    CREATE_ACL = "create_acl"
    DELETE_ACL = "delete_acl"
    DELETE_CONFIG = "delete_config"
    DELETE_TOPIC = "delete_topic"
    # Replication jobs (reconciler/plan/job_actions.py)
    DEPLOY_JOB = "deploy_job"
    UPDATE_JOB = "update_job"
    RESTART_JOB = "restart_job"
    STOP_JOB = "stop_job"


class Phase(enum.IntEnum):
    """Order of actions within a cluster; leaves room for other kinds (e.g. jobs after topics and ACLs)."""

    CREATE = 10
    CONFIG = 20
    PARTITIONS = 30
    ACL = 40
    JOB = 50  # update/restart jobs of flows into this cluster (deploys sort after every cluster)
    STOP_JOB = 75  # before any deletion, so a running job cannot re-create what is deleted
    DELETE_ACL = 80
    DELETE_CONFIG = 85
    DELETE_TOPIC = 90


class Verb(str, enum.Enum):
    """How a renderer marks an action, Terraform-style."""

    CREATE = "+"
    UPDATE = "~"
    DELETE = "-"


@dataclass(frozen=True)
class Action:
    KIND: ClassVar[ActionKind]
    PHASE: ClassVar[Phase]
    VERB: ClassVar[Verb]
    REASON_KIND: ClassVar[ReasonKind] = ReasonKind.OTHER

    cluster: str
    reason: str

    @property
    def reason_kind(self) -> ReasonKind:
        """What the action is about (typed; `reason` is the same in words, for people)."""
        return self.REASON_KIND

    @property
    def subject(self) -> str:
        """What the action is about (a topic name, a flow name), for ordering and grouping."""
        return getattr(self, "topic", "")

    def describe(self) -> str:
        raise NotImplementedError

    def details(self) -> list[str]:
        return []

    def tiebreak(self) -> tuple:
        """Orders actions of one kind on one subject (e.g. several configs of a topic)."""
        return ()

    def sort_key(self) -> tuple:
        return (self.cluster, int(self.PHASE), self.subject, self.tiebreak())

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.KIND.value, "verb": self.VERB.value}
        for f in dataclasses.fields(self):
            if f.name == "why":  # the instance reason kind of job actions: written as reason_kind
                continue
            value = getattr(self, f.name)
            if isinstance(value, AclBinding):
                value = value.to_dict()
            elif isinstance(value, tuple) and f.name == "configs":
                value = dict(value)
            out[f.name] = value
        out["description"] = self.describe()
        out["reason_kind"] = self.reason_kind.value
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Action:
        kind = ACTION_TYPES[ActionKind(d["kind"])]
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(kind):
            if f.name == "why":
                kwargs[f.name] = ReasonKind(d["reason_kind"]) if d.get("reason_kind") else None
                continue
            value = d[f.name]
            if f.name == "acl":
                value = AclBinding.from_dict(value)
            elif f.name == "configs":
                value = tuple(sorted(value.items()))
            kwargs[f.name] = value
        return kind(**kwargs)


ACTION_TYPES: dict[ActionKind, type[Action]] = {}


def register(cls: type[Action]) -> type[Action]:
    ACTION_TYPES[cls.KIND] = cls
    return cls


@register
@dataclass(frozen=True)
class CreateTopic(Action):
    KIND = ActionKind.CREATE_TOPIC
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


@register
@dataclass(frozen=True)
class SetConfig(Action):
    KIND = ActionKind.SET_CONFIG
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


@register
@dataclass(frozen=True)
class AddPartitions(Action):
    KIND = ActionKind.ADD_PARTITIONS
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


@register
@dataclass(frozen=True)
class CreateAcl(_AclAction):
    KIND = ActionKind.CREATE_ACL
    REASON_KIND = ReasonKind.ACL
    PHASE = Phase.ACL
    VERB = Verb.CREATE
    LABEL = "create"


@register
@dataclass(frozen=True)
class DeleteAcl(_AclAction):
    KIND = ActionKind.DELETE_ACL
    REASON_KIND = ReasonKind.ACL
    PHASE = Phase.DELETE_ACL
    VERB = Verb.DELETE
    LABEL = "DELETE"


@register
@dataclass(frozen=True)
class DeleteConfig(Action):
    KIND = ActionKind.DELETE_CONFIG
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


@register
@dataclass(frozen=True)
class DeleteTopic(Action):
    KIND = ActionKind.DELETE_TOPIC
    REASON_KIND = ReasonKind.TOPIC_EXTRA
    PHASE = Phase.DELETE_TOPIC
    VERB = Verb.DELETE
    topic: str = ""
    partitions: int = 0

    def describe(self) -> str:
        return f"DELETE topic {self.topic} ({self.partitions} partitions, all its records)"


@dataclass
class Plan:
    """What apply would do (actions), what it cannot or will not do (findings), and what it was computed from."""

    actions: list[Action] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    clusters: list[str] = field(default_factory=list)
    scope: dict[str, list[str]] = field(default_factory=dict)  # cluster -> topic names the plan depends on
    fingerprint: str = ""
    topology: str | None = None

    def __post_init__(self) -> None:
        self.actions = sorted(self.actions, key=lambda a: a.sort_key())
        self.findings = sorted(set(self.findings), key=lambda f: f.sort_key())

    @property
    def has_changes(self) -> bool:
        return bool(self.actions)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]

    def counts(self) -> dict[str, int]:
        out = {"create": 0, "update": 0, "delete": 0}
        for a in self.actions:
            out[{Verb.CREATE: "create", Verb.UPDATE: "update", Verb.DELETE: "delete"}[a.VERB]] += 1
        return out

    def summary_line(self) -> str:
        c = self.counts()
        if self.errors:
            head = "Plan incomplete: nothing can be applied until the errors are fixed."
        elif not self.actions:
            head = "No changes. The clusters match the topology."
        else:
            head = f"Plan: {c['create']} to create, {c['update']} to change, {c['delete']} to delete."
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
        }
        if include_scope:
            out["scope"] = {k: list(v) for k, v in self.scope.items()}
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Plan:
        if d.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"plan format_version {d.get('format_version')!r} is not {FORMAT_VERSION}")
        return cls(
            [Action.from_dict(a) for a in d["actions"]],
            [Finding.from_dict(f) for f in d["findings"]],
            list(d["clusters"]),
            {k: list(v) for k, v in d.get("scope", {}).items()},
            d["fingerprint"],
            d.get("topology"),
        )
