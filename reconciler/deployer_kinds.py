"""The deployers: the one list of the ways a replication job can be run, and the `local[N]` master rule.

Below every layer that names a deployer (the settings registry's `job.deployer` takes its choices from
`DeployerKind`, the topology's checks, the contract, the deployers themselves), so each name is written once.
"""

from __future__ import annotations

import enum
import re


class DeployerKind(enum.StrEnum):
    """A deployer, as `job.deployer` names it (a str: it compares equal to the name, and formats as it)."""

    LOCAL = "local"  # a process on this machine
    SPARK_STANDALONE = "spark-standalone"  # a process on this machine, submitting to a Spark standalone master
    KUBERNETES = "kubernetes"  # a SparkApplication for the Spark operator


DEFAULT_DEPLOYER = DeployerKind.LOCAL

#: Deployers that run the job as a process on this machine and share one state directory.
PROCESS_DEPLOYERS: frozenset[DeployerKind] = frozenset({DeployerKind.LOCAL, DeployerKind.SPARK_STANDALONE})

_LOCAL_MASTER = re.compile(r"local\[(\d+)\]")


def local_threads(master: str) -> int | None:
    """N of a `local[N]` master (None: another master). An engine's `local[N]` is raised to its flows' task slots
    anyway (contract/deployers.py `local_slots`), so two `local[N]` masters agree whatever their N."""
    m = _LOCAL_MASTER.fullmatch(master.strip())
    return int(m.group(1)) if m else None
