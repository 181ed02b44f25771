"""Files the installed package needs at run time, found with `importlib.resources`.

The topology and plan JSON Schemas, the spark-submit entry point of a replication job and the demo topology
live at the top of the repository (`schemas/`, `jobs/`, `topologies/demo/`), where users and the
design expect them; this package holds symbolic links to them, which the wheel build turns into
real files. So a checkout, an editable install and `pip install .` all find the same bytes, and
`tests/unit/test_packaging.py` checks that the wheel carries them.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

_PACKAGE = "reconciler.resources"


def _path(*parts: str) -> Path:
    """A real file-system path (wheels are installed unpacked, so the traversable is one)."""
    path = Path(str(resources.files(_PACKAGE).joinpath(*parts)))
    if not path.exists():
        raise FileNotFoundError(
            f"{'/'.join(parts)} is missing from the installed package at {path}; "
            "reinstall the package (pip install --force-reinstall kafka-replication-reconciler)"
        )
    return path


def schema_path() -> Path:
    """`topology.schema.json` (draft 2020-12), the single source of truth for the topology's shape."""
    return _path("topology.schema.json")


def plan_schema_path() -> Path:
    """`plan.schema.json` (draft 2020-12): the shape of the plan JSON (`plan --format json`, saved plans' `plan`)."""
    return _path("plan.schema.json")


def job_script() -> Path:
    """The spark-submit entry point of a replication job (`mirror_job.py --spec FILE`)."""
    return _path("mirror_job.py")


def demo_topology() -> Path:
    """The directory of the demo topology that `reconciler demo` applies."""
    return _path("demo")


def import_root() -> Path:
    """The directory that holds the `reconciler` package: what a Spark worker needs on PYTHONPATH."""
    return Path(__file__).resolve().parents[2]
