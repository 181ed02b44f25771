"""The job image's Dockerfile: linted with hadolint (a binary wheel of the [test] extra), and consistent
with what the Kubernetes deployer renders. Building it needs a Docker engine: the `image` workflow does."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from reconciler.deploy.kubernetes import APP_ROOT
from tests.dev_tools import tool

ROOT = Path(__file__).resolve().parents[2]


def test_hadolint_passes():
    r = subprocess.run([tool("hadolint"), "--no-color", "Dockerfile"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_image_holds_the_entry_point_where_the_manifests_look():
    text = (ROOT / "Dockerfile").read_text()
    assert f"WORKDIR {APP_ROOT}" in text and re.search(r"^COPY jobs \./jobs$", text, re.M)
    copied = {src for line in re.findall(r"^COPY (.+) \S+$", text, re.M) for src in line.split()}
    assert {"reconciler", "schemas", "jobs", "pyproject.toml", "constraints.txt", "LICENSE"} <= copied
    assert re.search(r"^USER 185$", text, re.M), "the job runs as the base image's unprivileged user"


def test_image_workflow_builds_this_dockerfile():
    wf = (ROOT / ".github" / "workflows" / "image.yml").read_text()
    assert "docker build" in wf and "-f Dockerfile" in wf
