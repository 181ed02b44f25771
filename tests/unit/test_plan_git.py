"""Git wiring of the CLI on a real temporary repository (clusters: the memory double).

`plan --revision`, `plan --base` between two commits and against the work tree (which files and flows
changed, the plan limited to the affected flows, "nothing to plan"), the revision an apply records
next to the lease (commit, author, time, dirty flag, clusters), and `drift --revision`.
"""

from __future__ import annotations

import json
import textwrap

import git
import pytest

from reconciler.adapters.memory_admin import MemoryAdmin, MemoryFactory
from reconciler.apply.lock import LEASE_TOPIC, read_applied
from reconciler.cli.main import main
from reconciler.plan.actions import FORMAT_MINOR, FORMAT_VERSION
from reconciler.textutil import md_inline
from tests.plan_helpers import memory_backend

ALICE = git.Actor("Alice Example", "alice@example.com")

CLUSTERS = """\
apiVersion: reconciler/v1
kind: Topology
metadata: {name: prod}
clusters:
  west: {bootstrap_servers: "127.0.0.1:1"}
  east: {bootstrap_servers: "127.0.0.1:2"}
  north: {bootstrap_servers: "127.0.0.1:3"}
"""
FLOWS_V1 = """\
apiVersion: reconciler/v1
kind: Topology
flows:
  - {source: west, target: east, topics: {include: ["orders"]}}
  - {source: east, target: west, topics: {include: ["audit"]}}
"""
FLOWS_V2 = """\
apiVersion: reconciler/v1
kind: Topology
flows:
  - {source: west, target: east, topics: {include: ["orders", "payments"]}}
  - {source: east, target: west, topics: {include: ["audit"]}}
  - {source: west, target: north, topics: {include: ["orders"]}}
"""
FLOWS_V3 = """\
apiVersion: reconciler/v1
kind: Topology
flows:
  - {source: west, target: east, topics: {include: ["orders", "payments"]}}
  - {source: west, target: north, topics: {include: ["orders"]}}
"""
PATH = "topologies/prod"


class Repo:
    def __init__(self, root):
        self.root = root
        self.git = git.Repo.init(root)

    def write(self, name: str, text: str) -> None:
        p = self.root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))

    def commit(self, message: str, files: dict[str, str]) -> str:
        for name, text in files.items():
            self.write(name, text)
        self.git.index.add(list(files))
        return self.git.index.commit(message, author=ALICE, committer=ALICE).hexsha


@pytest.fixture
def repo(tmp_path, monkeypatch):
    r = Repo(tmp_path / "topology-repo")
    r.v1 = r.commit("v1", {f"{PATH}/clusters.yaml": CLUSTERS, f"{PATH}/flows.yaml": FLOWS_V1, "README.md": "x\n"})
    r.v2 = r.commit("v2: payments, west->north", {f"{PATH}/flows.yaml": FLOWS_V2})
    monkeypatch.chdir(r.root)
    r.factory = MemoryFactory()
    r.backend = memory_backend(r.factory)
    for alias, topics in {"west": {"orders": 2, "payments": 1}, "east": {"audit": 1}}.items():
        for name, n in topics.items():
            r.factory(type("C", (), {"alias": alias})()).cluster.add_topic(name, n)
    return r


def run(repo, capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv), repo.backend)
    out, err = capsys.readouterr()
    return code, out, err


def created(plan_json: dict) -> set[tuple[str, str]]:
    return {(a["cluster"], a["topic"]) for a in plan_json["actions"] if a["kind"] == "create_topic"}


