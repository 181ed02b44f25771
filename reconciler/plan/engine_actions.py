"""The engine-level plan action: `ReplaceEngine`, an engine stopped and started again (Terraform's
`DeleteThenCreate`, with its `ActionReason`), drawn `-/+ replace engine E`.

An engine is one Spark application holding several flows (by default every flow into one target cluster,
`job.engine`; reconciler/deployers/base.py). Most changes of a flow leave its engine running (job_actions.py:
update in place, restart in place, stop, deploy into it). The engine itself is replaced, every flow of it
restarting from its committed offsets, when (its `why`, a ReasonKind):

  job-engine-settings   its own settings changed (`settings`, each a typed `EngineSetting`: the Spark master but
                        for one `local[N]` for another, `spark_conf`, the metrics port; on kubernetes its
                        SparkApplication's settings): the "forces replacement" of Terraform
  job-duplicated        it runs more than once: every instance is stopped, then exactly one started
  job-down              none of its flows runs: nothing to stop, it starts

The action lists every flow the replacement restarts (`restarts`, each an `EngineFlow` with its own typed reason):
the flows of the engine into the action's cluster whose own change is carried out with it (a restart, `op`
restart; a hot change, `op` place: the spec handed over) and the flows restarted only because the engine is
(`op` none, reason job-with-engine). A flow in it has no other action in the plan; a flow that moves into or out
of the engine, is deployed into it or stopped keeps its own action. One action per engine and target cluster (each
cluster's lease covers its own actions): an engine holding flows into two clusters may have one in each.

Apply hands the flows of `op` restart and place to the engine's deployer in one `EngineChange` (one deployer unit,
reconciler/jobplan/handlers.py); its result names each flow's.

Risk: a replacement is a restart of every flow of the engine (no data is deleted; each flow resumes from its
committed offsets: at-least-once may copy up to a round of records again, exactly-once none). It is neither a
creation nor a deletion: the plan counts it apart ("N to replace") and the pull-request comment warns of it.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from reconciler.contract.spec import JobSpec
from reconciler.plan.action_base import Action, ActionKind, Phase, Verb
from reconciler.plan.job_actions import fmt, spec_words, where_to_run
from reconciler.plan.reasons import ReasonKind
from reconciler.plan.risk import Risk
from reconciler.textutil import plural
from reconciler.topology.secrets import is_secret_key

SENSITIVE = "(sensitive value)"


class EngineFlowOp(str, enum.Enum):
    """What apply hands the engine for one flow of a replacement (the values are the deployer's `FlowOp`s)."""

    RESTART = "restart"  # its own restart (down, a field it cannot take live, ...): its spec, restarted
    PLACE = "place"  # its own hot change: its spec handed over (the engine's restart restarts it)
    NONE = "none"  # nothing of its own: restarted by the engine's replacement alone, nothing handed over


@dataclass(frozen=True)
class EngineSetting:
    """One of the engine's own settings that changed and forces its replacement: `path` is a job spec path
    (`engine.spark_conf.spark.sql.shuffle.partitions`, `engine.master`) or a deployment setting (`image`,
    `metrics_port`). A setting that holds a secret (`spark.authenticate.secret`: topology/secrets.py
    `is_secret_key`) is `sensitive`: its values are not kept (None) and are shown as "(sensitive value)"."""

    path: str
    old: Any = None
    new: Any = None
    sensitive: bool = False

    @classmethod
    def of(cls, path: str, old: Any, new: Any) -> tuple[EngineSetting, ...]:
        """The change of `path` from `old` to `new`: one setting, or one per key that differs when both are mappings
        (`engine.spark_conf` -> `engine.spark_conf.spark.ui.enabled`, ...); the values dropped of a secret's setting
        (a Spark setting: deployment settings name things, never hold a secret)."""
        if isinstance(old, Mapping | None) and isinstance(new, Mapping | None) and (old or new):
            a, b = old or {}, new or {}
            return tuple(
                s
                for k in sorted(set(a) | set(b))
                if a.get(k) != b.get(k)
                for s in cls.of(f"{path}.{k}", a.get(k), b.get(k))
            )
        if path.startswith("engine.") and is_secret_key(path):
            return (cls(path, None, None, True),)
        return (cls(path, old, new),)

    def describe(self) -> str:
        if self.sensitive:
            return f"{self.path}: {SENSITIVE} (forces replacement)"
        old = "(not set)" if self.old is None else fmt(self.old)
        new = "(not set)" if self.new is None else fmt(self.new)
        return f"{self.path}: {old} -> {new} (forces replacement)"

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "old": self.old, "new": self.new, "sensitive": self.sensitive}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EngineSetting:
        return cls(str(d["path"]), d.get("old"), d.get("new"), bool(d.get("sensitive", False)))


