"""`kubernetes` deployer: one SparkApplication per engine for the Spark operator (sparkoperator.k8s.io/v1beta2).

An engine (reconciler.engine.host) is one Spark application running several flows: by default every flow
into one target cluster (`job.engine`, default the target's alias). Per engine one file
`<manifests_dir>/engine-<engine>.yaml` with five documents:

* a ConfigMap holding the engine directory: `engine.json` (the engine's `EngineRecord`: name, master `inherit`,
  spark_conf) and one key per flow, `flow.<source>.<target>[.<family>].json` (its job spec), plus
  `flow.<...>.restart` (a token: a new value restarts that flow in place). It is mounted whole at
  /etc/reconciler/engine. A ConfigMap has no subdirectories, so the flows lie flat beside engine.json
  (reconciler.contract.engine.flow_files reads both layouts): one ConfigMap is one atomic update (the kubelet
  swaps the mounted directory in one rename), nothing is mounted inside a read-only ConfigMap volume, and no
  `items` list in the SparkApplication names the flows (which would change it with every flow).
* a SparkApplication (Python, cluster mode) running `jobs/mirror_job.py --engine-dir /etc/reconciler/engine
  --master inherit` from the image. Nothing of it depends on the engine's flows: its executors scale with the
  flows' tasks (dynamic allocation, at most `spark.dynamicAllocation.maxExecutors`), and the pods take every
  key of the Secret `secret_name` as a variable (`envFrom`, optional) and as a file (see Secrets below). The
  pods' shape (the ConfigMap's and the Secret's volumes, the environment, the metrics port, a Pod Security
  "restricted" securityContext, the working directory, the termination grace period) is in pod templates
  (`spec.driver.template`, `spec.executor.template`), which Spark applies itself: no mutating webhook is needed
  (Spark operator v2.1 or later; docs/install.md).;
* a ReplicationEngine (contract/engine_status.py) naming the flows with their wanted spec hashes and the topology's
  lag SLOs (the option SLO_OPTION), into whose status the driver writes its verdict for Argo CD and Flux
  (engine/health_writer.py; docs/gitops-controllers.md), and a Role and RoleBinding letting the driver's service
  account read that resource and patch its status, nothing else. The ReplicationEngine CRD is written beside the
  engines' files (CRD_FILE, `crd_text`), and applied first with `kubectl_apply`.

Adding, changing and removing a flow rewrites only the ConfigMap: Kubernetes updates mounted ConfigMaps in place
(within the kubelet's sync period, about a minute) and the running engine picks the flow files up; a flow change
that needs a restart restarts that flow in place (the flow's driver exits 3 and the engine runs the new file). A
change of the engine's own settings (spark_conf, image, namespace, service account, Secret, metrics port) changes
the SparkApplication, whose driver carries the annotation `reconciler/restart-hash` (the hash of those settings):
the operator resubmits it, every flow of the engine restarts; `restartPolicy: Always` restarts it after a crash.

`engines` reads the engine files back (each with its flows); `apply` places, restarts and removes the flows of an
engine change one after the other under a lock on the manifests directory, reading the engine's file back to know
its other flows. A flow moving to another engine leaves the old one (whose file goes when its
last flow does). A manifest of the earlier layout (one SparkApplication per flow, `mirror-<source>-to-<target>-
<hash>.yaml`) is reported by `inspect` without an engine, so the plan shows the flow moving into its engine; the
move deletes that file (and `kubectl delete -f` it first with `kubectl_apply`). The new engine resumes the flow
from its committed offsets; an old driver still running meanwhile sees the newer instance's status and stops
itself (exit 4).

Secrets: the specs keep `${ENV_VAR}` references; the driver and the executors take every key of the Kubernetes
Secret `secret_name` as an environment variable (`envFrom`) and as a file, the Secret mounted at
/etc/reconciler/secrets (SECRETS_MOUNT), their RECONCILER_SECRETS_DIR, which `${NAME}` reads first. The kubelet
rewrites the mounted files when the Secret changes (within its sync period, about a minute), so a rotated
credential, or a key added later, reaches the running engine: its flows reconnect with it (docs/security.md,
"Rotating credentials"); the environment, fixed when a pod starts, keeps the old values. No secret value is ever
rendered; the ConfigMap's annotation `reconciler/secret-variables` lists the variables its flows reference (the
Secret must hold them; until it does, a flow that needs one fails alone and is retried).

By default the files are only written, for a GitOps controller (Argo CD, Flux) to sync; with
`job.kubectl_apply: true` the deployer also runs `kubectl apply --server-side --field-manager=reconciler
--force-conflicts -f FILE` (KUBECTL_APPLY; and `kubectl delete -f` when an engine loses its last flow). Server-side:
client-side apply keeps the whole object in the annotation kubectl.kubernetes.io/last-applied-configuration, capped
at 256 KiB, which a ConfigMap of about 100 flows passes; `--force-conflicts` because the reconciler owns these
objects (a field another manager set, e.g. by a `kubectl edit`, is taken back). Without kubectl the deployer cannot see pods: whether a flow runs is read from the status
it publishes, like for every other deployer.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from reconciler import settings
from reconciler.adapters.base import OpResult
from reconciler.contract import engine_status
from reconciler.contract.deployers import DEPLOYMENT_OPTION_FIELDS, ENGINE_OPTION, KUBERNETES, SLO_OPTION
from reconciler.contract.engine import ENGINE_FILE, INHERIT_MASTER, RESTART_SUFFIX, flat_flow_file
from reconciler.contract.spec import JobSpec
from reconciler.deployers.base import (
    Deployer,
    Deployment,
    EngineChange,
    EngineDeployment,
    FlowChange,
    FlowOp,
    each_flow,
    engine_of,
)
from reconciler.settings import (
    ALL_INTERFACES,
    BIND_ENV,
    INSTANCE_ENV,
    KUBERNETES_PORT,
    PORT_ENV,
    SECRETS_DIR_ENV,
    STATUS_RESOURCE_ENV,
)
from reconciler.topology.defaults import BUILTIN_FLOW_DEFAULTS
from reconciler.topology.flow_id import flow_ends
from reconciler.topology.secrets import references
from reconciler.topology.settings_registry import engine_options

API_VERSION = "sparkoperator.k8s.io/v1beta2"
ENGINE_MOUNT = "/etc/reconciler/engine"
#: Where the Secret `secret_name` is mounted on the driver and the executors, one file per key: their
#: RECONCILER_SECRETS_DIR, so `${NAME}` reads the key NAME there (and a rotated Secret reaches running engines).
SECRETS_MOUNT = "/etc/reconciler/secrets"
APP_ROOT = "/opt/reconciler"
#: The Spark of the job image (`sparkVersion`): constraints.txt's pyspark pin, which the Dockerfile installs; not
#: the pyspark of the machine that renders, so every machine renders the same SparkApplication (a test keeps the
#: two equal: tests/unit/test_kubernetes_deployer.py).
IMAGE_SPARK_VERSION = "4.3.0"
#: The image's working directory for the job's pods (writable by the Spark images' user, uid 185: Dockerfile).
WORK_DIR = "/opt/spark/work-dir"
SPARK_UID = 185
#: The containers Spark takes from a pod template (the names the operator passes as podTemplateContainerName).
DRIVER_CONTAINER = "spark-kubernetes-driver"
EXECUTOR_CONTAINER = "spark-kubernetes-executor"
#: The deployer's options when a flow's job does not set them: the topology's built-in job defaults (their one
#: home, topology/defaults.py), except the metrics port, which this deployer fixes (the pod's port).
DEFAULTS = {
    **{k: BUILTIN_FLOW_DEFAULTS["job"][k] for k in DEPLOYMENT_OPTION_FIELDS[KUBERNETES] if k != "metrics_port"},
    "metrics_port": KUBERNETES_PORT,
}
#: Options that change where and how the manifests are written, not the SparkApplication: the deployment settings
#: (settings_registry's scope) but the engine's name.
FILE_OPTIONS = frozenset(DEPLOYMENT_OPTION_FIELDS[KUBERNETES]) - engine_options(KUBERNETES) - {ENGINE_OPTION}
#: Options that are not the SparkApplication's: a change resubmits nothing.
NOT_APP_OPTIONS = FILE_OPTIONS | {SLO_OPTION}
#: The file of the ReplicationEngine CRD in a manifests directory, beside the engines' files.
CRD_FILE = "crd-replicationengine.yaml"
#: Executors of an engine when its spark_conf does not say (dynamic allocation: they follow the flows' tasks).
MIN_EXECUTORS = 1
MAX_EXECUTORS = 8
#: SparkApplication states in which its driver runs or is about to.
ALIVE_STATES = frozenset({"RUNNING", "SUBMITTED", "PENDING_RERUN", "INVALIDATING", "SUCCEEDING"})
#: How the manifests are applied with `kubectl_apply` (then `-f FILE`): server-side, as the reconciler.
KUBECTL_APPLY = ("apply", "--server-side", "--field-manager=reconciler", "--force-conflicts")
LEGACY_GLOB = "mirror-*.yaml"
ENGINE_PREFIX = "engine-"


class _NoAliasDumper(yaml.SafeDumper):
    """Rendered manifests never use YAML anchors/aliases: kubectl, Argo CD and reviewers read them as written."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def manifests_root(options: Mapping[str, Any]) -> Path:
    d = options.get("manifests_dir")
    if d:
        return Path(d).resolve()
    return settings.state_dir() / "k8s"


