"""Topic, consumer-group and config-property filters (MM2's TopicFilter, GroupFilter, ConfigPropertyFilter),
and the one place a user's pattern is compiled and matched (issue 44).

Patterns are full-match regular expressions, as in MirrorMaker 2's `topics` / `topics.exclude`, matched
with RE2 (google-re2): time linear in the length of the name, whatever the pattern. Python's `re`, like
Java's `java.util.regex` (MM2's), backtracks: `\\w*\\w*\\w*\\w*\\w*\\w*\\w*\\w*z` took 2.3 s on a
40-character name and 55.6 s on 60, and `(x+)+y` doubles with every `x`; RE2 answers both in microseconds.

Every user pattern (topic, group and config-property filters, `builtin_exclude`, residency rules, the
witnesses' check, imported MM2 patterns once they are a topology) goes through `compile_user_pattern`;
`pattern_problem` says why a pattern is refused, in the words validate prints at the pattern's
FILE:LINE:COL. The project's own fixed regular expressions stay on `re`.

The language read, against MM2's java.util.regex (our compatibility reference) and Python's `re`:

- **Full match** (RE2 anchored at both ends, Java's `Matcher.matches()`): `orders` does not match
  `orders.eu`. `^`, `$`, `\\A` and `\\z` are accepted and redundant; `$` is the end of the name only.
- **Refused** (what RE2 cannot express in linear time; each named, with the fix): backreferences
  (`\\1`, `(?P=name)`, `\\k<name>`), lookahead `(?=` `(?!`, lookbehind `(?<=` `(?<!`, atomic groups
  `(?>`, possessive quantifiers `x++` `x*+` `x?+` `x{2}+` (drop the second `+`: nothing backtracks
  now), conditionals `(?(1)`, comments `(?#`, the inline flags `x`, `u`, `a`, `L` (RE2 reads `i`, `m`,
  `s`, `U`), `\\Z` (write nothing: the match is full already), `\\uXXXX` (write `\\x{XXXX}`), `\\G`, `\\R`,
  `\\h`, `\\X`, and `{,n}` (Python reads `{0,n}`, RE2 the literal text, Java an error: write `{0,n}`).
  A repeat count is at most 1000, nested counts multiplied (`x{1001}`, `(x{100}){100}`): no topic name
  is longer than 249 characters.
- **ASCII classes**: `\\w`, `\\d`, `\\s` and `\\b` are ASCII, as in Java (without
  UNICODE_CHARACTER_CLASS); Python's `re` reads them as Unicode. Topic names are ASCII
  (`[a-zA-Z0-9._-]`) and config names too, so this only matters for a group id such as `café`: write
  `\\p{L}` or the letters themselves. `.` matches any character but a newline, as in both.
- **Flags** such as `(?i)` apply to their own pattern only (each pattern is wrapped in `(?:...)`
  before the filter joins them with `|`), wherever they stand; case folding is Unicode's, as Python's
  (Java's `(?i)` is ASCII-only unless `(?u)`). Named groups `(?P<n>...)` / `(?<n>...)` are accepted and
  capture nothing.
- **Also accepted** (Java reads them, Python's `re` does not): `\\p{L}`, `\\Q...\\E`; and the POSIX
  classes `[[:alpha:]]`.

Names are bounded before they are matched: a topic name longer than Kafka's 249 characters, a group id
or a config name longer than 4096 (Kafka does not bound group ids; we do) never matches: no topic and no
group is selected by such a name, and no config property of such a name is copied.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, ClassVar

import re2
from re2 import _re2

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

MAX_PATTERN_CHARS = 1_000  # a topic/group/config pattern; longer ones are refused (pattern complexity limit)
MAX_TOPIC_NAME_CHARS = 249  # Kafka's limit (org.apache.kafka.common.internals.Topic.MAX_NAME_LENGTH)
MAX_GROUP_ID_CHARS = 4_096  # Kafka sets none; a longer group id is never selected
MAX_CONFIG_NAME_CHARS = 4_096  # a config property name longer than this is never copied
MAX_REPEAT = 1_000  # RE2's limit on a repeat count (nested counts multiplied)

PATTERN_HINT = (
    "patterns are full-match regular expressions matched in linear time (RE2 syntax: the common part of "
    "Java's and Python's); escape dots as \\\\. in YAML double quotes (docs/security.md)"
)

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the reasons are ours to report, not RE2's to log on stderr
_OPTIONS.never_capture = True  # a filter only asks "does it match": no group is captured
_BOTH = _re2.RE2.Anchor.ANCHOR_BOTH
_NO_MATCH = (-1, -1)


class PatternError(ValueError):
    """A user pattern the linear-time matcher refuses; the message is `pattern_problem`'s."""


