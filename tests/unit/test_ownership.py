"""Ownership (issue 48): a topology's `owner:` claims the remote topics it creates (records in the cluster's lease
topic, state/ownership.py), its jobs carry it (JobSpec.owner), and prune deletes only what its owner claims: two
teams' topologies applied alternately to one cluster never delete each other's objects. Against the memory double
here; tests/integration/test_ownership_brokers.py does the same against real brokers."""

from __future__ import annotations

import json

import pytest

from reconciler.adapters.base import Record
from reconciler.adapters.memory_admin import MemoryCluster, MemoryFactory
from reconciler.apply.guard import TopologyGuard
from reconciler.cli.main import main
from reconciler.contract.spec import JobSpec
from reconciler.jobplan.plan import diff_jobs
from reconciler.jobplan.state import desired_jobs
from reconciler.plan.actions import RecordOwnership
from reconciler.state.ownership import LEASE_TOPIC, claim_key, claim_value, parse_claims
from reconciler.topology.build import load_topology_text
from tests.helpers import write
from tests.job_helpers import FakeDeployer, StatusBoard, fake_backend
from tests.plan_helpers import memory_backend

TEAM = """apiVersion: reconciler/v1
kind: Topology
metadata: {{name: {owner}}}
{owner_line}
clusters:
  west: {{bootstrap_servers: "127.0.0.1:1"}}
  east: {{bootstrap_servers: "127.0.0.1:2"}}
flows:
  - source: west
    target: east
    name: {family}
    topics: {{include: [{include}]}}
prune: {{topics: true, flows: true}}
"""


def team(owner: str | None, family: str, include: str) -> str:
    return TEAM.format(
        owner=owner or "legacy", owner_line=f"owner: {owner}" if owner else "", family=family, include=include
    )


class Shared:
    """Two memory clusters several topologies are applied to, through the CLI (lease, guard, handlers)."""

    def __init__(self, tmp_path, capsys):
        west = MemoryCluster("west")
        for name in ("orders.eu", "orders.us", "payments.eu"):
            west.add_topic(name, 2)
        self.factory = MemoryFactory({"west": west, "east": MemoryCluster("east")})
        self.tmp, self.capsys = tmp_path, capsys

    def file(self, name: str, text: str) -> str:
        return str(write(self.tmp, name, text))

    def apply(self, path: str) -> str:
        code = main(["apply", "--auto-approve", path], memory_backend(self.factory))
        out, err = self.capsys.readouterr()
        assert code == 0, out + err
        return out

    def plan(self, path: str) -> dict:
        assert main(["plan", "--format", "json", path], memory_backend(self.factory)) == 0
        return json.loads(self.capsys.readouterr().out)

    def east(self) -> set[str]:
        return {t for t in self.factory.clusters["east"].topics if t.startswith("west.") and "internal" not in t}

    def claims(self) -> dict[str, frozenset[str]]:
        log = self.factory.clusters["east"].topics[LEASE_TOPIC].log
        return parse_claims(Record(i, k, v) for i, (k, v) in enumerate(log))


@pytest.fixture
def shared(tmp_path, capsys):
    return Shared(tmp_path, capsys)


def test_two_teams_applied_alternately_never_delete_each_others_topics(shared):
    a = shared.file("a.yaml", team("team-a", "orders", '"orders\\\\..*"'))
    b = shared.file("b.yaml", team("team-b", "payments", "payments.eu"))
    out = shared.apply(a)
    assert "record owner team-a: claim 2 topics" in out
    assert shared.east() == {"west.orders.eu", "west.orders.us", "west.heartbeats"}
    assert shared.claims() == {"west.orders.eu": {"team-a"}, "west.orders.us": {"team-a"}}

    plan = shared.plan(b)  # team b prunes topics and flows, and does not want team a's topics
    assert [a["kind"] for a in plan["actions"] if a["kind"] == "delete_topic"] == []
    kept = {f["subject"]: f["message"] for f in plan["findings"] if f["kind"] == "retained"}
    assert kept["west.orders.eu"] == "east:west.orders.eu belongs to owner team-a (another topology); left alone"
    shared.apply(b)
    for path in (a, b, a, b):
        shared.apply(path)
        assert shared.east() == {"west.orders.eu", "west.orders.us", "west.payments.eu", "west.heartbeats"}
    assert shared.claims()["west.payments.eu"] == {"team-b"}

    # team a narrows its filter: prune deletes its own topic (and withdraws the claim), never team b's
    a2 = shared.file("a.yaml", team("team-a", "orders", '"orders\\\\.eu"'))
    plan = shared.plan(a2)
    assert [(x["kind"], x.get("topic")) for x in plan["actions"]] == [
        ("delete_topic", "west.orders.us"),
        ("record_ownership", None),
    ]
    assert next(x for x in plan["actions"] if x["kind"] == "record_ownership")["release"] == ["west.orders.us"]
    shared.apply(a2)
    assert shared.east() == {"west.orders.eu", "west.payments.eu", "west.heartbeats"}
    assert "west.orders.us" not in shared.claims()
    assert shared.plan(a2)["actions"] == [] and shared.plan(b)["actions"] == []


def test_an_owner_does_not_prune_what_it_never_claimed(shared):
    legacy = shared.file("legacy.yaml", team(None, "orders", '"orders\\\\..*"'))
    shared.apply(legacy)  # no owner: nothing claimed
    assert LEASE_TOPIC not in shared.factory.clusters["east"].topics or shared.claims() == {}
    owned = shared.file("owned.yaml", team("team-a", "payments", "payments.eu"))
    plan = shared.plan(owned)
    assert [x["kind"] for x in plan["actions"] if x["kind"] == "delete_topic"] == []
    unclaimed = {f["subject"]: f for f in plan["findings"] if f["kind"] == "unmanaged"}
    assert "owner team-a does not claim it" in unclaimed["west.orders.eu"]["message"]
    assert unclaimed["west.orders.eu"]["reason_kind"] == "ownership"


