"""The files derived from the settings registry (topology/settings_registry.py), rendered: the flow part of the
JSON Schema and its `prune` and `slo` properties (and what an environment overrides of them: `$defs.flowOverride`,
the environment's `prune` and `slo`, with `$defs.clusterBinding` derived from `$defs.cluster`), and the two tables
of the settings reference, docs/reference/settings.md (flow settings; `prune:` and `slo:`).

`scripts/generate_settings.py` writes them; tests/unit/test_settings_registry.py fails when the committed
files are not what these functions make of the registry. Everything else in both files is written by hand and
kept as it is: the schema's clusters, policies, metadata, owner, the rest of `environments` and a flow's `name`,
`source` and `target`; the page around the tables' markers.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconciler.deployer_kinds import DeployerKind
from reconciler.topology.settings_registry import (
    FLOW_SETTINGS,
    NO_DEFAULT,
    SECTIONS,
    TOPOLOGY_SECTIONS,
    TOPOLOGY_SETTINGS,
    Setting,
)

TABLE_BEGIN = (
    "<!-- settings-table:begin (generated from reconciler/topology/settings_registry.py by "
    "scripts/generate_settings.py; do not edit) -->"
)
TABLE_END = "<!-- settings-table:end -->"
TOPOLOGY_TABLE_BEGIN = (
    "<!-- topology-settings-table:begin (generated from reconciler/topology/settings_registry.py by "
    "scripts/generate_settings.py; do not edit) -->"
)
TOPOLOGY_TABLE_END = "<!-- topology-settings-table:end -->"
SETTINGS_PAGE = "docs/reference/settings.md"


def _json(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    return value


def _has_default(s: Setting) -> bool:
    return s.default is not NO_DEFAULT and s.default is not None


# --- the JSON Schema ---------------------------------------------------------------------------


def _leaf_schema(s: Setting, annotate: bool) -> dict[str, Any]:
    out = {**s.json_schema(), "description": s.doc}
    if annotate and _has_default(s):
        out["default"] = _json(s.default)
    if annotate and s.examples:
        out["examples"] = _json(s.examples)
    return out


def _properties(settings: list[Setting], annotate: bool) -> dict[str, Any]:
    """Nested schema properties of `settings`: a section (`sync`, `job`, ...) is an object of its settings."""
    props: dict[str, Any] = {}
    for s in settings:
        node = props
        for depth, part in enumerate(s.path[:-1], start=1):
            doc = SECTIONS.get(".".join(s.path[:depth]))
            section = node.setdefault(
                part,
                {"type": "object", "additionalProperties": False, **({"description": doc} if doc else {})},
            )
            node = section.setdefault("properties", {})
        node[s.path[-1]] = _leaf_schema(s, annotate)
    return props


def schema_with_settings(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of `schema` whose flow settings are the registry's: `$defs.flowSettings` (a topology's `defaults:`,
    with the built-in defaults and examples editors show) and the settings of `$defs.flow` (a flow's own keys
    that are no setting, `name`, `source`, `target`, come first and stay as written)."""
    out = copy.deepcopy(schema)
    defs = out["$defs"]
    shared = [s for s in FLOW_SETTINGS if not s.flow_only]
    defs["flowSettings"] = {"type": "object", "additionalProperties": False, "properties": _properties(shared, True)}
    registry_keys = {s.path[0] for s in FLOW_SETTINGS}
    flow = defs["flow"]
    own = {k: v for k, v in flow.get("properties", {}).items() if k not in registry_keys}
    flow_only = [s for s in FLOW_SETTINGS if s.flow_only]
    flow["properties"] = {**own, **_properties(flow_only, True), **_properties(shared, False)}
    top = _properties(list(TOPOLOGY_SETTINGS), True)
    for section in TOPOLOGY_SECTIONS:  # in place: the top-level keys keep their order
        out["properties"][section] = top[section]
    # An environment (docs/environments.md) overrides the same settings: a flow's (all but its name and ends),
    # `prune:` and `slo:`, and binds each cluster's connection fields (`$defs.cluster`, every key optional, a
    # `config` or `tags` key null to remove the topology's).
    defs["flowOverride"] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {**_properties(flow_only, False), **_properties(shared, False)},
    }
    binding = copy.deepcopy(defs["cluster"])
    binding.pop("required", None)
    for key in ("config", "tags"):
        values = binding["properties"][key]["additionalProperties"]
        kinds = values["type"] if isinstance(values["type"], list) else [values["type"]]
        values["type"] = [*kinds, "null"]
    defs["clusterBinding"] = binding
    environment = defs["environment"]["properties"]
    for section in TOPOLOGY_SECTIONS:
        environment[section] = _properties(list(TOPOLOGY_SETTINGS), False)[section]
    return out