def resource_name(flow: str) -> str:
    """The DNS-1123 name of a flow's SparkApplication in the earlier layout (one per flow): the name of its file."""
    source, target, family = flow_ends(flow)
    readable = f"mirror-{source}-to-{target}" + (f"-{family}" if family else "")
    base = re.sub(r"[^a-z0-9-]+", "-", readable.lower()).strip("-")
    digest = hashlib.sha256(flow.encode()).hexdigest()[:6]
    return f"{base[: 63 - 7].rstrip('-')}-{digest}"


def engine_resource_name(engine: str) -> str:
    """A DNS-1123 name for an engine's SparkApplication: `mirror-engine-<engine>`; a short hash is added when the
    engine's name had to be changed (upper case, `_`) or shortened, so distinct engines stay distinct. Short
    enough for the names Spark derives from it (driver pod, driver service)."""
    base = re.sub(r"[^a-z0-9-]+", "-", engine.lower()).strip("-")
    readable = f"mirror-engine-{base}"
    if base == engine and len(readable) <= 50:
        return readable
    digest = hashlib.sha256(engine.encode()).hexdigest()[:6]
    return f"{readable[:43].rstrip('-')}-{digest}"


def engine_file(engine: str, options: Mapping[str, Any]) -> Path:
    return manifests_root(options) / f"{ENGINE_PREFIX}{engine}.yaml"


