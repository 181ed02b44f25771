"""Hypothesis strategies for the three kinds of input the CLI reads from a file (issue 24):

* topologies (`reconciler validate FILE`): generated from schemas/topology.schema.json (`from_schema`,
  a strategy for the subset of JSON Schema the file uses: hypothesis-jsonschema does not run on the
  Hypothesis versions pinned here), full meshes of many clusters, and mutants of topologies/*;
* MirrorMaker 2 properties (`reconciler import mm2 FILE`): generated from the keys the importer maps
  (reconciler/interop/mm2_keys.py) and mutants of tests/unit/interop_files/full.properties;
* Strimzi KafkaMirrorMaker2 resources (`reconciler import strimzi FILE`): generated in both API shapes
  (v1beta2 `spec.clusters`, v1 `spec.target` + `mirrors[].source`) and mutants of the examples.

A mutant is an example's tree with one to four of: a key deleted or repeated, a value retyped (a
list where a mapping belongs, a bool, an int, None, a float), swapped for a huge string (up to
`Profile.huge`) or another part of the tree, nested thousands deep, written with an odd YAML tag or
alias, a key made a bool, an int or None, a regular expression with a big repeat or nested
quantifiers; then, sometimes, a mutation of the bytes (cut, CRLF, tabs, NUL, a BOM, invalid UTF-8).

Every strategy draws the bytes of one file.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from reconciler.interop.mm2_keys import CONNECTOR_KEYS, NOT_EXPRESSIBLE, POLICY_CLASSES, REFRESH_KEYS, Kind
from tests.property.yamlgen import Pairs, Raw, dump

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "topology.schema.json").read_text(encoding="utf-8"))
INTEROP = ROOT / "tests" / "unit" / "interop_files"


# Inputs that break the CLI on main today, each a hole of issue 24 being fixed in the file named.
# The quick run leaves them out so that it passes and guards everything else; the long run draws them
# (docs/property-tests-findings.md lists what it found). When a hole is fixed, delete it here: the quick run covers it then.
OPEN_HOLES: dict[str, str] = {}  # every hole of issue 24 is closed: the quick run draws every family


@dataclass(frozen=True)
class Profile:
    """How far the generated inputs go. The quick run keeps the extremes small enough to be fast and
    leaves out the open holes; the long run goes to what issue 24 measured."""

    huge: tuple[int, ...]  # characters of a huge string
    deep: tuple[int, ...]  # levels of a nested flow collection
    mesh: int  # clusters of a generated full mesh (at most)
    mm2_clusters: tuple[int, ...]  # aliases in a generated `clusters =` list
    left_out: frozenset[str] = frozenset()  # OPEN_HOLES not drawn
    rare: int = 0  # the last `rare` sizes of each tuple (and meshes past 30) are drawn one time in ten
    blowup_one_in: int = 10  # patterns that blow up (each costs a time bound while that hole is open)

    def draws(self, hole: str) -> bool:
        return hole not in self.left_out


QUICK = Profile(
    # values quoted whole stay under the stderr bound (tests/property/cli.py) below 64 K characters
    huge=(10_000, 100_000) if "long-values" not in OPEN_HOLES else (10_000, 30_000),
    deep=(50, 1_000),
    mesh=8,
    mm2_clusters=(50, 1_000),
    left_out=frozenset(OPEN_HOLES),
)
LONG = Profile(
    huge=(10_000, 100_000, 1_000_000, 10_000_000),
    deep=(50, 1_000, 10_000, 100_000),
    mesh=250,
    mm2_clusters=(50, 1_000, 10_000, 100_000),
    rare=2,
    blowup_one_in=100,
)


def sized(profile: Profile, sizes: tuple[int, ...]) -> st.SearchStrategy[int]:
    """One of `sizes`; the biggest (`profile.rare` of them) one time in ten: each costs seconds."""
    if not profile.rare or len(sizes) <= profile.rare:
        return st.sampled_from(sizes)
    common, rare = st.sampled_from(sizes[: -profile.rare]), st.sampled_from(sizes[-profile.rare :])
    return st.integers(0, 9).flatmap(lambda i: rare if i == 0 else common)


def mesh_size(profile: Profile) -> st.SearchStrategy[int]:
    if profile.mesh <= 30 or not profile.rare:
        return st.integers(2, profile.mesh)
    return st.integers(0, 9).flatmap(lambda i: st.integers(31, profile.mesh) if i == 0 else st.integers(2, 30))


# --- building blocks ---------------------------------------------------------------------------

ALIASES = ["west", "east", "a", "b", "dr", "primary", "backup", "c-1", "x_y"]
ODD_ALIASES: list[Any] = [True, False, 1, 0, None, 1.5, "", "yes", "1", "~", "a.b", "-x", "a b", "é", "a->b"]

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=24)
NAMES = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,12}", fullmatch=True)

REGEX_PLAIN = [
    "orders",
    "orders\\..*",
    ".*",
    "a|b",
    "payments-[0-9]+",
    "[a-z]+\\.events",
    "x{3}",
    "caf\u00e9",
    "scratch-.*",
    ".*\\.tmp",
]
# Patterns that blow up a backtracking matcher or a witness generator (issue 24): big repeats,
# nested quantifiers.
REGEX_BLOWUP = [
    "x{30}",
    "(x+)+y",
    "(a|aa)+$",
    "(a*)*b",
    "(.*){12}",
    "(a?){25}a{25}",
    "x{1000000000}",
    "x{4294967294}",
    "[ab]{4294967294}",
    "x{100000000}",
    "x{99999999999}",
]
# Patterns at the edge of what Python's and Java's regular expressions accept: syntax only one of
# them has, or neither.
REGEX_EDGE = [
    "(",
    "[z-a]",
    "a{2,1}",
    "(?P<g>a)",
    "(?<name>x)",
    "\\",
    "*",
    "(?<=a+)b",
    "(?=",
    "\\p{L}+",
    "[[:alpha:]]",
    "\\Q.\\E",
    "a++",
    "(?i)orders",
    "(?",
    "((((((((((a))))))))))*",
    "\\1",
    "(a)\\2",
    "[",
    "x{,5}",
    "\\u0041",
    "\\x{41}",
    "(?s).*",
    "^$",
]


def regex(profile: Profile) -> st.SearchStrategy[str]:
    """Topic and group patterns: plausible ones, edge syntax, small repeats, random metacharacters;
    one in `profile.blowup_one_in` a blow-up (big repeat, nested quantifiers)."""
    atoms = st.sampled_from(["x", "[ab]", "(x+)", ".", "(ab|a)", "\\d"])
    common = st.one_of(
        st.sampled_from(REGEX_PLAIN),
        st.sampled_from(REGEX_EDGE),
        st.builds("{}{{{}}}".format, atoms, st.integers(0, 8)),
        st.text(st.sampled_from(list("ab.?|()[]^$\\0123,-:<=!")), min_size=1, max_size=16),
    )
    if not profile.draws("regex-blowup"):
        return common
    blowup = st.one_of(
        st.sampled_from(REGEX_BLOWUP),
        st.builds("{}{{{}}}".format, atoms, st.integers(9, 40) | st.integers(0, 2**33)),
        st.text(st.sampled_from(list("ab.*+?|()[]{}^$\\0123,-:<=!")), min_size=1, max_size=16),
    )
    return st.integers(0, profile.blowup_one_in - 1).flatmap(lambda i: blowup if i == 0 else common)


# Values a YAML document can hold that no field of ours wants: tags, aliases, merge keys, sets.
ODD_YAML = [
    "!!bool yes}",
    "!!bool yes",
    "!!bool maybe",
    "!!int 0x1F",
    "!!int abc",
    "!!float nan",
    "!!float 1e999",
    "!!str",
    "!!binary AAAA",
    "!!binary ***",
    "!!set {a, b}",
    "!!omap [a: 1, b: 2]",
    "!!pairs [a: 1, a: 2]",
    "!!timestamp 2001-12-14",
    "!!timestamp 2026-13-45",
    "!!null x",
    "!!map [1]",
    "!!seq {a: 1}",
    "!!python/object:os.system ls",
    "!!python/name:os.system",
    "!!python/tuple [1, 2]",
    "!custom x",
    "!<tag:yaml.org,2002:str> x",
    "!<tag:example.com,2000:app/x> 1",
    "&a [*a]",
    "*nope",
    "&b x",
    "{<<: {a: 1}}",
    "{<<: [1]}",
    "{<<: *nope}",
    "? [a]",
    "|\n  block",
    ">-",
    "'unterminated",
    '"\\uD800"',
    '"\\x00"',
    '"\\N"',
    "0o17",
    "0x" + "f" * 40,
    "9" * 5000,
    "1e999",
    "-.inf",
    ".nan",
    "2026-13-45",
    "~",
    "[]",
    "{}",
    "[a, [b, {c: d}]]",
    "{a: 1, a: 2}",
    "%TAG ! tag:x,2000:",
    "---",
    "...",
    "@reserved",
    "`reserved",
    "- a",
    "a: b: c",
]

SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT,
)
ANY_VALUE = st.recursive(
    SCALAR | st.sampled_from(ODD_YAML).map(Raw),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(TEXT, children, max_size=3),
    max_leaves=8,
)


# Big values are built here from small draws (a unit, a size), never drawn whole: Hypothesis keeps
# every drawn value of the last 10,000 inputs (for its reports), and 10,000 x 10 MB does not fit.
HUGE_UNITS = ["x", "\u00e9", "ab.", "\\", "${X}", "{", "'", "\u4e2d"]


def huge(draw, profile: Profile) -> str:
    """A string of one of `profile.huge` characters."""
    unit = pick(draw, HUGE_UNITS)
    n = draw(sized(profile, profile.huge))
    return (unit * (n // len(unit) + 1))[:n]


def deep(draw, profile: Profile) -> Raw:
    """A flow collection nested one of `profile.deep` levels (closed, unclosed, with an alias)."""
    form = draw(st.integers(0, 3))
    n = draw(sized(profile, profile.deep))
    if form == 0:
        return Raw("[" * n + "]" * n)
    if form == 1:
        return Raw("{a: " * n + "1" + "}" * n)
    if form == 2:
        return Raw("[" * n)  # unclosed
    return Raw("[&x" + ", [" * n + "*x" + "]" * n + "]")


class FileInput:
    """What a strategy of files draws: the bytes, taken once (`take()`), so that Hypothesis keeps a
    small object, not the bytes, for each of the inputs it remembers."""

    def __init__(self, data: bytes):
        self.size = len(data)
        self.head = data[:200]
        self._data: bytes | None = data

    def take(self) -> bytes:
        data, self._data = self._data, None
        assert data is not None, "an input is taken once"
        return data

    def __repr__(self) -> str:
        return f"FileInput({self.size} bytes: {self.head!r}...)"


# --- JSON Schema -> strategy --------------------------------------------------------------------


def from_schema(
    node: dict,
    overrides: dict[tuple[str, ...], st.SearchStrategy] | None = None,
    defs: dict | None = None,
    path: tuple[str, ...] = (),
) -> st.SearchStrategy:
    """Values valid against `node`, for the JSON Schema keywords schemas/topology.schema.json uses
    (type, const, enum, properties, required, additionalProperties, propertyNames with pattern,
    items, minItems, minLength, pattern, minimum, maximum, exclusiveMinimum, not-const, $ref).
    `overrides` replaces the strategy of the value at a path that ends in the given property names
    (`[]` stands for any list item), to draw what matters more than the schema says (regular
    expressions, cluster aliases flows name)."""
    overrides = overrides or {}
    defs = SCHEMA.get("$defs", {}) if defs is None else defs
    for suffix, strategy in overrides.items():
        if path[-len(suffix) :] == suffix and len(path) >= len(suffix):
            return strategy
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return st.deferred(lambda: from_schema(defs[name], overrides, defs, path))
    if "const" in node:
        return st.just(node["const"])
    if "enum" in node:
        return st.sampled_from(node["enum"])
    types = node.get("type", ["string", "number", "boolean", "null", "array", "object"])
    if isinstance(types, list):
        return st.one_of([from_schema({**node, "type": t}, overrides, defs, path) for t in types])
    if types == "object":
        props = node.get("properties", {})
        required = node.get("required", [])
        fixed = {k: from_schema(v, overrides, defs, path + (k,)) for k, v in props.items() if k in required}
        optional = {k: from_schema(v, overrides, defs, path + (k,)) for k, v in props.items() if k not in required}
        base = st.fixed_dictionaries(fixed, optional=optional)
        extra = node.get("additionalProperties", True)
        if extra is False:
            return base
        pattern = node.get("propertyNames", {}).get("pattern")
        keys = st.from_regex(pattern, fullmatch=False) if pattern else TEXT
        values = from_schema(extra, overrides, defs, path + ("*",)) if isinstance(extra, dict) else SCALAR
        return st.builds(lambda b, more: {**more, **b}, base, st.dictionaries(keys, values, max_size=4))
    if types == "array":
        items = from_schema(node.get("items", {}), overrides, defs, path + ("[]",))
        return st.lists(items, min_size=node.get("minItems", 0), max_size=4)
    if types == "string":
        if "pattern" in node:
            return st.from_regex(node["pattern"], fullmatch=False)
        return st.text(st.characters(exclude_categories=("Cs",)), min_size=node.get("minLength", 0), max_size=24)
    if types in ("integer", "number"):
        lo = node.get("minimum")
        hi = node.get("maximum")
        if types == "integer":
            s: st.SearchStrategy = st.integers(lo, hi)
        else:
            s = st.floats(lo, hi, allow_nan=False, allow_infinity=False)
        if "exclusiveMinimum" in node:
            s = s.filter(lambda v, m=node["exclusiveMinimum"]: v > m)
        if "not" in node and "const" in node["not"]:
            s = s.filter(lambda v, c=node["not"]["const"]: v != c)
        return s
    if types == "boolean":
        return st.booleans()
    if types == "null":
        return st.none()
    raise ValueError(f"from_schema: {node!r} at {path} is not supported")


ALIAS = st.one_of(st.sampled_from(ALIASES), NAMES)


def topology_overrides(profile: Profile) -> dict[tuple[str, ...], st.SearchStrategy]:
    """What the schema strategy draws in place of the schema's own strings: patterns, cluster aliases
    that flows name."""

    def patterns(min_size: int = 0) -> st.SearchStrategy[list[str]]:
        return st.lists(regex(profile), min_size=min_size, max_size=3)

    overrides: dict[tuple[str, ...], st.SearchStrategy] = {
        ("bootstrap_servers",): st.one_of(
            st.sampled_from(["localhost:9092", "k1:9092,k2:9092", "${BOOTSTRAP}", "${env:X}", "h:0", "[::1]:9092"]),
            st.text(min_size=1, max_size=20),
        ),
        ("source",): ALIAS,
        ("target",): ALIAS,
        ("topics", "include"): patterns(),
        ("topics", "exclude"): patterns(),
        ("groups", "include"): patterns(),
        ("groups", "exclude"): patterns(),
        ("config_properties", "exclude"): patterns(),
        ("residency", "[]", "topics"): patterns(1),
        ("residency", "[]", "allowed"): st.lists(
            st.sampled_from(["eu", "us", "apac", "*"]) | TEXT, min_size=1, max_size=3
        ),
        ("tags",): st.dictionaries(
            st.sampled_from(["region", "role", "zone"]) | TEXT, st.sampled_from(["eu", "us"]) | TEXT
        ),
    }
    # a cluster of a topology without environments names its endpoints (the schema's `then`)
    cluster = from_schema({**SCHEMA["$defs"]["cluster"], "required": ["bootstrap_servers"]}, overrides)
    overrides[("clusters",)] = st.dictionaries(ALIAS, cluster, max_size=5)
    return overrides


def schema_topologies(profile: Profile) -> st.SearchStrategy[Any]:
    """Topologies valid against the JSON Schema, with flows between clusters that exist more often
    than chance would give, so the semantic checks and the analysis run on them too. One in four declares
    `environments:` (`validate FILE` then stops at the missing `--env`, after checking them); the others none."""
    return st.tuples(from_schema(SCHEMA, topology_overrides(profile)), st.integers(0, 3)).map(
        lambda t: (
            t[0] if t[1] == 0 or not isinstance(t[0], dict) else {k: v for k, v in t[0].items() if k != "environments"}
        )
    )


def mesh(n: int, include: str = ".*") -> dict:
    """A full mesh of n clusters: every cluster mirrors every topic to every other one."""
    names = [f"c{i}" for i in range(n)]
    return {
        "apiVersion": "reconciler/v1",
        "kind": "Topology",
        "clusters": {c: {"bootstrap_servers": f"{c}:9092"} for c in names},
        "defaults": {"policy": "identity"},
        "flows": [{"source": s, "target": t, "topics": {"include": [include]}} for s in names for t in names if s != t],
    }


# --- mutation of trees --------------------------------------------------------------------------


def _paths(tree: Any, prefix: tuple = ()) -> list[tuple]:
    out: list[tuple] = []
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.append(prefix + (k,))
            out.extend(_paths(v, prefix + (k,)))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out.append(prefix + (i,))
            out.extend(_paths(v, prefix + (i,)))
    return out


def _parent(tree: Any, path: tuple) -> Any:
    for p in path[:-1]:
        tree = tree[p]
    return tree


def _replace(tree: Any, path: tuple, node: Any) -> Any:
    """`tree` with the node at `path` replaced by `node` (the new tree, when path is the root)."""
    if not path:
        return node
    _parent(tree, path)[path[-1]] = node
    return tree


def _rename(d: dict, old: Any, new: Any) -> dict:
    return {(new if k == old else k): v for k, v in d.items()}


MUTATIONS = ("delete", "retype", "huge", "huge_key", "deep", "odd_yaml", "odd_key", "dup_key", "regex", "swap")


def pick(draw, items: list) -> Any:
    """One of `items`, drawn as an index: `st.sampled_from` would keep the list (Hypothesis caches
    strategies with their arguments), and these lists hold strings of megabytes."""
    return items[draw(st.integers(0, len(items) - 1))]


def _shape(value: Any) -> type:
    return dict if isinstance(value, dict) else list if isinstance(value, list) else str


def mutate_tree(draw, base: Any, profile: Profile, keep_shape: bool = False) -> Any:
    """`base` (not changed) with one to four mutations. `keep_shape`: a mapping stays a mapping, a
    list a list and a scalar a scalar (values and keys still change)."""
    tree = copy.deepcopy(base)
    odd_keys = [k for k in ODD_ALIASES if isinstance(k, str) or profile.draws("alias-type")]
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(tree)
        if not paths:
            break
        path = pick(draw, paths)
        op = draw(st.sampled_from(MUTATIONS))
        parent = _parent(tree, path)
        last = path[-1]
        value = parent[last]
        scalar = _shape(value) is str
        if keep_shape and not scalar and op in ("retype", "huge", "deep", "odd_yaml"):
            continue
        if keep_shape and op in ("deep", "odd_yaml"):
            continue
        if op == "delete":
            del parent[last]
        elif op == "retype":
            parent[last] = draw(SCALAR if keep_shape else ANY_VALUE)
        elif op == "huge":
            parent[last] = huge(draw, profile)
        elif op == "deep":
            parent[last] = deep(draw, profile)
        elif op == "odd_yaml":
            parent[last] = Raw(draw(st.sampled_from(ODD_YAML)))
        elif op == "regex":
            if isinstance(value, list):
                value.insert(draw(st.integers(0, len(value))), draw(regex(profile)))
            elif scalar or not keep_shape:
                parent[last] = draw(regex(profile))
        elif op == "swap":
            other = pick(draw, paths)
            moved = _parent(tree, other)[other[-1]]
            if not keep_shape or _shape(moved) is _shape(value):
                parent[last] = copy.deepcopy(moved)
        elif isinstance(parent, dict):  # the key operations
            if op == "dup_key":  # the key twice, the second time with another value
                items = list(parent.items())
                i = [k for k, _ in items].index(last)
                other_value = SCALAR if keep_shape and scalar else ANY_VALUE
                same = keep_shape and not scalar or draw(st.booleans())
                items.insert(i + 1, (last, copy.deepcopy(value) if same else draw(other_value)))
                tree = _replace(tree, path[:-1], Pairs(tuple(items)))  # a leaf from now on
                continue
            new = huge(draw, profile) if op == "huge_key" else draw(st.sampled_from(odd_keys))
            if new not in parent:
                tree = _replace(tree, path[:-1], _rename(parent, last, new))
    return tree


# --- mutation of bytes --------------------------------------------------------------------------


def mutate_bytes(draw, text: str) -> bytes:
    """The encoded text, sometimes with one change no generator of trees makes."""
    data = text.encode("utf-8", "surrogatepass")
    op = draw(st.sampled_from(["none"] * 24 + ["cut", "crlf", "tab", "nul", "bom", "latin1", "bad_utf8", "dup_doc"]))
    if op == "cut" and data:
        return data[: draw(st.integers(0, len(data) - 1))]
    if op == "crlf":
        return data.replace(b"\n", b"\r\n")
    if op == "tab":
        return data.replace(b"  ", b"\t", draw(st.integers(1, 3)))
    if op == "nul" and data:
        i = draw(st.integers(0, len(data)))
        return data[:i] + b"\x00" + data[i:]
    if op == "bom":
        return b"\xef\xbb\xbf" + data
    if op == "latin1":
        return text.encode("latin-1", "replace")
    if op == "bad_utf8" and data:
        i = draw(st.integers(0, len(data)))
        return data[:i] + b"\xff\xfe\xc3" + data[i:]
    if op == "dup_doc":
        return data + b"---\n" + data
    return data


# --- topologies ---------------------------------------------------------------------------------


def _example_topologies() -> list[Any]:
    """topologies/*/ as trees, the files of a directory merged."""
    out = []
    for d in sorted(p for p in (ROOT / "topologies").iterdir() if p.is_dir()):
        merged: dict = {}
        for f in sorted(d.glob("*.yaml")):
            data = yaml.safe_load(f.read_text(encoding="utf-8"))
            for k, v in data.items():
                merged[k] = {**merged[k], **v} if isinstance(merged.get(k), dict) else v
        out.append(merged)
    return out


EXAMPLE_TOPOLOGIES = _example_topologies()


@st.composite
def topologies(draw, profile: Profile) -> FileInput:
    """The bytes of one topology file: generated from the schema, a mutant of an example or of a
    generated one, or a full mesh."""
    source = draw(st.integers(0, 3))
    if source == 0:
        tree = draw(schema_topologies(profile))
    elif source == 1:
        tree = mutate_tree(draw, pick(draw, EXAMPLE_TOPOLOGIES), profile)
    elif source == 2:
        tree = mutate_tree(draw, draw(schema_topologies(profile)), profile)
    else:
        tree = mesh(draw(mesh_size(profile)), draw(regex(profile)))
    return FileInput(mutate_bytes(draw, dump(tree)))


# --- MirrorMaker 2 properties -------------------------------------------------------------------


def _escape_key(key: str) -> str:
    return re.sub(r"([=: \t\\#!])", r"\\\1", key)


def _value_for(kind: Kind, profile: Profile) -> st.SearchStrategy[str]:
    junk = st.sampled_from(["", "maybe", "-1", "0", "1e999", "NaN", "${env:X}", "${cyc}", "  ", "\\u00e9"]) | TEXT
    good: st.SearchStrategy[str]
    if kind == Kind.LIST:
        good = st.lists(regex(profile), min_size=1, max_size=3).map(", ".join)
    elif kind == Kind.BOOL:
        good = st.sampled_from(["true", "false", "TRUE", "False", "yes"])
    elif kind in (Kind.INT, Kind.SECONDS):
        good = st.integers(-5, 2**64).map(str) | st.sampled_from(["1.5", "0x10", "10s"])
    elif kind == Kind.POLICY:
        good = st.sampled_from(sorted(POLICY_CLASSES) + ["com.example.Custom"])
    elif kind == Kind.LOCATION:
        good = st.sampled_from(["source", "target", "SOURCE"])
    else:
        good = st.sampled_from([".", "_", "-", "", ".."]) | TEXT
    return st.one_of(good, good, good, junk)


CLIENT_KEYS = {
    "bootstrap.servers": st.sampled_from(["k:9092", "k1:9092,k2:9092", "${env:BOOT}", "", "${file:/x:y}"]),
    "security.protocol": st.sampled_from(["SSL", "SASL_SSL", "PLAINTEXT", "SASL_PLAINTEXT", "bogus"]),
    "sasl.mechanism": st.sampled_from(["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256", "GSSAPI", "OAUTHBEARER", ""]),
    "sasl.jaas.config": st.sampled_from(
        [
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";',
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=u password=${env:PW};",
            "org.apache.kafka.common.security.plain.PlainLoginModule required",
            'x required username="\\"";',
            "garbage",
        ]
    ),
    "ssl.truststore.location": st.sampled_from(["/etc/ca.pem", "", "${file:/a:b}"]),
    "ssl.truststore.type": st.sampled_from(["PEM", "JKS", "PKCS12"]),
    "ssl.keystore.location": st.sampled_from(["/etc/k.p12", ""]),
    "ssl.keystore.password": st.sampled_from(["${file:/etc/s.properties:pw}", "lit", "${env:KP}"]),
    "exactly.once.source.support": st.sampled_from(["enabled", "disabled", "preparing", "bogus"]),
}


def property_values(profile: Profile) -> dict[str, st.SearchStrategy[str]]:
    """The MM2 keys the importer maps, each with the values it may be given."""
    return {k.key: _value_for(k.kind, profile) for k in CONNECTOR_KEYS} | {
        k: _value_for(Kind.SECONDS, profile) for k in REFRESH_KEYS
    }


def mm2_generated(draw, profile: Profile) -> str:
    values = property_values(profile)
    aliases = draw(st.lists(ALIAS, min_size=1, max_size=4, unique=True))
    entries: list[tuple[str, str]] = [("clusters", ", ".join(aliases))]
    for a in aliases:
        for key in draw(st.lists(st.sampled_from(sorted(CLIENT_KEYS)), max_size=4, unique=True)) or [
            "bootstrap.servers"
        ]:
            entries.append((f"{a}.{key}", draw(CLIENT_KEYS[key])))
    if draw(st.booleans()):
        entries.append(("config.providers", draw(st.sampled_from(["env", "file", "env,file", "bogus", ""]))))
    for key in draw(st.lists(st.sampled_from(sorted(values)), max_size=6)):
        entries.append((key, draw(values[key])))
    flows = [(s, t) for s in aliases for t in aliases if s != t] + [(aliases[0], aliases[0]), ("nope", aliases[0])]
    for s, t in draw(st.lists(st.sampled_from(flows), max_size=4)):
        entries.append((f"{s}->{t}.enabled", draw(st.sampled_from(["true", "false", "maybe"]))))
        for key in draw(st.lists(st.sampled_from(sorted(values)), max_size=3)):
            entries.append((f"{s}->{t}.{key}", draw(values[key])))
    for key in draw(st.lists(st.sampled_from(sorted(NOT_EXPRESSIBLE)), max_size=2)):
        entries.append((key, "1"))
    if draw(st.integers(0, 9)) == 0:  # a reference cycle or a reference to nothing
        entries.append(("x", "${y}"))
        entries.append(("y", draw(st.sampled_from(["${x}", "${y}", "${env:}", "${:}", "${file::}", "${"]))))
    if draw(st.integers(0, 9)) == 0:
        entries.append(
            (draw(st.sampled_from([a + ".bootstrap.servers" for a in aliases] + ["topics"])), huge(draw, profile))
        )
    lines = []
    for key, value in entries:
        sep = draw(st.sampled_from([" = ", "=", ": ", ":", " ", "\t"]))
        value = value.replace("\\", "\\\\") if draw(st.booleans()) else value
        if len(value) > 20 and draw(st.integers(0, 4)) == 0:  # a continuation line
            cut = draw(st.integers(1, len(value) - 1))
            value = value[:cut] + "\\\n    " + value[cut:]
        lines.append(f"{_escape_key(key)}{sep}{value}")
        if draw(st.integers(0, 7)) == 0:
            lines.append(draw(st.sampled_from(["# a comment", "! a comment", "", "   ", "# \\"])))
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\\", "\n\\\n"]))


ODD_PROPERTY_LINES = [
    "=novalue",
    ":",
    "key\\",
    "key = \\u12",
    "key = \\uZZZZ",
    "key = \\u00e9\\u",
    "a->b->c.enabled = true",
    "->.enabled = true",
    "a->.enabled = true",
    ".bootstrap.servers = x:1",
    "clusters =",
    "clusters = ,,,",
    "clusters = a, a, a",
    "clusters = a b c",
    "clusters = 1, true, null",
    "\\u0000 = x",
    "key = ${",
    "key = ${env:X",
    "a = ${b}",
    "b = ${a}",
    "\x00",
    "\ufeffclusters = a",
    "replication.policy.separator =",
    "replication.policy.class = Identity",
    "tasks.max = -1",
    "tasks.max = 99999999999999999999999",
]


def mutate_mm2(draw, text: str, profile: Profile) -> str:
    lines = text.split("\n")
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["delete", "dup", "value", "key", "insert", "huge", "clusters", "cut"]))
        i = draw(st.integers(0, max(0, len(lines) - 1)))
        line = lines[i] if lines else ""
        head, eq, _ = line.partition("=")
        if op == "delete" and lines:
            del lines[i]
        elif op == "dup" and lines:
            lines.insert(i, lines[draw(st.integers(0, len(lines) - 1))])
        elif op == "value" and eq:
            lines[i] = head + "= " + draw(st.one_of(regex(profile), TEXT, st.sampled_from(ODD_PROPERTY_LINES)))
        elif op == "key" and eq:
            lines[i] = draw(st.one_of(TEXT, st.sampled_from(ODD_PROPERTY_LINES))) + " =" + line.partition("=")[2]
        elif op == "insert":
            lines.insert(i, draw(st.sampled_from(ODD_PROPERTY_LINES)))
        elif op == "huge":
            big = huge(draw, profile)
            lines.insert(i, pick(draw, [f"{big} = 1", f"topics = {big}", f"primary.bootstrap.servers = {big}"]))
        elif op == "clusters":
            n = draw(sized(profile, profile.mm2_clusters))
            lines.insert(i, "clusters = " + ", ".join(f"c{j}" for j in range(n)))
        elif op == "cut":
            return "\n".join(lines)[: draw(st.integers(0, max(0, len("\n".join(lines)))))]
    return "\n".join(lines)


FULL_PROPERTIES = (INTEROP / "full.properties").read_text(encoding="utf-8")


@st.composite
def mm2_files(draw, profile: Profile) -> FileInput:
    """The bytes of one MM2 properties file: generated, a mutant of full.properties or of a generated one.
    (Big texts are passed to plain functions, never to strategies: Hypothesis caches strategies with
    their arguments, and a 10 MB argument a thousand times over is 10 GB.)"""
    source = draw(st.integers(0, 3))
    if source == 0:
        text = mm2_generated(draw, profile)
    elif source == 1:
        text = mutate_mm2(draw, FULL_PROPERTIES, profile)
    elif source == 2:
        text = mutate_mm2(draw, mm2_generated(draw, profile), profile)
    else:
        text = mm2_many(draw(sized(profile, profile.mm2_clusters)), draw(st.booleans()))
    return FileInput(mutate_bytes(draw, text))


def mm2_many(n: int, mesh: bool) -> str:
    """n clusters, each with its bootstrap servers, in a chain of flows (or a ring of meshes of 3)."""
    lines = ["clusters = " + ", ".join(f"c{i}" for i in range(n))]
    lines += [f"c{i}.bootstrap.servers = c{i}:9092" for i in range(n)]
    for i in range(n - 1):
        lines.append(f"c{i}->c{i + 1}.enabled = true")
        if mesh:
            lines.append(f"c{i + 1}->c{i}.enabled = true")
    return "\n".join(lines) + "\n"


# --- Strimzi KafkaMirrorMaker2 ------------------------------------------------------------------

SECRET_NAME = st.sampled_from(["mm2-user", "ca-cert", "x", "", "UPPER_CASE", "a.b"]) | TEXT


def _auth() -> st.SearchStrategy[dict]:
    return st.one_of(
        st.fixed_dictionaries(
            {
                "type": st.sampled_from(["scram-sha-512", "scram-sha-256", "plain"]),
                "username": st.sampled_from(["mm2-user", "", "u\u00e9"]),
                "passwordSecret": st.fixed_dictionaries({"secretName": SECRET_NAME, "password": SECRET_NAME}),
            }
        ),
        st.fixed_dictionaries(
            {
                "type": st.just("tls"),
                "certificateAndKey": st.fixed_dictionaries(
                    {"secretName": SECRET_NAME, "certificate": SECRET_NAME, "key": SECRET_NAME}
                ),
            }
        ),
        st.fixed_dictionaries({"type": st.sampled_from(["oauth", "custom", "bogus", ""])}),
    )


def _tls() -> st.SearchStrategy[dict]:
    cert = st.fixed_dictionaries(
        {"secretName": SECRET_NAME}, optional={"certificate": SECRET_NAME, "pattern": st.just("*.crt")}
    )
    return st.fixed_dictionaries({"trustedCertificates": st.lists(cert, max_size=2)})


def _config() -> st.SearchStrategy[dict]:
    keys = (
        st.sampled_from(sorted(property_values(QUICK)) + sorted(NOT_EXPRESSIBLE) + ["exactly.once.source.support"])
        | TEXT
    )
    return st.dictionaries(keys, SCALAR, max_size=4)


def _cluster(alias: st.SearchStrategy) -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries(
        {"alias": alias, "bootstrapServers": st.sampled_from(["k:9092", "k:9093", ""]) | TEXT},
        optional={"tls": _tls(), "authentication": _auth(), "config": _config()},
    )


def _connector() -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries(
        {},
        optional={
            "tasksMax": st.integers(-2, 2**40),
            "config": _config(),
            "state": st.sampled_from(["running", "paused", "stopped", "bogus"]),
        },
    )


def _mirror_patterns(profile: Profile) -> dict[str, st.SearchStrategy]:
    return {
        k: regex(profile)
        for k in (
            "topicsPattern",
            "topicsExcludePattern",
            "topicsBlacklistPattern",
            "groupsPattern",
            "groupsExcludePattern",
            "groupsBlacklistPattern",
        )
    }


def strimzi_generated(draw, profile: Profile) -> dict:
    aliases = draw(st.lists(ALIAS, min_size=1, max_size=4, unique=True))
    alias = st.sampled_from(aliases)
    metadata: dict = {"name": draw(st.sampled_from(["my-mm2", "", "x"]))}
    if draw(st.integers(0, 4)) == 0:
        metadata["annotations"] = {"reconciler.dev/properties": draw(st.sampled_from(["a = b\n", "\\u12", ""]))}
    spec: dict = {"version": draw(st.sampled_from(["3.9.0", "4.0.0", ""])), "replicas": draw(st.integers(0, 3))}
    optional = {
        "sourceConnector": _connector(),
        "checkpointConnector": _connector(),
        "heartbeatConnector": _connector(),
    }
    optional.update(_mirror_patterns(profile))
    if draw(st.booleans()):  # v1beta2: clusters + connectCluster, mirrors name them
        api = draw(st.sampled_from(["kafka.strimzi.io/v1beta2", "kafka.strimzi.io/v1", "v1"]))
        spec["connectCluster"] = draw(alias)
        spec["clusters"] = [draw(_cluster(st.just(a))) for a in aliases]
        mirror = st.fixed_dictionaries({"sourceCluster": alias, "targetCluster": alias}, optional=optional)
    else:  # v1: spec.target once, mirrors[].source
        api = draw(st.sampled_from(["kafka.strimzi.io/v1", "kafka.strimzi.io/v1beta2"]))
        spec["target"] = draw(_cluster(alias))
        for k in ("groupId", "configStorageTopic", "statusStorageTopic", "offsetStorageTopic"):
            if draw(st.booleans()):
                spec["target"][k] = draw(st.sampled_from(["mm2", ""]))
        mirror = st.fixed_dictionaries({"source": _cluster(alias)}, optional=optional)
    spec["mirrors"] = draw(st.lists(mirror, max_size=3))
    return {"apiVersion": api, "kind": "KafkaMirrorMaker2", "metadata": metadata, "spec": spec}


STRIMZI_EXAMPLES = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(INTEROP.glob("strimzi_*.yaml"))]


@st.composite
def strimzi_files(draw, profile: Profile) -> FileInput:
    """The bytes of one KafkaMirrorMaker2 resource: generated, a mutant of an example or of a generated one."""
    keep_shape = not profile.draws("strimzi-shape")
    source = draw(st.integers(0, 2))
    if source == 0:
        tree = strimzi_generated(draw, profile)
    elif source == 1:
        tree = mutate_tree(draw, pick(draw, STRIMZI_EXAMPLES), profile, keep_shape)
    else:
        tree = mutate_tree(draw, strimzi_generated(draw, profile), profile, keep_shape)
    return FileInput(mutate_bytes(draw, dump(tree)))
