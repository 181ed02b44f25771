"""Issue 44: every user pattern is matched in time linear in the name (RE2), from one place.

`validate` used to accept `\\w*\\w*\\w*\\w*\\w*\\w*\\w*\\w*z`, whose match took 2.3 s on a 40-character name and
55.6 s on 60 with Python's `re`, and `plan` never finished on a cluster holding a 200-character topic name.
Now each of the issue's patterns is either refused by validate with the construct named, or matched on a
249-character name in well under 10 ms (measured: a few microseconds on a quiet machine); the tests assert
< 50 ms, the median of five runs, a functional bound that survives a noisy machine, not a benchmark.
"""

from __future__ import annotations

import multiprocessing
import re
import statistics
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from reconciler.cli.main import main
from reconciler.mirror.filters import (
    DEFAULT_CONFIG_PROPERTY_EXCLUDES,
    DEFAULT_GROUP_EXCLUDES,
    DEFAULT_TOPIC_EXCLUDES,
    MAX_GROUP_ID_CHARS,
    MAX_TOPIC_NAME_CHARS,
    ConfigPropertyFilter,
    GroupFilter,
    PatternError,
    PatternFilter,
    TopicFilter,
    compile_user_pattern,
    pattern_problem,
)
from tests.helpers import write

BOUND_SECONDS = 0.050  # measured: microseconds; 10 ms is the issue's target, 50 ms the noisy-machine margin

# The issue's patterns: polynomial (`\w*` x 8, `.*` x 5) and exponential (nested repeats, overlapping
# alternatives) backtracking with Python's and Java's engines.
ISSUE_PATTERNS = [
    r"\w*\w*\w*\w*\w*\w*\w*\w*z",
    "(x+)+y",
    "(a|a)*b",
    "(.*a){12}",
    "(x|xx)+y",
    "(a*)*b",
    "(.*){12}z",
    "(a?){25}a{25}",
    ".*.*.*.*.*z",
    r"(\w+\s?)+z",
    "(a|aa)+$",
    "(x+x+)+y",
]
# Names each of them fails on after trying hard: the worst case of a backtracking engine.
ADVERSARIAL = ["a" * MAX_TOPIC_NAME_CHARS, "x" * MAX_TOPIC_NAME_CHARS, "a" * (MAX_TOPIC_NAME_CHARS - 1) + "!"]

TWO_CLUSTERS = """\
apiVersion: reconciler/v1
kind: Topology
clusters:
  west: {bootstrap_servers: "127.0.0.1:1"}
  east: {bootstrap_servers: "127.0.0.1:2"}
flows:
"""