def test_a_topology_without_owner_never_prunes_a_claimed_topic(shared):
    shared.apply(shared.file("a.yaml", team("team-a", "orders", '"orders\\\\..*"')))
    legacy = shared.file("legacy.yaml", team(None, "payments", "payments.eu"))
    plan = shared.plan(legacy)
    assert [x["kind"] for x in plan["actions"] if x["kind"] in ("delete_topic", "record_ownership")] == []
    shared.apply(legacy)
    assert {"west.orders.eu", "west.orders.us"} <= shared.east()


def test_adding_an_owner_claims_the_topics_already_there(shared):
    shared.apply(shared.file("t.yaml", team(None, "orders", '"orders\\\\..*"')))
    owned = shared.file("t.yaml", team("team-a", "orders", '"orders\\\\..*"'))
    plan = shared.plan(owned)
    assert [x["kind"] for x in plan["actions"]] == ["record_ownership"]
    shared.apply(owned)
    assert shared.claims() == {"west.orders.eu": {"team-a"}, "west.orders.us": {"team-a"}}
    assert shared.plan(owned)["actions"] == []


def test_a_topic_two_owners_want_is_a_conflict_both_claim(shared):
    shared.apply(shared.file("a.yaml", team("team-a", "orders", '"orders\\\\..*"')))
    b = shared.file("b.yaml", team("team-b", "more", '"orders\\\\.eu"'))
    plan = shared.plan(b)
    conflict = [f for f in plan["findings"] if f["kind"] == "conflict" and f["subject"] == "west.orders.eu"]
    assert conflict and "claimed by team-a too" in conflict[0]["message"]


def test_claims_read_back_after_tombstones_and_garbage():
    records = [
        Record(0, claim_key("a", "t1"), claim_value("a", "t1")),
        Record(1, claim_key("b", "t1"), claim_value("b", "t1")),
        Record(2, claim_key("a", "t2"), claim_value("a", "t2")),
        Record(3, claim_key("a", "t2"), None),
        Record(4, b"owned/x/t3", b"not json"),
        Record(5, claim_key("c", "t4"), claim_value("d", "t4")),  # a value that is not its key's: skipped
        Record(6, b"applied/east", b"{}"),
    ]
    assert parse_claims(records) == {"t1": frozenset({"a", "b"})}


def test_the_guard_refuses_ownership_records_of_another_owner_or_topic():
    topo = load_topology_text(team("team-a", "orders", '"orders\\\\..*"'))
    guard = TopologyGuard(topo)
    assert guard.refusal(RecordOwnership("east", "", "team-a", ("west.orders.eu",))) is None
    assert "owner is team-a" in guard.refusal(RecordOwnership("east", "", "team-b", ("west.orders.eu",)))
    assert "not a remote topic" in guard.refusal(RecordOwnership("east", "", "team-a", ("west.payments.eu",)))
    assert "wants" in guard.refusal(RecordOwnership("east", "", "team-a", (), ("west.orders.eu",)))
    assert guard.refusal(RecordOwnership("east", "", "team-a", (), ("west.payments.eu",))) is None


# --- jobs ---------------------------------------------------------------------------------------


def test_a_job_spec_carries_its_owner_and_a_spec_without_one_hashes_as_before():
    plain = load_topology_text(team(None, "orders", "x"))
    owned = load_topology_text(team("team-a", "orders", "x"))
    a, b = JobSpec.from_flow(plain, plain.flows[0]), JobSpec.from_flow(owned, owned.flows[0])
    assert "owner" not in a.to_dict() and b.to_dict()["owner"] == "team-a"
    assert JobSpec.from_dict(b.to_dict()) == b and JobSpec.from_dict(a.to_dict()).owner is None
    assert a.changes(b) == {"owner": (None, "team-a")} and a.restart_fields(b) == set(), "taken in place"


def _jobs(topology_text: str, deployer: FakeDeployer):
    topology = load_topology_text(topology_text)
    backend = fake_backend(StatusBoard(), deployer)
    from reconciler.jobplan.state import read_jobs

    desired = desired_jobs(topology)
    return diff_jobs(topology, desired, read_jobs(topology, backend, desired, {}))


def test_prune_stops_only_the_owners_jobs_and_a_flow_of_another_owner_is_a_conflict():
    deployer = FakeDeployer()
    a = load_topology_text(team("team-a", "orders", "x"))
    deployer._start(JobSpec.from_flow(a, a.flows[0]), {"engine": "east"})
    # team b's topology (prune.flows on) does not have team a's flow: left alone
    actions, findings = _jobs(team("team-b", "payments", "y"), deployer)
    assert [x.KIND.value for x in actions] == ["deploy_job"]
    left = [f for f in findings if f.subject == "west->east:orders"]
    assert left and "belongs to owner team-a; left alone" in left[0].message
    # team b declares the same flow: an error, nothing changes team a's job
    actions, findings = _jobs(team("team-b", "orders", "y"), deployer)
    assert actions == [] and [f.kind.value for f in findings if f.severity.value == "error"] == ["conflict"]
    # team a's own topology without the flow stops it (prune.flows)
    actions, _ = _jobs(team("team-a", "other", "z"), deployer)
    assert sorted(x.KIND.value for x in actions) == ["deploy_job", "stop_job"]
