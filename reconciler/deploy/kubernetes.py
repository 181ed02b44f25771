"""`kubernetes` deployer: SparkApplication manifests for the Spark operator (sparkoperator.k8s.io/v1beta2).

Per flow one file `<manifests_dir>/mirror-<source>-to-<target>.yaml` with two documents:

* a ConfigMap holding the job spec (`spec.json`), mounted into the driver at
  /etc/reconciler/spec.json. The job re-reads that file every refresh interval, and Kubernetes
  updates mounted ConfigMaps in place, so hot-reloadable changes (`update`) only touch the
  ConfigMap: no restart.
* a SparkApplication (Python, cluster mode) running `jobs/mirror_job.py --spec ... --master inherit`
  from the image. Its driver carries the annotation `reconciler/restart-hash` (the hash of the
  spec fields a running job cannot take), so the operator resubmits the application exactly when
  a change needs a restart; `restartPolicy: Always` restarts it after a crash or an exit 3.

Secrets: the spec keeps `${ENV_VAR}` references; each becomes an environment variable of the
driver and the executors taken from the Kubernetes Secret `secret_name` (key = variable name,
`envSecretKeyRefs`). No secret value is ever rendered.

By default the files are only written, for a GitOps controller (Argo CD, Flux) to sync; with
`job.kubectl_apply: true` the deployer also runs `kubectl apply -f FILE` (and `kubectl delete -f`
on stop). Without kubectl the deployer cannot see pods: whether the job runs is read from the
status it publishes, like for every other deployer.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from reconciler import settings
from reconciler.adapters.base import OpResult
from reconciler.contract.deployers import INSTANCE_ENV, KUBERNETES
from reconciler.contract.flow_id import flow_ends
from reconciler.contract.metrics import KUBERNETES_PORT, PORT_ENV
from reconciler.contract.spec import JobSpec
from reconciler.deploy.base import Deployer, Deployment, restart_hash
from reconciler.topology.secrets import references

API_VERSION = "sparkoperator.k8s.io/v1beta2"
SPEC_MOUNT = "/etc/reconciler"
APP_ROOT = "/opt/reconciler"
DEFAULTS = {
    "namespace": "default",
    "image": None,
    "service_account": "spark-operator-spark",
    "secret_name": "reconciler-secrets",
    "manifests_dir": None,
    "kubectl_apply": False,
    "metrics_port": KUBERNETES_PORT,
}


def secret_env(refs: Mapping[str, Mapping[str, str]]) -> list[dict[str, Any]]:
    """Container `env` entries that read each variable from its Secret key (fresh dicts: no YAML anchors)."""
    return [{"name": n, "valueFrom": {"secretKeyRef": {"name": r["name"], "key": r["key"]}}} for n, r in refs.items()]


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
    """A DNS-1123 name for the flow's SparkApplication; a short hash keeps distinct flows distinct."""
    source, target, family = flow_ends(flow)
    readable = f"mirror-{source}-to-{target}" + (f"-{family}" if family else "")
    base = re.sub(r"[^a-z0-9-]+", "-", readable.lower()).strip("-")
    digest = hashlib.sha256(flow.encode()).hexdigest()[:6]
    return f"{base[: 63 - 7].rstrip('-')}-{digest}"


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