def secret_references(spec: JobSpec) -> list[str]:
    names: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, str):
            names.update(references(value))
        elif isinstance(value, Mapping):
            for v in value.values():
                walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)

    walk(spec.to_dict())
    return sorted(names)


@dataclass(frozen=True)
class FlowEntry:
    """One flow of an engine's ConfigMap: its spec (as stored), when it was last (re)started, its restart token."""

    text: str  # the spec's JSON, as in the ConfigMap
    deployed_at: float
    token: str | None = None

    @property
    def spec(self) -> JobSpec | None:
        try:
            return JobSpec.from_json(self.text)
        except Exception:  # noqa: BLE001 - an unreadable spec: the plan restarts the flow with the desired one
            return None


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _parse_iso(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        import calendar

        return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def settings_hash(engine: str, spark_conf: Mapping[str, str], options: Mapping[str, Any]) -> str:
    """The hash of what an engine's SparkApplication is made of (not its flows): a change resubmits it."""
    app_options = {k: v for k, v in sorted(options.items()) if k not in NOT_APP_OPTIONS and v is not None}
    text = json.dumps({"engine": engine, "spark_conf": dict(sorted(spark_conf.items())), "options": app_options})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _engine_options(engine: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The engine's deployment options over the deployer's defaults; ValueError without an image."""
    opts = {**DEFAULTS, **{k: v for k, v in options.items() if v is not None}, "engine": engine}
    if not opts["image"]:
        raise ValueError(
            f"engine {engine}: the kubernetes deployer needs job.image (an image with the project installed)"
        )
    return opts


def _spark_conf(spark_conf: Mapping[str, str]) -> dict[str, str]:
    """The application's sparkConf: the engine's own settings over the deployer's. Shuffle tracking is not among
    them: the operator turns it on with `dynamicAllocation` (v2.1 and later)."""
    conf = {
        "spark.python.worker.reuse": "true",
        "spark.ui.showConsoleProgress": "false",
        "spark.task.maxFailures": "1",
        "spark.scheduler.mode": "FAIR",
        "spark.executorEnv.PYTHONPATH": APP_ROOT,
        **{str(k): str(v) for k, v in spark_conf.items()},
    }
    return dict(sorted(conf.items()))


def _secret_parts(secret_name: str) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The Secret `secret_name` as the pods take it: every key a variable (`envFrom`) and a file (a volume mounted at
    SECRETS_MOUNT, their RECONCILER_SECRETS_DIR): what `${NAME}` reads first, and what the kubelet rewrites when the
    Secret changes, so a rotated credential reaches the running engine (docs/security.md, "Rotating credentials").
    Owner and group (fsGroup) read only. (envFrom, volume, mount, environment variable)"""
    env_from = [{"secretRef": {"name": secret_name, "optional": True}}]
    volume = {"name": "secrets", "secret": {"secretName": secret_name, "optional": True, "defaultMode": 0o440}}
    mount = {"name": "secrets", "mountPath": SECRETS_MOUNT, "readOnly": True}
    return env_from, volume, mount, {"name": SECRETS_DIR_ENV, "value": SECRETS_MOUNT}


def _driver(
    name: str,
    ns: str,
    conf: Mapping[str, str],
    opts: Mapping[str, Any],
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> dict[str, Any]:
    """The driver: its resources, service account, and the pod template of its container (the engine's ConfigMap and
    the Secret mounted, its metrics port, its instance id, the ReplicationEngine it writes its status to)."""
    port = int(opts["metrics_port"])
    env_from, secrets_volume, secrets_mount, secrets_env = _secret_parts(opts["secret_name"])
    container: dict[str, Any] = {
        "name": DRIVER_CONTAINER,
        "workingDir": WORK_DIR,
        "securityContext": _container_security(),
        "volumeMounts": [{"name": "engine", "mountPath": ENGINE_MOUNT, "readOnly": True}, secrets_mount],
        "envFrom": env_from,
        "env": [
            {"name": "PYTHONPATH", "value": APP_ROOT},
            secrets_env,
            {"name": PORT_ENV, "value": str(port)},
            # the pod network: Prometheus scrapes the pod's address (issue 45; docs/security.md, Metrics exposure)
            {"name": BIND_ENV, "value": ALL_INTERFACES},
            # One instance per driver pod: the operator's resubmission (restartPolicy) is a new pod, a new
            # instance, which a zombie driver of an earlier pod sees in the status topic and stops for.
            {"name": INSTANCE_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
            # where the engine publishes its verdict for Argo CD and Flux (contract/engine_status.py)
            {"name": STATUS_RESOURCE_ENV, "value": f"{ns}/{name}"},
        ],
    }
    if port:  # the driver serves its flows' metrics (docs/monitoring.md); or deploy/monitoring/podmonitor.yaml
        container["ports"] = [{"name": "metrics", "containerPort": port}]
    volumes = [{"name": "engine", "configMap": {"name": f"{name}-flows"}}, secrets_volume]
    return {
        "cores": _int_conf(conf, "spark.driver.cores", 1),
        "memory": conf.get("spark.driver.memory", "512m"),
        "serviceAccount": opts["service_account"],
        "labels": dict(labels),
        "annotations": dict(annotations),
        "template": _pod_template(container, volumes, int(opts["termination_grace_seconds"])),
    }


def _executor(conf: Mapping[str, str], opts: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    """The executors: their resources and the pod template of their container (the Secret only)."""
    env_from, secrets_volume, secrets_mount, secrets_env = _secret_parts(opts["secret_name"])
    container = {
        "name": EXECUTOR_CONTAINER,
        "workingDir": WORK_DIR,
        "securityContext": _container_security(),
        "volumeMounts": [secrets_mount],
        "envFrom": env_from,
        "env": [secrets_env],
    }
    return {
        "cores": _int_conf(conf, "spark.executor.cores", 1),
        "memory": conf.get("spark.executor.memory", "512m"),
        "labels": dict(labels),
        "template": _pod_template(container, [secrets_volume], int(opts["termination_grace_seconds"])),
    }


def _config_map(
    engine: str,
    name: str,
    ns: str,
    labels: Mapping[str, str],
    flows: Mapping[str, FlowEntry],
    spark_conf: Mapping[str, str],
) -> dict[str, Any]:
    """The engine directory: engine.json and one key per flow (and its restart token), the flows noted."""
    variables = sorted({v for entry in flows.values() if (s := entry.spec) is not None for v in secret_references(s)})
    flow_notes = {
        flow: {"key": flat_flow_file(flow), "spec-hash": _hash_of(entry), "deployed-at": _iso(entry.deployed_at)}
        for flow, entry in sorted(flows.items())
    }
    data = {ENGINE_FILE: _compact({"name": engine, "master": INHERIT_MASTER, "spark_conf": dict(spark_conf)})}
    for flow, entry in sorted(flows.items()):
        key = flat_flow_file(flow)
        spec = entry.spec
        data[key] = spec.to_compact_json() + "\n" if spec is not None else entry.text
        if entry.token:
            data[key[: -len(".json")] + RESTART_SUFFIX] = entry.token + "\n"
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{name}-flows",
            "namespace": ns,
            "labels": dict(labels),
            "annotations": {
                "reconciler/engine": engine,
                "reconciler/flows": _compact(flow_notes),
                "reconciler/secret-variables": ",".join(variables),
            },
        },
        "data": data,
    }


def _spark_application(
    engine: str,
    name: str,
    ns: str,
    labels: Mapping[str, str],
    options: Mapping[str, Any],
    image: str,
    spark_version: str,
    conf: Mapping[str, str],
    driver: dict[str, Any],
    executor: dict[str, Any],
    deployed_at: float | None,
) -> dict[str, Any]:
    """The SparkApplication. Fields equal to what Spark or the operator take when they are absent and that nothing
    stores in the object are left out (imagePullPolicy, pythonVersion, dynamicAllocation.initialExecutors, a port's
    protocol); fields the operator's webhook would store when absent are rendered with a value (mode, restartPolicy,
    cores, memory): docs/gitops-controllers.md, "A compare after sync is empty"."""
    lo = int(conf.get("spark.dynamicAllocation.minExecutors", MIN_EXECUTORS))
    hi = max(lo, int(conf.get("spark.dynamicAllocation.maxExecutors", MAX_EXECUTORS)))
    annotations = {"reconciler/engine": engine, "reconciler/options": _compact(dict(sorted(options.items())))}
    if deployed_at is not None:
        annotations["reconciler/deployed-at"] = _iso(deployed_at)
    return {
        "apiVersion": API_VERSION,
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": ns, "labels": dict(labels), "annotations": annotations},
        "spec": {
            "type": "Python",
            "mode": "cluster",
            "image": image,
            "mainApplicationFile": f"local://{APP_ROOT}/jobs/mirror_job.py",
            "arguments": ["--engine-dir", ENGINE_MOUNT, "--master", INHERIT_MASTER],
            "sparkVersion": spark_version,
            "sparkConf": dict(conf),
            "restartPolicy": {"type": "Always", "onFailureRetryInterval": 10, "onSubmissionFailureRetryInterval": 20},
            "dynamicAllocation": {"enabled": True, "minExecutors": lo, "maxExecutors": hi},
            "driver": driver,
            "executor": executor,
        },
    }


def _status_access(name: str, ns: str, labels: Mapping[str, str], service_account: str) -> list[dict[str, Any]]:
    """A Role and its RoleBinding: the driver's service account may read its own ReplicationEngine and write its
    status, nothing else (resourceNames: this engine's only)."""
    role = f"{name}-status"
    rules = [
        {
            "apiGroups": [engine_status.GROUP],
            "resources": [engine_status.PLURAL],
            "resourceNames": [name],
            "verbs": ["get"],
        },
        {
            "apiGroups": [engine_status.GROUP],
            "resources": [f"{engine_status.PLURAL}/status"],
            "resourceNames": [name],
            "verbs": ["get", "patch"],
        },
    ]
    meta = {"name": role, "namespace": ns, "labels": dict(labels)}
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": dict(meta, labels=dict(labels)),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": ns}],
        },
    ]


