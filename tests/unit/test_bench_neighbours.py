"""The pieces bench/blast.py, bench/ratelimit.py and bench/scale.py share to time a flow beside another
(bench/neighbours.py), and scale.py's phases' choices: which partitions a poison backlog takes, the staged
topology a rate limit is applied with. What they print, not how fast anything is: no timing is asserted here."""

from __future__ import annotations

import argparse

import pytest

from bench.neighbours import CAP_TOLERANCE, PartitionWatch, cap_verdicts, poisoned_figures
from bench.scale import TARGET, Cluster, poison_partitions, poisoned_key, topology
from reconciler.topology.build import load_topology_text


def _watch(expected: dict, first: dict, last: dict, samples: list) -> PartitionWatch:
    """A watch as its thread leaves it (no broker: the figures are read off what it saw)."""
    w = object.__new__(PartitionWatch)
    w.expected, w.first, w.last, w.samples = expected, first, last, samples
    w.start = {k: 0 for k in expected}
    return w


def test_poisoned_figures_compare_records_per_partition_each_over_its_own_time():
    # healthy: 2 partitions, 1,000 records each, from t=0 to t=1; poisoned: 2 partitions, to t=2
    healthy = _watch(
        {("b.t", 0): 1000, ("b.t", 1): 1000},
        {("b.t", 0): (0.0, 0), ("b.t", 1): (0.0, 0)},
        {("b.t", 0): 1.0, ("b.t", 1): 1.0},
        [(0.0, 0), (0.5, 1000), (1.0, 2000)],
    )
    poisoned = _watch(
        {("a.t", 1): 1000, ("a.t", 2): 1000},
        {("a.t", 1): (0.0, 0), ("a.t", 2): (0.5, 0)},
        {("a.t", 1): 2.0, ("a.t", 2): 1.5},
        [(0.0, 0), (0.5, 500), (1.0, 1000), (2.0, 2000)],
    )
    r = poisoned_figures(healthy, poisoned)
    assert r["healthy_per_partition"] == pytest.approx(1000.0)
    assert r["poisoned_per_partition"] == pytest.approx(500.0)
    assert r["ratio_per_partition"] == pytest.approx(0.5)
    assert r["overlap_s"] == pytest.approx(1.0)  # both copy from t=0 to t=1
    assert r["ratio_while_both_copy"] == pytest.approx(0.5)  # 1,000 records against 2,000 in that second
    assert r["ratio_slowest_partition"] == pytest.approx(0.5)  # 500/s against 1,000/s


def test_cap_verdicts_say_met_within_the_tolerance_and_missed_outside():
    lo = 1 - CAP_TOLERANCE
    met = cap_verdicts([0.97, 1.02, 0.99], [0.9, 0.85, 1.0])
    assert "MET" in met[0] and "MET" in met[1] and f"{lo:.2f}" in met[0]
    missed = cap_verdicts([1.3, 1.25, 1.2], [0.5, 0.7, 0.6])
    assert "MISSED" in missed[0] and "MISSED" in missed[1]
    assert "0.600" in missed[1]  # the median printed


def test_the_poison_backlog_skips_the_poisoned_partition_and_takes_as_many_of_each_source():
    topics = {"a": [f"a{i:05d}" for i in range(10)], "b": [f"b{i:05d}" for i in range(10)]}
    opts = argparse.Namespace(partitions=5, poison_topics=4)
    bad = poisoned_key(topics, 5)
    parts = poison_partitions(topics, opts)
    assert bad == ("a00000", 4) and bad not in parts["a"]
    assert ("a00000", 0) in parts["a"]  # the poisoned topic's other partitions are in the backlog
    assert len(parts["a"]) == len(parts["b"]) == 4 * 5 - 1
    assert [p for _, p in parts["a"]] == [p for _, p in parts["b"]]


def test_the_rate_limit_topology_caps_flow_a_only_and_releases_only_the_staged_topics():
    clusters = {
        alias: Cluster(alias, broker=None, relay=argparse.Namespace(port=9000 + i))  # type: ignore[arg-type]
        for i, alias in enumerate(("a", "b", TARGET))
    }
    topo = load_topology_text(topology(clusters, {"b": ["rl0-solo"]}, 20000))
    flows = {f.source: f for f in topo.flows}
    assert flows["a"].rate_limit.records_per_second == 20000
    assert not flows["b"].rate_limit.limited
    assert flows["b"].topics.include == ("b[0-9]+|rl0-solo",)
    assert flows["a"].topics.include == ("a[0-9]+",)  # a topic released to b leaves a's spec as it was
    assert not load_topology_text(topology(clusters)).flows[0].rate_limit.limited


def test_a_partition_first_seen_late_keeps_its_records_in_the_flows_rate():
    # partition 1 is first seen at t=1 with 900 of its 1,000 records there: they landed inside the window (0-2 s)
    w = _watch(
        {("a.t", 0): 1000, ("a.t", 1): 1000},
        {("a.t", 0): (0.0, 100), ("a.t", 1): (1.0, 900)},
        {("a.t", 0): 2.0, ("a.t", 1): 1.5},
        [(0.0, 100), (1.0, 1500), (2.0, 2000)],
    )
    assert w.rate() == pytest.approx((2000 - 100) / 2.0)
