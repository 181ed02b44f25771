"""Plan actions for replication jobs: deploy, update in place, restart and stop, one per flow.

A flow's job is its part of an engine (the Spark application holding it). These actions change one flow and leave
its engine's other flows running; a change that replaces the whole engine (its own settings changed, it runs twice,
or it is down) is an engine-level action instead, `ReplaceEngine` (plan/engine_actions.py), which lists every flow
it restarts: a flow is in one action of a plan, never in two.
Each action is attached to the flow's *target* cluster (where the job reports
its status, and whose lease an apply takes). Order: update and restart run in `Phase.JOB` of the
target cluster, after its topic and ACL actions and before its deletions (a job whose filter was
narrowed must have the new spec before its old remote topics are deleted, or it would re-create
them); stop runs in `Phase.STOP_JOB`, also before the deletions; deploy runs after the actions of
*every* cluster, so the topics at both ends of a new flow exist before its job starts. Fields are JSON-native so a saved plan carries the exact spec
to deploy (`spec`, with `${ENV_VAR}` references unresolved: never a secret).

Renderers print them through the generic `describe()` / `details()`; the JSON form has, besides
`kind`, `verb`, `cluster`, `reason`, `description`: `flow`, `deployer`, `options` (deployer
settings), `spec` (the job spec), `spec_hash`, and per kind `current_hash`, `changes`
({field: [current, desired]}), `state` (the job's live state), `previous_deployer`, `running`, `where`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from reconciler.contract.deployers import ENGINE_SLOTS_HINT, KUBERNETES, SPARK_STANDALONE, local_slots
from reconciler.contract.spec import JobSpec
from reconciler.plan.action_base import Action, ActionKind, Phase, Verb
from reconciler.plan.reasons import ReasonKind
from reconciler.plan.risk import Risk


def short(spec_hash: str | None) -> str:
    return spec_hash[:12] if spec_hash else "none"


def spec_words(current_hash: str | None, spec_hash: str) -> str:
    """'spec A -> B' when the spec changes, else 'spec B'."""
    if current_hash and current_hash != spec_hash:
        return f"spec {short(current_hash)} -> {short(spec_hash)}"
    return f"spec {short(spec_hash)}"


def fmt(value: Any) -> str:
    """A setting's value for people: strings as they are, the rest as JSON."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(json.dumps(v) if not isinstance(v, str) else v for v in value) + "]"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return json.dumps(value) if not isinstance(value, str) else value


def where_to_run(deployer: str, spec: JobSpec | None, options: dict) -> str:
    if deployer == KUBERNETES:
        run = f"kubernetes {options.get('namespace') or 'default'}, image {options.get('image')}"
    else:
        master = spec.engine.master if spec is not None else None
        slots = options.get(ENGINE_SLOTS_HINT)
        if master is not None and slots:
            master = local_slots(master, int(slots))  # what the engine runs: room for every flow's slots
        run = f"spark-standalone {master}" if deployer == SPARK_STANDALONE else f"{deployer} {master}"
    engine = options.get("engine")
    return f"engine {engine}, {run}" if engine else run


def in_engine(options: dict) -> str:
    """' in engine E' for a flow run by an engine ('' otherwise)."""
    return f" in engine {options['engine']}" if options.get("engine") else ""


@dataclass(frozen=True)
class JobAction(Action):
    """Base of the job actions: the flow, where it runs and the spec it should run."""

    SHOW_RESULT: ClassVar[bool] = True  # apply prints what the deployer did (pid, manifest file)

    flow: str = ""
    deployer: str = ""
    options: dict = field(default_factory=dict)
    spec: dict = field(default_factory=dict)
    spec_hash: str = ""
    why: ReasonKind | None = None  # what this one is about, when not the kind's default (a restart of a down job)

    @property
    def reason_kind(self) -> ReasonKind:
        return self.why or self.REASON_KIND

    @property
    def subject(self) -> str:
        return self.flow

    @property
    def flows(self) -> tuple[str, ...]:
        """Every flow this action changes: its own (an engine replacement lists several)."""
        return (self.flow,)

    def __hash__(self) -> int:
        return hash((self.KIND, self.cluster, self.flow, self.spec_hash))

    def job_spec(self) -> JobSpec:
        return JobSpec.from_dict(self.spec)

    def _spec_or_none(self) -> JobSpec | None:
        return self.job_spec() if self.spec else None

    def _summary(self) -> list[str]:
        s = self._spec_or_none()
        if s is None:
            return []
        topics = "include " + fmt(list(s.settings.topics.include))
        if s.settings.topics.exclude:
            topics += ", exclude " + fmt(list(s.settings.topics.exclude))
        return [
            f"topics: {topics}",
            f"delivery: {s.delivery}, parallelism {s.engine.parallelism}, "
            f"refresh every {s.settings.refresh_interval_seconds}s",
        ]

    def _changes(self) -> list[str]:
        return [f"{k}: {fmt(v[0])} -> {fmt(v[1])}" for k, v in sorted(getattr(self, "changes", {}).items())]