class UserPattern:
    """A compiled user pattern (or several joined with `|`): `fullmatch(name)` in time linear in `name`.

    It calls the RE2 binding's compiled program directly (google-re2's `_re2.RE2.Match`): the public
    `re2.compile(...).fullmatch` builds a match object with character offsets, about six times slower on
    a topic name, and a mesh routes millions of names."""

    __slots__ = ("pattern", "_regexp")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        try:
            encoded = pattern.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise PatternError("is not valid Unicode text (a lone surrogate)") from exc
        self._regexp = _re2.RE2(encoded, _OPTIONS)
        if not self._regexp.ok():
            raise PatternError(_explain(pattern, self._regexp.error().decode("utf-8", "replace")))

    def fullmatch(self, name: str) -> bool:
        try:
            text = name.encode("utf-8")
        except UnicodeEncodeError:
            return False  # a lone surrogate: no Kafka name holds one
        return bool(self._regexp.Match(_BOTH, text, 0, len(text))[0] != _NO_MATCH)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return UserPattern, (self.pattern,)  # a job's spec is pickled to Spark's workers; RE2's program is not

    def __repr__(self) -> str:
        return f"UserPattern({self.pattern!r})"


# --- why a pattern is refused -------------------------------------------------------------------

_ESCAPES = {
    "Z": "`\\Z` (end of input) is not supported by the linear-time matcher; patterns match the whole name "
    "already: drop it (or write `\\z`)",
    "u": "`\\uXXXX` is not supported by the linear-time matcher: write `\\x{XXXX}` (or the character itself)",
    "G": "`\\G` (end of the previous match) is not supported by the linear-time matcher: drop it",
    "k": "the named backreference `\\k<name>` is not supported by the linear-time matcher (it needs "
    "backtracking): spell out the text, or list the alternatives",
}
_BACKREFERENCE = (
    "the backreference `{}` is not supported by the linear-time matcher (matching one needs backtracking): "
    "spell out the alternatives (`(a|b)\\1` -> `aa|bb`)"
)
_PERL_OPERATORS = (  # longest first
    ("(?<=", "lookbehind `(?<=` is not supported by the linear-time matcher; match the text itself instead"),
    ("(?<!", "negative lookbehind `(?<!` is not supported by the linear-time matcher; add an exclude pattern instead"),
    (
        "(?P=",
        "the named backreference `(?P=name)` is not supported by the linear-time matcher (it needs "
        "backtracking): spell out the text, or list the alternatives",
    ),
    ("(?P>", "the recursion `(?P>name)` is not supported by the linear-time matcher: spell the pattern out"),
    (
        "(?=",
        "lookahead `(?=` is not supported by the linear-time matcher; match the text itself, or move the "
        "condition into an exclude pattern",
    ),
    (
        "(?!",
        "negative lookahead `(?!` is not supported by the linear-time matcher; write what it refuses as an "
        "exclude pattern instead (`(?!tmp-).*` -> include `.*`, exclude `tmp-.*`)",
    ),
    (
        "(?>",
        "the atomic group `(?>` is not supported by the linear-time matcher, nor needed: it never "
        "backtracks, so write the group as `(?:`",
    ),
    ("(?(", "the conditional `(?(` is not supported by the linear-time matcher: list the alternatives with `|`"),
    ("(?#", "the comment `(?#...)` is not supported by the linear-time matcher: drop it"),
)
_FLAGS = "RE2 reads the inline flags i, m, s and U (`(?i)orders`); drop the others (`x`, `u`, `a`, `L`)"


_RE2_ERRORS = {  # RE2's words for a malformed pattern, in Python's (which the earlier messages used)
    "missing )": "missing ), unterminated subpattern",
    "unexpected )": "unbalanced parenthesis",
    "missing ]": "unterminated character set",
    "missing argument to repetition operator": "nothing to repeat",
    "no argument for repetition operator": "nothing to repeat",
    "trailing \\": "bad escape (end of pattern)",
    "invalid character class range": "bad character range",
    "invalid named capture group": "bad group name",
    "duplicate capture group name": "redefinition of group name",
}


def _where(pattern: str, fragment: str) -> str:
    at = pattern.find(fragment) if fragment else -1
    return f" (character {at + 1} of the pattern)" if at >= 0 else ""


