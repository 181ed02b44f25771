"""Which topic configs are *explicitly set*: the rule that keeps plans free of endless false diffs.

Brokers disagree on describe_configs. Real Kafka lists every topic config and labels its source
(DYNAMIC_TOPIC_CONFIG for per-topic overrides, DEFAULT_CONFIG / STATIC_BROKER_CONFIG / ... for
inherited values). Tansu lists only the configs stored for the topic and labels every one
DEFAULT_CONFIG. The rule, decided once per cluster from all topics it described:

* the cluster "reports sources" when any entry has a source other than DEFAULT_CONFIG/UNKNOWN, or
  any topic's answer lists all of MARKER_KEYS (configs every real Kafka lists and nobody sets all
  at once); then explicit = entries with source DYNAMIC_TOPIC_CONFIG;
* otherwise it lists stored configs only; then explicit = every entry listed.

This is the one home of the rule: planning reads live configs with it (`adapters/live_read.py`), and the
replication job copies a source topic's configs with it (`explicit_configs_of` on one topic's
answer, `engine/topics.py`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.state.live import ConfigSourceMode

MARKER_KEYS = frozenset({"segment.bytes", "segment.index.bytes", "index.interval.bytes", "file.delete.delay.ms"})


class ConfigSource(enum.IntEnum):
    """Kafka's DescribeConfigs source ids (same numbers as confluent_kafka.admin.ConfigSource)."""

    UNKNOWN_CONFIG = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


@dataclass(frozen=True)
class RawConfigEntry:
    """A describe_configs entry as the broker sent it."""

    name: str
    value: str | None
    source: int
    is_sensitive: bool = False

    @classmethod
    def of(cls, entry: Any, name: str | None = None) -> RawConfigEntry:
        """From a confluent_kafka ConfigEntry (describe_configs answers: config name -> entry)."""
        source = getattr(entry, "source", ConfigSource.UNKNOWN_CONFIG)
        return cls(
            entry.name if name is None else name,
            entry.value,
            int(getattr(source, "value", source)),
            bool(getattr(entry, "is_sensitive", False)),
        )


def detect_mode(described: Mapping[str, list[RawConfigEntry]]) -> ConfigSourceMode:
    if not described:
        return ConfigSourceMode.UNKNOWN
    inherited = {ConfigSource.DEFAULT_CONFIG, ConfigSource.UNKNOWN_CONFIG}
    for entries in described.values():
        if any(e.source not in inherited for e in entries):
            return ConfigSourceMode.SOURCES
        if MARKER_KEYS <= {e.name for e in entries}:
            return ConfigSourceMode.SOURCES
    return ConfigSourceMode.STORED_ONLY


def explicit_configs(entries: list[RawConfigEntry], mode: ConfigSourceMode) -> dict[str, str]:
    """The configs set on the topic itself (secret values, which brokers hide, are skipped)."""
    out = {}
    for e in entries:
        if e.value is None or e.is_sensitive:
            continue
        if mode is ConfigSourceMode.SOURCES and e.source != ConfigSource.DYNAMIC_TOPIC_CONFIG:
            continue
        out[e.name] = e.value
    return out


def explicit_configs_of(entries: list[RawConfigEntry]) -> dict[str, str]:
    """The configs set on one topic, deciding the cluster's mode from that topic's answer alone."""
    return explicit_configs(entries, detect_mode({"": entries}))
