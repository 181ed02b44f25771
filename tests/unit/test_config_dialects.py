"""Explicitly-set configs across broker dialects (real Kafka sources vs Tansu's stored-only listing)."""

from reconciler.state.configs import MARKER_KEYS, detect_mode, explicit_configs
from reconciler.state.configs import ConfigSource as S
from reconciler.state.configs import RawConfigEntry as E
from reconciler.state.live import ConfigSourceMode as M


def test_real_kafka_full_listing_keeps_only_dynamic_topic_configs():
    entries = [E(k, "1", S.DEFAULT_CONFIG) for k in MARKER_KEYS] + [
        E("retention.ms", "5", S.DYNAMIC_TOPIC_CONFIG),
        E("min.insync.replicas", "2", S.STATIC_BROKER_CONFIG),
        E("sasl.jaas", None, S.DYNAMIC_TOPIC_CONFIG, True),
    ]
    mode = detect_mode({"t": entries})
    assert mode is M.SOURCES
    assert explicit_configs(entries, mode) == {"retention.ms": "5"}


def test_real_kafka_without_any_override_is_still_detected_by_marker_keys():
    entries = [E(k, "1", S.DEFAULT_CONFIG) for k in MARKER_KEYS | {"retention.ms"}]
    assert detect_mode({"t": entries, "u": []}) is M.SOURCES
    assert explicit_configs(entries, M.SOURCES) == {}


def test_tansu_stored_only_listing_counts_everything_listed():
    described = {
        "t": [E("retention.ms", "5", S.DEFAULT_CONFIG), E("cleanup.policy", "compact", S.DEFAULT_CONFIG)],
        "u": [],
    }
    mode = detect_mode(described)
    assert mode is M.STORED_ONLY
    assert explicit_configs(described["t"], mode) == {"retention.ms": "5", "cleanup.policy": "compact"}


def test_no_topics_means_unknown():
    assert detect_mode({}) is M.UNKNOWN