def _explain(pattern: str, error: str) -> str:
    """RE2's parse error (`<what>: <fragment>`) as the construct it refused and what to write instead."""
    what, _, fragment = error.partition(": ")
    where = _where(pattern, fragment)
    if what == "invalid escape sequence" and len(fragment) >= 2:
        letter = fragment[1]
        if letter.isdigit():
            return _BACKREFERENCE.format(fragment) + where
        if letter in _ESCAPES:
            return _ESCAPES[letter] + where
        return (
            f"the escape `{fragment}` is not supported by the linear-time matcher: escape only punctuation "
            f"(`\\.`), or use `\\d`, `\\w`, `\\s`, `\\p{{...}}`, `\\x{{...}}`{where}"
        )
    if what == "bad repetition operator" and fragment.endswith("+") and len(fragment) >= 2:
        return (
            f"the possessive quantifier `{fragment}` is not supported by the linear-time matcher, nor needed: "
            f"nothing backtracks now, so write `{fragment[:-1]}`{where}"
        )
    if what == "invalid perl operator":
        at = pattern.find(fragment)
        here = pattern[at:] if at >= 0 else fragment
        while at >= 0:  # `(?P<n>a)(?P=n)`: RE2 names `(?P`, the second one
            for start, message in _PERL_OPERATORS:
                if pattern.startswith(start, at):
                    return f"{message} (character {at + 1} of the pattern)"
            at = pattern.find(fragment, at + 1)
        if here.startswith("(?") and len(here) > 2 and here[2].isalpha():
            return f"the inline flag `{here[:3]}` is not supported by the linear-time matcher: {_FLAGS}{where}"
        return f"the group `{fragment}` is not supported by the linear-time matcher{where}"
    if what == "invalid repetition size":
        low, _, high = fragment.strip("{}").partition(",")
        if low.isdigit() and high.isdigit() and int(low) > int(high):
            return f"the repeat `{fragment}` has its minimum above its maximum: write `{{{high},{low}}}`{where}"
        return (
            f"the repeat `{fragment}` counts more than the linear-time matcher allows (at most {MAX_REPEAT:,}, "
            f"nested repeats multiplied): no topic name is longer than {MAX_TOPIC_NAME_CHARS} characters; write a "
            f"smaller count, or `+`{where}"
        )
    if what == "pattern too large - compile failed" or "too large" in what or "too deep" in what:
        return f"is too large for the linear-time matcher ({what}): use a simpler pattern"
    if fragment == pattern:
        where = ""  # RE2 names the whole pattern: no position worth giving
    return f"does not compile: {_RE2_ERRORS.get(what, what)}{where}"


def _repeats(pattern: str) -> Iterator[str]:
    """Every counted repeat `{n}`, `{n,}`, `{n,m}`, `{,m}` outside a character class and an escape."""
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if pattern.startswith("\\Q", i):
                end = pattern.find("\\E", i + 2)
                i = len(pattern) if end < 0 else end + 2
                continue
            if pattern[i + 1 : i + 2] in ("x", "p", "P") and pattern.startswith("{", i + 2):  # `\x{1234}`, `\p{L}`
                end = pattern.find("}", i + 2)
                i = len(pattern) if end < 0 else end + 1
                continue
            i += 2
            continue
        if in_class:
            if pattern.startswith("[:", i):
                end = pattern.find(":]", i + 2)
                i = i + 1 if end < 0 else end + 2
                continue
            in_class = c != "]"
        elif c == "[":
            in_class = True
            i += 1
            i += pattern.startswith("^", i)
            i += pattern.startswith("]", i)  # a `]` first in a class is itself
            continue
        elif c == "{":
            end = pattern.find("}", i)
            low, comma, high = pattern[i + 1 : end].partition(",") if end > i else ("", "", "")
            if (low.isdigit() or (comma and not low)) and (not high or high.isdigit()) and (low or high):
                yield pattern[i : end + 1]
        i += 1


def pattern_problem(pattern: Any) -> str | None:
    """Why the linear-time matcher refuses `pattern` (the construct, where, and what to write instead), or None.

    The answer reads after the pattern: `pattern '(?=a)b' is refused: lookahead ...`, `... does not compile: ...`.

    The one check for every topic, group, config-property and residency pattern: validate reports it at the
    pattern's FILE:LINE:COL, and a filter refuses to be built with such a pattern (a job reading its spec)."""
    if not isinstance(pattern, str):
        return f"is not a string ({type(pattern).__name__})"
    return _problem(pattern)


