"""The typed intermediate of an import: a topology draft, what could not be expressed, which
variables to set. `to_yaml` turns a draft into topology YAML; `validate` runs the project's own
loader and analysis on it (no rule is re-implemented here).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from reconciler.analysis.hazards import analyse
from reconciler.textutil import cut
from reconciler.topology.build import build_topology
from reconciler.topology.defaults import BUILTIN_FLOW_DEFAULTS
from reconciler.topology.diagnostics import Diagnostics
from reconciler.topology.loader import Document, load_text
from reconciler.topology.model import Topology

#: A flow setting as a path into the topology's flow settings, e.g. ("sync", "acls").
Setting = tuple[str, ...]


@dataclass(frozen=True)
class Note:
    """A key the conversion could not express (or expressed only approximately), and what to do."""

    where: str | None  # FILE:LINE, None when it has no single place
    key: str
    message: str
    action: str

    def render(self) -> str:
        head = f"{self.where}: " if self.where else ""
        return f"{head}warning: {cut(self.key)}: {self.message}; {self.action}"


@dataclass(frozen=True)
class ImportOptions:
    """What the user tells an import that the file cannot: which policy a custom `replication.policy.class` is
    (class name -> "identity" or "default"; it decides every remote topic's name, so it is never guessed)."""

    policy_classes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EnvVar:
    """A variable the user must set: the topology references it instead of holding a secret."""

    name: str
    source: str  # where its value is today, in words (never the value)


@dataclass(frozen=True)
class ClusterDraft:
    alias: str
    bootstrap_servers: str
    config: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    replication_principal: str | None = None
    line: int = 0  # where the cluster is defined in the input (0: unknown)


@dataclass(frozen=True)
class FlowDraft:
    source: str
    target: str
    enabled: bool
    settings: Mapping[Setting, Any]  # every setting the source format determines (its defaults included)
    lines: Mapping[Setting, int] = field(default_factory=dict)  # the input line of each setting read from it
    line: int = 0  # the flow's first line in the input (0: unknown)


@dataclass(frozen=True)
class ResidencyDraft:
    name: str
    topics: tuple[str, ...]
    tag: str
    allowed: tuple[str, ...]
    line: int = 0


@dataclass
class TopologyDraft:
    name: str | None
    clusters: list[ClusterDraft]
    flows: list[FlowDraft]
    description: str | None = None
    residency: list[ResidencyDraft] = field(default_factory=list)
    prune: dict[str, bool] = field(default_factory=dict)
    slo: dict[str, float | int] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)
    env_vars: list[EnvVar] = field(default_factory=list)


def builtin_default(setting: Setting) -> Any:
    value: Any = BUILTIN_FLOW_DEFAULTS
    for part in setting:
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return tuple(value) if isinstance(value, list) else value


