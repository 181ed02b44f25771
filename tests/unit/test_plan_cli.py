"""The plan/apply CLI against the memory double: exit codes, formats, confirmation, saved plans."""

import json

import pytest

from reconciler.cli.main import main
from reconciler.plan import planfile
from tests.plan_helpers import World, topology

TOPO = """apiVersion: reconciler/v1
kind: Topology
metadata: {name: cli}
clusters:
  west: {bootstrap_servers: "127.0.0.1:1"}
  east: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: west, target: east, topics: {include: ["orders"]}}
"""


@pytest.fixture
def world(tmp_path, monkeypatch):
    path = tmp_path / "t.yaml"
    path.write_text(TOPO)
    w = World(topology('flows:\n  - {source: west, target: east, topics: {include: ["orders"]}}'))
    w["west"].add_topic("orders", 2)
    w.path = str(path)
    return w


def test_detailed_exitcode(world, capsys):
    assert main(["plan", world.path, "--detailed-exitcode"], world.backend()) == 2
    assert main(["plan", world.path], world.backend()) == 0
    assert main(["apply", world.path, "--auto-approve"], world.backend()) == 0
    assert main(["plan", world.path, "--detailed-exitcode"], world.backend()) == 0
    assert "No changes." in capsys.readouterr().out


@pytest.mark.parametrize(
    "fmt,marker", [("text", "Plan: 5 to create"), ("markdown", "```diff"), ("json", '"format_version": 2')]
)
def test_formats(world, capsys, fmt, marker):
    main(["plan", world.path, "--format", fmt], world.backend())
    assert marker in capsys.readouterr().out


def test_confirmation_on_a_terminal(world, capsys):
    asked: list[str] = []

    def answer(text: str):
        return lambda question: asked.append(question) or text

    assert main(["apply", world.path], world.backend(ask=answer("no"))) == 1
    assert "Apply cancelled." in capsys.readouterr().err and "west.orders" not in world["east"].topics
    assert asked[-1].strip() == "Apply these 5 actions? Only 'yes' will be accepted:"
    assert main(["apply", world.path], world.backend(ask=answer("yes"))) == 0
    assert "west.orders" in world["east"].topics


def test_no_terminal_no_question(world, capsys):
    assert main(["apply", world.path], world.backend(ask=lambda question: None)) == 1
    err = capsys.readouterr().err
    assert "refusing to ask for confirmation: stdin is not a terminal" in err and "--auto-approve" in err
    assert "west.orders" not in world["east"].topics


