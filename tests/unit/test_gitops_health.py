"""What Argo CD and Flux make of an engine's ReplicationEngine, on statuses a real engine wrote.

The fixtures tests/unit/k8s/replicationengine-*.json are ReplicationEngines as an engine left them: captured from
tests/integration/test_k8s_stop.py (a real engine in a driver pod's shape, real brokers; tests/unit/k8s/README.md
says how). Argo CD's health check (deploy/argocd/health.lua) runs here in a real Lua (lupa), the way Argo CD runs it:
the object as the global `obj`, the script's returned table read for `status` and `message`. Flux's expressions
(deploy/flux/kustomization.yaml `healthCheckExprs`) run in a CEL evaluator (cel-python), in the order Flux's
kustomize-controller evaluates them (fluxcd/pkg runtime/cel `StatusEvaluator`: a status.observedGeneration other than
metadata.generation is InProgress; then inProgress, failed, current; none true: InProgress)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from lupa import LuaRuntime

from reconciler.contract.engine_status import API_VERSION, ARGOCD_KEY, KIND, crd
from tests.unit.test_kubernetes_crd import Validator, strict

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent / "k8s"
LUA = ROOT / "deploy" / "argocd" / "health.lua"
#: each captured fixture, and what Argo CD and Flux make of it
CASES = {
    "progressing": ("Progressing", "InProgress"),
    "healthy": ("Healthy", "Current"),
    "degraded": ("Degraded", "Failed"),
    "suspended": ("Suspended", "Current"),
}


def fixture(name: str) -> dict[str, Any]:
    return json.loads((HERE / f"replicationengine-{name}.json").read_text())


def argocd(obj: dict[str, Any]) -> tuple[str, str]:
    """Argo CD's health of `obj` by deploy/argocd/health.lua: (status, message)."""
    lua = LuaRuntime(unpack_returned_tuples=True)
    lua.globals().obj = lua.table_from(obj, recursive=True)
    hs = lua.execute(LUA.read_text())
    return hs["status"], hs["message"]


def _exprs() -> dict[str, str]:
    doc = yaml.safe_load((ROOT / "deploy" / "flux" / "kustomization.yaml").read_text())
    [check] = doc["spec"]["healthCheckExprs"]
    assert (check["apiVersion"], check["kind"]) == (API_VERSION, KIND)
    return check


def flux(obj: dict[str, Any]) -> str:
    """Flux's status of `obj` (kstatus: InProgress, Failed, Current) by the Kustomization's healthCheckExprs."""
    observed = (obj.get("status") or {}).get("observedGeneration")
    if isinstance(observed, int) and observed != obj["metadata"].get("generation"):
        return "InProgress"
    env = celpy.Environment()
    activation = {key: celpy.json_to_cel(value) for key, value in obj.items()}
    check = _exprs()
    for key, status in (("inProgress", "InProgress"), ("failed", "Failed"), ("current", "Current")):
        if key not in check:
            continue
        result = env.program(env.compile(check[key])).evaluate(activation)
        if not isinstance(result, celpy.celtypes.BoolType):
            raise ValueError(f"{key}: {result!r}")  # Flux: the evaluation failed, the object is not ready
        if result:
            return status
    return "InProgress"


def test_the_fixtures_are_what_an_engine_wrote_in_each_phase():
    for name in CASES:
        obj = fixture(name)
        assert obj["apiVersion"] == API_VERSION and obj["kind"] == KIND, name
        assert obj["status"]["phase"].lower() == {"healthy": "ready"}.get(name, name), name
        assert obj["status"]["instance"], "written by a driver pod (its uid)"
        schema = strict(crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
        assert [e.message for e in Validator(schema).iter_errors(obj)] == [], name


@pytest.mark.parametrize("name", sorted(CASES))
def test_argo_cd_reads_each_captured_status_as_its_health(name):
    status, message = argocd(fixture(name))
    assert status == CASES[name][0]
    assert message == fixture(name)["status"]["message"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_flux_reads_each_captured_status_as_its_health(name):
    assert flux(fixture(name)) == CASES[name][1]


def test_before_the_engine_judged_the_synced_generation_both_wait():
    obj = fixture("healthy")
    obj["metadata"]["generation"] += 1  # a sync changed the spec; the engine has not judged it yet
    assert argocd(obj)[0] == "Progressing" and "judge generation" in argocd(obj)[1]
    assert flux(obj) == "InProgress"
    bare = {k: v for k, v in fixture("healthy").items() if k != "status"}  # synced, no engine has written yet
    assert argocd(bare) == ("Progressing", "Waiting for the engine to publish its verdict")
    with pytest.raises(Exception):  # noqa: B017 - Flux too: `status` does not exist yet, so it waits (its docs)
        flux(bare)


def test_argo_cd_takes_degraded_over_progressing_as_flux_does_not_need_to():
    """The engine sets exactly one of the three True (Suspended: none); were both set, Argo CD says Degraded."""
    obj = copy.deepcopy(fixture("degraded"))
    for c in obj["status"]["conditions"]:
        c["status"] = "True" if c["type"] in ("Degraded", "Progressing") else "False"
    assert argocd(obj)[0] == "Degraded"
    assert [c["type"] for c in fixture("degraded")["status"]["conditions"] if c["status"] == "True"] == ["Degraded"]


def test_the_argocd_cm_snippet_holds_the_script_under_its_key():
    cm = yaml.safe_load((ROOT / "deploy" / "argocd" / "argocd-cm.yaml").read_text())
    assert cm["data"] == {ARGOCD_KEY: LUA.read_text()}
    assert ARGOCD_KEY == "resource.customizations.health.replication.reconciler.dev_ReplicationEngine"


def test_the_shipped_crd_is_the_rendered_one():
    from reconciler.deployers.kubernetes import crd_text

    assert (ROOT / "deploy" / "kubernetes" / "replicationengine-crd.yaml").read_text() == crd_text()
    assert yaml.safe_load(crd_text()) == crd()