def _nest(settings: Mapping[Setting, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, value in sorted(settings.items()):
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = list(value) if isinstance(value, tuple) else value
    return out


def factor(flows: list[FlowDraft]) -> tuple[dict[Setting, Any], list[dict[Setting, Any]]]:
    """(defaults, per-flow overrides): a setting all flows share goes to `defaults:`; values equal to
    the built-in defaults are left out so the topology stays short."""
    keys = sorted({k for f in flows for k in f.settings})
    defaults: dict[Setting, Any] = {}
    per_flow: list[dict[Setting, Any]] = [{} for _ in flows]
    for key in keys:
        values = [f.settings.get(key, builtin_default(key)) for f in flows]
        if all(v == values[0] for v in values):
            if values[0] != builtin_default(key):
                defaults[key] = values[0]
            continue
        for i, v in enumerate(values):
            if v != builtin_default(key):
                per_flow[i][key] = v
    return defaults, per_flow


def _header(draft: TopologyDraft, origin: str) -> list[str]:
    lines = [f"# Imported from {origin} by `reconciler import`."]
    if draft.env_vars:
        lines.append("# Set these environment variables (secrets stay out of the topology):")
        lines += [f"#   {v.name}: {v.source}" for v in draft.env_vars]
    if draft.notes:
        lines.append("# Not expressed in this topology (see `reconciler import` warnings):")
        lines += [f"#   {n.render()}" for n in draft.notes]
    return lines


class _Dumper(yaml.SafeDumper):
    pass


def _str_presenter(dumper, data: str):
    style = "'" if re.search(r"[\\]|^\s|\s$|^$", data) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_presenter)


def to_data(draft: TopologyDraft) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": "reconciler/v1", "kind": "Topology"}
    meta = {k: v for k, v in (("name", draft.name), ("description", draft.description)) if v}
    if meta:
        doc["metadata"] = meta
    clusters: dict[str, Any] = {}
    for c in draft.clusters:
        entry: dict[str, Any] = {"bootstrap_servers": c.bootstrap_servers}
        if c.config:
            entry["config"] = dict(c.config)
        if c.tags:
            entry["tags"] = dict(c.tags)
        if c.replication_principal:
            entry["replication_principal"] = c.replication_principal
        clusters[c.alias] = entry
    doc["clusters"] = clusters
    defaults, per_flow = factor(draft.flows)
    if defaults:
        doc["defaults"] = _nest(defaults)
    flows = []
    for f, own in zip(draft.flows, per_flow):
        entry = {"source": f.source, "target": f.target}
        if not f.enabled:
            entry["enabled"] = False
        entry.update(_nest(own))
        flows.append(entry)
    doc["flows"] = flows
    if draft.residency:
        doc["policies"] = {
            "residency": [
                {"name": r.name, "topics": list(r.topics), "tag": r.tag, "allowed": list(r.allowed)}
                for r in draft.residency
            ]
        }
    if draft.prune:
        doc["prune"] = dict(draft.prune)
    if draft.slo:
        doc["slo"] = dict(draft.slo)
    return doc


def to_yaml(draft: TopologyDraft, origin: str) -> str:
    body = yaml.dump(
        to_data(draft), Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120, allow_unicode=True
    )
    return "\n".join(_header(draft, origin)) + "\n" + body


@dataclass(frozen=True)
class Checked:
    """An imported topology's text as validated: the topology (None: it does not validate), the findings and the
    documents read (their positions map a finding back to the input, `render_at_input`)."""

    topology: Topology | None
    diags: Diagnostics
    docs: list[Document]


def check(text: str, file: str) -> Checked:
    """The project's own validation (schema, semantics, loops, diamonds, residency) on the output; the text is
    read once (a large import spends most of its time in the YAML reader)."""
    diags = Diagnostics()
    docs = load_text(text, file, diags)
    topology = build_topology(docs, diags)
    if topology is not None:
        analyse(topology, diags)
    return Checked(topology if diags.ok else None, diags, docs)


def validate(text: str, file: str) -> tuple[Topology | None, Diagnostics]:
    checked = check(text, file)
    return checked.topology, checked.diags


IMPORTED = "<imported topology>"  # the file name of the imported topology while it is validated
_IMPORTED_AT = re.compile(re.escape(IMPORTED) + r":(\d+):(\d+)")


def _setting_line(flow: FlowDraft, rest: tuple) -> int | None:
    for n in range(len(rest), 0, -1):
        if tuple(rest[:n]) in flow.lines:
            return flow.lines[tuple(rest[:n])]
    return None


def render_at_input(draft: TopologyDraft, docs: list[Document], diags: Diagnostics, file: str) -> str:
    """`diags` of the imported topology (`docs`, as `check` read it; the user never sees it: nothing is written
    when it does not validate) at the input's lines, `FILE:LINE: error: ...`: the line of the setting, else of
    its flow, cluster or rule, else 1. A position in the topology is mapped to the YAML path of the nearest value
    at or before it, and the path to the draft element it came from."""
    marks: list[tuple[int, int, tuple]] = []
    for doc in docs:
        for path, loc in (*doc.positions.items(), *doc.key_positions.items()):
            marks.append((loc.line, loc.col, path))
    marks.sort(key=lambda m: (m[0], m[1]))
    starts = [(m[0], m[1]) for m in marks]
    clusters = {c.alias: c.line for c in draft.clusters}

    def line_of(path: tuple) -> int | None:
        head, rest = (path[0], path[1:]) if path else (None, ())
        if head == "flows" and rest and isinstance(rest[0], int) and rest[0] < len(draft.flows):
            flow = draft.flows[rest[0]]
            return _setting_line(flow, rest[1:]) or flow.line or None
        if head == "defaults":
            found = (_setting_line(f, rest) for f in draft.flows)
            return next((n for n in found if n), None) or min((f.line for f in draft.flows if f.line), default=None)
        if head == "clusters" and rest:
            return clusters.get(rest[0]) or None
        if head == "policies" and rest[:1] == ("residency",) and len(rest) > 1 and isinstance(rest[1], int):
            return draft.residency[rest[1]].line if rest[1] < len(draft.residency) else None
        return None

    def at(line: int, col: int) -> int:
        i = bisect.bisect_right(starts, (line, col)) - 1
        return (line_of(marks[max(i, 0)][2]) if marks else None) or 1

    def mapped(words: str) -> str:  # positions quoted in a message or hint
        return _IMPORTED_AT.sub(lambda m: f"{file}:{at(int(m.group(1)), int(m.group(2)))}", words)

    out = []
    for d in diags.sorted():
        line = at(d.where.line, d.where.col) if d.where is not None else 1
        out.append(f"{file}:{line}: {d.severity.value}: {mapped(d.message)}")
        if d.hint:
            out.append(f"  hint: {mapped(d.hint)}")
    return "\n".join(out)


# --- helpers shared by the importers ------------------------------------------------------------

_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")  # by convention: upper case (a Secret key `password` is not one)


class EnvNames:
    """Generated variable names, unique within one import (a set of the names taken: each name is
    found in constant time, so an import stays linear in the number of secrets)."""

    def __init__(self, draft: TopologyDraft):
        self.draft = draft
        self.taken = {v.name for v in draft.env_vars}
        self.suffix: dict[str, int] = {}  # name -> the next suffix to try (`NAME_2`, `NAME_3`, ...)

    def _append(self, name: str, source: str) -> str:
        self.draft.env_vars.append(EnvVar(name, source))
        self.taken.add(name)
        return name

    def add(self, name: str, source: str) -> str:
        final, n = name, self.suffix.get(name, 2)
        while final in self.taken:
            final, n = f"{name}_{n}", n + 1
        self.suffix[name] = n
        return self._append(final, source)

    def known(self, name: str, source: str) -> str:
        return name if name in self.taken else self._append(name, source)


def is_env_name(text: str) -> bool:
    return bool(_ENV_NAME.fullmatch(text))
