"""The action base: `ActionKind`, `Phase`, `Verb` and the `Action` dataclass every plan action subclasses.

The action types themselves are in plan/actions.py (topics, configs, ACLs), plan/job_actions.py (jobs) and
plan/engine_actions.py (engine replacements); plan/actions.py lists every one in `ACTION_TYPES`. Each names its
`KIND`, `PHASE`, `VERB` and `RISK` (plan/risk.py).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from reconciler.plan.reasons import ReasonKind
from reconciler.plan.risk import Risk
from reconciler.state.live import AclBinding


class ActionKind(str, enum.Enum):
    CREATE_TOPIC = "create_topic"
    SET_CONFIG = "set_config"
    ADD_PARTITIONS = "add_partitions"
    CREATE_ACL = "create_acl"
    DELETE_ACL = "delete_acl"
    DELETE_CONFIG = "delete_config"
    DELETE_TOPIC = "delete_topic"
    RECORD_OWNERSHIP = "record_ownership"  # an owner's claims of its remote topics (state/ownership.py)
    # Replication jobs (reconciler/plan/job_actions.py)
    DEPLOY_JOB = "deploy_job"
    UPDATE_JOB = "update_job"
    RESTART_JOB = "restart_job"
    STOP_JOB = "stop_job"
    # An engine (the Spark application holding flows) replaced: reconciler/plan/engine_actions.py
    REPLACE_ENGINE = "replace_engine"


class Phase(enum.IntEnum):
    """Order of actions within a cluster; leaves room for other kinds (e.g. jobs after topics and ACLs)."""

    CREATE = 10
    CONFIG = 20
    PARTITIONS = 30
    ACL = 40
    ENGINE = 45  # replace engines of flows into this cluster, before the changes of single flows of other engines
    JOB = 50  # update/restart jobs of flows into this cluster (deploys sort after every cluster)
    STOP_JOB = 75  # before any deletion, so a running job cannot re-create what is deleted
    DELETE_ACL = 80
    DELETE_CONFIG = 85
    DELETE_TOPIC = 90
    OWNERSHIP = 95  # last: a claim is withdrawn only once its topic is gone


class Verb(str, enum.Enum):
    """How a renderer marks an action, Terraform-style."""

    CREATE = "+"
    UPDATE = "~"
    DELETE = "-"
    REPLACE = "-/+"  # stopped, then started again with the new settings (an engine: Terraform's DeleteThenCreate)


@dataclass(frozen=True)
class Action:
    KIND: ClassVar[ActionKind]
    PHASE: ClassVar[Phase]
    VERB: ClassVar[Verb]
    #: the risk class of every action of this type (plan/risk.py): what policies forbid or ask an approval for
    RISK: ClassVar[Risk]
    REASON_KIND: ClassVar[ReasonKind] = ReasonKind.OTHER

    cluster: str
    reason: str

    @property
    def reason_kind(self) -> ReasonKind:
        """What the action is about (typed; `reason` is the same in words, for people)."""
        return self.REASON_KIND

    @property
    def risk(self) -> Risk:
        return self.RISK

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
        out["risk"] = self.risk.value
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Action:
        """The action of this type that `to_dict` wrote (`reconciler.plan.actions.action_from_dict` picks
        the type from `kind`)."""
        if d["kind"] != cls.KIND.value:
            raise ValueError(f"a {d['kind']!r} action is not a {cls.__name__}")
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name == "why":
                kwargs[f.name] = ReasonKind(d["reason_kind"]) if d.get("reason_kind") else None
                continue
            if f.name not in d and (
                f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            ):
                continue  # a field this plan file predates: its default
            value = d[f.name]
            if f.name == "acl":
                value = AclBinding.from_dict(value)
            elif f.name == "configs":
                value = tuple(sorted(value.items()))
            kwargs[f.name] = value
        return cls(**kwargs)
