"""The deployer interface: where a replication job runs, and what the deployer knows about it.

One job per flow. A deployer starts a job with a spec (`deploy`), hands hot-reloadable changes to
the running job (`update`: it rewrites the spec file the job re-reads every refresh interval),
restarts it with a new spec (`restart`: graceful stop, then start; the job resumes from its
committed offsets), stops it (`stop`) and says what it deployed (`inspect`, `deployments`).

Every operation is idempotent and checks what runs now, so a plan applied late (or twice) still
converges: `deploy` of a job that already runs that spec is "already done", `update` of a job
that is down starts it, `update` with a change that needs a restart restarts it.

Implementations (chosen per flow by `job.deployer`):
  local            reconciler.deployers.local       detached `spark-submit --master local[N]` per job
  spark-standalone reconciler.deployers.standalone  `spark-submit --master spark://HOST:PORT`, client mode
  kubernetes       reconciler.deployers.kubernetes  SparkApplication manifests for the Spark operator
"""

from __future__ import annotations

import abc
import signal
from collections.abc import Mapping
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


class Deployer(abc.ABC):
    name: ClassVar[str]

    @abc.abstractmethod
    def inspect(self, flow: str, options: Mapping[str, Any] | None = None) -> Deployment | None:
        """What this deployer deployed for `flow` (None: nothing)."""

    @abc.abstractmethod
    def deployments(self, options: list[Mapping[str, Any]] | None = None) -> list[Deployment]:
        """Every job this deployer knows about (running or not); `options`: the settings in use
        (e.g. the manifest directories of the topology's flows) where that matters."""

    @abc.abstractmethod
    def deploy(self, spec: JobSpec, options: Mapping[str, Any] | None = None) -> OpResult:
        """Make the job of `spec.flow` run `spec` (start it; already running it: nothing to do)."""

    @abc.abstractmethod
    def update(self, spec: JobSpec, options: Mapping[str, Any] | None = None) -> OpResult:
        """Hand a spec that differs only in hot-reloadable fields to the running job, without a restart."""

    @abc.abstractmethod
    def restart(self, spec: JobSpec, options: Mapping[str, Any] | None = None) -> OpResult:
        """Graceful stop (if it runs), then start with `spec`."""

    @abc.abstractmethod
    def stop(self, flow: str, options: Mapping[str, Any] | None = None) -> OpResult:
        """Graceful stop (finish the batch, commit), forced after a timeout."""
