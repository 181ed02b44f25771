"""The plan JSON follows schemas/plan.schema.json (issue 48). The suite checks every plan JSON it makes, where it is
made (RECONCILER_TEST_PLAN_SCHEMA, tests/conftest.py; reconciler/plan/document.py); these tests check that the check
is on and bites, and that every action kind, with every field, validates."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
from jsonschema import Draft202012Validator

from reconciler import settings
from reconciler.contract.spec import ClusterSpec
from reconciler.plan.action_base import Action, Phase, Verb
from reconciler.plan.actions import FORMAT_MINOR, FORMAT_VERSION, AddPartitions, CreateAcl, Plan
from reconciler.plan.document import PlanSchemaError, document, problems
from reconciler.plan.engine_actions import EngineFlow, EngineFlowOp, EngineSetting, ReplaceEngine
from reconciler.plan.findings import Finding, FindingKind, Severity
from reconciler.plan.job_actions import DeployJob, RestartJob, StopJob, UpdateJob
from reconciler.plan.policy_record import Approval, PolicyFinding, PolicyRecord
from reconciler.plan.reasons import ReasonKind
from reconciler.plan.risk import Risk
from reconciler.state.live import AclBinding, AclOperation, AclPermission, AclResource
from tests.spec_helpers import job_spec

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "plan.schema.json").read_text())


def test_the_schema_is_a_schema_and_names_the_format_version():
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["format_version"] == {"const": FORMAT_VERSION, **_desc("format_version")}
    assert SCHEMA["properties"]["format_minor"]["const"] == FORMAT_MINOR
    assert f"format_version {FORMAT_VERSION}, format_minor {FORMAT_MINOR}" in SCHEMA["title"]
    assert (
        f"format_version {FORMAT_VERSION}, format_minor {FORMAT_MINOR}" in (ROOT / "docs" / "plan-json.md").read_text()
    )


def _desc(key: str) -> dict:
    return {"description": SCHEMA["properties"][key]["description"]}


def test_the_suite_checks_every_plan_it_makes():
    assert settings.plan_schema_check(), "tests/conftest.py turns RECONCILER_TEST_PLAN_SCHEMA on for the session"


@dataclass(frozen=True)
class Unknown(Action):
    """An action kind the schema does not describe."""

    KIND = SimpleNamespace(value="resize_cluster")  # type: ignore[assignment]
    PHASE = Phase.CONFIG
    VERB = Verb.UPDATE
    RISK = Risk.CONFIG

    def describe(self) -> str:
        return "resize"


def test_a_plan_the_schema_does_not_describe_is_an_error_where_it_is_made():
    with pytest.raises(PlanSchemaError, match="resize_cluster"):
        document(Plan([Unknown("east", "why")]))
    doc = document(Plan())
    del doc["permissions"]
    assert problems(doc) == ["(document): 'permissions' is a required property"]
    doc = document(Plan([AddPartitions("east", "why", "t", 1, 2)]))
    doc["actions"][0]["risk"] = "delete"  # the class of the kind, nothing else
    assert "actions/0/risk: 'grow' was expected" in problems(doc)


def test_a_cli_the_suite_starts_checks_too(tmp_path):
    """The setting reaches the processes the tests start: a CLI making a plan the schema refuses fails."""
    code = (
        "import sys\n"
        "from reconciler.plan.document import document\n"
        "from reconciler.plan.actions import Plan\n"
        "doc = document(Plan())\n"
        "print('checked' if __import__('reconciler.settings').settings.plan_schema_check() else 'unchecked')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "checked"


def test_every_action_kind_with_every_field_validates():
    acl = AclBinding("t", "User:a", "*", AclOperation.READ, AclPermission.ALLOW)
    group_acl = AclBinding("g", "User:a", "*", AclOperation.READ, AclPermission.ALLOW, resource=AclResource.GROUP)
    actions = [
        CreateAcl("east", "why", acl),
        CreateAcl("east", "why", group_acl),
        DeployJob("east", "why", flow="west->east", deployer="local", options={"engine": "east"}, spec_hash="h"),
        UpdateJob(
            "east",
            "why",
            flow="west->east",
            deployer="local",
            spec_hash="h",
            current_hash="g",
            changes={"settings.delivery": ["at-least-once", "exactly-once"]},
        ),
        RestartJob(
            "east",
            "why",
            flow="west->east",
            deployer="kubernetes",
            options={"engine": "east"},
            spec_hash="h",
            why=ReasonKind.JOB_DOWN,
            current_hash=None,
            state="down",
            previous_deployer="local",
            running=False,
        ),
        ReplaceEngine(
            "east",
            "its Spark settings changed",
            engine="east",
            deployer="local",
            settings=(
                EngineSetting("engine.spark_conf.spark.x", None, "1"),
                EngineSetting("engine.spark_conf.spark.ssl.keyPassword", None, None, sensitive=True),
            ),
            restarts=(
                EngineFlow(
                    "west->east",
                    ReasonKind.JOB_DOWN,
                    "down",
                    EngineFlowOp.RESTART,
                    {"engine": "east"},
                    job_spec("west->east", ClusterSpec("west", "west:1"), ClusterSpec("east", "east:1")).to_dict(),
                    "h",
                    None,
                    {"settings.delivery": ["at-least-once", "exactly-once"]},
                    "down",
                ),
                EngineFlow("x->east", ReasonKind.JOB_WITH_ENGINE, "with its engine", state="running"),
            ),
        ),
        StopJob("east", "why", flow="old->east", deployer="local", where="pid 1"),
    ]
    finding = Finding(Severity.WARNING, FindingKind.UNMANAGED, "east", "t", "m", "h")
    record = PolicyRecord(
        (("p.yaml", "0" * 64),),
        (PolicyFinding("p.yaml", 3, "rule", "message", "east", "topic t"),),
        (PolicyFinding("p.rego", None, "warn", "message"),),
        (PolicyFinding("p.yaml", 4, "approve", "m", "east", "flow x", Risk.RESTART),),
        Approval("alice", "2026-11-28T22:00:00Z"),
    )
    doc = document(Plan(actions, [finding]), scope=True, policy=record.to_dict(), message="m")
    assert problems(doc) == []
    assert {a["kind"] for a in doc["actions"]} == {
        "create_acl",
        "deploy_job",
        "update_job",
        "restart_job",
        "stop_job",
        "replace_engine",
    }
    assert PolicyRecord.from_dict(doc["policy"]) == record
