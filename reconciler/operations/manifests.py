"""`reconciler render`: the kubernetes deployer's manifests of a topology, for review in a pull request.

Every engine of the topology's enabled `kubernetes` flows, rendered as `apply` would write it into
`job.manifests_dir` (`deployers/kubernetes.engine_text`), but into the directory given and without reaching
anything: no cluster (no admin, no status record), no kubectl. Deterministic: nothing of the wall clock. A flow's
`deployed-at` and restart token, an engine's `reconciler/restarts` and `reconciler/deployed-at` come from the
engine's file the directory already holds (kept as `apply` keeps them); a flow new to it, or changed in a field
that needs a restart, is stamped with the time of the topology's commit (`Backend.git`), or 1970-01-01T00:00:00Z
outside git. No restart token is ever made here: restarting a flow is `apply`'s (it knows the flow is down).

The operation reads the directory and returns the files' text; the command writes them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.contract.deployers import KUBERNETES
from reconciler.deployers.base import engine_of
from reconciler.deployers.kubernetes import (
    CRD_FILE,
    ENGINE_PREFIX,
    EngineManifest,
    FlowEntry,
    crd_text,
    engine_file,
    engine_text,
    next_entry,
)
from reconciler.gitops.revision import revision_label
from reconciler.jobplan.state import DesiredJob, desired_jobs
from reconciler.operations.backend import Backend
from reconciler.topology.model import Topology


class RenderError(Exception):
    """An engine that cannot be rendered (e.g. no job.image): nothing is written."""


@dataclass(frozen=True)
class EngineFile:
    engine: str
    path: Path  # in the output directory
    text: str
    flows: tuple[str, ...]
    changed: bool  # differs from the file the directory holds (or there is none)


@dataclass(frozen=True)
class Rendered:
    out: Path
    files: tuple[EngineFile, ...]
    #: (flow, deployer) of the enabled flows of other deployers: they have no manifests
    not_rendered: tuple[tuple[str, str], ...]
    #: engine files in the directory of engines the topology does not have (left alone)
    leftovers: tuple[Path, ...]
    revision: str | None  # `<sha>[-dirty]` the specs carry (None outside git)
    stamp: float  # the time of a new render: the commit's, or 0
    crd: EngineFile | None = None  # the ReplicationEngine CRD (CRD_FILE) beside the engines' files, when there are any


def _commit_time(git: Mapping[str, Any] | None) -> float:
    try:
        return dt.datetime.fromisoformat(str(git["time_iso"])).timestamp() if git else 0.0
    except (KeyError, ValueError):
        return 0.0


def render_manifests(
    topology: Topology, backend: Backend, paths: Sequence[str], out: Path, revision: str | None = None
) -> Rendered:
    """The engine files of `topology`'s kubernetes flows as they would be in `out` (read, not written)."""
    out = out.resolve()
    git = backend.git.revision(paths, revision)
    label, stamp = revision_label(git), _commit_time(git)
    desired = desired_jobs(topology, label)
    engines: dict[str, dict[str, DesiredJob]] = {}
    not_rendered: list[tuple[str, str]] = []
    for flow, d in sorted(desired.items()):
        if d.deployer == KUBERNETES:
            engines.setdefault(engine_of(flow, d.options), {})[flow] = d
        else:
            not_rendered.append((flow, d.deployer))
    files = []
    for engine, jobs in sorted(engines.items()):
        first = next(iter(jobs.values()))
        options = {**first.options, "engine": engine, "manifests_dir": str(out)}
        path = engine_file(engine, options)
        options = {**first.options, "engine": engine}  # as apply renders them (the topology's manifests_dir)
        previous = EngineManifest.load(path) if path.exists() else None
        held: Mapping[str, FlowEntry] = previous.flows if previous is not None else {}
        flows = {flow: next_entry(held.get(flow), d.spec, stamp) for flow, d in jobs.items()}
        try:
            text, _ = engine_text(
                engine,
                flows,
                first.spec.engine.spark_conf,
                options,
                previous,
                previous.restarts if previous is not None else 0,
                stamp if git else None,
            )
        except ValueError as exc:
            raise RenderError(str(exc)) from exc
        try:
            changed = path.read_text() != text
        except OSError:
            changed = True
        files.append(EngineFile(engine, path, text, tuple(sorted(jobs)), changed))
    crd = None
    if files:
        path = out / CRD_FILE
        text = crd_text()
        try:
            changed = path.read_text() != text
        except OSError:
            changed = True
        crd = EngineFile("", path, text, (), changed)
    mine = {f.path for f in files}
    leftovers = tuple(p for p in sorted(out.glob(f"{ENGINE_PREFIX}*.yaml")) if p not in mine) if out.is_dir() else ()
    return Rendered(out, tuple(files), tuple(not_rendered), leftovers, label, stamp, crd)
