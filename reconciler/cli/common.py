"""Helpers shared by CLI commands: loading + validating + analysing, printing diagnostics, exit codes."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from reconciler import logs, settings
from reconciler.analysis.hazards import analyse
from reconciler.policy.engine import PolicyError, PolicySet
from reconciler.policy.engine import load as load_policy_files
from reconciler.topology.build import load_topology
from reconciler.topology.diagnostics import Diagnostic, Diagnostics
from reconciler.topology.model import Topology

if TYPE_CHECKING:
    from reconciler.operations.backend import GitRepository

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CHANGES = 2  # Terraform's --detailed-exitcode meaning: success, with changes / drift
#: refused by policy (docs/policy.md): `plan --policy` found a violation (nothing saved), or `apply` refused a plan a
#: policy forbids or whose changes need an approval the plan does not record (nothing applied)
EXIT_POLICY = 3


def load_validated(
    paths: Iterable[str],
    quiet_warnings: bool = False,
    at: tuple[GitRepository, str] | None = None,
    env: str | None = None,
) -> tuple[Topology | None, Diagnostics]:
    """load -> (environment) -> validate -> model -> analyse; prints every diagnostic to stderr. Topology None on
    errors. Every command that reads a topology reads it here.

    With `at` (the Backend's git repository and a revision), the files are read as of that commit (from git
    objects), paths relative to the working directory; diagnostics then name `FILE@SHORTSHA`. `env` (`--env`) is
    the environment of a topology that declares `environments:` (topology/environments.py): required then, refused
    for a topology that declares none.
    """
    paths = list(paths)
    if at is not None:
        git, revision = at
        topology, diags = git.topology_at(paths, revision, env)
    else:
        topology, diags = load_topology(paths, env=env)
    if topology is not None:
        analyse(topology, diags)
        for cluster in topology.clusters.values():  # the CLI's JSON log lines never show these secrets
            logs.REDACT.add_from(cluster.config)
    shown = diags.errors if quiet_warnings else diags.items
    if shown:
        print(Diagnostics(list(shown)).render(), file=sys.stderr)
    if diags.errors:
        n = len(diags.errors)
        print(f"{n} error{'s' if n != 1 else ''}: topology is invalid; nothing was changed", file=sys.stderr)
        return None, diags
    return topology, diags


def confirmed(
    ask: Callable[[str], str | None], question: str, err: Callable[[str], None], *, unattended: str, cancelled: str
) -> bool:
    """Whether the person answered exactly 'yes' (as Terraform asks). Without a terminal nobody can answer:
    refuse, saying `unattended` (how to run it without a question)."""
    answer = ask(question + " Only 'yes' will be accepted: ")
    if answer is None:
        err(f"error: refusing to ask for confirmation: stdin is not a terminal. {unattended}")
        return False
    if answer.strip() != "yes":
        err(cancelled)
        return False
    return True


def policy_errors(exc: PolicyError) -> None:
    """Print the problems of policy files (FILE:LINE:COL) to stderr."""
    print(exc.diags.render(), file=sys.stderr)
    n = len(exc.diags.errors)
    print(f"{n} error{'s' if n != 1 else ''} in the policies; nothing was saved or applied", file=sys.stderr)


def load_policies(paths: list[str] | None) -> tuple[PolicySet | None, bool]:
    """(the policies of `--policy PATH...` or None without any, whether they could be read); prints every problem
    to stderr."""
    if not paths:
        return None, True
    try:
        return load_policy_files(paths), True
    except PolicyError as exc:
        policy_errors(exc)
        return None, False


def add_policy_argument(parser, what: str) -> None:
    parser.add_argument(
        "--policy",
        action="append",
        metavar="PATH",
        help=f"judge the plan with the policies of PATH: a directory of policy files, .rego and .yaml (not its "
        f"subdirectories) or one file; repeatable. {what} (docs/policy.md)",
    )


def relative_diagnostics(items: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Diagnostics with file names relative to the working directory (for comments and reports)."""
    cwd = os.getcwd() + os.sep
    out = []
    for d in items:
        if d.where is not None and d.where.file.startswith(cwd):
            d = replace(d, where=replace(d.where, file=d.where.file[len(cwd) :]))
        out.append(d)
    return out


def add_paths_argument(parser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="topology files or directories")
    add_env_argument(parser)


def add_env_argument(parser, flag: str = "--env", dest: str = "env") -> None:
    """`--env NAME`: the environment of a topology that declares `environments:` (docs/environments.md)."""
    parser.add_argument(
        flag,
        dest=dest,
        metavar="NAME",
        help="the environment to use, of a topology that declares `environments:` (required then; refused for one "
        "that declares none)",
    )


def add_revision_argument(parser) -> None:
    parser.add_argument(
        "--revision",
        metavar="REV",
        help="read the topology files as of this git revision (sha, branch, tag, HEAD~2) instead of from the work tree",
    )


def duration_argument(text: str) -> float:
    """argparse type of a duration option (`90`, `90s`, `5m`, `1h`; >= 0): anything else is a usage error."""
    try:
        return settings.duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def timeout_argument(text: str) -> float:
    """argparse type of a timeout (as `duration_argument`, > 0): a negative, zero or NaN timeout is a usage
    error, not a wait that never ends."""
    value = duration_argument(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a timeout: give a number of seconds > 0 (e.g. 30, 2m)")
    return value
