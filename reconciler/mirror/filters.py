"""Topic, consumer-group and config-property filters (MM2's TopicFilter, GroupFilter, ConfigPropertyFilter).

Patterns are full-match regular expressions, as in MirrorMaker 2's `topics` / `topics.exclude`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

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

    @cached_property
    def _exclude(self) -> re.Pattern[str] | None:
        return _compile_any(self.exclude)

    def should_replicate(self, prop: str) -> bool:
        return self._exclude is None or not self._exclude.fullmatch(prop)

    def apply(self, configs: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in configs.items() if self.should_replicate(k)}
