"""Topic families: several named flows of one source->target pair."""

from __future__ import annotations

import pytest

from reconciler.analysis.hazards import analyse
from reconciler.contract.spec import JobSpec, job_group, transactional_id
from reconciler.jobplan.state import desired_jobs
from reconciler.plan.desired import TopicRole
from reconciler.topology.diagnostics import Diagnostics, TopologyError
from reconciler.topology.model import flow_ends, flow_name
from tests.plan_helpers import World, topology

FAMILIES = """flows:
  - source: west
    target: east
    name: orders
    topics: {include: ["orders\\\\..*"]}
    job: {parallelism: 4}
  - source: west
    target: east
    name: rest
    topics: {include: [".*"], exclude: ["orders\\\\..*"]}
  - {source: east, target: west}
"""


def analysed(text: str) -> Diagnostics:
    diags = Diagnostics()
    analyse(topology(text), diags)
    return diags


def test_flow_ids():
    assert flow_name("west", "east") == "west->east"
    assert flow_name("west", "east", "orders") == "west->east:orders"
    assert flow_ends("west->east:orders") == ("west", "east", "orders")
    assert flow_ends("a-b->c_d") == ("a-b", "c_d", None)


def test_two_families_are_two_jobs_with_their_own_names_groups_and_transactions():
    topo = topology(FAMILIES)
    assert analysed(FAMILIES).ok
    assert [f.name for f in topo.flows] == ["west->east:orders", "west->east:rest", "east->west"]
    jobs = desired_jobs(topo)
    orders, rest = jobs["west->east:orders"].spec, jobs["west->east:rest"].spec
    assert (orders.engine.parallelism, rest.engine.parallelism) == (4, 2)  # own settings
    assert job_group(orders) == "__reconciler.mirror.west->east:orders" != job_group(rest)
    assert transactional_id(orders, 0) != transactional_id(rest, 0)
    assert JobSpec.from_json(orders.to_json()) == orders
    # heartbeats once per pair: the first family by name carries them
    assert (orders.emits_heartbeats, orders.settings.carries_heartbeats) == (True, True)
    assert (rest.emits_heartbeats, rest.settings.carries_heartbeats) == (False, False)


def test_families_plan_internal_topics_once_per_pair_and_name_the_family():
    topo = topology(FAMILIES)
    world = World(topo)
    world["west"].add_topic("orders.eu", 3)
    world["west"].add_topic("clicks", 2)
    plan = world.plan()
    creates = {(a.cluster, a.subject): a for a in plan.actions if a.KIND.value == "create_topic"}
    assert ("east", "west.orders.eu") in creates and ("east", "west.clicks") in creates
    assert "west->east:orders" in creates[("east", "west.orders.eu")].reason
    assert "west->east:rest" in creates[("east", "west.clicks")].reason
    # one heartbeats copy, one checkpoints topic and one offset-syncs topic for the pair
    assert ("east", "west.heartbeats") in creates
    from reconciler.plan.desired import desired_state

    state = desired_state(topo, world.live())
    internal = [t for t in state.all() if t.role is not TopicRole.REMOTE and t.cluster in ("west", "east")]
    names = sorted((t.cluster, t.name) for t in internal)
    assert names.count(("east", "west.checkpoints.internal")) == 1
    assert names.count(("west", "mm2-offset-syncs.east.internal")) == 1
    cp = state.get("east", "west.checkpoints.internal")
    assert set(cp.flows) == {"west->east:orders", "west->east:rest"}
    hb = state.get("east", "west.heartbeats")
    assert hb.flows == ("west->east:orders",)


def test_overlapping_families_are_refused_naming_both_and_a_topic():
    text = FAMILIES.replace("], exclude: [", ", ")  # rest now includes orders.* too
    assert text != FAMILIES
    diags = analysed(text)
    [err] = diags.errors
    assert "west->east:orders and west->east:rest overlap" in err.message
    assert "'orders.a'" in err.message or "orders." in err.message
    assert err.where.line == 13 and err.related[0].line == 8  # the second family; the first as related


@pytest.mark.parametrize(
    "flows, message",
    [
        ("flows:\n  - {source: west, target: east}\n  - {source: west, target: east}\n", "duplicate flow west->east"),
        ("flows:\n  - {source: west, target: east, name: a}\n  - {source: west, target: east}\n", "without a `name`"),
        (
            "flows:\n  - {source: west, target: east, name: a}\n  - {source: west, target: east, name: a}\n",
            "duplicate topic family 'a'",
        ),
    ],
)
def test_pairs_need_distinct_family_names(flows, message):
    with pytest.raises(TopologyError) as exc:
        topology(flows)
    assert message in str(exc.value)


def test_topologies_without_names_keep_their_job_specs():
    topo = topology("flows:\n  - {source: west, target: east}\n")
    spec = desired_jobs(topo)["west->east"].spec
    assert "family" not in spec.to_dict() and "carries_heartbeats" not in spec.to_dict()
    assert job_group(spec) == "__reconciler.mirror.west->east"
    assert transactional_id(spec, 1) == "reconciler.mirror.west->east.1"


def test_families_cannot_be_exported_to_mm2(tmp_path, capsys):
    from reconciler.cli.main import main

    f = tmp_path / "t.yaml"
    f.write_text(
        "apiVersion: reconciler/v1\nkind: Topology\nclusters:\n"
        "  west: {bootstrap_servers: 'a:1'}\n  east: {bootstrap_servers: 'b:1'}\n" + FAMILIES
    )
    for fmt in ("mm2", "strimzi"):
        assert main(["export", fmt, str(f)]) == 1
        err = capsys.readouterr().err
        assert f"{f}:7: error: flow west->east:orders is a topic family" in err