def test_plan_base_between_two_commits_limits_the_plan(repo, capsys):
    code, out, _ = run(repo, capsys, "plan", PATH, "--base", repo.v1[:10], "--revision", repo.v2, "--detailed-exitcode")
    assert code == 2
    head = out.split("\n\n")[0]
    assert f"Changes between {repo.v1[:10]} ({repo.v1[:7]}) and {repo.v2[:7]}:" in head
    assert f"  files: ~ {PATH}/flows.yaml" in head
    assert "  flows: ~ west->east (topics.include); + west->north" in head
    assert "Planning 2 of 3 flows: west->east, west->north." in head
    assert "east.audit" not in out, "east->west did not change: not planned"
    assert "west.payments" in out and "cluster north:" in out

    code, out, _ = run(repo, capsys, "plan", PATH, "--base", repo.v1, "--format", "json")
    doc = json.loads(out)
    assert doc["base"]["planned_flows"] == ["west->east", "west->north"]
    assert doc["base"]["files"]["modified"] == [f"{PATH}/flows.yaml"] and doc["base"]["head"]["worktree"] is True
    assert doc["base"]["changes"]["flows"][0] == {
        "flow": "west->east",
        "change": "changed",
        "settings": ["topics.include"],
    }
    assert ("west", "east.audit") not in created(doc) and ("east", "west.payments") in created(doc)
    full = json.loads(run(repo, capsys, "plan", PATH, "--format", "json")[1])
    assert ("west", "east.audit") in created(full) and created(doc) < created(full)

    code, out, _ = run(repo, capsys, "plan", PATH, "--base", repo.v1, "--format", "markdown")
    assert f"**Changes since `{repo.v1}` (`{repo.v1[:7]}`)** in the work tree (HEAD {repo.v2[:7]})" in out
    # names in Markdown are escaped (issue 44): `\~ west\-\>east \(topics\.include\)...` renders as the words
    assert f"- flows: {md_inline('~ west->east (topics.include); + west->north')}" in out and "```mermaid" in out


def test_plan_base_without_changes_says_so(repo, capsys):
    code, out, _ = run(repo, capsys, "plan", PATH, "--base", "HEAD", "--detailed-exitcode")
    assert code == 0 and out.rstrip().endswith(
        f"No topology changes between HEAD ({repo.v2[:7]}) and the work tree (HEAD {repo.v2[:7]}). Nothing to plan."
    )
    assert repo.factory.clusters["west"].topics.keys() == {"orders", "payments"}, "nothing was read or changed"
    code, out, _ = run(repo, capsys, "plan", PATH, "--base", "HEAD", "--format", "json")
    assert json.loads(out)["summary"]["changes"] is False
    # the plan format of a plan with nothing to plan is the plan format (it said format_minor 1 while plans were 2)
    full = json.loads(run(repo, capsys, "plan", PATH, "--format", "json")[1])
    got = json.loads(out)
    assert (got["format_version"], got["format_minor"]) == (full["format_version"], full["format_minor"])
    assert (got["format_version"], got["format_minor"]) == (FORMAT_VERSION, FORMAT_MINOR)
    # a comment-only edit changes a file but no flow
    repo.write(f"{PATH}/flows.yaml", "# reviewed\n" + FLOWS_V2)
    code, out, _ = run(repo, capsys, "plan", PATH, "--base", "HEAD")
    assert code == 0 and "1 topology file(s) changed since HEAD" in out and "no flow is affected" in out


def test_plan_base_against_uncommitted_edits_and_a_removed_flow(repo, capsys):
    assert run(repo, capsys, "apply", PATH, "--auto-approve")[0] == 0
    repo.write(f"{PATH}/flows.yaml", FLOWS_V3)  # not committed: east->west removed
    code, out, _ = run(repo, capsys, "plan", PATH, "--base", "HEAD")
    assert code == 0
    assert "and the work tree (HEAD " in out and "with uncommitted changes" in out
    assert (
        "flows: - east->west" in out
        and "Planning 0 of 2 flows and 1 removed flow (their leftovers): east->west." in out
    )
    assert "west:east.audit looks replicated from east, but there is no flow east->west" in out, (
        "the removed flow's leftovers stay in the limited plan"
    )
    assert "north" not in out.split("Findings:")[-1]


