"""What changed between two Topology models: flows, clusters and topology-wide settings.

Pure. `reconciler plan --base REV` uses it to say which flows changed and to plan only the flows
a change can affect (`TopologyChanges.affected_flows`). Settings are named by dotted paths into
the model (`topics.include`, `job.parallelism`, `config.sasl.username`), compared after defaults
are merged, so moving a value into `defaults:` without changing it is not a change.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.topology.model import Flow, Topology


class ChangeKind(str, enum.Enum):
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


@dataclass(frozen=True)
class FlowChange:
    name: str  # "source->target"
    kind: ChangeKind
    settings: tuple[str, ...] = ()  # for CHANGED: the dotted settings that differ


@dataclass(frozen=True)
class ClusterChange:
    alias: str
    kind: ChangeKind
    settings: tuple[str, ...] = ()


#: Topology-wide settings that change what a plan does for every flow (what may be deleted, where
#: topics may go). SLO and metadata changes do not change a plan.
PLAN_WIDE_SETTINGS = ("residency", "prune")


@dataclass(frozen=True)
class TopologyChanges:
    flows: tuple[FlowChange, ...] = ()
    clusters: tuple[ClusterChange, ...] = ()
    settings: tuple[str, ...] = ()  # topology-wide: residency, prune.*, slo.*, name
    affected_flows: tuple[str, ...] = ()  # flows a plan limited to the change must cover

    @property
    def empty(self) -> bool:
        return not (self.flows or self.clusters or self.settings)

    def to_dict(self) -> dict:
        return {
            "flows": [{"flow": f.name, "change": f.kind.value, "settings": list(f.settings)} for f in self.flows],
            "clusters": [
                {"cluster": c.alias, "change": c.kind.value, "settings": list(c.settings)} for c in self.clusters
            ],
            "settings": list(self.settings),
            "affected_flows": list(self.affected_flows),
        }


def changed_settings(old: Any, new: Any, prefix: str = "") -> tuple[str, ...]:
    """Dotted paths of the leaves that differ; dataclasses and mappings are compared field by field.

    Fields declared with compare=False (source positions) are ignored.
    """
    if old == new:
        return ()
    if dataclasses.is_dataclass(old) and type(old) is type(new):
        return tuple(
            path
            for f in dataclasses.fields(old)
            if f.compare
            for path in changed_settings(getattr(old, f.name), getattr(new, f.name), _join(prefix, f.name))
        )
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        return tuple(
            path
            for key in sorted(old.keys() | new.keys(), key=str)
            for path in changed_settings(old.get(key), new.get(key), _join(prefix, str(key)))
        )
    return (prefix,)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _keyed_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, ChangeKind, tuple[str, ...]]]:
    out: list[tuple[str, ChangeKind, tuple[str, ...]]] = []
    for key in sorted(old.keys() | new.keys()):
        if key not in old:
            out.append((key, ChangeKind.ADDED, ()))
        elif key not in new:
            out.append((key, ChangeKind.REMOVED, ()))
        elif settings := changed_settings(old[key], new[key]):
            out.append((key, ChangeKind.CHANGED, settings))
    return out


def _flows_by_name(flows: Iterable[Flow]) -> dict[str, Flow]:
    return {f.name: f for f in flows}


def diff_topologies(old: Topology, new: Topology) -> TopologyChanges:
    """Flows (by "source->target"), clusters and topology-wide settings added, removed or changed."""
    old_flows, new_flows = _flows_by_name(old.flows), _flows_by_name(new.flows)
    flows = tuple(FlowChange(*c) for c in _keyed_changes(old_flows, new_flows))
    clusters = tuple(ClusterChange(*c) for c in _keyed_changes(old.clusters, new.clusters))
    wide = tuple(
        s
        for field in ("residency", "prune", "slo", "name")
        for s in changed_settings(getattr(old, field), getattr(new, field), field)
    )

    affected = {f.name for f in flows}
    touched = {c.alias for c in clusters}
    affected |= {name for name, f in new_flows.items() if f.source in touched or f.target in touched}
    if any(s.split(".")[0] in PLAN_WIDE_SETTINGS for s in wide):
        affected |= new_flows.keys() | old_flows.keys()
    return TopologyChanges(flows, clusters, wide, tuple(sorted(affected)))
