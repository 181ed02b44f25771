"""Topic, consumer-group and config-property filters (MM2's TopicFilter, GroupFilter, ConfigPropertyFilter).

Patterns are full-match regular expressions, as in MirrorMaker 2's `topics` / `topics.exclude`.
Python's engine, like Java's (MM2's), backtracks: a pattern that can backtrack catastrophically
(`(x+)+y` takes seconds on 28 x's, doubling with each one) is refused (`backtracking_hazard`), by
validate and by a job reading its spec alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache

# Python 3.11+ (the project's floor): the regex parser lives in re; typeshed does not list it.
from re import _constants as sre_c  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any, ClassVar

# MirrorMaker 2's DefaultTopicFilter / DefaultGroupFilter / DefaultConfigPropertyFilter excludes.
DEFAULT_TOPIC_EXCLUDES: tuple[str, ...] = (r".*[\-\.]internal", r".*\.replica", r"__.*")
DEFAULT_GROUP_EXCLUDES: tuple[str, ...] = (r"console-consumer-.*", r"connect-.*", r"__.*")
DEFAULT_CONFIG_PROPERTY_EXCLUDES: tuple[str, ...] = (
    "follower\\.replication\\.throttled\\.replicas",
    "leader\\.replication\\.throttled\\.replicas",
    "message\\.timestamp\\.difference\\.max\\.ms",
    "message\\.timestamp\\.type",
    "unclean\\.leader\\.election\\.enable",
    "min\\.insync\\.replicas",
)


def _compile_any(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{p})" for p in patterns))


# --- catastrophic backtracking -----------------------------------------------------------------
# A repeated group backtracks exponentially when one text can be split into its iterations in many
# ways: a repeat inside it that can also match what starts the group's next iteration (`(x+)+`,
# `(a*ba*)+`), or alternatives that can match the same text (`(a|a)*`, `(x|xx)+`). A repeat inside
# is safe when something the iteration must match after it cannot be matched by it (`([a-z]+\.)+`),
# or when it is possessive or atomic (`(x++)+`, `(?>x+)+`): those never give back what they took.
# The check is conservative: it refuses a few patterns that would be fast, never one that is slow.

BACKTRACKING_HINT = (
    "MirrorMaker 2 matches with java.util.regex, which backtracks the same way, so MM2 would stall on it "
    "too: drop the inner repeat or the alternative that repeats another (`(x+)+y` -> `x+y`, "
    "`(x|xx)+` -> `x+`), end each repetition with a character the inner repeat cannot match "
    "(`([a-z]+\\.)+`), or make the inner repeat possessive (`(x++)+y`; Java and Python 3.11+ both read it)"
)

_ALPHABET = frozenset(map(chr, range(128))) | frozenset("\u00e9\u4e00\U0001f600")
_CATEGORY = {
    sre_c.CATEGORY_DIGIT: r"\d",
    sre_c.CATEGORY_NOT_DIGIT: r"\D",
    sre_c.CATEGORY_WORD: r"\w",
    sre_c.CATEGORY_NOT_WORD: r"\W",
    sre_c.CATEGORY_SPACE: r"\s",
    sre_c.CATEGORY_NOT_SPACE: r"\S",
}
_REPEATS = (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT)  # POSSESSIVE_REPEAT never backtracks into itself


def _category(cat: Any) -> frozenset[str]:
    pattern = re.compile(_CATEGORY.get(cat, r"[\s\S]"))
    return frozenset(c for c in _ALPHABET if pattern.fullmatch(c))


def _char_node(op: Any, av: Any) -> frozenset[str] | None:
    """The characters a one-character node matches (over a sample alphabet), None for other nodes."""
    if op is sre_c.LITERAL:
        return frozenset(chr(av))
    if op is sre_c.NOT_LITERAL:
        return _ALPHABET - {chr(av)}
    if op is sre_c.ANY:
        return _ALPHABET
    if op is sre_c.CATEGORY:
        return _category(av)
    if op is sre_c.IN:
        chars: set[str] = set()
        negate = False
        for iop, iav in av:
            if iop is sre_c.NEGATE:
                negate = True
            elif iop is sre_c.LITERAL:
                chars.add(chr(iav))
            elif iop is sre_c.RANGE:
                chars |= {c for c in _ALPHABET if iav[0] <= ord(c) <= iav[1]}
            elif iop is sre_c.CATEGORY:
                chars |= _category(iav)
            else:
                return _ALPHABET
        return _ALPHABET - chars if negate else frozenset(chars)
    return None


def _body(op: Any, av: Any) -> list | None:
    """The sequence inside a grouping node, None for a node that is not one."""
    if op is sre_c.SUBPATTERN:
        return av[-1]
    if op in (*_REPEATS, getattr(sre_c, "POSSESSIVE_REPEAT", None)):
        return av[2]
    if op is getattr(sre_c, "ATOMIC_GROUP", None):
        return av
    return None


def _first(seq: Any) -> tuple[frozenset[str], bool]:
    """(the characters a match of `seq` can start with, whether it can match the empty string)."""
    out: frozenset[str] = frozenset()
    for op, av in seq:
        chars, nullable = _first_node(op, av)
        out |= chars
        if not nullable:
            return out, False
    return out, True


def _first_node(op: Any, av: Any) -> tuple[frozenset[str], bool]:
    chars = _char_node(op, av)
    if chars is not None:
        return chars, False
    if op is sre_c.BRANCH:
        firsts = [_first(alt) for alt in av[1]]
        return frozenset().union(*(f for f, _ in firsts)), any(n for _, n in firsts)
    body = _body(op, av)
    if body is not None:
        first, nullable = _first(body)
        return first, nullable or (
            op is not sre_c.SUBPATTERN and op is not getattr(sre_c, "ATOMIC_GROUP", None) and av[0] == 0
        )
    if op in (sre_c.AT, sre_c.ASSERT, sre_c.ASSERT_NOT):
        return frozenset(), True
    return _ALPHABET, True  # group references and conditionals: anything


def _all_chars(seq: Any) -> frozenset[str]:
    """Every character a match of `seq` can hold."""
    out: frozenset[str] = frozenset()
    for op, av in seq:
        chars = _char_node(op, av)
        if chars is not None:
            out |= chars
        elif op is sre_c.BRANCH:
            out = out.union(*(_all_chars(alt) for alt in av[1]))
        elif _body(op, av) is not None:
            out |= _all_chars(_body(op, av))
        elif op not in (sre_c.AT, sre_c.ASSERT, sre_c.ASSERT_NOT):
            return _ALPHABET
    return out


def _inner(seq: Any, frames: tuple) -> Any:
    """(node, frames) for every backtracking repeat and branch inside `seq`, not below an atomic group or
    a possessive repeat; `frames` are the (sequence, index) pairs that lead to it."""
    for i, (op, av) in enumerate(seq):
        here = frames + ((seq, i),)
        if op in _REPEATS and av[0] != av[1]:
            yield op, av, here
        if op is sre_c.BRANCH:
            yield op, av, here
            for alt in av[1]:
                yield from _inner(alt, here)
        elif op in (sre_c.SUBPATTERN, *_REPEATS):
            yield from _inner(_body(op, av), here)


def _guarded(chars: frozenset[str], frames: tuple, next_iteration: frozenset[str]) -> bool:
    """Whether an iteration must match, after the node at the end of `frames`, something that starts with a
    character outside `chars` (so the node cannot take it), or else its next iteration starts so."""
    for seq, i in reversed(frames):
        for op, av in seq[i + 1 :]:
            first, nullable = _first_node(op, av)
            if not nullable and not (first & chars):
                return True
    return not (next_iteration & chars)


def _hazard(seq: Any) -> str | None:
    for op, av in seq:
        if op in _REPEATS and av[1] > 1:
            body = av[2]
            next_iteration = _first(body)[0]
            for iop, iav, frames in _inner(body, ()):
                if iop is sre_c.BRANCH:  # the parser factors prefixes out: (a|a) is a(|), (x|xx) is x(|x)
                    firsts = [_first(alt) for alt in iav[1]]
                    empty = sum(nullable for _, nullable in firsts)
                    if empty > 1 or any(a & b for k, (a, _) in enumerate(firsts) for b, _ in firsts[k + 1 :]):
                        return "a repeated group has alternatives that can match the same text (as in `(a|a)*`)"
                    if empty and not _guarded(_all_chars([(iop, iav)]), frames, next_iteration):
                        return "a repeated group has alternatives that can match the same text (as in `(x|xx)+`)"
                elif not _guarded(_all_chars(iav[2]), frames, next_iteration):
                    return (
                        "a repeated group holds a repeat that can also match what the group's next iteration "
                        "starts with (as in `(x+)+`)"
                    )
        if op is sre_c.BRANCH:
            found = next((h for alt in av[1] if (h := _hazard(alt))), None)
        else:
            body = _body(op, av)
            found = _hazard(body) if body is not None else None
        if found:
            return found
    return None


@lru_cache(maxsize=4096)
def backtracking_hazard(pattern: str) -> str | None:
    """Why `pattern` can backtrack catastrophically (exponential time in the length of a name), or None.

    The one check for every topic, group, config-property and residency pattern: validate reports it at
    the pattern's position, and a filter refuses to be built with such a pattern (a job's spec)."""
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError, TypeError):
        return None  # not a pattern at all: compiling it says why
    try:
        return _hazard(parsed)
    except RecursionError:
        return "it nests groups too deeply to be checked"


def _refuse_hazards(patterns: tuple[str, ...]) -> None:
    for p in patterns:
        why = backtracking_hazard(p)
        if why is not None:
            raise ValueError(f"pattern {p!r} can backtrack catastrophically: {why}")


@dataclass(frozen=True)
class PatternFilter:
    """include/exclude full-match patterns; a name passes if some include matches and no exclude does.

    Subclasses name `ALWAYS_EXCLUDED`, MM2's built-in excludes (the defaults of `topics.exclude` /
    `groups.exclude`), applied on top of `exclude` unless `builtin_exclude` replaces them.
    """

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    builtin_exclude: tuple[str, ...] | None = None  # None: ALWAYS_EXCLUDED
    ALWAYS_EXCLUDED: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        _refuse_hazards(self.include + self.exclude + self.builtin)

    @property
    def builtin(self) -> tuple[str, ...]:
        return self.ALWAYS_EXCLUDED if self.builtin_exclude is None else self.builtin_exclude

    @cached_property
    def _include(self) -> re.Pattern[str] | None:
        return _compile_any(self.include)

    @cached_property
    def _exclude(self) -> re.Pattern[str] | None:
        return _compile_any(self.exclude + self.builtin)

    def matches(self, name: str) -> bool:
        if self._include is None or not self._include.fullmatch(name):
            return False
        return not (self._exclude is not None and self._exclude.fullmatch(name))


@dataclass(frozen=True)
class TopicFilter(PatternFilter):
    """Which source topics a flow replicates. MM2's internal-topic excludes always apply on top."""

    ALWAYS_EXCLUDED: ClassVar[tuple[str, ...]] = DEFAULT_TOPIC_EXCLUDES


@dataclass(frozen=True)
class GroupFilter(PatternFilter):
    """Which consumer groups get checkpoints (and offset sync) on a flow."""

    ALWAYS_EXCLUDED: ClassVar[tuple[str, ...]] = DEFAULT_GROUP_EXCLUDES


@dataclass(frozen=True)
class ConfigPropertyFilter:
    """Which topic config properties are copied from a source topic to its remote topic."""

    exclude: tuple[str, ...] = DEFAULT_CONFIG_PROPERTY_EXCLUDES

    def __post_init__(self) -> None:
        _refuse_hazards(self.exclude)

    @cached_property
    def _exclude(self) -> re.Pattern[str] | None:
        return _compile_any(self.exclude)

    def should_replicate(self, prop: str) -> bool:
        return self._exclude is None or not self._exclude.fullmatch(prop)

    def apply(self, configs: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in configs.items() if self.should_replicate(k)}
