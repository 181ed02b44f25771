"""Import and export as operations: another tool's configuration -> a validated topology, and back.

Pure over their inputs (the text read, the topology loaded): the command reads the file, calls one of these,
renders the outcome and writes what it says. Nothing reaches a cluster.

`import_topology`: MirrorMaker 2 properties or a Strimzi KafkaMirrorMaker2 resource -> the topology's YAML, the
draft it came from (notes on what could not be expressed, environment variables to set) and its validation with
the project's own validator; or the errors at the input's lines (nothing is to be written then).
`export_topology`: a validated topology -> MirrorMaker 2 properties, Strimzi resources or alert rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reconciler import settings
from reconciler.interop.draft import IMPORTED, ImportOptions, TopologyDraft, check, render_at_input, to_yaml
from reconciler.interop.mm2_export import export_mm2
from reconciler.interop.mm2_import import import_mm2_text
from reconciler.interop.properties import PropertiesError
from reconciler.interop.strimzi import export_strimzi, import_strimzi_text
from reconciler.render.alert_rules import export_alerts
from reconciler.topology.diagnostics import Diagnostics, SourceLocation
from reconciler.topology.loader import too_many_flows
from reconciler.topology.model import Topology

IMPORTERS: dict[str, Callable[[str, str, ImportOptions | None], TopologyDraft]] = {
    "mm2": import_mm2_text,
    "strimzi": import_strimzi_text,
}
EXPORTERS: dict[str, Callable[[Topology, str], str]] = {
    "mm2": export_mm2,
    "strimzi": export_strimzi,
    "alerts": export_alerts,  # Prometheus alert rules from the topology's slo: (docs/monitoring.md)
}


@dataclass(frozen=True)
class Imported:
    """An import's outcome. `errors`: the rendered errors at the input's lines (`FILE:LINE: error: ...`), and
    nothing else is set; else `yaml_text` (the topology), `topology` (as validated), `draft` (its notes and
    environment variables) and `warnings` (the validator's, against the imported text's name `IMPORTED`)."""

    errors: str | None = None
    yaml_text: str = ""
    topology: Topology | None = None
    draft: TopologyDraft | None = None
    warnings: Diagnostics | None = None


def import_topology(fmt: str, text: str, file: str, options: ImportOptions | None = None) -> Imported:
    """`text` (read from `file`) in format `fmt` (a key of IMPORTERS) as a topology, validated."""
    try:
        draft = IMPORTERS[fmt](text, file, options)
    except PropertiesError as exc:
        return Imported(errors=exc.render())
    limit = settings.max_flows()
    if len(draft.flows) > limit:  # refused before the topology is written out and read again
        diags = Diagnostics()
        too_many_flows(len(draft.flows), SourceLocation(file, draft.flows[limit].line or 1, 1), diags, limit)
        return Imported(errors=diags.render())
    yaml_text = to_yaml(draft, file)
    checked = check(yaml_text, IMPORTED)
    if checked.topology is None:
        rendered = render_at_input(draft, checked.docs, checked.diags, file)
        return Imported(
            errors=f"{rendered}\n{file}: error: the imported topology does not validate (above); nothing was written"
        )
    return Imported(yaml_text=yaml_text, topology=checked.topology, draft=draft, warnings=checked.diags)


def export_topology(fmt: str, topology: Topology, origin: str) -> str:
    """`topology` in format `fmt` (a key of EXPORTERS); ExportError when it cannot be expressed."""
    return EXPORTERS[fmt](topology, origin)