def render_engine(
    engine: str,
    flows: Mapping[str, FlowEntry],
    spark_conf: Mapping[str, str],
    options: Mapping[str, Any],
    *,
    deployed_at: float | None = None,
    restarts: int = 0,
    spark_version: str | None = None,
) -> list[dict[str, Any]]:
    """An engine's documents as plain dicts (YAML-ready): the ConfigMap (the engine directory), the SparkApplication,
    the ReplicationEngine its driver writes its verdict to, and the Role and RoleBinding that let it."""
    opts = _engine_options(engine, options)
    name, ns = engine_resource_name(engine), opts["namespace"]
    labels = {
        "app.kubernetes.io/name": "reconciler-mirror",
        "app.kubernetes.io/managed-by": "reconciler",
        "app.kubernetes.io/instance": name,
    }
    conf = _spark_conf(spark_conf)
    pod_annotations = {"reconciler/restart-hash": settings_hash(engine, spark_conf, options)}
    port = int(opts["metrics_port"])
    if port:  # the driver serves its flows' metrics (docs/monitoring.md); or deploy/monitoring/podmonitor.yaml
        pod_annotations.update(
            {"prometheus.io/scrape": "true", "prometheus.io/port": str(port), "prometheus.io/path": "/metrics"}
        )
    if restarts:
        pod_annotations["reconciler/restarts"] = str(restarts)
    app = _spark_application(
        engine,
        name,
        ns,
        labels,
        options,
        opts["image"],
        spark_version or IMAGE_SPARK_VERSION,
        conf,
        _driver(name, ns, conf, opts, labels, pod_annotations),
        _executor(conf, opts, labels),
        deployed_at,
    )
    wanted = {flow: _hash_of(entry) for flow, entry in flows.items()}
    status = engine_status.resource(
        name, ns, labels, engine, name, wanted, engine_status.slo_of(options.get(SLO_OPTION) or {})
    )
    return [
        _config_map(engine, name, ns, labels, flows, spark_conf),
        app,
        status,
        *_status_access(name, ns, labels, opts["service_account"]),
    ]


