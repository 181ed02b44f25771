"""`reconciler show PLANFILE`: a saved plan (`plan --out`) as text or JSON, without contacting any cluster
(Terraform's `show`): what a reviewer reads before `apply PLANFILE`, which applies exactly that plan."""

from __future__ import annotations

import sys
import time

from reconciler import settings
from reconciler.cli.common import EXIT_ERROR, EXIT_OK
from reconciler.operations.backend import Backend
from reconciler.plan import planfile
from reconciler.render import plan_json, plan_text
from reconciler.render import policy as policy_render
from reconciler.textutil import term


def register(sub) -> None:
    p = sub.add_parser("show", help="show a saved plan file (from `plan --out`) without contacting the clusters")
    p.add_argument("planfile", metavar="PLANFILE")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_show)


def cmd_show(args, backend: Backend) -> int:
    if not planfile.is_plan_file(args.planfile):
        print(
            f"error: {args.planfile}: not a saved plan (make one with `reconciler plan PATH... --out FILE`)",
            file=sys.stderr,
        )
        return EXIT_ERROR
    try:  # verified when a key is set; a reviewer without the key still reads it, told it is not verified
        verify = bool(settings.plan_keys())
        saved = planfile.load(args.planfile, verify=verify)
    except planfile.PlanFileError as exc:
        print(term(f"error: {exc}"), file=sys.stderr)
        return EXIT_ERROR
    if not verify:
        print(
            f"warning: {args.planfile}: signature (key {saved.key_id}) not verified: {settings.PLAN_KEY_ENV} is not "
            "set; `apply` verifies it",
            file=sys.stderr,
        )
    if args.format == "json":
        about = {
            "revision": saved.revision,
            "saved_at": saved.saved_at,
            "git": saved.git,
            "clusters": sorted(saved.plan.clusters),
            "topology": {
                "content_sha256": saved.topology_digest,
                "commit": saved.commit,
                "environment": saved.environment,
            },
            "key_id": saved.key_id,
            "verified": verify,
        }
        policy = saved.policy.to_dict() if saved.policy is not None else None
        sys.stdout.write(plan_json.render(saved.plan, policy=policy, saved=about))
        return EXIT_OK
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(saved.saved_at)) if saved.saved_at else "unknown time"
    print(
        f"Saved plan {args.planfile}: made at {when}"
        + (f" from {term(saved.revision)}" if saved.revision else "")
        + (f" for environment {term(saved.environment)}" if saved.environment else "")
        + f", clusters {', '.join(term(c) for c in sorted(saved.plan.clusters))}, signed with key {saved.key_id}"
        + (" (verified)." if verify else " (not verified).")
    )
    print(
        f"`reconciler apply {args.planfile} TOPOLOGY...` applies exactly this plan (refused if it was edited, if the "
        "topology is not the one planned, or if the clusters changed since).\n"
    )
    sys.stdout.write(plan_text.render(saved.plan))
    if saved.policy is not None:
        sys.stdout.write(policy_render.text(saved.policy))
    return EXIT_OK
