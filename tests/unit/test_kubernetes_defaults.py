"""A compare after sync is empty: every document the kubernetes deployer renders is what the API server and the
controllers store of it, so Argo CD and Flux see nothing to sync once it is synced.

What stores a default into an object, restated here as each does it:

- the API server, from a CRD's OpenAPI schema: each `default:` of a field absent from an object present (the
  SparkApplication CRDs vendored in tests/unit/k8s/; the ReplicationEngine CRD, which has none);
- the API server's own defaults of the built-in kinds rendered: a CustomResourceDefinition's `conversion.strategy`,
  `names.singular` and `names.listKind`; a RoleBinding subject's `apiGroup` (empty for a ServiceAccount, so nothing
  is stored); a ConfigMap and a Role have none;
- the Spark operator's mutating webhook (enabled by its chart by default), on a SparkApplication created or changed:
  `SetSparkApplicationDefaults` (api/v1beta2/defaults.go) of v2.5.2, `defaultSparkApplication`
  (internal/webhook/sparkapplication_defaulter.go) of v2.1.1.

The one difference left, explained in docs/gitops-controllers.md: operator v2.4 and later store
`spec.dynamicAllocation.shuffleTrackingEnabled: true`, a field the CRD of v2.1 to v2.3 does not have (their API server
would prune it from the manifest: a difference on those clusters for ever). Argo CD's diff ignores a field the manifest
does not set (three-way and server-side diff alike), and so does Flux's (server-side dry-run apply).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from reconciler.contract import engine_status
from reconciler.deployers.kubernetes import crd_text
from tests.unit.test_kubernetes_crd import CRDS, crd_schema, manifests


# --- what stores defaults ------------------------------------------------------------------------------------
def openapi_defaults(obj: Any, schema: dict[str, Any]) -> Any:
    """The API server's structural defaulting: a `default:` is set where its field is absent from an object that is
    there, recursively (arrays item by item, maps value by value); a subtree that preserves unknown fields without
    listing properties is left as it is."""
    if isinstance(obj, dict):
        props = schema.get("properties") or {}
        out = {}
        for key, value in obj.items():
            sub = props.get(key) or (
                schema.get("additionalProperties") if isinstance(schema.get("additionalProperties"), dict) else None
            )
            out[key] = openapi_defaults(value, sub) if sub else copy.deepcopy(value)
        for key, sub in props.items():
            if key not in out and "default" in sub:
                out[key] = openapi_defaults(copy.deepcopy(sub["default"]), sub)
        return out
    if isinstance(obj, list):
        items = schema.get("items") or {}
        return [openapi_defaults(v, items) for v in obj]
    return obj


def operator_defaults(app: dict[str, Any], version: str) -> dict[str, Any]:
    """The Spark operator's webhook on a new or changed SparkApplication (v2.1.1 or v2.5.2, as their source has it)."""
    app = copy.deepcopy(app)
    spec, conf = app["spec"], app["spec"].get("sparkConf") or {}
    if version == "v2.5.2":
        spec.setdefault("type", "Scala")
    spec.setdefault("mode", "cluster")
    policy = spec.setdefault("restartPolicy", {})
    policy.setdefault("type", "Never")
    if policy["type"] != "Never":
        policy.setdefault("onFailureRetryInterval", 5)
        policy.setdefault("onSubmissionFailureRetryInterval", 5)
    alloc = spec.get("dynamicAllocation")
    if version == "v2.5.2":
        for role in ("driver", "executor"):
            if f"spark.{role}.cores" not in conf:
                spec[role].setdefault("cores", 1)
            if f"spark.{role}.memory" not in conf:
                spec[role].setdefault("memory", "1g")
        dynamic = alloc["enabled"] if alloc is not None else conf.get("spark.dynamicallocation.enabled") == "true"
        if dynamic and alloc is not None:
            alloc.setdefault("shuffleTrackingEnabled", True)
    else:
        dynamic = bool(alloc and alloc.get("enabled")) or conf.get("spark.dynamicAllocation.enabled") == "true"
    if not dynamic and not conf.get("spark.executor.instances"):
        spec["executor"].setdefault("instances", 1)
    return app


