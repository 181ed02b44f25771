"""The CI workflows parse, run only scripts that exist, and keep the CLI steps in ci/ scripts."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.dev_tools import tool

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


@pytest.mark.parametrize(
    "name,trigger", [("plan.yml", "pull_request_target"), ("apply.yml", "push"), ("drift.yml", "schedule")]
)
def test_triggers(name, trigger):
    doc = load(ROOT / ".github" / "workflows" / name)
    assert trigger in doc["on"]
    if name == "apply.yml":
        assert doc["on"]["push"]["branches"] == ["main"]
        assert doc["concurrency"]["cancel-in-progress"] is False
    if name == "plan.yml":
        assert any(p.startswith("topologies/") for p in doc["on"]["pull_request_target"]["paths"])


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
            calls = [
                line for line in s.splitlines() if re.match(r"\s*(\S*/)?(reconciler|python3? -m reconciler)\s", line)
            ]
            assert not calls, f"{name}: CLI calls belong in ci/ scripts: {calls}"


def test_secrets_come_from_the_secret_store_only_into_the_steps_that_need_them():
    for name in NEW:
        text = (ROOT / ".github" / "workflows" / name).read_text()
        doc = load(ROOT / ".github" / "workflows" / name)
        with_secrets = 0
        for job in doc["jobs"].values():
            assert not any("secrets." in str(v) for v in (job.get("env") or {}).values()), f"{name}: job-wide secret"
            steps = [s for s in job["steps"] if any("secrets." in str(v) for v in (s.get("env") or {}).values())]
            with_secrets += len(steps)
            assert all("ci/" in s.get("run", "") for s in steps), f"{name}: secrets outside the ci/ step"
            for step in steps:
                secret_vars = {k: v for k, v in step["env"].items() if "secrets." in str(v)}
                assert all(
                    re.fullmatch(r"\$\{\{ secrets\.(\w+) \}\}", v) and v.split(".")[1].split(" ")[0] == k
                    for k, v in secret_vars.items()
                ), secret_vars
        assert with_secrets and "toJSON(secrets)" not in text


def test_secret_names_match_the_example_topology_references():
    """The names the workflows map are the `${...}` references of the example topology they document."""
    from reconciler.cli.commands_env import variable_uses
    from reconciler.topology.build import load_topology

    topology, _ = load_topology([str(ROOT / "topologies" / "dr-active-passive")])
    wanted = {u.name for u in variable_uses(topology)}
    assert wanted
    for name in NEW:
        doc = load(ROOT / ".github" / "workflows" / name)
        mapped = {
            k
            for job in doc["jobs"].values()
            for s in job["steps"]
            for k, v in (s.get("env") or {}).items()
            if "secrets." in str(v)
        }
        # apply.yml saves a plan and applies it: it also maps the key that signs it (docs/security.md)
        signing = {"RECONCILER_PLAN_KEY"} if name == "apply.yml" else set()
        assert mapped == wanted | signing, name


def test_workflows_are_hardened():
    for path in WORKFLOWS:
        doc = load(path)
        assert "permissions" in doc, f"{path.name}: no top-level permissions"
        for job in doc["jobs"].values():
            for step in job["steps"]:
                if "uses" in step:
                    assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", step["uses"]), (
                        f"{path.name}: {step['uses']} not pinned"
                    )
        for line in path.read_text().splitlines():
            if "uses:" in line:
                assert re.search(r"@[0-9a-f]{40}  # v\d+\.\d+\.\d+$", line), f"{path.name}: pin without version comment"
    apply = load(ROOT / ".github" / "workflows" / "apply.yml")
    job = apply["jobs"]["apply"]
    assert job["environment"] and apply["concurrency"]["cancel-in-progress"] is False
    checkout = next(s for s in job["steps"] if "actions/checkout@" in s.get("uses", ""))
    assert checkout["with"]["ref"] == "main"  # a newer queued run replaces an older one: it applies the latest main


def test_actionlint_passes_on_every_workflow():
    env = {**os.environ, "PATH": f"{Path(tool('shellcheck')).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    r = subprocess.run(
        [tool("actionlint"), "-no-color", *map(str, WORKFLOWS)], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_shellcheck_passes_on_every_script():
    scripts = sorted([*(ROOT / "ci").glob("*.sh"), *(ROOT / "scripts").glob("*.sh"), ROOT / ".ci" / "run"])
    r = subprocess.run([tool("shellcheck"), "-x", *map(str, scripts)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_comment_and_issue_markers_match_the_scripts():
    plan = (ROOT / ".github" / "workflows" / "plan.yml").read_text()
    script = (ROOT / "ci" / "plan-pr.sh").read_text()
    assert "<!-- reconciler-plan -->" in plan and "<!-- reconciler-plan -->" in script
    assert "<!-- reconciler-drift -->" in (ROOT / ".github" / "workflows" / "drift.yml").read_text()


def test_ci_scripts_are_valid_bash():
    for script in sorted((ROOT / "ci").glob("*.sh")):
        assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0, script.name
        assert script.read_text().startswith("#!/usr/bin/env bash"), script.name


def test_env_command_lists_and_checks_the_variables_a_topology_needs(capsys, monkeypatch):
    from reconciler.cli.main import main

    path = str(ROOT / "topologies" / "dr-active-passive")
    names = ("PRIMARY_BOOTSTRAP", "PRIMARY_MIRROR_USERNAME", "PRIMARY_MIRROR_PASSWORD")
    for name in (*names, "DR_BOOTSTRAP", "DR_MIRROR_USERNAME", "DR_MIRROR_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PRIMARY_BOOTSTRAP", "127.0.0.1:9092")
    assert main(["env", path]) == 0
    out = capsys.readouterr().out
    assert "PRIMARY_MIRROR_PASSWORD" in out and "NOT SET" in out and "primary.sasl.password" in out
    assert main(["env", path, "--check", "--names"]) == 1
    captured = capsys.readouterr()
    assert captured.out.split() == [
        "DR_BOOTSTRAP",
        "DR_MIRROR_PASSWORD",
        "DR_MIRROR_USERNAME",
        "PRIMARY_BOOTSTRAP",
        "PRIMARY_MIRROR_PASSWORD",
        "PRIMARY_MIRROR_USERNAME",
    ]
    assert (
        "5 variables the topology needs are not set: DR_BOOTSTRAP, DR_MIRROR_PASSWORD, DR_MIRROR_USERNAME, "
        "PRIMARY_MIRROR_PASSWORD, PRIMARY_MIRROR_USERNAME" in captured.err
    )


def test_pull_request_runs_hold_no_write_right_and_no_production_secret():
    """Issue 44: the plan of a pull request runs the base branch's code with the read-only plan principal's
    credentials (environment kafka-plan), no write permission where secrets are, no git token kept on disk;
    the job that writes the comment has no secret and no checkout."""
    plan = load(ROOT / ".github" / "workflows" / "plan.yml")
    assert plan["permissions"] == {}
    job = plan["jobs"]["plan"]
    assert job["environment"] == "kafka-plan" and job["permissions"] == {"contents": "read"}
    checkouts = [s for s in job["steps"] if "actions/checkout@" in s.get("uses", "")]
    assert checkouts[0]["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    assert all(s["with"]["persist-credentials"] is False for s in checkouts)
    assert any("ci/take-topology.sh" in s.get("run", "") for s in job["steps"])
    comment = plan["jobs"]["comment"]
    assert comment["permissions"] == {"pull-requests": "write"}
    assert not any("checkout" in s.get("uses", "") or "secrets." in str(s) for s in comment["steps"])
    for path in WORKFLOWS:
        doc = load(path)
        for name, job in doc["jobs"].items():
            for step in job["steps"]:
                if "actions/checkout@" in step.get("uses", ""):
                    assert step["with"]["persist-credentials"] is False, f"{path.name}: {name} keeps the git token"
            perms = job.get("permissions") or doc.get("permissions") or {}
            writes = [k for k, v in perms.items() if v == "write"]
            if "pull_request" in doc["on"] and job.get("if", "").find("!= 'pull_request'") < 0:
                assert not writes, f"{path.name}: {name} runs on pull requests with {writes}: write"
    assert load(ROOT / ".github" / "workflows" / "drift.yml")["jobs"]["drift"]["environment"] == "kafka-plan"


def test_take_topology_copies_only_the_topology_files(tmp_path):
    """ci/take-topology.sh: the pull request's topology YAML, nothing else, no symbolic link."""
    pr = tmp_path / "pr"
    (pr / "topologies" / "prod").mkdir(parents=True)
    (pr / "topologies" / "prod" / "t.yaml").write_text("kind: Topology\n")
    (pr / "topologies" / "prod" / "evil.sh").write_text("curl evil\n")
    (pr / "topologies" / "prod" / "link.yaml").symlink_to("/etc/passwd")
    (pr / "ci").mkdir()
    (pr / "ci" / "plan-pr.sh").write_text("exfiltrate\n")
    work = tmp_path / "work"
    (work / "topologies" / "prod").mkdir(parents=True)
    (work / "topologies" / "prod" / "old.yaml").write_text("old\n")
    r = subprocess.run(
        ["bash", str(ROOT / "ci" / "take-topology.sh"), str(pr)],
        cwd=work,
        env={**os.environ, "TOPOLOGY_PATHS": "topologies/prod"},
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (work / "topologies" / "prod").iterdir()) == ["t.yaml"]
    assert not (work / "ci").exists() and not pr.exists()
    r = subprocess.run(
        ["bash", str(ROOT / "ci" / "take-topology.sh"), str(pr)],
        cwd=work,
        env={**os.environ, "TOPOLOGY_PATHS": "../etc"},
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "refusing path" in r.stderr