@dataclass(frozen=True)
class DeployJob(JobAction):
    KIND = ActionKind.DEPLOY_JOB
    RISK = Risk.CREATE
    REASON_KIND = ReasonKind.JOB_MISSING
    PHASE = Phase.JOB
    VERB = Verb.CREATE

    def __hash__(self) -> int:
        return hash((self.KIND, self.cluster, self.flow, self.spec_hash))

    def sort_key(self) -> tuple:
        return ("\U0010ffff", int(self.PHASE), self.cluster, self.subject, ())  # after every cluster's actions

    def describe(self) -> str:
        return f"deploy job {self.flow} ({where_to_run(self.deployer, self._spec_or_none(), self.options)}, spec {short(self.spec_hash)})"

    def details(self) -> list[str]:
        engine = self.options.get("engine")
        how = [f"added to engine {engine} if it runs (its other flows keep running), else the engine starts"]
        return self._summary() + (how if engine else [])


@dataclass(frozen=True)
class UpdateJob(JobAction):
    """Only hot-reloadable fields differ: the running job gets the new spec and applies it itself."""

    KIND = ActionKind.UPDATE_JOB
    RISK = Risk.CONFIG
    REASON_KIND = ReasonKind.JOB_STALE_SPEC
    PHASE = Phase.JOB
    VERB = Verb.UPDATE
    current_hash: str = ""
    changes: dict = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.KIND, self.cluster, self.flow, self.spec_hash))

    def describe(self) -> str:
        return (
            f"update job {self.flow} in place, no restart (spec {short(self.current_hash)} -> {short(self.spec_hash)})"
        )

    def details(self) -> list[str]:
        return self._changes()


@dataclass(frozen=True)
class RestartJob(JobAction):
    """A restart of one flow that leaves its engine running (its other flows keep running): the job is down, a field
    it cannot take while running changed, or it moves (to another engine or deployer). Graceful stop, then start."""

    KIND = ActionKind.RESTART_JOB
    RISK = Risk.RESTART
    REASON_KIND = ReasonKind.JOB_STALE_SPEC
    PHASE = Phase.JOB
    VERB = Verb.UPDATE
    current_hash: str | None = None
    changes: dict = field(default_factory=dict)
    state: str = ""
    previous_deployer: str | None = None
    running: bool = True  # a process of the job runs now (False: it is dead, nothing to stop: a plain start)

    def __hash__(self) -> int:
        return hash((self.KIND, self.cluster, self.flow, self.spec_hash))

    def describe(self) -> str:
        spec = spec_words(self.current_hash, self.spec_hash)
        where = where_to_run(self.deployer, self._spec_or_none(), self.options)
        if self.previous_deployer and self.previous_deployer != self.deployer:
            where = f"{self.previous_deployer} -> {where}"
        verb = "restart" if self.running else "start"
        if self.state == "duplicated":
            return f"STOP EVERY INSTANCE of job {self.flow}, then start one ({where}, {spec})"
        return f"{verb} job {self.flow} ({where}, {spec})"

    def details(self) -> list[str]:
        engine = self.options.get("engine")
        if "engine" in self.changes:
            now = self.changes["engine"][0]
            how = (
                f"moves {'from engine ' + str(now) if now else 'from its own Spark application'} into engine {engine}: "
                "the current job stops gracefully (it commits), then the flow starts in the engine from the committed "
                "offsets: nothing copied twice, nothing skipped"
            )
        elif self.state == "duplicated":
            how = "every instance stopped (graceful, then SIGKILL), then exactly one started; resumes from its committed offsets"
        elif self.running and engine:
            how = f"graceful stop of this flow, then start, in engine {engine} (its other flows keep running); resumes from its committed offsets"
        elif self.running:
            how = "graceful stop, then start; resumes from its committed offsets"
        else:
            how = "not running (nothing to stop): start; resumes from its committed offsets"
        return self._changes() + [how]


@dataclass(frozen=True)
class StopJob(JobAction):
    KIND = ActionKind.STOP_JOB
    RISK = Risk.DELETE
    REASON_KIND = ReasonKind.JOB_UNWANTED
    PHASE = Phase.STOP_JOB
    VERB = Verb.DELETE
    where: str = ""

    def __hash__(self) -> int:
        return hash((self.KIND, self.cluster, self.flow, self.spec_hash))

    def describe(self) -> str:
        return f"STOP job {self.flow} ({self.deployer}, {self.where}): replication of this flow stops"

    def details(self) -> list[str]:
        kept = (
            f"; the other flows of engine {self.options['engine']} keep running" if self.options.get("engine") else ""
        )
        return [f"graceful stop: finishes its batch and commits; its topics and offsets are kept{kept}"]