def render_schema(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def schema_text(current: str) -> str:
    """The schema file's text as the registry makes it from the `current` text."""
    return render_schema(schema_with_settings(json.loads(current)))


# --- the reference tables -----------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default_text(s: Setting) -> str:
    if s.default is NO_DEFAULT or s.default is None:
        return "unset"
    return f"`{json.dumps(_json(s.default), ensure_ascii=False)}`"


def _mm2_text(s: Setting) -> str:
    if s.mm2 is None:
        return "—"
    text = ", ".join(f"`{k}`" for k in s.mm2.keys)
    if s.mm2.legacy:
        text += " (also read: " + ", ".join(f"`{k}`" for k in s.mm2.legacy) + ")"
    if _has_default(s) and s.mm2.default is not None and _json(s.mm2.default) != _json(s.default):
        text += f"; **MM2's default differs: `{json.dumps(_json(s.mm2.default), ensure_ascii=False)}`**"
    return text


def _scope_text(s: Setting) -> str:
    """The setting's scope, and the deployers that read it when not all do: "engine (kubernetes)"."""
    if set(s.deployers) == set(DeployerKind):
        return s.scope.value
    return f"{s.scope.value} ({', '.join(d.value for d in s.deployers)})"


def settings_table() -> str:
    """The table of flow settings, one row per setting."""
    rows = [
        "| setting | default | hot reload | scope | MirrorMaker 2 | what it does |",
        "|---|---|---|---|---|---|",
    ]
    for s in FLOW_SETTINGS:
        key = f"`{s.name}`" + (" (flows only)" if s.flow_only else "")
        hot = "yes" if s.hot_reload else "no"
        cells = [key, _cell(_default_text(s)), hot, _scope_text(s), _cell(_mm2_text(s)), _cell(s.doc)]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def topology_settings_table() -> str:
    """The table of the topology-wide settings (`prune:`, `slo:`), one row per setting."""
    rows = ["| setting | default | what it does |", "|---|---|---|"]
    for s in TOPOLOGY_SETTINGS:
        rows.append(f"| `{s.name}` | {_cell(_default_text(s))} | {_cell(s.doc)} |")
    return "\n".join(rows) + "\n"


def _replace_between(current: str, begin: str, end: str, table: str) -> str:
    if begin not in current or end not in current:
        raise ValueError(f"{SETTINGS_PAGE} has no table markers ({begin} ... {end})")
    head, rest = current.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{table}{end}{tail}"


def settings_page_text(current: str) -> str:
    """`current` (the settings page's text) with the tables between their markers replaced by `settings_table()` and
    `topology_settings_table()`."""
    text = _replace_between(current, TABLE_BEGIN, TABLE_END, settings_table())
    return _replace_between(text, TOPOLOGY_TABLE_BEGIN, TOPOLOGY_TABLE_END, topology_settings_table())


# --- writing -----------------------------------------------------------------------------------


#: The derived files (paths from the repository root) and what makes each one's text from its current text.
DERIVED: dict[str, Callable[[str], str]] = {
    "schemas/topology.schema.json": schema_text,
    SETTINGS_PAGE: settings_page_text,
}


def stale_files(root: Path) -> list[str]:
    """The derived files of the checkout at `root` whose text is not what the registry makes of it."""
    return [name for name, make in DERIVED.items() if make(text := (root / name).read_text("utf-8")) != text]


def write_all(root: Path) -> list[str]:
    """Rewrite the stale derived files of the checkout at `root`; the names written."""
    written = []
    for name, make in DERIVED.items():
        current = (root / name).read_text(encoding="utf-8")
        text = make(current)
        if text != current:
            (root / name).write_text(text, encoding="utf-8")
            written.append(name)
    return written