@lru_cache(maxsize=8192)
def _problem(pattern: str) -> str | None:
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"has {len(pattern):,} characters (limit {MAX_PATTERN_CHARS:,}): split it, or use a shorter prefix"
    for bad in _repeats(pattern):
        if bad.startswith("{,"):
            return (
                f"is refused: the repeat `{bad}` means `{{0{bad[1:]}` in Python, the literal text in RE2 and an error "
                f"in Java: write `{{0{bad[1:]}`{_where(pattern, bad)}"
            )
        if any(len(n) > 4 or int(n) > MAX_REPEAT for n in bad.strip("{}").split(",") if n):
            # RE2 reads a count of ten digits or more as literal text: refuse it before RE2 sees it
            return "is refused: " + _explain(pattern, f"invalid repetition size: {bad}")
    try:
        UserPattern(pattern)
    except PatternError as exc:
        problem = str(exc)
        return problem if problem.startswith(("does not ", "is ")) else f"is refused: {problem}"
    return None


@lru_cache(maxsize=8192)
def compile_user_pattern(pattern: str) -> UserPattern:
    """The compiled user pattern, matched in linear time; PatternError (a ValueError) with
    `pattern_problem`'s words when it is refused."""
    problem = pattern_problem(pattern)
    if problem is not None:
        raise PatternError(f"pattern {pattern!r} {problem}")
    return UserPattern(pattern)


class _AnyOf:
    """Several user patterns: one RE2 program of their union when it fits RE2's memory, else each in turn."""

    __slots__ = ("_patterns", "_parts")

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self._patterns = patterns
        compiled = [compile_user_pattern(p) for p in patterns]  # refuses a bad one, by its own words
        try:
            self._parts: tuple[UserPattern, ...] = (
                (UserPattern("|".join(f"(?:{p})" for p in patterns)),) if len(patterns) > 1 else tuple(compiled)
            )
        except PatternError:
            self._parts = tuple(compiled)  # the union is too large for one program

    def fullmatch(self, name: str) -> bool:
        return any(p.fullmatch(name) for p in self._parts)

    def __reduce__(self) -> tuple[Any, tuple[tuple[str, ...]]]:
        return _AnyOf, (self._patterns,)


def _compile_any(patterns: tuple[str, ...]) -> _AnyOf | None:
    return _AnyOf(patterns) if patterns else None


def too_long(name: str, limit: int = MAX_TOPIC_NAME_CHARS) -> bool:
    """Whether `name` is longer than a filter will match (Kafka's 249 characters for a topic name)."""
    return len(name) > limit


def _refuse(patterns: tuple[str, ...]) -> None:
    for p in patterns:
        compile_user_pattern(p)


@dataclass(frozen=True)
class PatternFilter:
    """include/exclude full-match patterns; a name passes if some include matches and no exclude does.

    Subclasses name `ALWAYS_EXCLUDED`, MM2's built-in excludes (the defaults of `topics.exclude` /
    `groups.exclude`), applied on top of `exclude` unless `builtin_exclude` replaces them, and
    `MAX_NAME_CHARS`, past which a name is never matched (a topic name's 249 here: residency rules).
    """

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    builtin_exclude: tuple[str, ...] | None = None  # None: ALWAYS_EXCLUDED
    ALWAYS_EXCLUDED: ClassVar[tuple[str, ...]] = ()
    MAX_NAME_CHARS: ClassVar[int] = MAX_TOPIC_NAME_CHARS

    def __post_init__(self) -> None:
        _refuse(self.include + self.exclude + self.builtin)

    @property
    def builtin(self) -> tuple[str, ...]:
        return self.ALWAYS_EXCLUDED if self.builtin_exclude is None else self.builtin_exclude

    @cached_property
    def _include(self) -> _AnyOf | None:
        return _compile_any(self.include)

    @cached_property
    def _exclude(self) -> _AnyOf | None:
        return _compile_any(self.exclude + self.builtin)

    def matches(self, name: str) -> bool:
        if len(name) > self.MAX_NAME_CHARS or self._include is None or not self._include.fullmatch(name):
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
    MAX_NAME_CHARS: ClassVar[int] = MAX_GROUP_ID_CHARS


@dataclass(frozen=True)
class ConfigPropertyFilter:
    """Which topic config properties are copied from a source topic to its remote topic (a name longer
    than MAX_CONFIG_NAME_CHARS is not: no Kafka config is named so)."""

    exclude: tuple[str, ...] = DEFAULT_CONFIG_PROPERTY_EXCLUDES

    def __post_init__(self) -> None:
        _refuse(self.exclude)

    @cached_property
    def _exclude(self) -> _AnyOf | None:
        return _compile_any(self.exclude)

    def should_replicate(self, prop: str) -> bool:
        if len(prop) > MAX_CONFIG_NAME_CHARS:
            return False
        return self._exclude is None or not self._exclude.fullmatch(prop)

    def apply(self, configs: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in configs.items() if self.should_replicate(k)}