def render(
    spec: JobSpec,
    options: Mapping[str, Any],
    *,
    deployed_at: float | None = None,
    restarts: int = 0,
    spark_version: str | None = None,
) -> list[dict[str, Any]]:
    """The ConfigMap and SparkApplication of one job, as plain dicts (YAML-ready)."""
    opts = {**DEFAULTS, **{k: v for k, v in options.items() if v is not None}}
    if not opts["image"]:
        raise ValueError(
            f"flow {spec.flow}: the kubernetes deployer needs job.image (an image with the project installed)"
        )
    name = resource_name(spec.flow)
    ns = opts["namespace"]
    labels = {
        "app.kubernetes.io/name": "reconciler-mirror",
        "app.kubernetes.io/managed-by": "reconciler",
        "app.kubernetes.io/instance": name,
    }
    flow_note = {"reconciler/flow": spec.flow, "reconciler/spec-hash": spec.spec_hash()}
    if spec.git_revision:
        flow_note["reconciler/git-revision"] = spec.git_revision
    env_refs = {n: {"name": opts["secret_name"], "key": n} for n in secret_references(spec)}
    if spark_version is None:
        try:
            import pyspark

            spark_version = pyspark.__version__
        except ImportError:  # pragma: no cover
            spark_version = "4.0.0"
    pod_annotations = {"reconciler/restart-hash": restart_hash(spec)[:16]}
    port = int(opts["metrics_port"])
    if port:  # the driver serves the job's metrics (docs/monitoring.md); or deploy/monitoring/podmonitor.yaml
        pod_annotations.update(
            {"prometheus.io/scrape": "true", "prometheus.io/port": str(port), "prometheus.io/path": "/metrics"}
        )
    if restarts:
        pod_annotations["reconciler/restarts"] = str(restarts)
    conf = {
        "spark.python.worker.reuse": "true",
        "spark.ui.showConsoleProgress": "false",
        "spark.task.maxFailures": "1",
        "spark.executorEnv.PYTHONPATH": APP_ROOT,
        **{str(k): str(v) for k, v in spec.engine.spark_conf.items()},
    }
    driver: dict[str, Any] = {
        "cores": 1,
        "memory": "512m",
        "serviceAccount": opts["service_account"],
        "labels": dict(labels),
        "annotations": dict(pod_annotations),
        "volumeMounts": [{"name": "job-spec", "mountPath": SPEC_MOUNT, "readOnly": True}],
        "env": [
            {"name": "PYTHONPATH", "value": APP_ROOT},
            {"name": PORT_ENV, "value": str(port)},
            # One instance per driver pod: the operator's resubmission (restartPolicy) is a new pod, a new
            # instance, which a zombie driver of an earlier pod sees in the status topic and stops for.
            {"name": INSTANCE_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        ],
    }
    if port:
        driver["ports"] = [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]
    executor: dict[str, Any] = {
        "instances": spec.engine.parallelism,
        "cores": 1,
        "memory": "512m",
        "labels": dict(labels),
    }
    if env_refs:  # `env` with valueFrom.secretKeyRef (the operator's envSecretKeyRefs is deprecated)
        driver["env"] += secret_env(env_refs)
        executor["env"] = secret_env(env_refs)
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-spec", "namespace": ns, "labels": dict(labels), "annotations": dict(flow_note)},
        "data": {"spec.json": spec.to_json() + "\n"},
    }
    app_annotations = {**flow_note, "reconciler/options": json.dumps(dict(sorted(options.items())), sort_keys=True)}
    if deployed_at is not None:
        app_annotations["reconciler/deployed-at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(deployed_at))
    app = {
        "apiVersion": API_VERSION,
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": ns, "labels": dict(labels), "annotations": app_annotations},
        "spec": {
            "type": "Python",
            "pythonVersion": "3",
            "mode": "cluster",
            "image": opts["image"],
            "imagePullPolicy": "IfNotPresent",
            "mainApplicationFile": f"local://{APP_ROOT}/jobs/mirror_job.py",
            "arguments": ["--spec", f"{SPEC_MOUNT}/spec.json", "--master", "inherit"],
            "sparkVersion": spark_version,
            "sparkConf": dict(sorted(conf.items())),
            "restartPolicy": {"type": "Always", "onFailureRetryInterval": 10, "onSubmissionFailureRetryInterval": 20},
            "volumes": [{"name": "job-spec", "configMap": {"name": f"{name}-spec"}}],
            "driver": driver,
            "executor": executor,
        },
    }
    return [config_map, app]


class KubernetesDeployer(Deployer):
    name = KUBERNETES

    def __init__(self, kubectl: str | None = None):
        self.kubectl = kubectl or settings.kubectl()

    def path(self, flow: str, options: Mapping[str, Any]) -> Path:
        return manifests_root(options) / f"{resource_name(flow)}.yaml"

    # --- reading back what was rendered -------------------------------------------------------
    @staticmethod
    def _read(path: Path) -> tuple[dict, dict] | None:
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        except (OSError, yaml.YAMLError):
            return None
        cm = next((d for d in docs if d.get("kind") == "ConfigMap"), None)
        app = next((d for d in docs if d.get("kind") == "SparkApplication"), None)
        return (cm, app) if cm and app else None

    def _deployment(self, path: Path) -> Deployment | None:
        read = self._read(path)
        if read is None:
            return None
        cm, app = read
        ann = app["metadata"].get("annotations", {})
        flow = ann.get("reconciler/flow")
        if not flow:
            return None
        try:
            spec = JobSpec.from_json(cm["data"]["spec.json"])
        except Exception:  # noqa: BLE001
            spec = None
        try:
            options = json.loads(ann.get("reconciler/options", "{}"))
        except ValueError:
            options = {}
        ns, name = app["metadata"].get("namespace", "default"), app["metadata"]["name"]
        alive, detail, where = None, f"manifest {path}", f"k8s {ns}/{name}"
        if options.get("kubectl_apply"):
            found = self._app_state(ns, name)
            if found is not None:
                state, pod = found
                alive = state in ("RUNNING", "SUBMITTED", "PENDING_RERUN", "INVALIDATING", "SUCCEEDING")
                detail = f"SparkApplication state {state}"
                if pod:
                    where += f", driver pod {pod}"
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

    def inspect(self, flow: str, options: Mapping[str, Any] | None = None) -> Deployment | None:
        path = self.path(flow, options or {})
        return self._deployment(path) if path.exists() else None

    def deployments(self, options: list[Mapping[str, Any]] | None = None) -> list[Deployment]:
        roots = sorted({manifests_root(o) for o in (options or [])} | {manifests_root({})})
        out = []
        for root in roots:
            for path in sorted(root.glob("mirror-*.yaml")) if root.exists() else []:
                dep = self._deployment(path)
                if dep is not None:
                    out.append(dep)
        return out

    # --- changes -------------------------------------------------------------------------------
    def _write(self, spec: JobSpec, options: Mapping[str, Any], *, restart: bool) -> OpResult:
        path = self.path(spec.flow, options)
        previous = self._read(path) if path.exists() else None
        deployed_at, restarts = time.time(), 0
        if previous is not None:
            _, app = previous
            pod_ann = app["spec"].get("driver", {}).get("annotations", {})
            restarts = int(pod_ann.get("reconciler/restarts", "0"))
            if restart and pod_ann.get("reconciler/restart-hash") == restart_hash(spec)[:16]:
                restarts += 1  # same spec, job down: a changed annotation makes the operator resubmit it
            if not restart:
                stamp = app["metadata"].get("annotations", {}).get("reconciler/deployed-at")
                deployed_at = _parse_iso(stamp) or deployed_at
        try:
            docs = render(spec, options, deployed_at=deployed_at, restarts=restarts)
        except ValueError as exc:
            return OpResult.failed(str(exc))
        path.parent.mkdir(parents=True, exist_ok=True)
        text = (
            f"# Rendered by the reconciler for flow {spec.flow}; `reconciler apply` rewrites this file.\n"
            + yaml.dump_all(docs, Dumper=_NoAliasDumper, sort_keys=False, default_flow_style=False)
        )
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
        if options.get("kubectl_apply"):
            res = self._kubectl("apply", "-f", str(path))
            if not res.ok:
                return res
            return OpResult.success(f"rendered {path}; kubectl apply: {res.message}")
        return OpResult.success(f"rendered {path} (for your GitOps controller to sync)")

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

    def deploy(self, spec: JobSpec, options: Mapping[str, Any] | None = None) -> OpResult:
        current = self.inspect(spec.flow, options)
        if (
            current is not None
            and current.spec_hash == spec.spec_hash()
            and dict(current.options) == dict(options or {})
        ):
            return OpResult.already(f"manifest already renders this spec ({self.path(spec.flow, options or {})})")
        return self._write(spec, options or {}, restart=False)

    def update(self, spec: JobSpec, options: Mapping[str, Any] | None = None) -> OpResult:
        return self._write(spec, options or {}, restart=False)

    def restart(self, spec: JobSpec, options: Mapping[str, Any] | None = None) -> OpResult:
        return self._write(spec, options or {}, restart=True)

    def stop(self, flow: str, options: Mapping[str, Any] | None = None) -> OpResult:
        options = options or {}
        path = self.path(flow, options)
        if not path.exists():
            return OpResult.already(f"no manifest {path}")
        dep = self._deployment(path)
        if dep is not None and dep.options.get("kubectl_apply"):
            res = self._kubectl("delete", "-f", str(path), "--ignore-not-found")
            if not res.ok:
                return res
        path.unlink()
        return OpResult.success(f"removed {path}")


def _parse_iso(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        import calendar

        return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None