def test_saved_plan_apply_and_refusals(world, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("RECONCILER_PLAN_KEY", "test-plan-key-0123456789abcdef")
    out = tmp_path / "p.json"
    assert main(["plan", world.path, "--out", str(out)], world.backend()) == 0
    doc = json.loads(out.read_text())
    assert doc["kind"] == "reconciler-saved-plan" and doc["plan"]["scope"]["west"] == [
        "heartbeats",
        "mm2-offset-syncs.east.internal",
        "orders",
    ]
    world["west"].topics["orders"].partitions = 3
    assert main(["apply", str(out), world.path, "--auto-approve"], world.backend()) == 1
    assert "would not create topic west.orders (2 partitions" in capsys.readouterr().err
    main(["plan", world.path, "--out", str(out)], world.backend())
    assert main(["apply", str(out), world.path, "--auto-approve"], world.backend()) == 0
    assert world["east"].topics["west.orders"].partitions == 3
    bad = tmp_path / "bad.json"
    bad.write_text(f'{{"kind": "reconciler-saved-plan", "format_version": {planfile.FORMAT_VERSION}}}')
    assert main(["apply", str(bad), world.path, "--auto-approve"], world.backend()) == 1
    assert "not signed" in capsys.readouterr().err


def test_impossible_changes_are_findings_not_actions(world, capsys):
    world["east"].add_topic("west.orders", 5)  # more partitions than the source: never recreated
    assert main(["apply", world.path, "--auto-approve"], world.backend()) == 0
    out = capsys.readouterr().out
    assert (
        "impossible" in out
        and "west.orders" in world["east"].topics
        and world["east"].topics["west.orders"].partitions == 5
    )


def test_failed_actions_make_apply_fail(world, capsys):
    from reconciler.adapters.base import OpResult

    def admins(cluster):
        admin = world.factory(cluster)
        real = admin.create_topics

        def refuse_remote_topics(specs):
            if specs[0].name.startswith("reconciler."):
                return real(specs)  # the lease topic
            return {s.name: OpResult.failed("POLICY_VIOLATION: no") for s in specs}

        admin.create_topics = refuse_remote_topics
        return admin

    assert main(["apply", world.path, "--auto-approve"], world.backend(admin_factory=admins)) == 1
    captured = capsys.readouterr()
    assert "FAILED: POLICY_VIOLATION: no" in captured.out and "Apply finished with errors" in captured.err


def test_cli_output_redacts_resolved_secrets(tmp_path, monkeypatch, capsys):
    from reconciler.adapters.base import AdminError

    monkeypatch.setenv("EAST_CLI_TOKEN", "tok-9f8e7d6c5b4a")
    path = tmp_path / "t.yaml"
    path.write_text(
        TOPO.replace(
            'east: {bootstrap_servers: "127.0.0.1:2"}',
            'east: {bootstrap_servers: "127.0.0.1:2", config: {sasl.oauthbearer.token: "${EAST_CLI_TOKEN}"}}',
        )
    )
    w = World(topology('flows:\n  - {source: west, target: east, topics: {include: ["orders"]}}'))

    def admins(cluster):
        admin = w.factory(cluster)

        def leaky():
            raise AdminError(f"cluster {admin.alias!r}: auth failed for token tok-9f8e7d6c5b4a")

        admin.list_topics = leaky
        return admin

    assert main(["plan", str(path)], w.backend(admin_factory=admins)) == 1
    captured = capsys.readouterr()
    assert "auth failed for token ***" in captured.out and "tok-9f8e7d6c5b4a" not in captured.out + captured.err


def test_auto_approve_plans_again_when_clusters_change_before_the_lease(world, monkeypatch, capsys):
    """A remote topic created by someone else between the plan and the lease (e.g. the in-flight request of a
    killed apply): --auto-approve plans again under the lease, since it approved "whatever the plan is"."""
    from reconciler.apply.lock import LEASE_TOPIC

    def admins(cluster):
        admin = world.factory(cluster)
        if cluster.alias == "east":
            real_list = admin.list_topics

            def list_then_change():
                if LEASE_TOPIC in world["east"].topics and "west.orders" not in world["east"].topics:
                    world["east"].add_topic("west.orders", 2)  # someone else, once the lease is held
                return real_list()

            admin.list_topics = list_then_change
        return admin

    assert main(["apply", world.path, "--auto-approve"], world.backend(admin_factory=admins)) == 0
    out = capsys.readouterr().out
    assert "The clusters changed while planning" in out and "planned again under the lease" in out
    assert out.count("+ create topic west.orders") == 1, "the second plan no longer creates it"
    assert main(["plan", world.path, "--detailed-exitcode"], world.backend()) == 0


def test_plan_out_prints_a_summary_not_the_whole_plan(world, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("RECONCILER_PLAN_KEY", "test-plan-key-0123456789abcdef")
    out = tmp_path / "p.json"
    assert main(["plan", world.path, "--out", str(out)], world.backend()) == 0
    captured = capsys.readouterr()
    assert "+ create topic" not in captured.out and "  east: + " in captured.out
    assert captured.out.rstrip().splitlines()[-1].startswith("Plan: ") and "Saved the plan" in captured.err


def test_plan_with_a_cluster_down_leads_with_the_error_and_lists_no_actions(world, capsys):
    world["east"].reachable = False
    assert main(["plan", world.path], world.backend()) == 1
    out = capsys.readouterr().out
    assert "Plan incomplete" in out.splitlines()[0] and out.splitlines()[2] == "Errors:"
    assert "+ " not in out and "deploy" not in out.split("Errors:")[0]
