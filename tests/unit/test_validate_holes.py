"""`reconciler validate` on the inputs issue 24 found: every one an answer (valid, or located errors),
never a traceback, a hang or a flood of output."""

from __future__ import annotations

import pytest

from reconciler.analysis.witness import MAX_CHARS, examples
from reconciler.cli.main import main
from tests.helpers import write

TWO_CLUSTERS = """\
apiVersion: reconciler/v1
kind: Topology
clusters:
  west: {bootstrap_servers: "127.0.0.1:1"}
  east: {bootstrap_servers: "127.0.0.1:2"}
"""


def _flows(*lines: str) -> str:
    return TWO_CLUSTERS + "flows:\n" + "".join(f"  - {line}\n" for line in lines)


# --- 1. witness generation is bounded whatever the repeat counts ---------------------------------

HUGE_REPEATS = ["x{1000000000}", "x{4294967294}", "[ab]{4294967294}", "x{100000000}", "(ab|c){99999999}y"]


@pytest.mark.parametrize("pattern", HUGE_REPEATS)
def test_a_huge_repeat_count_has_no_example_longer_than_a_topic_name(pattern):
    assert all(len(e) <= MAX_CHARS for e in examples(pattern))
    assert examples(pattern) == (), "no topic name can be that long"


def test_examples_up_to_the_topic_name_limit_are_still_found():
    assert examples("x{249}") == ("x" * 249,)
    assert examples("x{250}") == ()
    assert examples("(ab|cd){3}")[0] == "ababab"


@pytest.mark.parametrize("pattern", HUGE_REPEATS)
def test_validate_answers_a_huge_repeat_count_in_a_few_lines(tmp_path, capsys, pattern):
    """The linear-time matcher (issue 44) counts at most 1,000: a bigger count is one located error."""
    f = write(tmp_path, "t.yaml", _flows(f'{{source: west, target: east, topics: {{include: ["{pattern}"]}}}}'))
    assert main(["validate", str(f)]) == 1
    err = capsys.readouterr().err
    assert f"{f}:7:" in err and "counts more than the linear-time matcher allows (at most 1,000" in err
    assert len(err) < 2_000 and "Traceback" not in err


# --- 3. a cluster name YAML reads as a bool, an int or None is a located error -------------------


@pytest.mark.parametrize("written", ["1", "true", "~", "yes", "1.5", "null"])
def test_a_cluster_name_that_is_not_a_string_is_located_with_the_fix(tmp_path, capsys, written):
    f = write(
        tmp_path,
        "t.yaml",
        TWO_CLUSTERS
        + f'  {written}: {{bootstrap_servers: "127.0.0.1:3"}}\n'
        + "flows:\n  - {source: west, target: eest}\n"
        + f"  - {{source: {written}, target: east}}\n"
        + f"  - {{source: west, target: {written}}}\n",
    )
    assert main(["validate", str(f)]) == 1
    err = capsys.readouterr().err
    assert f"{f}:6:3: error: cluster name {written} is not a string: quote it ('{written}')" in err
    assert f"{f}:9:14: error: flows[1].source: name {written} is not a string: quote it ('{written}')" in err
    assert f"{f}:10:28: error: flows[2].target: name {written} is not a string: quote it ('{written}')" in err
    assert f"{f}:8:28: error: flow target 'eest' is not a defined cluster" in err, "the other flows are still checked"
    assert "Traceback" not in err


# --- 4. long values are cut in every message -------------------------------------------------------


def test_a_long_value_is_shown_as_its_start_and_its_length(tmp_path, capsys):
    name, pattern = "w" * 90_000, "q" * 900 + "("
    f = write(
        tmp_path,
        "t.yaml",
        "apiVersion: reconciler/v1\nkind: Topology\nclusters:\n"
        f'  ? {name}\n  : {{bootstrap_servers: "127.0.0.1:1"}}\n'
        '  east: {bootstrap_servers: "127.0.0.1:2"}\n'
        f"flows:\n  - {{source: east, target: {'z' * 90_000}}}\n"
        f'  - {{source: east, target: {name}, topics: {{include: ["{pattern}"]}}}}\n',
    )
    assert main(["validate", str(f)]) == 1
    err = capsys.readouterr().err
    assert len(err) < 3_000, "each value is cut to about 200 characters"
    assert f"{f}:8:" in err and "flow target '" + "z" * 200 + "... (90,000 chars) is not a defined cluster" in err
    assert "known clusters: east, " + "w" * 200 + "... (90,000 chars)" in err
    assert "pattern '" + "q" * 200 + "... (901 chars) does not compile" in err