def _compact(value: Any) -> str:
    """JSON without whitespace, keys sorted: the ConfigMap's flow specs and the annotations (an engine of 400 flows
    stays within Kubernetes' limits: 1 MiB of data, 256 KiB of annotations)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _int_conf(conf: Mapping[str, str], key: str, default: int) -> int:
    try:
        return int(conf[key])
    except (KeyError, ValueError):
        return default


def _container_security() -> dict[str, Any]:
    """A container of Pod Security's "restricted" profile: the image's unprivileged user, no privilege escalation,
    no capabilities, the runtime's seccomp profile."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "runAsUser": SPARK_UID,
        "runAsGroup": SPARK_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _pod_template(container: dict[str, Any], volumes: list[dict[str, Any]], grace: int) -> dict[str, Any]:
    """A pod template (spec.driver.template / spec.executor.template): Spark builds the pod from it itself (the
    operator hands it to spark-submit as spark.kubernetes.{driver,executor}.podTemplateFile), so the pod needs no
    mutating webhook; and with a template the operator does not mark the pod for its webhook (v2.1 and later)."""
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": grace,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": SPARK_UID,
            "runAsGroup": SPARK_UID,
            "fsGroup": SPARK_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
    }
    if volumes:
        spec["volumes"] = volumes
    return {"spec": spec}


def _hash_of(entry: FlowEntry) -> str | None:
    spec = entry.spec
    return spec.spec_hash() if spec is not None else None


def render(spec: JobSpec, options: Mapping[str, Any], **kw: Any) -> list[dict[str, Any]]:
    """The engine of one flow alone (its ConfigMap and SparkApplication)."""
    entry = FlowEntry(spec.to_json() + "\n", kw.pop("deployed_at", None) or time.time())
    return render_engine(
        engine_of(spec.flow, options), {spec.flow: entry}, spec.engine.spark_conf, options, deployed_at=None, **kw
    )


def _read_docs(path: Path) -> tuple[dict, dict] | None:
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    except (OSError, yaml.YAMLError):
        return None
    cm = next((d for d in docs if isinstance(d, dict) and d.get("kind") == "ConfigMap"), None)
    app = next((d for d in docs if isinstance(d, dict) and d.get("kind") == "SparkApplication"), None)
    return (cm, app) if cm and app else None


def _json(text: str | None, default: Any) -> Any:
    try:
        return json.loads(text) if text else default
    except ValueError:
        return default


