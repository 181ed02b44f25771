"""The CI workflows parse, run only scripts that exist, and keep the CLI steps in ci/ scripts."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
NEW = {"plan.yml", "apply.yml", "drift.yml"}


def load(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as true
    return doc


def runs(doc: dict) -> list[str]:
    return [step["run"] for job in doc["jobs"].values() for step in job["steps"] if "run" in step]


def test_the_three_workflows_exist_and_parse():
    assert NEW <= {p.name for p in WORKFLOWS}
    for path in WORKFLOWS:
        doc = load(path)
        assert doc["name"] and doc["on"] and doc["jobs"], path.name
        for job in doc["jobs"].values():
            assert job["runs-on"] and job["steps"], path.name


@pytest.mark.parametrize("name,trigger", [("plan.yml", "pull_request"), ("apply.yml", "push"), ("drift.yml", "schedule")])
def test_triggers(name, trigger):
    doc = load(ROOT / ".github" / "workflows" / name)
    assert trigger in doc["on"]
    if name == "apply.yml":
        assert doc["on"]["push"]["branches"] == ["main"]
        assert doc["concurrency"]["cancel-in-progress"] is False
    if name == "plan.yml":
        assert any(p.startswith("topologies/") for p in doc["on"]["pull_request"]["paths"])


def test_workflows_call_only_scripts_that_exist():
    for path in WORKFLOWS:
        for script in runs(load(path)):
            for ref in re.findall(r"(?:bash\s+)?((?:ci|scripts)/[\w.-]+\.sh)", script):
                assert (ROOT / ref).is_file(), f"{path.name} runs {ref}, which does not exist"
    for name in NEW:
        doc = load(ROOT / ".github" / "workflows" / name)
        scripts = [s for s in runs(doc) if "ci/" in s]
        assert scripts, f"{name} runs a ci/ script"
        for s in runs(doc):
            calls = [line for line in s.splitlines() if re.match(r"\s*(\S*/)?(reconciler|python3? -m reconciler)\s", line)]
            assert not calls, f"{name}: CLI calls belong in ci/ scripts: {calls}"


def test_secrets_come_from_the_secret_store_as_environment_variables():
    for name in NEW:
        text = (ROOT / ".github" / "workflows" / name).read_text()
        env = load(ROOT / ".github" / "workflows" / name)["jobs"]
        job_env = next(iter(env.values()))["env"]
        secret_vars = {k: v for k, v in job_env.items() if "secrets." in str(v)}
        assert secret_vars and all(re.fullmatch(r"\$\{\{ secrets\.\w+ \}\}", v) for v in secret_vars.values())
        assert "toJSON(secrets)" not in text


def test_comment_and_issue_markers_match_the_scripts():
    plan = (ROOT / ".github" / "workflows" / "plan.yml").read_text()
    script = (ROOT / "ci" / "plan-pr.sh").read_text()
    assert "<!-- reconciler-plan -->" in plan and "<!-- reconciler-plan -->" in script
    assert "<!-- reconciler-drift -->" in (ROOT / ".github" / "workflows" / "drift.yml").read_text()


def test_ci_scripts_are_valid_bash():
    for script in sorted((ROOT / "ci").glob("*.sh")):
        assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0, script.name
        assert script.read_text().startswith("#!/usr/bin/env bash"), script.name
