"""`reconciler env PATH...`: the environment variables a topology needs (its `${ENV_VAR}` references).

CI maps one secret per variable into the steps that connect (`.github/workflows/*.yml`); this lists
them, with the cluster setting that uses each, so the mapping is derived from the topology rather
than guessed. `--check` exits 1 naming every variable that is not set (a CI pre-flight). A variable is set when
the environment holds it or, with RECONCILER_SECRETS_DIR, a file of that name there does (topology/secrets.py `lookup`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from reconciler.cli.common import EXIT_ERROR, EXIT_OK, add_paths_argument, load_validated
from reconciler.operations.backend import Backend
from reconciler.textutil import plural
from reconciler.topology.model import Topology
from reconciler.topology.secrets import SecretsError, lookup, references


@dataclass(frozen=True)
class VariableUse:
    name: str
    cluster: str
    setting: str  # bootstrap_servers or a config key


def variable_uses(topology: Topology) -> list[VariableUse]:
    """Every `${ENV_VAR}` reference of the topology's clusters, sorted by variable then place."""
    uses = []
    for alias, cluster in topology.clusters.items():
        settings = {"bootstrap_servers": cluster.bootstrap_servers, **cluster.config}
        uses += [VariableUse(name, alias, key) for key, value in settings.items() for name in references(str(value))]
    return sorted(uses, key=lambda u: (u.name, u.cluster, u.setting))


def register(sub) -> None:
    p = sub.add_parser("env", help="list the environment variables (${ENV_VAR} references) a topology needs")
    add_paths_argument(p)
    p.add_argument("--check", action="store_true", help="exit 1 naming every variable that is not set")
    p.add_argument("--names", action="store_true", help="print only the names, one per line")
    p.set_defaults(func=cmd_env)


def _is_set(name: str) -> bool:
    """Whether `${name}` resolves: a file of RECONCILER_SECRETS_DIR or the environment (an unreadable file: no)."""
    try:
        return lookup(name) is not None
    except SecretsError:
        return False


def cmd_env(args, backend: Backend) -> int:
    topology, _ = load_validated(args.paths, quiet_warnings=True, env=args.env)
    if topology is None:
        return EXIT_ERROR
    uses = variable_uses(topology)
    names = sorted({u.name for u in uses})
    if args.names:
        print("\n".join(names))
    else:
        for name in names:
            where = ", ".join(f"{u.cluster}.{u.setting}" for u in uses if u.name == name)
            state = "set" if _is_set(name) else "NOT SET"
            print(f"{name:<32} {state:<8} used by {where}")
        if not names:
            print("The topology references no environment variables.")
    missing = [n for n in names if not _is_set(n)]
    if args.check and missing:
        print(
            f"error: {plural(len(missing), 'variable')} the topology needs "
            f"{'is' if len(missing) == 1 else 'are'} not set: {', '.join(missing)}",
            file=sys.stderr,
        )
        return EXIT_ERROR
    return EXIT_OK
