"""Job deployers (see reconciler.deployers.base for the interface)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reconciler.contract.deployers import DEPLOYER_NAMES, KUBERNETES, LOCAL, SPARK_STANDALONE, deployer_family
from reconciler.deployers.base import Deployer, Deployment
from reconciler.deployers.kubernetes import KubernetesDeployer
from reconciler.deployers.local import LocalDeployer, ProcessDeployer
from reconciler.deployers.standalone import StandaloneDeployer


class Deployers:
    """The deployers of one run, by name (local and spark-standalone share a state directory)."""

    def __init__(self, root: Path | None = None, kubectl: str | None = None):
        self.by_name: dict[str, Deployer] = {
            LOCAL: LocalDeployer(root),
            SPARK_STANDALONE: StandaloneDeployer(root),
            KUBERNETES: KubernetesDeployer(kubectl),
        }

    def get(self, name: str) -> Deployer:
        try:
            return self.by_name[name]
        except KeyError:
            raise ValueError(f"unknown job deployer {name!r} (known: {', '.join(DEPLOYER_NAMES)})") from None

    def deployments(self, options: list[Mapping[str, Any]] | None = None) -> list[Deployment]:
        out: list[Deployment] = []
        for d in self.by_name.values():
            out += d.deployments(options)
        return out

    @staticmethod
    def family(name: str) -> str:
        """Deployers that share state: a local job and a spark-standalone job of one flow are the same job."""
        return deployer_family(name)


__all__ = [
    "Deployer",
    "Deployers",
    "Deployment",
    "KubernetesDeployer",
    "LocalDeployer",
    "ProcessDeployer",
    "StandaloneDeployer",
    "DEPLOYER_NAMES",
]
