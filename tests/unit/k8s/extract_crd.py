"""Reduce the Spark operator's SparkApplication CRD to what tests/unit/test_kubernetes_crd.py checks against: its
v1beta2 openAPIV3Schema without the `description` texts (the operator's API docs: 70% of the file). Usage, in a
mirror of github.com/kubeflow/spark-operator:

    git show TAG:charts/spark-operator-chart/crds/sparkoperator.k8s.io_sparkapplications.yaml \
        | python tests/unit/k8s/extract_crd.py > tests/unit/k8s/sparkapplication-TAG.json
"""

from __future__ import annotations

import json
import sys
from typing import Any

import yaml


def strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def main() -> int:
    crd = yaml.safe_load(sys.stdin)
    assert crd["kind"] == "CustomResourceDefinition" and crd["spec"]["names"]["kind"] == "SparkApplication"
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    out = {
        "apiVersion": crd["apiVersion"],
        "kind": crd["kind"],
        "metadata": {"name": crd["metadata"]["name"], "annotations": crd["metadata"].get("annotations", {})},
        "version": "v1beta2",
        "openAPIV3Schema": strip(version["schema"]["openAPIV3Schema"]),
    }
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