@dataclass(frozen=True)
class EngineFlow:
    """One flow an engine replacement restarts, with its own reason (`why` typed, `reason` in words): its own
    restart or hot change carried out with the engine's (`op` restart, place: `spec` is what it runs after, with
    `options` its deployment settings), or nothing of its own (`op` none, `why` job-with-engine: it restarts with
    the engine on the spec it runs, `spec` empty). `changes`: its own changes, the engine's settings aside (those
    are the action's `settings`); `state`: its live state (running, down, duplicated, ...)."""

    flow: str
    why: ReasonKind
    reason: str
    op: EngineFlowOp = EngineFlowOp.NONE
    options: dict = field(default_factory=dict)
    spec: dict = field(default_factory=dict)
    spec_hash: str = ""
    current_hash: str | None = None
    changes: dict = field(default_factory=dict)
    state: str = ""

    @property
    def handed(self) -> bool:
        """Apply hands this flow's spec to the engine (its own change is carried out with the replacement)."""
        return self.op is not EngineFlowOp.NONE

    def describe(self) -> str:
        if not self.handed:
            return f"flow {self.flow}: {self.reason}"
        return f"flow {self.flow} ({spec_words(self.current_hash, self.spec_hash)}): {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "reason_kind": self.why.value,
            "reason": self.reason,
            "op": self.op.value,
            "options": self.options,
            "spec": self.spec,
            "spec_hash": self.spec_hash,
            "current_hash": self.current_hash,
            "changes": self.changes,
            "state": self.state,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EngineFlow:
        return cls(
            flow=str(d["flow"]),
            why=ReasonKind(d["reason_kind"]),
            reason=str(d.get("reason", "")),
            op=EngineFlowOp(d["op"]),
            options=dict(d.get("options") or {}),
            spec=dict(d.get("spec") or {}),
            spec_hash=str(d.get("spec_hash") or ""),
            current_hash=d.get("current_hash"),
            changes=dict(d.get("changes") or {}),
            state=str(d.get("state") or ""),
        )


#: How each kind of replacement goes, for people (`ReplaceEngine.details`).
_HOW: dict[ReasonKind, str] = {
    ReasonKind.JOB_ENGINE_SETTINGS: "its application stops gracefully (every flow finishes its batch and commits), "
    "then starts with the new settings",
    ReasonKind.JOB_DUPLICATED: "every instance of it stopped (graceful, then SIGKILL), then exactly one started",
    ReasonKind.JOB_DOWN: "nothing of it runs (nothing to stop): it starts",
}


@dataclass(frozen=True)
class ReplaceEngine(Action):
    """An engine replaced: its Spark application stopped (every instance) and started again, so every flow of it
    restarts from its committed offsets (see the module docstring). Engine-level: `engine` (its name), `deployer`,
    the target `cluster` whose flows it carries; `why` the cause (job-engine-settings, job-duplicated, job-down),
    `settings` the engine settings whose change forces it, `restarts` every flow it restarts, each with its own
    reason. Its risk is a restart of several flows at once, not a deletion: a "restart/replace" class."""

    KIND = ActionKind.REPLACE_ENGINE
    REASON_KIND = ReasonKind.JOB_ENGINE_SETTINGS
    PHASE = Phase.ENGINE
    VERB = Verb.REPLACE
    RISK = Risk.RESTART
    SHOW_RESULT: ClassVar[bool] = True  # apply prints what the deployer did (pid, manifest file)

    engine: str = ""
    deployer: str = ""
    why: ReasonKind = ReasonKind.JOB_ENGINE_SETTINGS
    settings: tuple[EngineSetting, ...] = ()
    restarts: tuple[EngineFlow, ...] = ()

    def __hash__(self) -> int:
        return hash((self.KIND, self.cluster, self.engine, self.deployer))

    @property
    def reason_kind(self) -> ReasonKind:
        return self.why

    @property
    def subject(self) -> str:
        return f"engine {self.engine}"  # a space: never a topic's or a flow's name

    @property
    def flows(self) -> tuple[str, ...]:
        """Every flow the replacement restarts."""
        return tuple(e.flow for e in self.restarts)

    @property
    def handed(self) -> tuple[EngineFlow, ...]:
        """The flows whose own change apply hands to the engine with its replacement."""
        return tuple(e for e in self.restarts if e.handed)

    def _where(self) -> str:
        first = next((e for e in self.handed if e.spec), None)
        if first is None:
            return self.deployer
        return where_to_run(self.deployer, JobSpec.from_dict(first.spec), {**first.options, "engine": None})

    def describe(self) -> str:
        names = self.flows
        return (
            f"replace engine {self.engine} ({self._where()}): restarts {plural(len(names), 'flow')} {', '.join(names)}"
        )

    def details(self) -> list[str]:
        lines = [s.describe() for s in self.settings]
        lines.append(f"{_HOW.get(self.why, 'it stops, then starts')}; every flow resumes from its committed offsets")
        for e in self.restarts:
            lines.append(e.describe())
            lines += [f"  {k}: {fmt(v[0])} -> {fmt(v[1])}" for k, v in sorted(e.changes.items())]
        return lines

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["settings"] = [s.to_dict() for s in self.settings]
        out["restarts"] = [e.to_dict() for e in self.restarts]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReplaceEngine:
        a = super().from_dict({**d, "settings": (), "restarts": ()})
        assert isinstance(a, ReplaceEngine)
        return dataclasses.replace(
            a,
            settings=tuple(EngineSetting.from_dict(s) for s in d.get("settings") or ()),
            restarts=tuple(EngineFlow.from_dict(e) for e in d.get("restarts") or ()),
        )
