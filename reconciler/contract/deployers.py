"""Deployer names: the one list of the ways a job can be run, and what each one keeps apart."""

from __future__ import annotations

import re

LOCAL = "local"
SPARK_STANDALONE = "spark-standalone"
KUBERNETES = "kubernetes"

DEPLOYER_NAMES: tuple[str, ...] = (LOCAL, SPARK_STANDALONE, KUBERNETES)
DEFAULT_DEPLOYER = LOCAL

#: Deployers that run the job as a process on this machine and share one state directory.
PROCESS_DEPLOYERS: frozenset[str] = frozenset({LOCAL, SPARK_STANDALONE})

#: JobSettings fields that change how a deployer runs a job but are not part of the job spec
#: (so not of its hash): a change to one of them needs a redeploy (restart).
DEPLOYMENT_OPTION_FIELDS: dict[str, tuple[str, ...]] = {
    LOCAL: ("metrics_port", "metrics_bind", "engine"),
    SPARK_STANDALONE: ("metrics_port", "metrics_bind", "engine"),
    KUBERNETES: (
        "namespace",
        "image",
        "service_account",
        "secret_name",
        "manifests_dir",
        "kubectl_apply",
        "metrics_port",
        "termination_grace_seconds",
        "engine",
    ),
}


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


def local_threads(master: str) -> int | None:
    """N of a `local[N]` master (None: another master)."""
    m = re.fullmatch(r"local\[(\d+)\]", master.strip())
    return int(m.group(1)) if m else None


def deployer_family(name: str) -> str:
    """Deployers that share state: a local job and a spark-standalone job of one flow are the same job."""
    return "process" if name in PROCESS_DEPLOYERS else name


#: A job instance's environment (its id, its state directory) is named in reconciler/settings.py
#: (`INSTANCE_ENV`, `JOB_DIR_ENV`), where the variables are read.
#: The file in the job directory where a running job says who it is: {"instance_id", "pid", "metrics_port", "at"}.
RUNTIME_FILE = "runtime.json"
