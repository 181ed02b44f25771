"""`reconciler import mm2|strimzi FILE [--out DIR]`: a MirrorMaker 2 configuration -> a topology.

Writes DIR/topology.yaml (or prints the YAML), lists on stderr every key it could not express (with
its line) and the environment variables to set. Malformed input: `FILE:LINE: error: ...`, exit 1,
nothing written. The result is validated with the project's own validator before it is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reconciler import outputs
from reconciler.cli.common import EXIT_ERROR, EXIT_OK
from reconciler.interop.draft import IMPORTED, ImportOptions, TopologyDraft
from reconciler.interop.mm2_keys import POLICY_KINDS
from reconciler.operations.backend import Backend
from reconciler.operations.interop import IMPORTERS, import_topology
from reconciler.topology.loader import read_source


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
    p.add_argument(
        "--policy-class",
        metavar="CLASS=identity|default",
        action="append",
        type=_policy_class,
        default=[],
        help="which policy a custom replication.policy.class behaves as (it decides every remote topic's name; "
        "an unknown class is an error without this); repeatable",
    )
    p.set_defaults(func=cmd_import)


def _policy_class(text: str) -> tuple[str, str]:
    cls, sep, kind = text.rpartition("=")
    if not sep or not cls.strip() or kind.strip() not in POLICY_KINDS:
        raise argparse.ArgumentTypeError(f"{text!r}: expected CLASS=identity or CLASS=default")
    return cls.strip(), kind.strip()


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
    imported = import_topology(args.format, text, str(path), ImportOptions(dict(args.policy_class)))
    if imported.errors is not None or imported.topology is None or imported.draft is None:
        print(imported.errors, file=sys.stderr)
        return EXIT_ERROR
    out_file = Path(args.out) / "topology.yaml" if args.out else None
    _report(imported.draft)
    if imported.warnings is not None and imported.warnings.warnings:
        print(imported.warnings.render().replace(IMPORTED, str(out_file or IMPORTED)), file=sys.stderr)
    if out_file is None:
        sys.stdout.write(imported.yaml_text)
        return EXIT_OK
    try:
        outputs.write_text(out_file, imported.yaml_text)
    except outputs.OutputError as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR
    notes = len(imported.draft.notes)
    print(
        f"wrote {out_file}: {len(imported.topology.clusters)} clusters, {len(imported.topology.flows)} flows, "
        f"{notes} warning{'s' if notes != 1 else ''}",
        file=sys.stderr,
    )
    return EXIT_OK
