"""bench/curves.py's pieces that decide what it prints: the fitted line (and when it says a line does not fit), the
points of each axis, and the topology of many flows on one source broker validating as a user's would.

The measurements themselves (brokers, an engine) are the benchmark's; no timing is asserted here.
"""

from __future__ import annotations

import argparse

import pytest

from bench.curves import Axis, fit, point_for
from bench.scale import TARGET, FlowDecl, sample_groups, topology_yaml
from reconciler.topology.build import load_topology_text


def _opts(**kw) -> argparse.Namespace:
    return argparse.Namespace(**({"partitions_per_topic": 5, "base_groups": 10, "base_partitions": 100} | kw))


def test_a_straight_line_is_fitted_with_its_slope_and_intercept():
    f = fit([10, 100, 1000], [2.0 + 0.5 * x for x in (10, 100, 1000)])
    assert f is not None
    assert f.slope == pytest.approx(0.5) and f.intercept == pytest.approx(2.0)
    assert f.r2 == pytest.approx(1.0) and f.max_residual == pytest.approx(0.0, abs=1e-9)
    assert f.verdict.startswith("R^2 1.00")


def test_points_off_a_line_say_a_line_does_not_fit():
    f = fit([1, 2, 3, 4], [0.0, 10.0, 0.0, 10.0])
    assert f is not None and f.r2 < 0.9
    assert "a line does not fit" in f.verdict and "largest residual" in f.verdict


def test_two_points_make_a_line_through_both_and_missing_figures_are_left_out():
    f = fit([1, 2, 3], [1.0, float("nan"), 5.0])
    assert f is not None and f.points == 2 and f.slope == pytest.approx(2.0)
    assert f.verdict == "2 points: a line through both"
    assert fit([1, 2], [1.0, float("nan")]) is None


def test_each_axis_varies_its_own_count_only():
    opts = _opts()
    assert point_for(Axis.PARTITIONS, 10, opts).partitions == 10
    p = point_for(Axis.PARTITIONS, 2500, opts)
    assert (p.partitions, p.partitions_per_topic, p.groups, p.flows) == (2500, 5, 10, 1)
    g = point_for(Axis.GROUPS, 10000, opts)
    assert (g.partitions, g.groups, g.flows) == (100, 10000, 1)
    f = point_for(Axis.FLOWS, 50, opts)
    assert (f.partitions, f.partitions_per_topic, f.groups, f.flows) == (50, 1, 50, 50)
    assert len(f.aliases) == 50 and len(set(f.aliases)) == 50


def test_many_flows_on_one_source_broker_validate_into_one_target():
    aliases = ["s000", "s001", "s002"]
    flows = [FlowDecl(a, f"{a}\\d{{5}}", f"{a}g\\d{{6}}") for a in aliases]
    text = topology_yaml({a: "127.0.0.1:9092" for a in aliases} | {TARGET: "127.0.0.1:9093"}, flows, name="curves")
    topo = load_topology_text(text)
    assert len(topo.flows) == 3
    assert {f.target for f in topo.flows} == {TARGET}


def test_the_sampled_groups_spread_over_the_topics_not_only_over_the_groups():
    topics = [f"a{i:05d}" for i in range(20)]
    groups = [f"ag{k:06d}" for k in range(10000)]
    picked = sample_groups({"a": (None, topics, groups)}, 500)
    assert len(picked) == 500 and len({s.group for s in picked}) == 500
    assert len({s.topic for s in picked}) == 20
    assert {s.remote.topic for s in picked} == {f"a.{t}" for t in topics}
