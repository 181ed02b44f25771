"""`reconciler export FORMAT PATH... [--out FILE]`: a topology in another tool's format.

The formats are `operations.interop.EXPORTERS` (validated Topology, origin text) -> file text.
"""

from __future__ import annotations

import sys

from reconciler import outputs
from reconciler.cli.common import EXIT_ERROR, EXIT_OK, add_paths_argument, load_validated
from reconciler.interop.mm2_export import ExportError
from reconciler.operations.backend import Backend
from reconciler.operations.interop import EXPORTERS, export_topology


def register(sub) -> None:
    p = sub.add_parser(
        "export",
        help="write the topology as a MirrorMaker 2 properties file or Strimzi "
        "KafkaMirrorMaker2 resources (to run MM2 side by side, or to go back), or Prometheus "
        "alert rules from its slo: thresholds",
    )
    p.add_argument("format", choices=sorted(EXPORTERS))
    add_paths_argument(p)
    p.add_argument("--out", metavar="FILE", help="write to FILE (default: stdout)")
    p.set_defaults(func=cmd_export)


def cmd_export(args, backend: Backend) -> int:
    bad_out = outputs.problems([args.out])
    if bad_out:
        print(bad_out[0], file=sys.stderr)
        return EXIT_ERROR
    topology, _ = load_validated(args.paths, quiet_warnings=True, env=args.env)
    if topology is None:
        return EXIT_ERROR
    try:
        text = export_topology(args.format, topology, " ".join(args.paths))
    except ExportError as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR
    if args.out:
        try:
            outputs.write_text(args.out, text)
        except outputs.OutputError as exc:
            print(exc, file=sys.stderr)
            return EXIT_ERROR
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK
