"""The deployer interface: where replication runs, and what the deployer knows about it. Its unit is the engine.

An engine is one Spark application running several flows (docs/architecture.md; by default every flow into one
target cluster, `job.engine`). A deployer does two things with engines:

  `engines()`   lists the engines it deployed (running or not), each with its flows (`EngineDeployment`);
                a flow's job of an earlier release (one application per flow) is listed as an engine without
                a name holding that one flow, so the plan sees it and moves the flow into its engine
  `apply()`     applies an `EngineChange`: an engine with the changes of its flows (`FlowChange`: place a spec,
                restart a flow with a spec, remove a flow); one result per flow change, in order

Placing a spec is idempotent and checks what runs now, so a plan applied late (or twice) still converges: a flow
already running that spec is "already done", a flow that is down starts, a hot-reloadable change is handed to the
running flow (it re-reads its spec file every refresh interval), a change it cannot take restarts it in place.
A change of the engine's own settings (master, spark_conf, the deployment settings of its application) replaces
the engine: every flow of it restarts. Removing a flow stops it gracefully; an engine stops with its last flow.

The per-flow view that plan, apply and status use (`Deployment`, reconciler.contract.jobstate) is derived from
the engine list in one place, `flow_view`: one deployment per flow, that of the first engine holding it (a move
between engines that did not finish names the others in its detail), with the processes of the flow's job of an
earlier release still alive counted as strays of it. `deployments()` and `inspect()` read that view, and
`deploy`/`update`/`restart`/`stop` of one flow are an `apply` of its engine with that one flow change.

Implementations (chosen per flow by `job.deployer`):
  local            reconciler.deployers.local       a detached `spark-submit --master local[N]` per engine
  spark-standalone reconciler.deployers.standalone  `spark-submit --master spark://HOST:PORT`, client mode
  kubernetes       reconciler.deployers.kubernetes  a SparkApplication per engine for the Spark operator
"""

from __future__ import annotations

import abc
import enum
import signal
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from reconciler.adapters.base import OpResult
from reconciler.contract.deployers import DEPLOYMENT_OPTION_FIELDS, ENGINE_SLOTS_HINT, PROCESS_DEPLOYERS
from reconciler.contract.jobstate import Deployment
from reconciler.contract.spec import JobSpec
from reconciler.topology.flow_id import FlowId, flow_ends
from reconciler.topology.model import JobSettings


def deployment_options(job: JobSettings, engine: str | None = None, engine_slots: int | None = None) -> dict[str, Any]:
    """The deployer-specific settings of a flow's job (JSON-native values); `engine`: the flow's engine as
    resolved (`Flow.engine`: `job.engine`, else the target's alias); `engine_slots`: the task slots of all the
    flows of that engine (a process deployer's hint, `ENGINE_SLOTS_HINT`, never compared by the plan)."""
    options = {name: getattr(job, name) for name in DEPLOYMENT_OPTION_FIELDS.get(job.deployer, ())}
    if "engine" in options:
        options["engine"] = engine or job.engine
    if engine_slots is not None and job.deployer in PROCESS_DEPLOYERS:
        options[ENGINE_SLOTS_HINT] = engine_slots
    return options


def restart_hash(spec: JobSpec) -> str:
    """Hash of the part of a spec a running job cannot take without a restart."""
    return spec.restart_hash()


def flow_slug(flow: str) -> str:
    """A file name for a flow: `eu-west->eu-central` -> `eu-west.eu-central` (aliases never contain '.')."""
    return FlowId(*flow_ends(flow)).slug()


EXIT_MEANINGS = {
    0: "stopped",
    1: "failed",
    3: "restart required",
    4: "stopped itself: a newer instance of the flow runs",
}


def describe_exit(code: int | None) -> str:
    """Words for a job's exit code; 128 + N is a process killed by signal N (as a shell reports it)."""
    if code is None:
        return "ended without an exit code (its supervisor was killed, e.g. by SIGKILL)"
    if code > 128:
        try:
            name = signal.Signals(code - 128).name
        except ValueError:
            name = f"signal {code - 128}"
        return f"was killed by {name} (exit code {code})"
    meaning = EXIT_MEANINGS.get(code) or "failed"
    return f"exited with code {code} ({meaning})"


def engine_of(flow: str, options: Mapping[str, Any] | None = None) -> str:
    """The engine a flow runs in: `job.engine` (in the deployment options), else its target cluster's alias."""
    name = (options or {}).get("engine")
    return str(name) if name else flow_ends(flow)[1]


class FlowOp(str, enum.Enum):
    """What an engine change does to one of its flows."""

    PLACE = "place"  # run this spec: start it, hand it to the running flow (hot) or restart the flow in place
    RESTART = "restart"  # graceful stop, then start with this spec (a dead or duplicated engine starts afresh)
    REMOVE = "remove"  # graceful stop; the flow leaves every engine holding it (the engine stops with its last)


@dataclass(frozen=True)
class FlowChange:
    """One flow's change within an engine change; `options`: the flow's deployment options (`deployment_options`)."""

    op: FlowOp
    flow: str
    spec: JobSpec | None = None  # the spec to run (PLACE, RESTART); None for REMOVE
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.op is not FlowOp.REMOVE and self.spec is None:
            raise ValueError(f"flow {self.flow}: a {self.op.value} needs a spec")


@dataclass(frozen=True)
class EngineChange:
    """An engine with the changes of its flows: what `Deployer.apply` takes."""

    engine: str
    flows: tuple[FlowChange, ...]

    @classmethod
    def of(cls, change: FlowChange) -> EngineChange:
        """The change of one flow, in its engine."""
        return cls(engine_of(change.flow, change.options), (change,))


@dataclass(frozen=True)
class EngineDeployment:
    """What a deployer knows about one engine it deployed: where it runs and its flows (as per-flow deployments)."""

    name: str | None  # None: a flow's own application of an earlier release (before engines)
    deployer: str
    where: str  # for people: "engine east: driver pid 1234 (instance ab12), local[2]"
    alive: bool | None  # its application runs; None: the deployer cannot tell (the flows' statuses decide)
    flows: tuple[Deployment, ...] = ()
    #: Every process of it running now, one description per instance (leftovers included).
    processes: tuple[str, ...] = ()


def flow_view(engines: Iterable[EngineDeployment]) -> list[Deployment]:
    """The per-flow view of a list of engines (pure; the one place it is derived), by flow: each flow's deployment
    in the first engine holding it, its detail naming the other engines holding it (a move that did not finish),
    the processes of its job of an earlier release (an engine without a name) as strays; a flow no engine holds
    is its earlier job's deployment."""
    found: dict[str, list[tuple[EngineDeployment, Deployment]]] = {}
    for eng in engines:
        for dep in eng.flows:
            found.setdefault(dep.flow, []).append((eng, dep))
    out: list[Deployment] = []
    for flow in sorted(found):
        named = [(e, d) for e, d in found[flow] if e.name is not None]
        earlier = [e for e, _ in found[flow] if e.name is None]
        if named:
            _, dep = named[0]
            also = [str(e.name) for e, _ in named[1:]]
            strays = dep.strays + tuple(p for e in earlier for p in e.processes)
        else:
            dep, also, strays = found[flow][0][1], [], found[flow][0][1].strays
        said = [dep.detail] if dep.detail else []
        if also:
            said.append(f"also in engine(s) {', '.join(also)}")
        if strays:
            said.append(f"still running unseen: {'; '.join(strays)}")
        out.append(replace(dep, detail="; ".join(said), strays=strays))
    return out


def each_flow(change: EngineChange, fn: Callable[[FlowChange], OpResult], parallel: bool = True) -> list[OpResult]:
    """`fn` of every flow change of `change` (in parallel: an engine's flows wait for their own graceful stops), one
    result each, in order; a flow change that raises fails alone."""

    def one(fc: FlowChange) -> OpResult:
        try:
            return fn(fc)
        except Exception as exc:  # noqa: BLE001 - one flow's failure is its result, not the engine's
            return OpResult.failed(f"{type(exc).__name__}: {exc}")

    if not parallel or len(change.flows) < 2:
        return [one(fc) for fc in change.flows]
    with ThreadPoolExecutor(max_workers=min(8, len(change.flows))) as pool:
        return list(pool.map(one, change.flows))


class Deployer(abc.ABC):
    """A way to run engines (see the module docstring): `engines` and `apply`; the per-flow methods derive."""

    name: ClassVar[str]

    @abc.abstractmethod
    def engines(self, options: list[Mapping[str, Any]] | None = None) -> list[EngineDeployment]:
        """Every engine this deployer knows about (running or not), with its flows; `options`: the settings in use
        (e.g. the manifest directories of the topology's flows) where that matters."""

    @abc.abstractmethod
    def apply(self, change: EngineChange) -> list[OpResult]:
        """Apply an engine's flow changes (idempotent: see the module docstring); one result per flow change."""

    # --- the per-flow view, derived -------------------------------------------------------------
    def deployments(self, options: list[Mapping[str, Any]] | None = None) -> list[Deployment]:
        """Every flow of this deployer's engines (`flow_view`), of the flows this deployer started."""
        return [d for d in flow_view(self.engines(options)) if d.deployer == self.name]

    def inspect(self, flow: str, options: Mapping[str, Any] | None = None) -> Deployment | None:
        """What this deployer (or one sharing its state) deployed for `flow` (None: nothing)."""
        return next((d for d in flow_view(self.engines([options] if options else None)) if d.flow == flow), None)

    def deploy(self, spec: JobSpec, options: Mapping[str, Any] | None = None) -> OpResult:
        """Make `spec.flow` run `spec` in its engine (already running it: nothing to do)."""
        return self.apply(EngineChange.of(FlowChange(FlowOp.PLACE, spec.flow, spec, options or {})))[0]

    def update(self, spec: JobSpec, options: Mapping[str, Any] | None = None) -> OpResult:
        """Hand a spec that differs only in hot-reloadable fields to the running flow, without a restart."""
        return self.deploy(spec, options)

    def restart(self, spec: JobSpec, options: Mapping[str, Any] | None = None) -> OpResult:
        """Graceful stop of the flow (if it runs), then start with `spec`."""
        return self.apply(EngineChange.of(FlowChange(FlowOp.RESTART, spec.flow, spec, options or {})))[0]

    def stop(self, flow: str, options: Mapping[str, Any] | None = None) -> OpResult:
        """Graceful stop of the flow (finish the batch, commit), forced after a timeout."""
        return self.apply(EngineChange.of(FlowChange(FlowOp.REMOVE, flow, None, options or {})))[0]
