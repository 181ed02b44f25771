"""`reconciler force-unlock PATH... --cluster ALIAS LOCK_ID`: remove a lease left by a killed apply.

A lease held by an apply that died on another host lives until it expires (RECONCILER_LEASE_TTL,
60 s by default; one of a dead process on this host is ignored at once). The error an apply prints
names the holder and its LOCK_ID; this withdraws exactly that claim, after asking (Terraform's
force-unlock). Removing the lease of an apply that is still running lets another one interleave
with it, so look before you force.

A cluster that is down is found by the admin's capability probe (`adapters/probe.py`) before the lease
topic is read: one line naming it, exit 1, within seconds.
"""

from __future__ import annotations

import sys
import time

from reconciler.cli.common import EXIT_ERROR, EXIT_OK, add_paths_argument, confirmed, load_validated
from reconciler.operations.backend import Backend
from reconciler.operations.lock import LeaseClaim, remove_lease
from reconciler.textutil import term


def register(sub) -> None:
    p = sub.add_parser("force-unlock", help="remove an apply lease left on a cluster by a killed apply")
    add_paths_argument(p)
    p.add_argument("--cluster", required=True, metavar="ALIAS", help="the cluster whose lease to remove")
    p.add_argument("lock_id", metavar="LOCK_ID", help="the lease's owner id, as the refused apply printed it")
    p.add_argument("--force", action="store_true", help="do not ask for confirmation")
    p.set_defaults(func=cmd_force_unlock)


def cmd_force_unlock(args, backend: Backend) -> int:
    topology, _ = load_validated(args.paths, quiet_warnings=True, env=args.env)
    if topology is None:
        return EXIT_ERROR

    def confirm(claim: LeaseClaim) -> bool:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(claim.acquired_at))
        print(f"Lease {term(claim.lock_id)} on {term(claim.cluster)}: held by {term(claim.who)} since {since}.")
        return args.force or confirmed(
            backend.ask,
            "Remove it? An apply that still runs would lose its exclusivity.",
            lambda text: print(text, file=sys.stderr),
            unattended="Run again with --force.",
            cancelled="Force-unlock cancelled.",
        )

    outcome = remove_lease(topology, args.cluster, args.lock_id, backend, confirm)
    if outcome.error is not None:
        print(term(f"error: {outcome.error}"), file=sys.stderr)
    if not outcome.removed:
        return EXIT_ERROR
    print(f"Removed the lease {term(args.lock_id)} on {term(args.cluster)}.")
    return EXIT_OK