@dataclass(frozen=True)
class EngineManifest:
    """An engine's file as rendered: its flows, Spark settings and deployment options."""

    path: Path
    engine: str
    flows: dict[str, FlowEntry]
    spark_conf: dict[str, str]
    options: dict[str, Any]
    namespace: str
    app_name: str
    restarts: int
    deployed_at: float | None
    docs: tuple[dict, dict]

    @classmethod
    def load(cls, path: Path) -> EngineManifest | None:
        read = _read_docs(path)
        if read is None:
            return None
        cm, app = read
        engine = (app["metadata"].get("annotations") or {}).get("reconciler/engine")
        if not engine:
            return None
        data = cm.get("data") or {}
        record = _json(data.get(ENGINE_FILE), {})
        notes = _json((cm["metadata"].get("annotations") or {}).get("reconciler/flows"), {})
        flows: dict[str, FlowEntry] = {}
        for flow, note in sorted(notes.items()):
            key = note.get("key") or flat_flow_file(flow)
            token = data.get(key[: -len(".json")] + RESTART_SUFFIX)
            stamp = _parse_iso(note.get("deployed-at"))
            flows[flow] = FlowEntry(
                data.get(key) or "",
                # 0 (1970-01-01T00:00:00Z): not known (`reconciler render` outside git), kept as it is
                stamp if stamp is not None else path.stat().st_mtime,
                token.strip() if token else None,
            )
        ann = app["metadata"].get("annotations") or {}
        pod_ann = app["spec"].get("driver", {}).get("annotations") or {}
        return cls(
            path,
            str(engine),
            flows,
            {str(k): str(v) for k, v in (record.get("spark_conf") or {}).items()},
            _json(ann.get("reconciler/options"), {}),
            app["metadata"].get("namespace", "default"),
            app["metadata"]["name"],
            int(pod_ann.get("reconciler/restarts", "0")),
            _parse_iso(ann.get("reconciler/deployed-at")),
            (cm, app),
        )


def next_entry(old: FlowEntry | None, spec: JobSpec, now: float, restart_token: str | None = None) -> FlowEntry:
    """A flow's entry once `spec` is placed in its engine (pure): the same entry when its spec is the one it has;
    else the new spec, rendered `now` when it needs a (re)start, else (a hot change) when it was; `restart_token`
    (a restart) replaces its token, which a flow new to the engine never gets (it just starts)."""
    current = old.spec if old is not None else None
    if old is not None and current is not None and current.spec_hash() == spec.spec_hash() and restart_token is None:
        return old
    needs_restart = restart_token is not None or current is None or bool(current.restart_fields(spec))
    return FlowEntry(
        spec.to_json() + "\n",
        now if needs_restart or old is None else old.deployed_at,
        None if old is None else restart_token if restart_token is not None else old.token,
    )


def engine_text(
    engine: str,
    flows: Mapping[str, FlowEntry],
    spark_conf: Mapping[str, str],
    options: Mapping[str, Any],
    previous: EngineManifest | None,
    restarts: int,
    now: float | None,
) -> tuple[str, bool]:
    """An engine's file as text (pure) and whether its SparkApplication differs from `previous`'s (the operator
    resubmits it then). Its `reconciler/deployed-at`: `previous`'s while the application is the same, else `now`
    (None: none). Raises ValueError when the engine cannot be rendered (no image)."""
    docs = render_engine(engine, flows, spark_conf, options, restarts=restarts)
    app = docs[1]
    app_changed = previous is None or previous.docs[1].get("spec") != app["spec"]
    stamp = previous.deployed_at if previous is not None and not app_changed and previous.deployed_at else now
    if stamp is not None:
        app["metadata"]["annotations"]["reconciler/deployed-at"] = _iso(stamp)
    header = (
        f"# Rendered by the reconciler for engine {engine} (flows: {', '.join(sorted(flows))});"
        " `reconciler apply` rewrites this file.\n"
    )
    return header + yaml.dump_all(docs, Dumper=_NoAliasDumper, sort_keys=False, default_flow_style=False), app_changed


def crd_text() -> str:
    """The ReplicationEngine CRD's file (CRD_FILE), as render and apply write it beside the engines' files."""
    header = (
        "# The ReplicationEngine CRD: each engine's verdict for Argo CD and Flux (docs/gitops-controllers.md). Rendered by\n"
        "# the reconciler; the same file as deploy/kubernetes/replicationengine-crd.yaml.\n"
    )
    return header + yaml.dump(engine_status.crd(), Dumper=_NoAliasDumper, sort_keys=False, default_flow_style=False)