def test_plan_revision_reads_an_old_commit(repo, capsys):
    code, out, _ = run(repo, capsys, "plan", PATH, "--revision", repo.v1, "--format", "json")
    assert code == 0
    assert created(json.loads(out)) == {
        ("east", "west.orders"),
        ("west", "east.audit"),
        ("west", "heartbeats"),
        ("east", "heartbeats"),
        ("east", "west.heartbeats"),
        ("west", "east.heartbeats"),
        ("east", "west.checkpoints.internal"),
        ("west", "east.checkpoints.internal"),
        ("west", "mm2-offset-syncs.east.internal"),
        ("east", "mm2-offset-syncs.west.internal"),
    }
    code, _, err = run(repo, capsys, "plan", PATH, "--revision", "no-such-rev")
    assert code == 1 and "unknown revision 'no-such-rev'" in err
    code, _, err = run(repo, capsys, "plan", PATH, "--base", "no-such-rev")
    assert code == 1 and "--base no-such-rev: unknown revision" in err


def applied(repo, alias: str) -> dict:
    return read_applied(MemoryAdmin(repo.factory.clusters[alias], alias))


def test_apply_records_the_git_revision(repo, capsys, monkeypatch):
    monkeypatch.setenv("RECONCILER_PLAN_KEY", "test-plan-key-0123456789abcdef")
    assert run(repo, capsys, "apply", PATH, "--auto-approve")[0] == 0
    rec = applied(repo, "east")
    assert rec["revision"] == repo.v2 and rec["clusters"] == ["east", "north", "west"]
    assert rec["git"]["commit"] == repo.v2 and rec["git"]["author"] == "Alice Example"
    assert rec["git"]["dirty"] is False and rec["git"]["message_subject"] == "v2: payments, west->north"
    assert rec["git"]["time_iso"] and rec["who"] and rec["fingerprint"].startswith("sha256:")

    # an uncommitted topology edit is applied: the record says dirty
    repo.write(f"{PATH}/flows.yaml", FLOWS_V2.replace('"payments"', '"payments", "refunds"'))
    repo.factory.clusters["west"].add_topic("refunds", 1)
    assert run(repo, capsys, "apply", PATH, "--auto-approve")[0] == 0
    assert applied(repo, "east")["git"]["dirty"] is True and applied(repo, "east")["revision"] == repo.v2 + "-dirty"
    assert applied(repo, "west")["revision"] == repo.v2, "west was not changed by that apply"

    # a plan saved from an old revision records that revision when applied
    repo.factory.clusters["west"].add_topic("orders-late", 1)
    repo.write(f"{PATH}/flows.yaml", FLOWS_V2.replace('["orders"]}', '["orders", "orders-late"]}'))
    repo.v3 = repo.commit(
        "v3: orders-late to north", {f"{PATH}/flows.yaml": (repo.root / PATH / "flows.yaml").read_text()}
    )
    planfile = repo.root.parent / "plan.json"
    assert run(repo, capsys, "plan", PATH, "--revision", repo.v3[:8], "--out", str(planfile))[0] == 0
    assert json.loads(planfile.read_text())["git"]["commit"] == repo.v3
    assert run(repo, capsys, "apply", str(planfile), PATH, "--auto-approve")[0] == 0
    assert applied(repo, "north")["git"]["commit"] == repo.v3 and applied(repo, "north")["git"]["dirty"] is False
    assert (
        repo.factory.clusters["north"].topics["reconciler.lease.internal"]
        is repo.factory.clusters["north"].topics[LEASE_TOPIC]
    )


def test_drift_reports_the_reconciled_revision_and_reads_old_revisions(repo, capsys, monkeypatch):
    assert run(repo, capsys, "apply", PATH, "--auto-approve")[0] == 0
    code, out, _ = run(repo, capsys, "drift", PATH, "--no-jobs", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["status"] == "in-sync" and doc["revision"]["commit"] == repo.v2
    east = next(c for c in doc["clusters"] if c["cluster"] == "east")
    assert east["applied"]["commit"] == repo.v2 and east["applied"]["author"] == "Alice Example"
    # as of v1 the live clusters have too much: west.payments and the north flow are not in v1
    code, out, _ = run(repo, capsys, "drift", PATH, "--no-jobs", "--revision", repo.v1)
    assert code == 2
    assert f'topology revision: {repo.v1[:7]} "v1" by Alice Example' in out
    assert "east:west.payments looks replicated from west but no enabled flow wants it" in out
    assert f"last reconciled to {repo.v2[:7]}" in out
