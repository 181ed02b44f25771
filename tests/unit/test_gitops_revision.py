"""Topologies at git revisions, changed files and flows, and the work tree's revision, on real repositories.

Each test builds a temporary repository with gitpython (Repo.init, index.add, index.commit) and
commits topology files in several versions.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import git
import pytest

from reconciler.gitops import (
    ChangeKind,
    FlowChange,
    RevisionError,
    changed_since,
    compare_with_base,
    describe_revision,
    describe_worktree,
    load_topology_at,
)

ALICE = git.Actor("Alice Example", "alice@example.com")

CLUSTERS_V1 = """\
apiVersion: reconciler/v1
kind: Topology
clusters:
  west: {bootstrap_servers: "127.0.0.1:1"}
  east: {bootstrap_servers: "127.0.0.1:2"}
"""
FLOWS_V1 = """\
apiVersion: reconciler/v1
kind: Topology
flows:
  - source: west
    target: east
    topics: {include: ["orders"]}
"""
CLUSTERS_V2 = CLUSTERS_V1 + '  north: {bootstrap_servers: "127.0.0.1:3"}\n'
FLOWS_V2 = FLOWS_V1.replace('["orders"]', '["orders", "payments"]') + "  - {source: east, target: north}\n"
# v3 breaks the flows file on line 7: a flow to a cluster that does not exist
FLOWS_V3 = FLOWS_V2 + "  - {source: east, target: nowhere}\n"


class Repo:
    """A temporary repository that commits whole file sets."""

    def __init__(self, root: Path):
        self.root = root
        self.git = git.Repo.init(root)

    def write(self, files: dict[str, str | None]) -> None:
        for name, text in files.items():
            path = self.root / name
            if text is None:
                path.unlink()
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(textwrap.dedent(text))

    def commit(self, message: str, files: dict[str, str | None]) -> str:
        self.write(files)
        for name, text in files.items():
            (self.git.index.remove if text is None else self.git.index.add)([name])
        return self.git.index.commit(message, author=ALICE, committer=ALICE).hexsha


@pytest.fixture
def repo(tmp_path) -> Repo:
    r = Repo(tmp_path / "repo")
    r.commit(
        "topology v1",
        {"topologies/demo/clusters.yaml": CLUSTERS_V1, "topologies/demo/flows.yaml": FLOWS_V1, "README.md": "hello\n"},
    )
    r.commit(
        "topology v2: payments, east->north\n\nlonger body",
        {"topologies/demo/clusters.yaml": CLUSTERS_V2, "topologies/demo/flows.yaml": FLOWS_V2},
    )
    return r


def short(r: Repo, rev: str) -> str:
    return r.git.git.rev_parse("--short", rev)


def flow_names(topology) -> set[str]:
    return {f.name for f in topology.flows}


def test_load_the_topology_at_each_revision_without_touching_the_work_tree(repo):
    repo.write({"topologies/demo/flows.yaml": "garbage: [\n"})  # an uncommitted, broken edit
    for rev, flows in [
        ("HEAD~1", {"west->east"}),
        ("HEAD", {"west->east", "east->north"}),
        (repo.git.head.commit.parents[0].hexsha, {"west->east"}),
    ]:
        topology, diags = load_topology_at(repo.root, rev, ["topologies/demo"])
        assert diags.ok and flow_names(topology) == flows
        assert topology.files == (
            f"topologies/demo/clusters.yaml@{short(repo, rev)}",
            f"topologies/demo/flows.yaml@{short(repo, rev)}",
        )
    assert (repo.root / "topologies/demo/flows.yaml").read_text() == "garbage: [\n", "work tree untouched"
    assert repo.git.head.commit.message.startswith("topology v2")


def test_single_files_paths_relative_to_a_directory_and_absolute_paths(repo):
    topology, diags = load_topology_at(
        repo.root,
        "HEAD",
        [repo.root / "topologies/demo/clusters.yaml", "flows.yaml"],
        cwd=repo.root / "topologies/demo",
    )
    assert diags.ok and flow_names(topology) == {"west->east", "east->north"}
    with pytest.raises(RevisionError, match="outside the repository"):
        changed_since(repo.root, "HEAD", ["/"])


def test_errors_at_a_revision_name_the_file_at_its_short_sha_and_the_line(repo):
    bad = repo.commit("v3: broken", {"topologies/demo/flows.yaml": FLOWS_V3})
    repo.commit("v4: fixed", {"topologies/demo/flows.yaml": FLOWS_V2})
    topology, diags = load_topology_at(repo.root, bad, ["topologies/demo"])
    assert topology is None
    (error,) = diags.errors
    assert error.where.file == f"topologies/demo/flows.yaml@{short(repo, bad)}" and error.where.line == 8
    assert "'nowhere' is not a defined cluster" in error.message
    assert error.render().startswith(f"topologies/demo/flows.yaml@{short(repo, bad)}:8:")
    assert load_topology_at(repo.root, "HEAD", ["topologies/demo"])[1].ok


def test_unknown_revisions_and_paths_missing_at_a_revision_are_diagnostics(repo):
    topology, diags = load_topology_at(repo.root, "no-such-branch", ["topologies/demo"])
    assert topology is None and "unknown revision 'no-such-branch'" in diags.errors[0].message
    topology, diags = load_topology_at(repo.root, "HEAD", ["topologies/prod"])
    assert topology is None
    assert diags.errors[0].message == f"no such file or directory at {short(repo, 'HEAD')}: topologies/prod"
    _, diags = load_topology_at(repo.root, "HEAD", [""])  # the whole repository: README.md is not YAML
    assert diags.ok


def test_changed_files_between_two_commits(repo):
    first = repo.git.head.commit.parents[0].hexsha
    third = repo.commit(
        "v3: extra file, drop clusters", {"topologies/demo/extra.yaml": FLOWS_V1, "topologies/demo/clusters.yaml": None}
    )
    changes = changed_since(repo.root, first, ["topologies"], head_rev="HEAD~1")
    assert (changes.added, changes.modified, changes.deleted) == (
        (),
        ("topologies/demo/clusters.yaml", "topologies/demo/flows.yaml"),
        (),
    )
    changes = changed_since(repo.root, "HEAD~1", ["topologies"], head_rev=third)
    assert (changes.added, changes.modified, changes.deleted) == (
        ("topologies/demo/extra.yaml",),
        (),
        ("topologies/demo/clusters.yaml",),
    )
    assert changes.to_dict()["head"] == short(repo, third)
    assert changed_since(repo.root, "HEAD", ["topologies"], head_rev="HEAD").empty


def test_changed_files_between_a_commit_and_the_uncommitted_work_tree(repo):
    assert changed_since(repo.root, "HEAD", ["topologies/demo"]).empty
    repo.write(
        {
            "topologies/demo/flows.yaml": FLOWS_V3,  # modified, not staged
            "topologies/demo/new.yml": CLUSTERS_V1,  # untracked
            "topologies/demo/notes.txt": "not a topology",  # not YAML: ignored in directories
            "topologies/demo/clusters.yaml": None,
        }
    )  # deleted
    changes = changed_since(repo.root, "HEAD", ["topologies/demo"])
    assert changes.head is None and changes.to_dict()["head"] == "worktree"
    assert (changes.added, changes.modified, changes.deleted) == (
        ("topologies/demo/new.yml",),
        ("topologies/demo/flows.yaml",),
        ("topologies/demo/clusters.yaml",),
    )
    assert changes.files == ("topologies/demo/clusters.yaml", "topologies/demo/flows.yaml", "topologies/demo/new.yml")
    # the same edits seen from the older commit
    older = changed_since(repo.root, "HEAD~1", ["topologies/demo"])
    assert older.modified == ("topologies/demo/flows.yaml",) and older.deleted == ("topologies/demo/clusters.yaml",)


def test_describe_worktree_records_the_commit_and_a_dirty_flag(repo):
    info = describe_worktree(repo.root)
    head = repo.git.head.commit
    assert (info.commit, info.author, info.email, info.message_subject, info.dirty) == (
        head.hexsha,
        "Alice Example",
        "alice@example.com",
        "topology v2: payments, east->north",
        False,
    )
    assert head.hexsha.startswith(info.short) and len(info.short) >= 7
    assert info.time_iso == head.committed_datetime.isoformat()
    assert info.to_dict()["commit"] == head.hexsha and info.label() == info.short

    repo.write({"topologies/demo/flows.yaml": FLOWS_V3})
    assert describe_worktree(repo.root).dirty
    assert describe_worktree(repo.root / "topologies").dirty, "found from a subdirectory"
    assert not describe_worktree(repo.root, paths=["README.md"]).dirty, "dirty only within the given paths"
    repo.git.index.add(["topologies/demo/flows.yaml"])  # staged but not committed: still dirty
    assert describe_worktree(repo.root, paths=["topologies"]).dirty
    repo.git.index.commit("v3", author=ALICE, committer=ALICE)
    (repo.root / "topologies/demo/untracked.yaml").write_text("x: 1\n")
    assert describe_worktree(repo.root, paths=["topologies"]).dirty, "untracked files count"
    assert not describe_revision(repo.root, "HEAD~1").dirty


def test_not_a_repository_or_no_commits(tmp_path):
    with pytest.raises(RevisionError, match="not inside a git repository"):
        describe_worktree(tmp_path)
    git.Repo.init(tmp_path / "empty")
    with pytest.raises(RevisionError, match="no commits yet"):
        describe_worktree(tmp_path / "empty")


def test_compare_with_base_says_which_files_and_flows_changed(repo):
    base = repo.git.head.commit.parents[0].hexsha
    comparison, diags = compare_with_base(repo.root, base, ["topologies/demo"], head_rev="HEAD")
    assert diags.ok and not comparison.head_is_worktree
    assert comparison.files.modified == ("topologies/demo/clusters.yaml", "topologies/demo/flows.yaml")
    assert comparison.changes.flows == (
        FlowChange("east->north", ChangeKind.ADDED),
        FlowChange("west->east", ChangeKind.CHANGED, ("topics.include",)),
    )
    assert [c.alias for c in comparison.changes.clusters] == ["north"]
    assert comparison.affected_flows() == ("east->north", "west->east")

    # against the work tree, with an uncommitted change to one flow's job settings
    repo.write(
        {
            "topologies/demo/flows.yaml": FLOWS_V2.replace(
                "{source: east, target: north}", "{source: east, target: north, job: {parallelism: 7}}"
            )
        }
    )
    comparison, diags = compare_with_base(repo.root, "HEAD", ["topologies/demo"])
    assert diags.ok and comparison.head_is_worktree and comparison.head.dirty
    assert comparison.files.modified == ("topologies/demo/flows.yaml",)
    assert comparison.changes.flows == (FlowChange("east->north", ChangeKind.CHANGED, ("job.parallelism",)),)
    assert comparison.affected_flows() == ("east->north",)

    # an invalid base revision: nothing to diff against, so every flow is affected
    bad = repo.commit("broken", {"topologies/demo/flows.yaml": FLOWS_V3})
    repo.commit("fixed", {"topologies/demo/flows.yaml": FLOWS_V2})
    comparison, diags = compare_with_base(repo.root, bad, ["topologies/demo"])
    assert diags.ok and comparison.old is None and comparison.changes is None
    assert not comparison.base_diagnostics.ok
    assert comparison.affected_flows() == ("east->north", "west->east")