class KubernetesDeployer(Deployer):
    name = KUBERNETES

    def __init__(self, kubectl: str | None = None):
        self.kubectl = kubectl or settings.kubectl()

    def path(self, flow: str, options: Mapping[str, Any]) -> Path:
        """The file of the engine `flow` runs in (per `options`)."""
        return engine_file(engine_of(flow, options), options)

    @contextmanager
    def _locked(self, root: Path) -> Iterator[None]:
        """One change of a manifests directory at a time (apply handles the flows of a batch in parallel, and the
        flows of an engine share its file); a lock on the directory itself, no lock file in a GitOps tree."""
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    # --- reading back what was rendered -------------------------------------------------------
    @staticmethod
    def _engines(root: Path) -> list[EngineManifest]:
        out = []
        for path in sorted(root.glob(f"{ENGINE_PREFIX}*.yaml")) if root.is_dir() else []:
            found = EngineManifest.load(path)
            if found is not None:
                out.append(found)
        return out

    def _engine_deployment(self, em: EngineManifest) -> EngineDeployment:
        alive, detail, where = None, f"engine {em.engine}, manifest {em.path}", f"k8s {em.namespace}/{em.app_name}"
        if em.flows and em.options.get("kubectl_apply"):
            found = self._app_state(em.namespace, em.app_name)
            if found is not None:
                state, pod = found
                alive = state in ALIVE_STATES
                detail = f"engine {em.engine}: SparkApplication state {state}"
                if pod:
                    where += f", driver pod {pod}"
        mtime = em.path.stat().st_mtime
        flows = tuple(
            Deployment(
                flow,
                self.name,
                where,
                entry.spec,
                alive,
                min(entry.deployed_at or mtime, mtime),  # not known (0): the file's time
                False,
                None,
                detail,
                {**em.options, "engine": em.engine},
            )
            for flow, entry in em.flows.items()
        )
        return EngineDeployment(em.engine, self.name, where, alive, flows)

    def _legacy_deployment(self, path: Path) -> Deployment | None:
        """A manifest of the earlier layout (one SparkApplication per flow): reported without an engine."""
        read = _read_docs(path)
        if read is None:
            return None
        cm, app = read
        ann = app["metadata"].get("annotations") or {}
        flow = ann.get("reconciler/flow")
        if not flow:
            return None
        try:
            spec = JobSpec.from_json((cm.get("data") or {})["spec.json"])
        except Exception:  # noqa: BLE001
            spec = None
        options = _json(ann.get("reconciler/options"), {})
        ns, name = app["metadata"].get("namespace", "default"), app["metadata"]["name"]
        alive, detail, where = None, f"its own SparkApplication (earlier layout), manifest {path}", f"k8s {ns}/{name}"
        if options.get("kubectl_apply"):
            found = self._app_state(ns, name)
            if found is not None:
                state, pod = found
                alive = state in ALIVE_STATES
                detail = f"its own SparkApplication (earlier layout), state {state}"
                if pod:
                    where += f", driver pod {pod}"
        options.pop("engine", None)
        return Deployment(flow, self.name, where, spec, alive, path.stat().st_mtime, False, None, detail, options)

    def _app_state(self, ns: str, name: str) -> tuple[str, str | None] | None:
        """The SparkApplication's state and its driver pod's name (the operator's status.driverInfo)."""
        if shutil.which(self.kubectl) is None:
            return None
        try:
            out = subprocess.run(
                [self.kubectl, "get", "sparkapplication", name, "-n", ns, "-o", "json"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode != 0:
            return ("NOT_FOUND", None) if "NotFound" in out.stderr else None
        try:
            status = json.loads(out.stdout).get("status", {})
        except ValueError:
            return None
        return status.get("applicationState", {}).get("state") or "SUBMITTED", status.get("driverInfo", {}).get(
            "podName"
        )

    def engines(self, options: list[Mapping[str, Any]] | None = None) -> list[EngineDeployment]:
        """The engine files of the manifests directories of `options` (and the default one), and every manifest of
        the earlier layout (one SparkApplication per flow) as an engine without a name holding its flow."""
        roots = sorted({manifests_root(o) for o in (options or [])} | {manifests_root({})})
        out: list[EngineDeployment] = []
        earlier: list[EngineDeployment] = []
        for root in roots:
            out += [self._engine_deployment(em) for em in self._engines(root)]
            for path in sorted(root.glob(LEGACY_GLOB)) if root.is_dir() else []:
                dep = self._legacy_deployment(path)
                if dep is not None:
                    earlier.append(EngineDeployment(None, self.name, dep.where, dep.alive, (dep,)))
        return out + earlier

    # --- changes -------------------------------------------------------------------------------
    def _kubectl(self, *args: str) -> OpResult:
        if shutil.which(self.kubectl) is None:
            return OpResult.failed(f"kubectl_apply is on but {self.kubectl!r} is not on PATH")
        try:
            out = subprocess.run([self.kubectl, *args], capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return OpResult.failed(f"kubectl {' '.join(args)}: {exc}")
        if out.returncode != 0:
            return OpResult.failed(f"kubectl {' '.join(args)} failed: {(out.stderr or out.stdout).strip()[:500]}")
        return OpResult.success((out.stdout or "").strip().replace("\n", "; ")[:300])

    def _write_engine(
        self,
        path: Path,
        engine: str,
        flows: Mapping[str, FlowEntry],
        spark_conf: Mapping[str, str],
        options: Mapping[str, Any],
        previous: EngineManifest | None,
        restarts: int,
    ) -> tuple[OpResult, bool, bool]:
        """Render the engine's file (kept as it is when nothing in it changes); (result, whether the file changed,
        whether its SparkApplication did: the operator resubmits it)."""
        text, app_changed = engine_text(engine, flows, spark_conf, options, previous, restarts, time.time())
        crd = self._write_crd(path.parent, bool(options.get("kubectl_apply")))
        if crd is not None and not crd.ok:
            return crd, False, False
        try:
            if path.read_text() == text:
                return OpResult.already(f"{path} already renders this"), False, False
        except OSError:
            pass
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
        if options.get("kubectl_apply"):
            res = self._kubectl(*KUBECTL_APPLY, "-f", str(path))
            if not res.ok:
                return res, True, app_changed
            return OpResult.success(f"rendered {path}; kubectl apply: {res.message}"), True, app_changed
        return OpResult.success(f"rendered {path} (for your GitOps controller to sync)"), True, app_changed

    def _write_crd(self, root: Path, kubectl_apply: bool) -> OpResult | None:
        """The ReplicationEngine CRD beside the engines' files (CRD_FILE), written when it is missing or differs, and
        then applied first with `kubectl_apply` (the engines' files hold ReplicationEngines). None: already there."""
        path = root / CRD_FILE
        text = crd_text()
        try:
            if path.read_text() == text:
                return None
        except OSError:
            pass
        root.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
        return self._kubectl(*KUBECTL_APPLY, "-f", str(path)) if kubectl_apply else OpResult.success(f"rendered {path}")

    def _remove_from(self, em: EngineManifest, flow: str) -> OpResult:
        """Take `flow` out of an engine's file: the ConfigMap is rewritten, or the file goes with its last flow."""
        flows = {f: e for f, e in em.flows.items() if f != flow}
        if flows:
            res, _, _ = self._write_engine(em.path, em.engine, flows, em.spark_conf, em.options, em, em.restarts)
            n = len(flows)
            kept = f"{n} other flow{'s' if n != 1 else ''} kept running"
            return OpResult(res.code, f"removed from engine {em.engine} ({kept}): {res.message}")
        return self._delete_file(em.path, bool(em.options.get("kubectl_apply")), f"engine {em.engine}")

    def _delete_file(self, path: Path, kubectl_apply: bool, what: str) -> OpResult:
        if kubectl_apply:
            res = self._kubectl("delete", "-f", str(path), "--ignore-not-found")
            if not res.ok:
                return res
        path.unlink(missing_ok=True)
        return OpResult.success(f"{what} removed ({path})")

    def _leave(self, flow: str, root: Path, keep: Path | None, kubectl_apply: bool) -> OpResult:
        """`flow` leaves every engine file of `root` but `keep`, and its manifest of the earlier layout."""
        said: list[str] = []
        legacy = root / f"{resource_name(flow)}.yaml"
        if legacy.exists():
            dep = self._legacy_deployment(legacy)
            res = self._delete_file(
                legacy,
                kubectl_apply or bool(dep is not None and dep.options.get("kubectl_apply")),
                "its own SparkApplication of the earlier layout",
            )
            if not res.ok:
                return res
            said.append(res.message)
        for em in self._engines(root):
            if em.path != keep and flow in em.flows:
                res = self._remove_from(em, flow)
                if not res.ok:
                    return res
                said.append(res.message)
        return OpResult.success("; ".join(said)) if said else OpResult.already("")

    def _place(self, spec: JobSpec, options: Mapping[str, Any] | None, *, restart: bool) -> OpResult:
        """Make `spec.flow` run `spec` in its engine: added to, rewritten in or restarted in (a new restart token)
        the engine's ConfigMap; the SparkApplication changes only with the engine's own settings."""
        engine = engine_of(spec.flow, options)
        opts = {**(options or {}), "engine": engine}
        if not opts.get("image"):
            return OpResult.failed(
                f"flow {spec.flow}: the kubernetes deployer needs job.image (an image with the project installed)"
            )
        root = manifests_root(opts)
        path = engine_file(engine, opts)
        with self._locked(root):
            left = self._leave(spec.flow, root, path, bool(opts.get("kubectl_apply")))
            if not left.ok:
                return left
            previous = EngineManifest.load(path) if path.exists() else None
            flows = dict(previous.flows) if previous is not None else {}
            old = flows.get(spec.flow)
            current = old.spec if old is not None else None
            flows[spec.flow] = next_entry(old, spec, time.time(), str(time.time_ns()) if restart else None)
            restarts = previous.restarts if previous is not None else 0
            if restart and previous is not None and opts.get("kubectl_apply"):
                found = self._app_state(previous.namespace, previous.app_name)
                if found is not None and found[0] not in ALIVE_STATES:
                    restarts += 1  # the engine is not running: a changed annotation makes the operator resubmit it
            try:
                res, changed, app_changed = self._write_engine(
                    path, engine, flows, spec.engine.spark_conf, opts, previous, restarts
                )
            except ValueError as exc:
                return OpResult.failed(str(exc))
        moved = f"{left.message}; " if left.message else ""
        if not res.ok or (not changed and not moved):
            return OpResult(res.code, moved + res.message)
        if old is None:
            how = f"added to engine {engine}"
        elif restart or (current is not None and current.restart_fields(spec)) or current is None:
            how = f"restarted in place in engine {engine}"
        else:
            how = f"spec handed to the running flow in engine {engine} (hot reload, no restart)"
        if previous is not None and app_changed:
            how += "; the engine's own settings changed: the operator resubmits its SparkApplication (all its flows)"
        return OpResult(res.code, f"{moved}{how}; {res.message}")

    def apply(self, change: EngineChange) -> list[OpResult]:
        """The flow changes of the engine one after the other (each rewrites the engine's file under the lock)."""

        def one(fc: FlowChange) -> OpResult:
            if fc.op is FlowOp.REMOVE:
                return self._remove(fc.flow, fc.options)
            assert fc.spec is not None  # FlowChange checks it
            return self._place(fc.spec, {**fc.options, "engine": change.engine}, restart=fc.op is FlowOp.RESTART)

        return each_flow(change, one, parallel=False)

    def _remove(self, flow: str, options: Mapping[str, Any] | None = None) -> OpResult:
        """`flow` leaves every engine file of its manifests directory (and its manifest of the earlier layout)."""
        options = options or {}
        root = manifests_root(options)
        if not root.is_dir():
            return OpResult.already(f"no manifest of flow {flow} in {root}")
        with self._locked(root):
            res = self._leave(flow, root, None, bool(options.get("kubectl_apply")))
        if res.ok and not res.message:
            return OpResult.already(f"no manifest of flow {flow} in {root}")
        return res