def test_cut_values_keeps_short_words_and_what_follows_a_quoted_value():
    from reconciler.textutil import MESSAGE_CHARS, cut_values

    assert cut_values("flow a->b: topic 'orders' is fine") == "flow a->b: topic 'orders' is fine"
    assert cut_values(f"names {'a' * 300!r}, then more") == f"names '{'a' * 200}... (300 chars), then more"
    assert len(cut_values("a b " * 100_000)) <= MESSAGE_CHARS + 20
    once = cut_values(f"names {'a' * 300!r}, then more")
    assert cut_values(once) == once, "a value cut already is left as it is"


# --- 2. a pattern that backtracked catastrophically is matched in linear time (issues 24, 44) -------

ONCE_CATASTROPHIC = [
    "(x+)+y",
    "(x*)*",
    "(a|a)*",
    "(x|xx)+y",
    "(x+x+)+y",
    r"(\w+\s?)+",
    "(.*-)+",
    "(a*ba*)+",
    "(x+){50}",
]


@pytest.mark.parametrize("pattern", ONCE_CATASTROPHIC)
def test_a_once_catastrophic_pattern_is_accepted_and_answers_at_once(tmp_path, capsys, pattern):
    """Issue 24 refused these (Python's and Java's engines backtrack exponentially on them); RE2 matches them
    in time linear in the name, so validate accepts them and a filter answers on a 249-character name."""
    from reconciler.mirror.filters import TopicFilter

    f = write(tmp_path, "t.yaml", _flows(f"{{source: west, target: east, topics: {{include: ['{pattern}']}}}}"))
    assert main(["validate", str(f)]) == 0, capsys.readouterr().err
    TopicFilter((pattern,)).matches("x" * 249)  # would take longer than the universe's age with `re`


@pytest.mark.parametrize(
    "place",
    [
        'topics: {include: ["(?=x)y"]}',
        'topics: {include: [".*"], exclude: ["(?=x)y"]}',
        'groups: {include: ["(?=x)y"]}',
        'topics: {include: [".*"], builtin_exclude: ["(?=x)y"]}',
    ],
)
def test_validate_refuses_a_construct_the_matcher_cannot_express_at_its_position(tmp_path, capsys, place):
    f = write(
        tmp_path,
        "t.yaml",
        _flows(
            '{source: west, target: east, topics: {include: ["x{30}"]}}', f"{{source: east, target: west, {place}}}"
        ),
    )
    assert main(["validate", str(f)]) == 1
    err = capsys.readouterr().err
    col = _flows("", f"{{source: east, target: west, {place}}}").splitlines()[-1].index("(?=x)y")
    assert f"{f}:8:{col}: error: pattern '(?=x)y' is refused: lookahead `(?=` is not supported" in err
    assert "exclude pattern" in err


def test_validate_refuses_an_unsupported_residency_pattern(tmp_path, capsys):
    f = write(
        tmp_path,
        "t.yaml",
        _flows('{source: west, target: east, topics: {include: ["x{30}"]}}')
        + "policies:\n  residency:\n    - {name: eu, topics: [orders, '(x)\\1y'], tag: zone, allowed: [eu]}\n",
    )
    assert main(["validate", str(f)]) == 1
    err = capsys.readouterr().err
    assert f"{f}:10:35: error: pattern '(x)\\\\1y' is refused: the backreference `\\1` is not supported" in err


def test_a_jobs_filters_refuse_what_validate_refuses():
    """One check: a spec whose filter holds such a pattern is refused when the job reads it."""
    from reconciler.contract.spec import JobSpec
    from reconciler.mirror.filters import GroupFilter, TopicFilter
    from reconciler.topology.build import load_topology_text
    from tests.helpers import MINIMAL

    with pytest.raises(ValueError, match=r"pattern 'x\+\+y' is refused: the possessive quantifier"):
        TopicFilter(("orders",), ("x++y",))
    with pytest.raises(ValueError, match="is refused: the atomic group"):
        GroupFilter(("(?>a)*",))
    topology = load_topology_text(MINIMAL)
    spec = JobSpec.from_flow(topology, topology.flows[0]).to_dict()
    spec["settings"]["topics"]["include"] = ["(?<=a)b"]
    with pytest.raises(ValueError, match="is refused: lookbehind"):
        JobSpec.from_dict(spec)


# --- 5. a 200-cluster full mesh validates (no alias-bomb false positive; no quadratic step) ---------


def full_mesh(n: int) -> str:
    """n clusters, a flow between every ordered pair (n * (n - 1)), each carrying its source's own
    topics (`cI-.*`) and no remote ones; written out in full, no YAML alias anywhere."""
    lines = ["apiVersion: reconciler/v1", "kind: Topology", "clusters:"]
    lines += [f"  c{i}: {{bootstrap_servers: 'h{i}:9092'}}" for i in range(n)]
    lines += ["flows:"]
    lines += [
        f"  - {{source: c{i}, target: c{j}, topics: {{include: ['c{i}-.*'], exclude: ['.*[.].*']}}, "
        "heartbeats: {replicate: false}}"
        for i in range(n)
        for j in range(n)
        if i != j
    ]
    return "\n".join(lines) + "\n"


