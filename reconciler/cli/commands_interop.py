"""`reconciler import mm2|strimzi FILE [--out DIR]`: a MirrorMaker 2 configuration -> a topology.

Writes DIR/topology.yaml (or prints the YAML), lists on stderr every key it could not express (with
its line) and the environment variables to set. Malformed input: `FILE:LINE: error: ...`, exit 1,
nothing written. The result is validated with the project's own validator before it is written.
"""

from __future__ import annotations

import sys
from pathlib import Path

from reconciler import outputs, settings
from reconciler.cli.common import EXIT_ERROR, EXIT_OK
from reconciler.interop.draft import IMPORTED, TopologyDraft, check, render_at_input, to_yaml
from reconciler.interop.mm2_import import import_mm2_text
from reconciler.interop.properties import PropertiesError
from reconciler.interop.strimzi import import_strimzi_text
from reconciler.operations.backend import Backend
from reconciler.topology.diagnostics import Diagnostics, SourceLocation
from reconciler.topology.loader import read_source, too_many_flows

IMPORTERS = {"mm2": import_mm2_text, "strimzi": import_strimzi_text}


def register(sub) -> None:
    p = sub.add_parser(
        "import", help="convert a MirrorMaker 2 properties file or a Strimzi KafkaMirrorMaker2 resource into a topology"
    )
    p.add_argument(
        "format",
        choices=sorted(IMPORTERS),
        help="mm2: connect-mirror-maker.sh properties; strimzi: KafkaMirrorMaker2 YAML",
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("--out", metavar="DIR", help="write DIR/topology.yaml (default: print the topology)")
    p.set_defaults(func=cmd_import)


def _report(draft: TopologyDraft) -> None:
    for note in draft.notes:
        print(note.render(), file=sys.stderr)
    if draft.env_vars:
        print("set these environment variables before plan/apply (the topology references them):", file=sys.stderr)
        for v in draft.env_vars:
            print(f"  {v.name}: {v.source}", file=sys.stderr)


def cmd_import(args, backend: Backend) -> int:
    path = Path(args.file)
    try:
        text = read_source(path)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"{path}:1: error: cannot read file: {exc}", file=sys.stderr)
        return EXIT_ERROR
    try:
        draft = IMPORTERS[args.format](text, str(path))
    except PropertiesError as exc:
        print(exc.render(), file=sys.stderr)
        return EXIT_ERROR
    out_file = Path(args.out) / "topology.yaml" if args.out else None
    limit = settings.max_flows()
    if len(draft.flows) > limit:  # refused before the topology is written out and read again
        diags = Diagnostics()
        too_many_flows(len(draft.flows), SourceLocation(str(path), draft.flows[limit].line or 1, 1), diags, limit)
        print(diags.render(), file=sys.stderr)
        return EXIT_ERROR
    yaml_text = to_yaml(draft, str(path))
    checked = check(yaml_text, IMPORTED)
    topology, diags = checked.topology, checked.diags
    if topology is None:
        print(render_at_input(draft, checked.docs, diags, str(path)), file=sys.stderr)
        print(f"{path}: error: the imported topology does not validate (above); nothing was written", file=sys.stderr)
        return EXIT_ERROR
    _report(draft)
    if diags.warnings:
        print(diags.render().replace(IMPORTED, str(out_file or IMPORTED)), file=sys.stderr)
    if out_file is None:
        sys.stdout.write(yaml_text)
    else:
        try:
            outputs.write_text(out_file, yaml_text)
        except outputs.OutputError as exc:
            print(exc, file=sys.stderr)
            return EXIT_ERROR
        print(
            f"wrote {out_file}: {len(topology.clusters)} clusters, {len(topology.flows)} flows, "
            f"{len(draft.notes)} warning{'s' if len(draft.notes) != 1 else ''}",
            file=sys.stderr,
        )
    return EXIT_OK
