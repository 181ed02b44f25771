"""The deployers as the planner and the deployers see them: what each takes beside the job spec, what of it replaces
an engine, and what each keeps apart. The deployers' names and the `local[N]` rule live below the topology
(reconciler/deployer_kinds.py); which settings are the engine's or the deployer's is each setting's `scope`
(topology/settings_registry.py): every list here is derived from them."""

from __future__ import annotations

from reconciler.deployer_kinds import PROCESS_DEPLOYERS, DeployerKind, local_threads
from reconciler.topology import settings_registry

# The deployers' names as plain strings (option and record values, YAML): the enum's values.
LOCAL: str = DeployerKind.LOCAL.value
SPARK_STANDALONE: str = DeployerKind.SPARK_STANDALONE.value
KUBERNETES: str = DeployerKind.KUBERNETES.value

DEPLOYER_NAMES: tuple[str, ...] = tuple(d.value for d in DeployerKind)

#: JobSettings fields that change how a deployer runs a job but are not part of the job spec
#: (so not of its hash): a change to one of them needs a redeploy (restart). Per deployer, the engine and
#: deployment settings it reads (`settings_registry.deployer_options`).
DEPLOYMENT_OPTION_FIELDS: dict[str, tuple[str, ...]] = {
    d.value: settings_registry.deployer_options(d) for d in DeployerKind
}

#: The option that names the flow's engine (`job.engine`, resolved): a change moves the flow to another engine.
ENGINE_OPTION = "engine"


def replaces_engine(change: str, deployer: str) -> bool:
    """Whether a change of `change` (a JobSpec path, "engine.spark_conf.spark.x", or an option of `deployer`,
    "image") replaces the flow's whole engine on `deployer`: a setting of the engine's application (scope
    `engine`). One `local[N]` master for another does, by this rule; the caller knows the engine runs local[max]."""
    if any(change == p or change.startswith(p + ".") for p in settings_registry.engine_spec_paths()):
        return True
    return change in settings_registry.engine_options(deployer)


#: Hints a process deployer takes with a flow's options but that are not settings of it (the plan never compares
#: them): `engine_slots`, the task slots of every flow the topology puts in the flow's engine, so that an engine
#: started by its first flow's deploy runs `local[N]` with room for the flows the same apply adds next.
ENGINE_SLOTS_HINT = "engine_slots"
#: The kubernetes deployer's option holding the topology's lag SLOs (`jobplan.state.desired_jobs`), which an engine
#: judges its flows against (its ReplicationEngine's spec.slo, contract/engine_status.py): a change rewrites that
#: resource and restarts nothing.
SLO_OPTION = "slo"


def local_slots(master: str, slots: int) -> str:
    """An engine's `local[N]` master holds at least one task thread per slot of its flows (Spark's tasks copy
    records, mostly waiting on the network: more threads than cores is the point)."""
    threads = local_threads(master)
    if threads is None or threads >= slots:
        return master
    return f"local[{slots}]"


def deployer_family(name: str) -> str:
    """Deployers that share state: a local job and a spark-standalone job of one flow are the same job."""
    return "process" if name in PROCESS_DEPLOYERS else name


#: A job instance's environment (its id, its state directory) is named in reconciler/settings.py
#: (`INSTANCE_ENV`, `JOB_DIR_ENV`), where the variables are read.
#: The file in the job directory where a running job says who it is: {"instance_id", "pid", "metrics_port", "at"}.
RUNTIME_FILE = "runtime.json"
