"""`reconciler render PATH... --out DIR [--revision REV]`: the kubernetes deployer's manifests of a topology.

One `engine-<engine>.yaml` per engine of the topology's enabled `kubernetes` flows, and the ReplicationEngine CRD
(`crd-replicationengine.yaml`), as `apply` would write them into `job.manifests_dir`, written into DIR without
reaching any cluster (`operations.manifests.render_manifests`): for review in a pull request. Two renders of one commit are byte-identical. Flows of other deployers are listed
as not rendered; engine files in DIR the topology no longer has are listed, not removed.

Exit codes: 0 (written, or nothing to write), 1 (the topology is invalid, an engine cannot be rendered, DIR
cannot be written).
"""

from __future__ import annotations

import sys
from pathlib import Path

from reconciler import outputs
from reconciler.cli.common import EXIT_ERROR, EXIT_OK, add_paths_argument, add_revision_argument, load_validated
from reconciler.operations.backend import Backend
from reconciler.operations.manifests import RenderError, render_manifests
from reconciler.textutil import plural, term


def register(sub) -> None:
    p = sub.add_parser(
        "render",
        help="write the kubernetes deployer's manifests (one file per engine) into a directory without reaching "
        "any cluster, for review in a pull request",
    )
    add_paths_argument(p)
    p.add_argument(
        "--out",
        metavar="DIR",
        required=True,
        help="the directory to write engine-<engine>.yaml (and the ReplicationEngine CRD) into",
    )
    add_revision_argument(p)
    p.set_defaults(func=cmd_render)


def cmd_render(args, backend: Backend) -> int:
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        print(f"error: --out {args.out} is a file; it takes a directory", file=sys.stderr)
        return EXIT_ERROR
    at = (backend.git, args.revision) if args.revision is not None else None
    topology, _ = load_validated(args.paths, quiet_warnings=True, at=at, env=args.env)
    if topology is None:
        return EXIT_ERROR
    try:
        rendered = render_manifests(topology, backend, args.paths, out, args.revision)
    except RenderError as exc:
        print(term(f"error: {exc}; nothing written"), file=sys.stderr)
        return EXIT_ERROR
    for f in (rendered.crd, *rendered.files) if rendered.crd is not None else rendered.files:
        what = f"engine {f.engine}: {plural(len(f.flows), 'flow')}" if f.engine else "the ReplicationEngine CRD"
        if not f.changed:
            print(f"unchanged {f.path} ({what})")
            continue
        try:
            outputs.write_text(f.path, f.text)
        except outputs.OutputError as exc:
            print(exc, file=sys.stderr)
            return EXIT_ERROR
        print(f"wrote {f.path} ({what})")
    if not rendered.files:
        print("no enabled flow uses the kubernetes deployer: nothing to render")
    for flow, deployer in rendered.not_rendered:
        print(term(f"not rendered: flow {flow} (deployer {deployer}: only kubernetes flows have manifests)"))
    for path in rendered.leftovers:
        print(f"left alone: {path} (no engine of the topology; delete it if the engine is gone)")
    return EXIT_OK