def _median_seconds(match, name: str, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        match(name)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _topology_with(pattern: str, section: str = "topics", key: str = "include") -> str:
    quoted = pattern.replace("'", "''")
    return TWO_CLUSTERS + f"  - {{source: west, target: east, {section}: {{{key}: ['{quoted}']}}}}\n"


# --- 1. the issue's patterns: refused with the construct named, or linear ------------------------


@pytest.mark.parametrize("pattern", ISSUE_PATTERNS)
def test_an_issue_pattern_is_matched_on_a_249_character_name_at_once(pattern):
    assert pattern_problem(pattern) is None, "RE2 reads all of them: none is refused"
    compiled = compile_user_pattern(pattern)
    for name in ADVERSARIAL:
        assert _median_seconds(compiled.fullmatch, name) < BOUND_SECONDS, (pattern, name[:5])
    flt = TopicFilter((pattern,), (pattern,))
    assert _median_seconds(flt.matches, ADVERSARIAL[0]) < BOUND_SECONDS


@pytest.mark.parametrize("pattern", ISSUE_PATTERNS[:4])
def test_validate_accepts_an_issue_pattern_and_answers_in_seconds(tmp_path, capsys, pattern):
    f = write(tmp_path, "t.yaml", _topology_with(pattern))
    t = time.perf_counter()
    assert main(["validate", str(f)]) == 0, capsys.readouterr().err
    assert time.perf_counter() - t < 30, "validate (witnesses, routing) is not slowed by the pattern"


def test_the_issues_pattern_still_means_what_it_says():
    compiled = compile_user_pattern(r"\w*\w*\w*\w*\w*\w*\w*\w*z")
    assert compiled.fullmatch("a" * 248 + "z") and compiled.fullmatch("z")
    assert not compiled.fullmatch("a" * 249) and not compiled.fullmatch("a.z")


# --- 2. constructs RE2 cannot express: refused, named, located ----------------------------------

UNSUPPORTED = [
    ("(?=orders)o.*", "lookahead `(?=`"),
    ("(?!tmp-).*", "negative lookahead `(?!`"),
    ("(?<=a)b", "lookbehind `(?<=`"),
    ("(?<!a)b", "negative lookbehind `(?<!`"),
    ("(a)\\1", "backreference `\\1`"),
    ("(?P<n>a)(?P=n)", "named backreference `(?P=name)`"),
    ("(?<n>a)\\k<n>", "named backreference `\\k<name>`"),
    ("x++y", "possessive quantifier `++`"),
    ("x*+y", "possessive quantifier `*+`"),
    ("(?>x+)y", "atomic group `(?>`"),
    ("(a)?(?(1)b|c)", "conditional `(?(`"),
    ("(?#note)orders", "comment `(?#...)`"),
    ("(?x)orders", "inline flag `(?x`"),
    ("orders\\Z", "`\\Z`"),
    ("caf\\u00e9", "`\\uXXXX`"),
    ("x{,5}", "`{,5}` means `{0,5}` in Python"),
    ("x{1001}", "`{1001}` counts more than the linear-time matcher allows"),
    ("x{4294967294}", "`{4294967294}` counts more than"),
    ("x{3,2}", "minimum above its maximum"),
]


@pytest.mark.parametrize("pattern,words", UNSUPPORTED)
def test_an_unsupported_construct_is_named_with_what_to_do(pattern, words):
    problem = pattern_problem(pattern)
    assert problem is not None and words in problem, problem
    assert "character " in problem, "where in the pattern"
    with pytest.raises(PatternError, match=re.escape(words)):
        TopicFilter((pattern,))


@pytest.mark.parametrize(
    "section,key",
    [("topics", "include"), ("topics", "exclude"), ("groups", "include"), ("config_properties", "exclude")],
)
@pytest.mark.parametrize("pattern,words", [UNSUPPORTED[0], UNSUPPORTED[4], UNSUPPORTED[7]])
def test_validate_refuses_it_at_the_patterns_file_line_col(tmp_path, capsys, section, key, pattern, words):
    text = _topology_with(pattern, section, key)
    f = write(tmp_path, "t.yaml", text)
    assert main(["validate", str(f)]) == 1
    err = capsys.readouterr().err
    line = text.splitlines()[-1]
    col = line.index("'" + pattern[:3]) + 1
    assert f"{f}:{len(text.splitlines())}:{col}: error: pattern " in err, err
    assert words in err and "is not supported by the linear-time matcher" in err
    assert "Traceback" not in err


def test_validate_refuses_it_in_a_residency_rule(tmp_path, capsys):
    text = (
        _topology_with("orders")
        + "policies:\n  residency:\n    - {name: eu, topics: [orders, '(?!x).*'], tag: zone, allowed: [eu]}\n"
    )
    f = write(tmp_path, "t.yaml", text)
    assert main(["validate", str(f)]) == 1
    assert f"{f}:10:35: error: pattern '(?!x).*' is refused: negative lookahead `(?!`" in capsys.readouterr().err


# --- 3. names are bounded before they are matched -----------------------------------------------


def test_a_name_longer_than_its_bound_never_matches():
    assert TopicFilter((".*",)).matches("a" * MAX_TOPIC_NAME_CHARS)
    assert not TopicFilter((".*",)).matches("a" * (MAX_TOPIC_NAME_CHARS + 1))
    assert not PatternFilter((".*",)).matches("a" * 10_000), "residency rules match topic names"
    assert GroupFilter((".*",)).matches("g" * MAX_GROUP_ID_CHARS)
    assert not GroupFilter((".*",)).matches("g" * (MAX_GROUP_ID_CHARS + 1))
    configs = {"retention.ms": "1", "x" * 5_000: "1"}
    assert ConfigPropertyFilter().apply(configs) == {"retention.ms": "1"}, "no config is named so: not copied"


def test_a_filter_that_has_matched_still_pickles():
    """The driver routes topics with the spec's filters, then pickles the spec to Spark's workers."""
    import copy
    import pickle

    from reconciler.contract.spec import JobSpec
    from reconciler.topology.build import load_topology_text
    from tests.helpers import MINIMAL

    topology = load_topology_text(MINIMAL)
    spec = JobSpec.from_flow(topology, topology.flows[0])
    flow = spec.mirror_flow
    assert flow.topics.matches("orders.eu") and not flow.topics.matches("orders.tmp")
    assert not flow.groups.matches("connect-x") and flow.config_properties.should_replicate("retention.ms")
    again = pickle.loads(pickle.dumps(spec))
    assert again.mirror_flow.topics.matches("orders.eu") and again == spec
    flt = TopicFilter(("a", "b.*"))
    assert flt.matches("bx") and copy.deepcopy(flt).matches("bx")


def test_a_name_with_a_lone_surrogate_never_matches():
    assert not TopicFilter((".*",)).matches("a\ud800")


@pytest.mark.parametrize("length", [MAX_TOPIC_NAME_CHARS, 10_000])
def test_plan_against_a_cluster_holding_a_long_topic_name_completes(length):
    from reconciler.operations.plan import plan_topology
    from tests.plan_helpers import World, topology

    topo = topology(
        "flows:\n  - {source: west, target: east, topics: {include: "
        '["\\\\w*\\\\w*\\\\w*\\\\w*\\\\w*\\\\w*\\\\w*\\\\w*z", "(x+)+y", "o.*"]}, groups: {include: ["(a|a)*b"]}}'
    )
    world = World(topo)
    world["west"].add_topic("a" * (length - 1) + "!", 1)
    world["west"].add_topic("x" * length, 1)
    world["west"].add_topic("o" * 240 + "z", 1)
    t = time.perf_counter()
    planned = plan_topology(topo, world.backend())
    assert time.perf_counter() - t < 30
    created = {a.subject for a in planned.plan.actions if a.KIND.value == "create_topic"}
    assert "west." + "o" * 240 + "z" in created
    assert not any(name.startswith(("west.aaa", "west.xxx")) for name in created)


def test_an_engines_topic_refresh_reports_a_topic_name_past_kafkas_limit_and_copies_the_rest():
    from reconciler.contract.spec import JobSpec
    from reconciler.engine.topics import TopicInfo, plan_partitions
    from reconciler.topology.build import load_topology_text

    topology = load_topology_text(_topology_with(r"\w*\w*\w*\w*\w*\w*\w*\w*z"))
    flow = JobSpec.from_flow(topology, topology.flows[0]).mirror_flow
    long_name, fine = "a" * 9_999 + "z", "a" * 200 + "z"
    source = {long_name: TopicInfo(long_name, 1), fine: TopicInfo(fine, 1)}
    t = time.perf_counter()
    plan = plan_partitions(flow, source, {})
    assert time.perf_counter() - t < 1
    assert [rt.remote for rt in plan.create] == ["west." + fine]
    assert plan.findings == [
        f"source topic {'a' * 60}... (10,000 chars) is longer than Kafka's 249 characters: never replicated"
    ]


# --- 4. MirrorMaker 2's patterns keep working ----------------------------------------------------

CORPUS = Path(__file__).parent / "interop_files" / "corpus"


def _patterns_in(node) -> list[str]:
    if isinstance(node, dict):
        found = []
        for k, v in node.items():
            if k in ("include", "exclude", "builtin_exclude") and isinstance(v, list):
                found += [p for p in v if isinstance(p, str)]
            else:
                found += _patterns_in(v)
        return found
    if isinstance(node, list):
        return [p for item in node for p in _patterns_in(item)]
    return []


def test_an_imported_mm2_pattern_re2_cannot_read_is_named_at_the_line_of_the_setting(tmp_path, capsys):
    """Java reads lookahead; an import says at the input's line what to write instead (nothing is written)."""
    src = tmp_path / "mm2.properties"
    src.write_text(
        "clusters = a, b\na.bootstrap.servers = a:1\nb.bootstrap.servers = b:1\na->b.enabled = true\n"
        "a->b.topics = orders, (?!tmp-).*\n"
    )
    assert main(["import", "mm2", str(src)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{src}:5: error: pattern '(?!tmp-).*' is refused: negative lookahead `(?!`"), err


def test_mirrormaker_2s_built_in_excludes_and_the_import_corpus_patterns_are_read():
    builtins = DEFAULT_TOPIC_EXCLUDES + DEFAULT_GROUP_EXCLUDES + DEFAULT_CONFIG_PROPERTY_EXCLUDES
    assert [p for p in builtins if pattern_problem(p)] == []
    found = [
        p
        for f in sorted(CORPUS.glob("*.expected"))
        for doc in yaml.safe_load_all(f.read_text())
        for p in _patterns_in(doc)
    ]
    assert found, "the corpus's drafts hold patterns"
    assert [p for p in found if pattern_problem(p)] == []
    topics = TopicFilter((".*",))
    assert topics.matches("orders") and not topics.matches("mm2-offsets.west.internal")
    assert not topics.matches("__consumer_offsets") and not topics.matches("orders.replica")
    assert not GroupFilter((".*",)).matches("console-consumer-123")
    assert not ConfigPropertyFilter().should_replicate("min.insync.replicas")


# --- 5. the same answers as Python's `re` on ordinary patterns -----------------------------------

ATOMS = ["a", "b", "o", "-", "_", "0", r"\.", ".", "[a-c]", "[^a]", r"\d", r"\w", "[._-]", "[0-9]"]
QUANTIFIERS = ["", "", "*", "+", "?", "{2}", "{1,3}", "{0,}", "*?", "+?"]


@st.composite
def ordinary_patterns(draw, depth: int = 2) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        if depth > 0 and draw(st.integers(0, 4)) == 0:
            inner = "|".join(draw(st.lists(ordinary_patterns(depth - 1), min_size=1, max_size=3)))
            atom = draw(st.sampled_from(["({})", "(?:{})"])).format(inner)
        else:
            atom = draw(st.sampled_from(ATOMS))
        parts.append(atom + draw(st.sampled_from(QUANTIFIERS)))
    return "".join(parts)


NAMES = st.text(st.sampled_from(list("abo-_.0129xz")), max_size=12)


def _python_re_serves(conn) -> None:
    while True:
        pattern, names = conn.recv()
        compiled = re.compile(pattern)
        conn.send([compiled.fullmatch(name) is not None for name in names])


class PythonRe:
    """The oracle, Python's backtracking `re`, in a child process: a generated pattern it backtracks on
    exponentially (nested quantifiers, the very patterns the linear matcher exists for) is given up after
    `patience` seconds instead of hanging the suite (`re` cannot be interrupted in-process)."""

    def __init__(self, patience: float = 2.0):
        self.patience = patience
        self._conn = self._child = None

    def fullmatches(self, pattern: str, names: list[str]) -> list[bool] | None:
        if self._child is None:
            self._conn, theirs = multiprocessing.Pipe()
            self._child = multiprocessing.get_context("fork").Process(
                target=_python_re_serves, args=(theirs,), daemon=True
            )
            self._child.start()
        self._conn.send((pattern, names))
        if self._conn.poll(self.patience):
            return self._conn.recv()
        self.close()  # it backtracks still: a new child for the next example
        return None

    def close(self) -> None:
        if self._child is not None:
            self._child.kill()
            self._child.join()
            self._conn.close()
            self._conn = self._child = None


@pytest.fixture(scope="module")
def python_re():
    oracle = PythonRe()
    yield oracle
    oracle.close()


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(pattern=ordinary_patterns(), names=st.lists(NAMES, min_size=1, max_size=8))
def test_ordinary_patterns_match_as_with_pythons_re(python_re, pattern, names):
    assert pattern_problem(pattern) is None
    theirs = python_re.fullmatches(pattern, names)
    assume(theirs is not None)  # Python's re took exponential time on it (ours is linear): no oracle
    ours = compile_user_pattern(pattern)
    for name, expected in zip(names, theirs, strict=True):
        assert ours.fullmatch(name) == expected, (pattern, name)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(include=st.lists(ordinary_patterns(), min_size=1, max_size=3), name=NAMES)
def test_a_filter_joins_its_patterns_as_before(python_re, include, name):
    [expected] = python_re.fullmatches("|".join(f"(?:{p})" for p in include), [name]) or [None]
    assume(expected is not None)
    assert TopicFilter(tuple(include), builtin_exclude=()).matches(name) == expected


@pytest.mark.parametrize(
    "pattern,name,matches",
    [
        ("orders", "orders.eu", False),  # full match, as MM2's Matcher.matches()
        (r"orders\..*", "orders.eu", True),
        ("orders$", "orders", True),
        ("^orders", "orders", True),
        ("(?i)orders", "ORDERS", True),
        (r"\p{L}+", "caf\u00e9", True),  # Java reads \p{L}; Python's re does not
        (r"\Qa.b\E", "a.b", True),
        (r"\Qa.b\E", "axb", False),
        (r"\w+", "caf\u00e9", False),  # ASCII \w, as Java's (Python's re reads Unicode)
        (r"\d", "\u0663", False),  # ASCII \d, as Java's
        (".", "\n", False),
        (r"caf\x{e9}", "caf\u00e9", True),
        (r"\x{2603}{2}", "\u2603\u2603", True),  # not a count of 2603
        ("x{1000}", "x" * 1000, True),
    ],
)
def test_the_documented_choices(pattern, name, matches):
    assert compile_user_pattern(pattern).fullmatch(name) is matches


def test_a_flag_applies_to_its_own_pattern_only():
    flt = TopicFilter(("(?i)orders", "payments"), builtin_exclude=())
    assert flt.matches("ORDERS") and flt.matches("payments") and not flt.matches("PAYMENTS")
