"""The job image's Dockerfile: linted with hadolint (a binary wheel of the [test] extra), consistent with what the
Kubernetes deployer renders, and with the project's own Python and pyspark (pyproject's requires-python, the Python
CI tests, constraints.txt). Building it needs a Docker engine (the `image` workflow does); what can run here does:
the job's entry point under the image's Python, and the image's entrypoint.sh starting spark-submit from the pyspark
wheel the way the operator's driver pod calls it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from reconciler.deployers.kubernetes import APP_ROOT, render
from tests.dev_tools import tool
from tests.plan_helpers import topology

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
ENTRYPOINT = ROOT / "deploy" / "image" / "entrypoint.sh"


def _pinned(package: str) -> str:
    m = re.search(rf"^{package}==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M | re.I)
    assert m, f"constraints.txt pins {package}"
    return m.group(1)


def _image_python() -> str:
    m = re.search(r"^ARG PYTHON_VERSION=(\d+\.\d+)$", DOCKERFILE, re.M)
    assert m, "the Dockerfile names its Python minor in ARG PYTHON_VERSION"
    return m.group(1)


def _image_interpreter() -> str:
    """A Python of the image's minor version with the project's dependencies: this one, or pyenv's of that minor
    (which has no pyspark: then the test says so)."""
    minor = _image_python()
    if f"{sys.version_info.major}.{sys.version_info.minor}" == minor:
        return sys.executable
    found = sorted(Path(os.path.expanduser("~/.pyenv/versions")).glob(f"{minor}.*/bin/python3"))
    if not found:
        pytest.skip(f"no Python {minor} here (pyenv install {minor})")
    probe = subprocess.run([str(found[-1]), "-c", "import pyspark"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(
            f"Python {minor} ({found[-1]}) has no pyspark: create a venv of it with pip install -c constraints.txt .[spark]"
        )
    return str(found[-1])


def test_hadolint_passes():
    r = subprocess.run([tool("hadolint"), "--no-color", "Dockerfile"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_shellcheck_passes_on_the_entrypoint():
    r = subprocess.run([tool("shellcheck"), "-x", str(ENTRYPOINT)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert os.access(ENTRYPOINT, os.X_OK), "COPY keeps the file's mode: the entrypoint must be executable in git"


def test_image_holds_the_entry_point_where_the_manifests_look():
    text = DOCKERFILE
    assert f"WORKDIR {APP_ROOT}" in text and re.search(r"^COPY jobs \./jobs$", text, re.M)
    copied = {src for line in re.findall(r"^COPY (.+) \S+$", text, re.M) for src in line.split()}
    assert {"reconciler", "schemas", "jobs", "pyproject.toml", "constraints.txt", "LICENSE"} <= copied
    assert re.search(r"^USER 185$", text, re.M), "the job runs as the Spark images' unprivileged user"
    assert re.search(r"^COPY deploy/image/entrypoint\.sh /opt/entrypoint\.sh$", text, re.M)
    assert re.search(r'^ENTRYPOINT \["/opt/entrypoint\.sh"\]$', text, re.M), "the entry point the operator calls"
    assert re.search(r"^ENV SPARK_HOME=/opt/spark", text, re.M)


def test_the_images_python_and_pyspark_are_the_projects():
    pyproject = (ROOT / "pyproject.toml").read_text()
    requires = re.search(r'^requires-python = "([^"]+)"', pyproject, re.M).group(1)  # type: ignore[union-attr]
    minor = _image_python()
    assert Version(f"{minor}.0") in SpecifierSet(requires), f"Python {minor} is outside requires-python {requires}"
    test_workflow = (ROOT / ".github" / "workflows" / "test.yml").read_text()
    assert f'python-version: "{minor}"' in test_workflow, "the image runs the Python minor the tests run"
    # Python's image by default; any bookworm base with python3 and its venv module (BASE_IMAGE: the test suite's
    # image made from Debian's packages, tests/integration/test_image.py)
    assert re.search(r"^ARG BASE_IMAGE=python:\$\{PYTHON_VERSION\}-slim-bookworm$", DOCKERFILE, re.M)
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", DOCKERFILE, re.M)
    assert not re.search(r"^FROM .*apache/spark", DOCKERFILE, re.M) and not re.search(r"pyspark[=<>~]", DOCKERFILE)
    # pyspark (and pyarrow) come only from the `spark` extra, hash-locked at the versions of constraints.txt
    assert re.search(r"pip install --no-cache-dir --require-hashes --no-deps -r requirements/image\.txt", DOCKERFILE)
    assert re.search(r"pip install --no-cache-dir --no-deps --no-build-isolation \.;", DOCKERFILE)
    spark_extra = re.search(r"^spark = \[(.+)\]", pyproject, re.M).group(1)  # type: ignore[union-attr]
    pyspark_spec = re.search(r'"pyspark([^"]+)"', spark_extra).group(1)  # type: ignore[union-attr]
    pinned = _pinned("pyspark")
    assert Version(pinned) in SpecifierSet(pyspark_spec)
    # the SparkApplication says the Spark version the image runs (the pyspark of the tests, from constraints.txt)
    import pyspark

    assert pyspark.__version__ == pinned, "the tests run constraints.txt's pyspark (scripts/bootstrap.sh)"
    topo = topology("flows:\n  - {source: west, target: east, job: {deployer: kubernetes, image: img:1}}")
    from reconciler.contract.spec import JobSpec

    _, app, *_ = render(JobSpec.from_flow(topo, topo.flows[0]), {"image": "img:1"})
    assert app["spec"]["sparkVersion"] == pinned


def test_the_job_entry_point_runs_under_the_images_python():
    python = _image_interpreter()
    r = subprocess.run([python, "jobs/mirror_job.py", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "--engine-dir" in r.stdout, r.stdout + r.stderr
    check = (
        "import sys, pyspark, pyarrow, reconciler.engine.host as e; "
        "print(f'{sys.version_info.major}.{sys.version_info.minor}', pyspark.__version__, pyarrow.__version__, "
        "e.EngineHost.__name__)"
    )
    r = subprocess.run([python, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [_image_python(), _pinned("pyspark"), _pinned("pyarrow"), "EngineHost"]


@pytest.mark.spark
def test_the_entrypoint_starts_spark_submit_from_the_pyspark_wheel(tmp_path):
    """`/opt/entrypoint.sh driver ...` as the operator's driver pod calls it, with SPARK_HOME laid out as the Dockerfile
    lays it out (links into the pyspark wheel); tini replaced by a shim (not installed here)."""
    import pyspark

    wheel = Path(pyspark.__file__).parent
    home = tmp_path / "spark"
    (home / "work-dir").mkdir(parents=True)
    links = re.search(r"for d in ([a-z ]+); do", DOCKERFILE).group(1).split()  # type: ignore[union-attr]
    assert {"bin", "jars"} <= set(links)
    for d in links:
        if (wheel / d).exists():
            (home / d).symlink_to(wheel / d)
    tini = tmp_path / "tini"
    tini.write_text('#!/bin/sh\n[ "$1" = -s ] && shift\n[ "$1" = -- ] && shift\nexec "$@"\n')
    tini.chmod(0o755)
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "TINI": str(tini),
        "SPARK_DRIVER_BIND_ADDRESS": "127.0.0.1",
        "PYSPARK_PYTHON": _image_interpreter(),
        "PYSPARK_DRIVER_PYTHON": _image_interpreter(),
        "PYTHONPATH": str(ROOT),
    }
    env.pop("SPARK_CONF_DIR", None)
    args = ["driver", "--master", "local[1]", "--conf", "spark.ui.enabled=false", "jobs/mirror_job.py", "--help"]
    r = subprocess.run([str(ENTRYPOINT), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "--engine-dir" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]
    r = subprocess.run([str(ENTRYPOINT), "echo", "passed through"], env=env, capture_output=True, text=True)
    assert r.stdout.strip() == "passed through"


def test_the_project_is_installed_into_a_venv_with_the_hosts_ca_bundle_when_given():
    """A virtual environment, so the same pip install works on Debian's python3 (PEP 668: no system-wide installs)
    and on Python's image; pip trusts the `ca-bundle` build secret only when one is given (a TLS-intercepting
    proxy), so a plain `docker build` is unchanged."""
    assert re.search(r"python3 -m venv /opt/venv;?$", DOCKERFILE, re.M)
    env_path = DOCKERFILE.index("ENV PATH=/opt/venv/bin:$PATH")
    assert env_path < DOCKERFILE.index("python3 -m pip install"), "python3 is the venv's when pip installs"
    assert "--break-system-packages" not in DOCKERFILE
    run = re.search(r"^RUN --mount=type=secret,id=ca-bundle (.+?)(?=^\S)", DOCKERFILE, re.M | re.S)
    assert run and "python3 -m pip install" in run.group(1)
    assert "if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi;" in run.group(1)


def test_the_working_directory_is_the_spark_users():
    """The operator runs the driver in the image's working directory: the last WORKDIR is /opt/spark/work-dir,
    owned by uid 185 (the project stays at /opt/reconciler, where the SparkApplication's main file is)."""
    workdirs = re.findall(r"^WORKDIR (\S+)$", DOCKERFILE, re.M)
    assert workdirs == [APP_ROOT, "/opt/spark/work-dir"]
    assert "chown -R spark:spark /opt/spark/work-dir" in DOCKERFILE
    assert DOCKERFILE.index("WORKDIR /opt/spark/work-dir") < DOCKERFILE.index("USER 185")
    wf = (ROOT / ".github" / "workflows" / "image.yml").read_text()
    assert not re.search(r"[^/]jobs/mirror_job\.py", wf), "relative to /opt/reconciler, which is no longer the workdir"


def test_the_test_suites_image_is_rebuilt_when_what_the_dockerfile_copies_changes(tmp_path):
    """tests/integration/image_build.py caches the built image under a hash of the Dockerfile and what it copies."""
    from tests.integration.image_build import copied_sources, job_image_key

    assert copied_sources(DOCKERFILE) == [
        "pyproject.toml", "README.md", "LICENSE", "constraints.txt", "requirements",
        "reconciler", "schemas", "jobs", "topologies/demo", "deploy/image/entrypoint.sh",
    ]  # fmt: skip
    (tmp_path / "Dockerfile").write_text("FROM x\nCOPY pkg ./pkg\nCOPY run.sh /run.sh\n")
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "pkg" / "a.py").write_text("a = 1\n")
    (tmp_path / "run.sh").write_text("#!/bin/sh\n")
    key = job_image_key("base:1", tmp_path)
    (tmp_path / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "tests.py").write_text("not copied\n")
    assert job_image_key("base:1", tmp_path) == key, "neither bytecode (.dockerignore) nor uncopied files count"
    assert job_image_key("base:2", tmp_path) != key
    (tmp_path / "run.sh").chmod(0o755)  # COPY keeps the mode
    assert (executable := job_image_key("base:1", tmp_path)) != key
    (tmp_path / "pkg" / "a.py").write_text("a = 2\n")
    assert job_image_key("base:1", tmp_path) not in (key, executable)


def test_image_workflow_builds_this_dockerfile():
    wf = (ROOT / ".github" / "workflows" / "image.yml").read_text()
    build = (ROOT / "ci" / "build-image.sh").read_text()  # the build and its checks, run by both jobs
    assert "docker build" in build and "-f Dockerfile" in build and "mirror_job.py" in build
    for job in ("image", "publish"):
        steps = yaml.safe_load(wf)["jobs"][job]["steps"]
        assert any("ci/build-image.sh" in (s.get("run") or "") for s in steps), job