def apiserver_defaults(doc: dict[str, Any]) -> dict[str, Any]:
    """The API server's defaults of the built-in kinds the deployer renders (and the ReplicationEngine's CRD's)."""
    doc = copy.deepcopy(doc)
    if doc["kind"] == "CustomResourceDefinition":
        names = doc["spec"]["names"]
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
        doc["spec"].setdefault("conversion", {"strategy": "None"})
    elif doc["kind"] == "RoleBinding":
        for subject in doc["subjects"]:
            if subject["kind"] != "ServiceAccount":
                subject.setdefault("apiGroup", "rbac.authorization.k8s.io")
    elif doc["kind"] == engine_status.KIND:
        doc = openapi_defaults(doc, engine_status.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    return doc


def stored(doc: dict[str, Any], crd: Any) -> dict[str, Any]:
    """What the cluster stores of a rendered document (`crd`: the SparkApplication CRD's file it is checked for)."""
    if doc["kind"] != "SparkApplication":
        return apiserver_defaults(doc)
    version = crd.stem.removeprefix("sparkapplication-")
    return openapi_defaults(operator_defaults(doc, version), crd_schema(crd))


def diff(a: Any, b: Any, at: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            d for k in sorted(set(a) | set(b)) for d in diff(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{at}/{k}")
        ]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, f"{at}/{i}")]
    return [] if a == b else [f"{at}: rendered {json.dumps(a)}, stored {json.dumps(b)}"]


#: What operator v2.4 and later store that the manifests cannot hold while v2.1 to v2.3 are supported (module doc).
SHUFFLE_TRACKING = '/spec/dynamicAllocation/shuffleTrackingEnabled: rendered "<absent>", stored true'


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return manifests()


# --- the tests -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("crd", CRDS, ids=lambda p: p.stem)
def test_what_is_stored_of_every_rendered_document_is_what_was_rendered(rendered, crd):
    assert len(rendered) >= 8
    for case, docs in rendered.items():
        assert [d["kind"] for d in docs] == [
            "ConfigMap",
            "SparkApplication",
            "ReplicationEngine",
            "Role",
            "RoleBinding",
        ]
        for doc in docs:
            found = diff(doc, stored(doc, crd))
            if doc["kind"] == "SparkApplication" and crd.stem.endswith("v2.5.2"):
                assert found == [SHUFFLE_TRACKING], (case, found)
            else:
                assert found == [], (case, doc["kind"], found)


def test_the_crd_file_is_stored_as_rendered():
    doc = yaml.safe_load(crd_text())
    assert diff(doc, apiserver_defaults(doc)) == []


@pytest.mark.parametrize("crd", CRDS, ids=lambda p: p.stem)
def test_the_check_finds_what_a_default_would_add(rendered, crd):
    """Without a field a defaulter fills, the stored object differs: the check above would say so."""
    _, app, *_ = copy.deepcopy(rendered["one flow"])
    del app["spec"]["mode"], app["spec"]["restartPolicy"]["onFailureRetryInterval"]
    app["spec"]["driver"]["sidecars"] = [{"name": "s", "ports": [{"containerPort": 1}]}]  # the CRD defaults protocol
    found = {d.split(":")[0] for d in diff(app, stored(app, crd))}
    assert {
        "/spec/mode",
        "/spec/restartPolicy/onFailureRetryInterval",
        "/spec/driver/sidecars/0/ports/0/protocol",
    } <= found
    doc = yaml.safe_load(crd_text())
    del doc["spec"]["conversion"], doc["spec"]["names"]["listKind"]
    assert len(diff(doc, apiserver_defaults(doc))) == 2


def test_fields_equal_to_what_spark_or_the_operator_take_when_absent_are_not_rendered(rendered):
    """Left out: nothing stores them, and each is what applies without it (Spark's pull policy and initial executors,
    Python 3, the operator's shuffle tracking with dynamicAllocation, a container port's protocol)."""
    for case, (_, app, *_) in rendered.items():
        spec = app["spec"]
        assert "imagePullPolicy" not in spec and "pythonVersion" not in spec, case
        assert "initialExecutors" not in spec["dynamicAllocation"], case
        assert "spark.dynamicAllocation.shuffleTracking.enabled" not in spec["sparkConf"], case
        for port in spec["driver"]["template"]["spec"]["containers"][0].get("ports", []):
            assert "protocol" not in port, case
