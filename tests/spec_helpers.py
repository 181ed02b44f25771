"""Job specs for tests: a spec with a few settings changed, by the short names tests use.

`job_spec("west->east", src, dst, topics_include=("orders",), parallelism=3)` and
`respec(spec, delivery="exactly-once")`. The short names map to paths of the spec's nested shape
(`settings.topics.include`, `engine.parallelism`); the spec is rebuilt through `JobSpec.from_dict`,
so values take the model's types (enums, tuples) and invalid ones raise ValueError as a spec file would.
"""

from __future__ import annotations

from typing import Any

from reconciler.contract.spec import ClusterSpec, JobSpec, RuntimeSettings

#: short name -> path under `settings`
SETTINGS = {
    "topics_include": ("topics", "include"),
    "topics_exclude": ("topics", "exclude"),
    "topics_builtin_exclude": ("topics", "builtin_exclude"),
    "groups_include": ("groups", "include"),
    "groups_exclude": ("groups", "exclude"),
    "groups_builtin_exclude": ("groups", "builtin_exclude"),
    "policy": ("policy", "kind"),
    "separator": ("policy", "separator"),
    "internal_separator": ("policy", "internal_separator"),
    "delivery": ("delivery",),
    "replication_factor": ("replication_factor",),
    "config_properties_exclude": ("config_properties", "exclude"),
    "sync_topic_configs": ("sync", "topic_configs"),
    "sync_group_offsets": ("sync", "group_offsets"),
    "sync_group_offsets_interval_seconds": ("sync", "group_offsets_interval_seconds"),
    "heartbeats_enabled": ("heartbeats", "enabled"),
    "heartbeats_interval_seconds": ("heartbeats", "interval_seconds"),
    "heartbeats_location": ("heartbeats", "location"),
    "heartbeats_replication_enabled": ("heartbeats", "replicate"),
    "checkpoints_enabled": ("checkpoints", "enabled"),
    "checkpoints_interval_seconds": ("checkpoints", "interval_seconds"),
    "refresh_interval_seconds": ("refresh_interval_seconds",),
    "offset_syncs_location": ("offset_syncs_location",),
    "offset_lag_max": ("offset_lag_max",),
    "family": ("family",),
    "carries_heartbeats": ("carries_heartbeats",),
    "on_refused_record": ("on_refused_record",),
    "records_per_second": ("rate_limit", "records_per_second"),
    "bytes_per_second": ("rate_limit", "bytes_per_second"),
}
ENGINE = {f for f in RuntimeSettings.__dataclass_fields__}


def _json(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def respec(spec: JobSpec, **changes: Any) -> JobSpec:
    d = spec.to_dict()
    for name, value in changes.items():
        if name in SETTINGS:
            *parents, leaf = SETTINGS[name]
            node = d["settings"]
            for p in parents:
                node = node.setdefault(p, {})  # a section the spec omits while it holds its default (rate_limit)
            node[leaf] = _json(value)
        elif name in ENGINE:
            d["engine"][name] = dict(value) if name == "spark_conf" else value
        elif name in ("source", "target"):
            d[name] = {"alias": value.alias, "bootstrap_servers": value.bootstrap_servers, "config": dict(value.config)}
        elif name in ("flow", "git_revision"):
            d[name] = value
        else:
            raise TypeError(f"no such job spec setting: {name}")
    return JobSpec.from_dict(d)


def job_spec(flow: str, source: ClusterSpec, target: ClusterSpec, **changes: Any) -> JobSpec:
    return respec(JobSpec(flow, source, target), **changes)
