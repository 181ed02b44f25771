"""Graph analysis that scales (issue 12): meshes, long rings and identity meshes answer with findings,
and the expansion behind validate and plan stops past RECONCILER_MAX_REMOTE_TOPICS.

Sizes are the issue's (they hung or ran for tens of seconds before); speed is measured in
bench/analysis.py, not asserted here.
"""

from bench.analysis import mesh, ring
from reconciler.analysis.expansion import expand
from reconciler.analysis.hazards import analyse
from reconciler.cli.main import main
from reconciler.plan.desired import TopicRole, desired_state
from reconciler.plan.findings import FindingKind, Severity
from reconciler.state.live import Capabilities, ClusterState, LiveState, TopicState
from reconciler.topology.build import load_topology_text
from reconciler.topology.diagnostics import Diagnostics
from tests.helpers import write


def test_nine_cluster_mesh_is_a_multiplication_finding_not_a_hang(tmp_path, capsys):
    f = write(tmp_path, "mesh.yaml", mesh(9))
    assert main(["validate", str(f)]) == 1
    err = capsys.readouterr().err
    assert "replication multiplies topics: each topic on c0 would reach" in err
    assert "c0.a, c1.c0.a" in err and "RECONCILER_MAX_REMOTE_TOPICS" in err
    assert "exclude remote topics" in err


def test_fifty_cluster_mesh_is_refused_with_the_count(tmp_path, capsys):
    f = write(tmp_path, "mesh.yaml", mesh(50))
    assert main(["validate", str(f)]) == 1
    assert "remote copies" in capsys.readouterr().err


def test_thousand_cluster_ring_names_the_chain_and_kafkas_name_limit(tmp_path, capsys):
    f = write(tmp_path, "ring.yaml", ring(1000))
    assert main(["validate", str(f)]) == 1
    err = capsys.readouterr().err
    assert "would be copied along the chain" in err and "c0.a on c1, c1.c0.a on c2" in err


def test_identity_mesh_is_refused_as_a_loop(tmp_path, capsys):
    f = write(tmp_path, "identity.yaml", mesh(20, "identity"))
    assert main(["validate", str(f)]) == 1
    err = capsys.readouterr().err
    assert "error: replication loop c0 -> c1 -> c0" in err
    assert "multiplies" not in err  # the loop is the cause
    assert err.count("error: replication loop") == 20 and "more replication loops like the ones above" in err


def test_small_mesh_count_is_exact_with_the_shortest_lineages_first():
    topo = load_topology_text(mesh(4))
    diags = Diagnostics()
    exp = analyse(topo, diags, limit=20)
    m = exp.multiplied
    assert m is not None and not m.more
    assert m.cluster_copies == 5 and m.copies == 15  # simple paths c0 -> x in K4: 1 + 2 + 2, to 3 clusters
    [error] = [d for d in diags.errors if "multiplies" in d.message]
    assert f"would reach {m.cluster} as 5 remote copies: c0.a, c" in error.message


def test_below_the_limit_nothing_changes():
    topo = load_topology_text(mesh(4))
    diags = Diagnostics()
    exp = analyse(topo, diags)
    assert exp.complete and not diags.errors
    assert len(exp.remote("c3")["c2.c1.c0.a"]) == 1


def test_long_names_past_kafkas_limit_are_not_followed():
    topo = load_topology_text(ring(200))
    exp = expand(topo, {"c0": ["orders"]})
    assert exp.too_long and len(exp.too_long[0].topic) > 249
    assert max(p.hops for p in exp.placements()) < 199


def _live(**clusters):
    return LiveState(
        {
            a: ClusterState(a, {t.name: t for t in topics}, acls=(), capabilities=Capabilities.all_supported())
            for a, topics in clusters.items()
        }
    )


def test_plan_refuses_to_create_more_remote_topics_than_the_bound():
    topo = load_topology_text(mesh(4))
    live = _live(c0=[TopicState("orders", 3, 1)], c1=[], c2=[], c3=[])
    assert any(t.role is TopicRole.REMOTE for t in desired_state(topo, live).all())
    d = desired_state(topo, live, max_remote_topics=5)
    [f] = [f for f in d.findings if f.kind is FindingKind.MULTIPLIED]
    assert (
        f.severity is Severity.ERROR
        and "refusing to plan remote topics" in f.message
        and "RECONCILER_MAX_REMOTE_TOPICS" in f.message
    )
    assert not [t for t in d.all() if t.role is TopicRole.REMOTE]


def test_eight_cluster_mesh_counts_the_issues_1957_copies(tmp_path, capsys):
    f = write(tmp_path, "mesh.yaml", mesh(8))
    assert main(["validate", str(f)]) == 1
    err = capsys.readouterr().err
    assert "each topic on c0 would reach c1 as 1,957 remote copies: c0.a, c2.c0.a, c3.c0.a, ..." in err
    assert "(13,699 remote copies in all)" in err


def test_identity_cycle_beyond_the_bound_is_found_on_the_graph():
    """A long identity ring inside a default-policy mesh: the expansion stops at the bound before it
    walks the ring; strongly connected components still find the loop."""
    aliases = [f"c{i}" for i in range(8)]
    flows = [(s, t, "default") for s in aliases[:6] for t in aliases[:6] if s != t]
    ring_ = [f"r{i}" for i in range(12)]
    flows += [(ring_[i], ring_[(i + 1) % 12], "identity") for i in range(12)] + [("c0", "r0", "default")]
    lines = ["apiVersion: reconciler/v1", "kind: Topology", "clusters:"]
    lines += [f'  {a}: {{bootstrap_servers: "127.0.0.1:{9000 + i}"}}' for i, a in enumerate(aliases + ring_)]
    lines += ["flows:"] + [f"  - {{source: {s}, target: {t}, policy: {p}}}" for s, t, p in flows]
    topo = load_topology_text("\n".join(lines) + "\n")
    diags = Diagnostics()
    exp = analyse(topo, diags, limit=50)
    assert not exp.complete and not exp.loops
    loops = [d.message for d in diags.errors if d.message.startswith("replication loop r0 -> r1")]
    assert loops and "-> r11 -> r0: topic" in loops[0]