def test_a_200_cluster_full_mesh_is_accepted(tmp_path, monkeypatch):
    from reconciler.analysis.hazards import analyse
    from reconciler.topology.build import load_topology

    # 39,800 flows: past the default RECONCILER_MAX_FLOWS (test_a_topology_past_the_flow_limit_is_refused...)
    monkeypatch.setenv("RECONCILER_MAX_FLOWS", "40000")
    f = write(tmp_path, "mesh.yaml", full_mesh(200))
    topology, diags = load_topology([f])
    assert topology is not None, diags.render()[:2_000]  # was refused as an alias bomb (over 200,000 values)
    assert len(topology.clusters) == 200 and len(topology.flows) == 200 * 199
    # 200 clusters x 199 targets x each source's examples: past the default bound of 10,000 remote
    # topics by design (RECONCILER_MAX_REMOTE_TOPICS); the bound is injected
    analyse(topology, diags, limit=1_000_000)
    assert diags.ok, diags.render()[:2_000]


def test_a_topology_past_the_flow_limit_is_refused_at_the_first_flow_past_it(tmp_path, monkeypatch, capsys):
    """RECONCILER_MAX_FLOWS (default 5,000): refused when read, at the line of the first flow past it, before the
    work grows with it (a 200-cluster mesh is 39,800 flows); across files too."""
    from reconciler.cli.main import main

    monkeypatch.setenv("RECONCILER_MAX_FLOWS", "5")
    f = write(tmp_path, "mesh.yaml", full_mesh(3))  # 6 flows
    assert main(["validate", str(f)]) == 1
    err = capsys.readouterr().err
    first_past = 3 + 3 + 1 + 6  # header, 3 clusters, `flows:`, the 6th flow
    assert f"{f}:{first_past}:" in err and "more than 5 flows (limit, RECONCILER_MAX_FLOWS)" in err, err
    d = tmp_path / "split"
    d.mkdir()
    text = full_mesh(3)
    head, flows = text.split("flows:\n")
    lines = flows.splitlines()
    write(d, "a.yaml", head + "flows:\n" + "\n".join(lines[:3]) + "\n")
    write(d, "b.yaml", "apiVersion: reconciler/v1\nkind: Topology\nflows:\n" + "\n".join(lines[3:]) + "\n")
    assert main(["validate", str(d)]) == 1
    err = capsys.readouterr().err
    assert f"{d / 'b.yaml'}:" in err and "more than 5 flows" in err, err
    monkeypatch.setenv("RECONCILER_MAX_FLOWS", "6")
    assert main(["validate", str(f)]) == 0, capsys.readouterr().err


def test_an_mm2_import_past_the_flow_limit_is_refused_before_it_is_built(tmp_path, monkeypatch, capsys):
    from reconciler.cli.main import main

    monkeypatch.setenv("RECONCILER_MAX_FLOWS", "2")
    f = tmp_path / "mm2.properties"
    names = ["a", "b", "c"]
    lines = ["clusters = a, b, c"] + [f"{n}.bootstrap.servers = {n}:9092" for n in names]
    lines += [f"{s}->{t}.enabled = true" for s in names for t in names if s != t]
    f.write_text("\n".join(lines) + "\n")
    assert main(["import", "mm2", str(f)]) == 1
    err = capsys.readouterr().err
    assert f"{f}:7: error: more than 2 flows (limit, RECONCILER_MAX_FLOWS)" in err, err


def test_an_empty_tagged_int_and_a_lone_surrogate_are_errors_not_tracebacks():
    """Found by the long property run (strimzi kind, seed 24): `!!int` with no value raised IndexError in
    PyYAML's constructor; a lone surrogate made libyaml's event parser (the flow-limit pre-scan) raise
    UnicodeEncodeError. Both are errors at a line of the file."""
    from reconciler.topology.diagnostics import Diagnostics
    from reconciler.topology.loader import load_text

    diags = Diagnostics()
    assert load_text("apiVersion: reconciler/v1\nkind: !!int\n", "t.yaml", diags) == []
    assert not diags.ok and "t.yaml:2:" in diags.render(), diags.render()
    diags = Diagnostics()
    load_text("apiVersion: reconciler/v1\nkind: Topology\nmetadata: {name: '\udc80'}\n", "t.yaml", diags)
    assert not diags.ok and "t.yaml:" in diags.render(), diags.render()
