"""Example strings a regular expression matches ("witnesses").

Candidates are built from Python's parse of the pattern and kept only when the filters' own matcher
(`mirror/filters.py:compile_user_pattern`, RE2) fully matches them; a pattern that matcher refuses has none.

Whether two topic filters can overlap is answered by trying concrete names: the examples of
one filter's include patterns, pushed through the other filters. This is exact for literal
patterns and a good approximation for the prefix/suffix patterns topologies use in practice.

Bounded whatever the pattern: at most `_LIMIT` candidates per node and none longer than
`MAX_CHARS` (Kafka's limit on a topic name), so `x{4294967294}` costs nothing and yields no example
(no topic can match it); repeats are built by string multiplication, never one element per count.
"""

from __future__ import annotations

import itertools
import re
from functools import lru_cache

# Python 3.11+ (the project's floor): the regex parser lives in re; typeshed does not list it.
from re import _constants as sre_c  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]

from reconciler.mirror.filters import MAX_TOPIC_NAME_CHARS, compile_user_pattern, pattern_problem

_CATEGORY_EXAMPLE = {
    sre_c.CATEGORY_DIGIT: "0",
    sre_c.CATEGORY_WORD: "a",
    sre_c.CATEGORY_SPACE: " ",
    sre_c.CATEGORY_NOT_DIGIT: "a",
    sre_c.CATEGORY_NOT_WORD: "-",
    sre_c.CATEGORY_NOT_SPACE: "a",
}
_LIMIT = 16
MAX_CHARS = MAX_TOPIC_NAME_CHARS  # Kafka's limit on a topic name: a longer example names no topic


def _any_char(chars: str = "ax.") -> list[str]:
    """Examples of `.`: letters, and the dot itself, last, because an unescaped `.` in a topic pattern
    (`customers.eu`) usually means a dot: without it, such a pattern's examples would miss the one topic
    it names, and a residency policy on `customers\\..*` would not see it."""
    return list(chars)


def _in(items) -> list[str]:
    negate = any(op is sre_c.NEGATE for op, _ in items)
    candidates: list[str] = []
    for op, av in items:
        if op is sre_c.LITERAL:
            candidates.append(chr(av))
        elif op is sre_c.RANGE:
            candidates.append(chr(av[0]))
        elif op is sre_c.CATEGORY:
            candidates.append(_CATEGORY_EXAMPLE.get(av, "a"))
    if negate:
        return [c for c in "a0-x_" if c not in candidates][:1] or ["~"]
    return candidates[:2] or ["a"]


def _fit(candidates) -> list[str]:
    """The first `_LIMIT` candidates that are not longer than `MAX_CHARS`."""
    return list(itertools.islice((c for c in candidates if len(c) <= MAX_CHARS), _LIMIT))


def _seq(parsed) -> list[str]:
    results = [""]
    for op, av in parsed:
        options = _node(op, av)
        results = _fit(a + b for a, b in itertools.product(results, options) if len(a) + len(b) <= MAX_CHARS)
        if not results:
            return []
    return results


def _repeat(inner: list[str], counts: list[int]) -> list[str]:
    """`n` copies of the inner examples, for each count: each example repeated, and one mix of the
    first two. Lengths are checked before a string is built, so a count of 4294967294 is free."""
    out: list[str] = []
    for n in counts:
        if n == 0:
            out.append("")
            continue
        out += [s * n for s in inner[:4] if len(s) * n <= MAX_CHARS]
        if len(inner) > 1 and len(inner[1]) + len(inner[0]) * (n - 1) <= MAX_CHARS:
            out.append(inner[1] + inner[0] * (n - 1))
    return _fit(dict.fromkeys(out))


def _node(op, av) -> list[str]:
    if op is sre_c.LITERAL:
        return [chr(av)]
    if op is sre_c.NOT_LITERAL:
        return ["a" if chr(av) != "a" else "b"]
    if op is sre_c.ANY:
        return _any_char()
    if op is sre_c.IN:
        return _in(av)
    if op is sre_c.SUBPATTERN:
        return _seq(av[-1])
    if op is sre_c.BRANCH:
        return _fit(s for branch in av[1] for s in _seq(branch))
    if op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, getattr(sre_c, "POSSESSIVE_REPEAT", None)):
        lo, hi, sub = av
        counts = sorted({lo, min(max(lo, 1), hi if hi is not sre_c.MAXREPEAT else lo + 1)})
        return _repeat(_seq(sub), counts)
    if op is sre_c.CATEGORY:
        return [_CATEGORY_EXAMPLE.get(av, "a")]
    return [""]  # anchors, lookarounds, groupref: contribute nothing


@lru_cache(maxsize=4096)
def examples(pattern: str) -> tuple[str, ...]:
    """A few strings that fully match `pattern` (verified), most specific first; none longer than
    MAX_CHARS, so a pattern that only matches longer names has none."""
    if pattern_problem(pattern) is not None:
        return ()  # validate reports it; no filter holds it
    compiled = compile_user_pattern(pattern)  # the filters' matcher decides, not Python's parser
    try:
        candidates = _seq(sre_parse.parse(pattern))
    except (re.error, RecursionError, TypeError, OverflowError, ValueError, MemoryError):
        return ()  # RE2-only syntax (`\p{L}`, `\Q...\E`, `(?<n>...)`): no example, an approximation
    return tuple(dict.fromkeys(c for c in candidates if c and compiled.fullmatch(c)))
