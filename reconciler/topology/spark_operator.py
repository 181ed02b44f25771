"""The Spark operator's rules on a SparkApplication's `sparkConf` (kubeflow/spark-operator), and the keys the
kubernetes deployer sets itself: their one home. `reconciler validate` warns about a `job.spark_conf` key of a
kubernetes flow found here (topology/build.py); the deployer (reconciler/deployers/kubernetes.py) renders the
keys it owns; tests/unit/test_kubernetes_crd.py checks the rendered manifests against the webhook's rules.

Restated from the operator's validating webhook, v2.5.2 (`internal/webhook/sparkconf_validator.go`; the vendored
CRDs and their origin: tests/unit/k8s/README.md). Earlier operators (v2.1 to v2.4) accept these keys but then
override or ignore them, so they are a mistake with any operator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

_SERVICE_ACCOUNT = "configure the service account via the CRD spec instead (job.service_account)"
_CREDENTIALS = "authentication credentials are managed by the operator"
_MASTER = "this value is managed by the operator"
_IMAGE = "use the image field on the CRD instead (job.image)"

#: sparkConf keys the operator's validating webhook denies (the application is rejected), with its reason.
DENIED_SPARK_CONF: Mapping[str, str] = {
    "spark.kubernetes.authenticate.driver.serviceAccountName": _SERVICE_ACCOUNT,
    "spark.kubernetes.authenticate.executor.serviceAccountName": _SERVICE_ACCOUNT,
    "spark.kubernetes.authenticate.oauthTokenFile": _CREDENTIALS,
    "spark.kubernetes.authenticate.oauthToken": _CREDENTIALS,
    "spark.kubernetes.authenticate.driver.oauthTokenFile": _CREDENTIALS,
    "spark.kubernetes.authenticate.driver.oauthToken": _CREDENTIALS,
    "spark.kubernetes.authenticate.executor.oauthTokenFile": _CREDENTIALS,
    "spark.kubernetes.authenticate.executor.oauthToken": _CREDENTIALS,
    "spark.master": _MASTER,
    "spark.kubernetes.driver.master": _MASTER,
    "spark.kubernetes.container.image": _IMAGE,
    "spark.kubernetes.driver.container.image": _IMAGE,
    "spark.kubernetes.executor.container.image": _IMAGE,
}

#: The one key the webhook accepts only with one value: the application's namespace.
NAMESPACE_KEY = "spark.kubernetes.namespace"

_TEMPLATES = "the kubernetes deployer renders the driver's and executors' pod templates; the operator sets this"
#: sparkConf keys the deployer or the operator sets from other settings: a value in job.spark_conf is overridden
#: (the operator passes its own after sparkConf) or breaks what the deployer renders.
OWNED_SPARK_CONF: Mapping[str, str] = {
    "spark.kubernetes.driver.podTemplateFile": _TEMPLATES,
    "spark.kubernetes.executor.podTemplateFile": _TEMPLATES,
    "spark.kubernetes.driver.podTemplateContainerName": _TEMPLATES,
    "spark.kubernetes.executor.podTemplateContainerName": _TEMPLATES,
    "spark.dynamicAllocation.enabled": "the deployer enables dynamic allocation (its executors follow the flows' "
    "tasks, between spark.dynamicAllocation.minExecutors and maxExecutors)",
    "spark.submit.deployMode": "the operator submits in cluster mode",
    "spark.app.name": "the operator names the application after the SparkApplication (the engine)",
    "spark.kubernetes.driver.pod.name": "the operator names the driver pod after the SparkApplication",
}


@dataclass(frozen=True)
class SparkConfProblem:
    """A `job.spark_conf` key the operator denies (`denied`) or the deployer/operator owns."""

    key: str
    reason: str
    denied: bool


def spark_conf_problems(spark_conf: Mapping[str, object], namespace: str) -> list[SparkConfProblem]:
    """The keys of an engine's spark_conf the operator denies or that are not the user's to set, in key order."""
    out: list[SparkConfProblem] = []
    for key in sorted(spark_conf):
        value = str(spark_conf[key])
        if key in DENIED_SPARK_CONF:
            out.append(SparkConfProblem(key, DENIED_SPARK_CONF[key], True))
        elif key == NAMESPACE_KEY and value != namespace:
            out.append(
                SparkConfProblem(key, f"must equal the application namespace {namespace!r} (job.namespace)", True)
            )
        elif key in OWNED_SPARK_CONF:
            out.append(SparkConfProblem(key, OWNED_SPARK_CONF[key], False))
    return out
