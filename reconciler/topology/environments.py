"""Stage (pure): a topology's `environments:` -> the documents of one environment, before the model is built.

One topology describes every environment (dev, staging, prod, ...); each environment binds the topology's clusters
to its endpoints, credentials and principals and overrides settings (docs/environments.md):

    environments:
      prod:
        clusters:
          west: {bootstrap_servers: "west.prod:9092", config: {sasl.password: "${WEST_SASL_PASSWORD}"}}
        defaults: {job: {parallelism: 4}}          # a topology's `defaults:`, key by key
        flows:
          "west->east": {topics: {include: ["orders\\..*"]}}   # a flow, by its name
        policies: {residency: {eu-only: {allowed: [eu]}}}     # a residency rule, by its name
        prune: {topics: true}
        slo: {max_lag_records: 1000}

`resolve(docs, env, diags)` returns the documents with environment `env` merged in (mappings key by key, anything
else replaced; a null `config` or `tags` key of a cluster removes the topology's) and `environments:` left out,
each merged value placed where the environment writes it: a later error names the environment's file and line.
Everything after it (schema, model, plan) sees an ordinary topology. Checked here, for every environment: the
shape of `environments:` (the schema's `$defs.environment`, whose settings are the registry's), names that are
no cluster, flow or residency rule of the topology, a binding written twice, and a cluster left without
`bootstrap_servers`. A topology without `environments:` is returned as it is (and `env` must be None); one with
them needs `env`.

`differences(docs, a, b, diags)` is `reconciler promote`: every setting either environment declares, with its
value in each (the environment's, else what the topology and the built-in defaults give), where they differ.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.topology import secrets
from reconciler.topology.defaults import BUILTIN_FLOW_DEFAULTS, copy_tree
from reconciler.topology.diagnostics import Diagnostics, SourceLocation
from reconciler.topology.flow_id import flow_name
from reconciler.topology.loader import Document, Path_, load_paths
from reconciler.topology.schema import validate_part
from reconciler.topology.settings_registry import TOPOLOGY_BY_NAME

SECTION = "environments"
#: The sections an environment overrides as a whole topology would write them (at most one of each).
SINGLETONS = ("defaults", "prune", "slo")
#: A cluster's keys whose mapping values an environment may remove (null).
REMOVABLE = ("config", "tags")
DOCS = "docs/environments.md"


@dataclass(frozen=True)
class Place:
    """A value of a document: the document and the value's path in it."""

    doc: Document
    path: Path_

    @property
    def value(self) -> Any:
        value: Any = self.doc.data
        for p in self.path:
            value = value[p]
        return value

    @property
    def where(self) -> SourceLocation:
        return self.doc.where_key(self.path)


@dataclass
class Environment:
    """One environment as declared (possibly across several documents): what it binds and overrides."""

    name: str
    places: list[Place] = field(default_factory=list)  # each `environments.<name>` mapping
    clusters: dict[str, Place] = field(default_factory=dict)
    flows: dict[str, Place] = field(default_factory=dict)
    residency: dict[str, Place] = field(default_factory=dict)
    singletons: dict[str, Place] = field(default_factory=dict)

    @property
    def where(self) -> SourceLocation:
        return self.places[0].where


@dataclass
class _Base:
    """Where the topology itself writes what environments refer to."""

    clusters: dict[str, Place] = field(default_factory=dict)
    flows: dict[str, list[Place]] = field(default_factory=dict)
    residency: dict[str, list[Place]] = field(default_factory=dict)
    singletons: dict[str, Place] = field(default_factory=dict)


def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def declares(docs: list[Document]) -> bool:
    """Whether the documents declare environments (an `environments:` key in any of them)."""
    return any(isinstance(d.data, dict) and SECTION in d.data for d in docs)


def names(docs: list[Document]) -> tuple[str, ...]:
    """The environments the documents declare, in the order they are written."""
    out: dict[str, None] = {}
    for doc in docs:
        for name in _mapping(_mapping(doc.data).get(SECTION)):
            if isinstance(name, str):
                out[name] = None
    return tuple(out)


def _base(docs: list[Document]) -> _Base:
    base = _Base()
    for doc in docs:
        data = _mapping(doc.data)
        for alias in _mapping(data.get("clusters")):
            if isinstance(alias, str):
                base.clusters.setdefault(alias, Place(doc, ("clusters", alias)))
        flows = data.get("flows")
        for i, raw in enumerate(flows if isinstance(flows, list) else []):
            raw = _mapping(raw)
            source, target, family = raw.get("source"), raw.get("target"), raw.get("name")
            if isinstance(source, str) and isinstance(target, str) and (family is None or isinstance(family, str)):
                base.flows.setdefault(flow_name(source, target, family), []).append(Place(doc, ("flows", i)))
        rules = _mapping(data.get("policies")).get("residency")
        for i, rule in enumerate(rules if isinstance(rules, list) else []):
            name = _mapping(rule).get("name")
            if isinstance(name, str):
                base.residency.setdefault(name, []).append(Place(doc, ("policies", "residency", i)))
        for section in SINGLETONS:
            if section in data:
                base.singletons.setdefault(section, Place(doc, (section,)))
    return base


def _not_a_string(what: str, place: Place, diags: Diagnostics) -> None:
    text = place.doc.written(place.path, key=True)
    diags.error(
        f"{what} name {text} is not a string: quote it ('{text}')",
        place.where,
        hint="YAML reads an unquoted 1, true, yes, null or ~ as a number, a boolean or nothing",
    )


def _twice(what: str, place: Place, first: Place, diags: Diagnostics) -> None:
    diags.error(
        f"{what} is defined twice",
        place.where,
        hint="write each binding and override of an environment once across all topology files",
        related=(first.where,),
    )


def _declared(docs: list[Document], diags: Diagnostics) -> dict[str, Environment] | None:
    """Every environment, its shape checked by the schema and its parts gathered across documents; None when the
    shape is wrong (the errors are in `diags`)."""
    envs: dict[str, Environment] = {}
    ok = True
    for doc in docs:
        if not isinstance(doc.data, dict) or SECTION not in doc.data:
            continue
        if not validate_part(doc, (SECTION,), "environments", diags):
            ok = False
            continue
        for name in doc.data[SECTION]:
            place = Place(doc, (SECTION, name))
            if not isinstance(name, str):
                _not_a_string("environment", place, diags)
                ok = False
                continue
            env = envs.setdefault(name, Environment(name))
            env.places.append(place)
            body = place.value
            for kind, parts in (("clusters", env.clusters), ("flows", env.flows)):
                for key in body.get(kind) or {}:
                    at = Place(doc, place.path + (kind, key))
                    if not isinstance(key, str):
                        _not_a_string("cluster" if kind == "clusters" else "flow", at, diags)
                        ok = False
                    elif key in parts:
                        _twice(f"environments.{name}.{kind}.{key}", at, parts[key], diags)
                        ok = False
                    else:
                        parts[key] = at
            for key in (body.get("policies") or {}).get("residency") or {}:
                at = Place(doc, place.path + ("policies", "residency", key))
                if not isinstance(key, str):
                    _not_a_string("residency rule", at, diags)
                    ok = False
                elif key in env.residency:
                    _twice(f"environments.{name}.policies.residency.{key}", at, env.residency[key], diags)
                    ok = False
                else:
                    env.residency[key] = at
            for section in SINGLETONS:
                if section in body:
                    at = Place(doc, place.path + (section,))
                    if section in env.singletons:
                        _twice(f"environments.{name}.{section}", at, env.singletons[section], diags)
                        ok = False
                    else:
                        env.singletons[section] = at
    return envs if ok else None


def _unknown(
    what: str, name: str, known: list[str], place: Place, diags: Diagnostics, likely: list[str] | None = None
) -> None:
    close = difflib.get_close_matches(name, likely or known, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}?" if close else f"the topology's {what}s: {', '.join(sorted(known)) or 'none'}"
    diags.error(f"environment {place.path[1]!r}: {name!r} is not a {what} of the topology", place.where, hint=hint)


def _check(env: Environment, base: _Base, diags: Diagnostics) -> None:
    """What an environment names must be the topology's, and every cluster must end up with an endpoint."""
    unbound = [a for a in base.clusters if a not in env.clusters]  # what a misspelt alias most likely meant
    for alias, place in env.clusters.items():
        if alias not in base.clusters:
            _unknown("cluster", alias, list(base.clusters), place, diags, unbound)
    for name, place in env.flows.items():
        if name not in base.flows:
            _unknown("flow", name, list(base.flows), place, diags)
    for name, place in env.residency.items():
        if name not in base.residency:
            _unknown("residency rule", name, list(base.residency), place, diags)
        elif len(base.residency[name]) > 1:
            diags.error(
                f"environment {env.name!r}: the topology has {len(base.residency[name])} residency rules named "
                f"{name!r}, so the override cannot tell which one it changes",
                place.where,
                hint="give each residency rule a name of its own",
                related=tuple(p.doc.where(p.path) for p in base.residency[name]),
            )
    for alias, place in base.clusters.items():
        cluster = _mapping(place.value)
        bound = _mapping(env.clusters[alias].value) if alias in env.clusters else {}
        if "bootstrap_servers" not in cluster and "bootstrap_servers" not in bound:
            diags.error(
                f"environment {env.name!r} gives cluster {alias!r} no bootstrap_servers",
                env.clusters[alias].where if alias in env.clusters else env.where,
                hint=f"set `environments.{env.name}.clusters.{alias}.bootstrap_servers`, or the cluster's own "
                "`bootstrap_servers` for every environment",
                related=(place.where,),
            )


def environments(docs: list[Document], diags: Diagnostics) -> dict[str, Environment] | None:
    """Every environment the documents declare, each checked ({} when they declare none); None on errors."""
    if not declares(docs):
        return {}
    envs = _declared(docs, diags)
    if envs is None:
        return None
    base = _base(docs)
    before = len(diags.errors)
    for env in envs.values():
        _check(env, base, diags)
    return envs if len(diags.errors) == before else None


def _first_place(docs: list[Document]) -> SourceLocation:
    for doc in docs:
        if isinstance(doc.data, dict) and SECTION in doc.data:
            return doc.where_key((SECTION,))
    return docs[0].where(()) if docs else SourceLocation("<topology>", 1, 1)


def choose(docs: list[Document], env: str | None, diags: Diagnostics) -> Environment | None:
    """The environment `env` of the documents, checked; None when they declare none (and `env` is None) or on an
    error: `env` unknown, not given for a topology that declares environments, or given for one that does not."""
    envs = environments(docs, diags)
    if envs is None:
        return None
    names = ", ".join(envs)
    if env is None:
        if envs:
            diags.error(
                f"this topology declares environments ({names}): choose one with --env NAME",
                _first_place(docs),
                hint=f"e.g. --env {next(iter(envs))}; every command that reads the topology takes it ({DOCS})",
            )
        return None
    if not envs:
        diags.error(
            f"--env {env}: this topology declares no environments",
            _first_place(docs),
            hint=f"leave out --env, or declare `environments:` with one named {env!r} ({DOCS})",
        )
        return None
    if env not in envs:
        close = difflib.get_close_matches(env, list(envs), n=1)
        diags.error(
            f"--env {env}: the topology declares no environment {env!r} (it declares {names})",
            _first_place(docs),
            hint=f"did you mean {close[0]!r}?" if close else f"declare `environments.{env}`, or choose one of {names}",
        )
        return None
    return envs[env]


# --- merging an environment into the documents -----------------------------------------------------


class _Resolved:
    """Copies of the documents, without `environments:`, into which an environment's values are merged."""

    def __init__(self, docs: list[Document]):
        self.docs = [self._copy(d) for d in docs]
        self.by_id = {id(old): new for old, new in zip(docs, self.docs)}
        self._subtrees: dict[tuple[int, Path_], list[tuple[str, Path_, Any]]] = {}

    @staticmethod
    def _copy(doc: Document) -> Document:
        data = doc.data
        if isinstance(data, dict) and SECTION in data:
            data = {k: v for k, v in data.items() if k != SECTION}
        return Document(
            doc.file,
            copy_tree(data),
            dict(doc.positions),
            dict(doc.key_positions),
            dict(doc.key_texts),
            dict(doc.value_texts),
        )

    def _subtree(self, src: Place) -> list[tuple[str, Path_, Any]]:
        """(which map, path below `src`, entry) of every position and text recorded under `src` (one pass over
        the source document's maps for each environment body, kept)."""
        key = (id(src.doc), src.path[:2])
        if key not in self._subtrees:
            body = src.path[:2]
            found: list[tuple[str, Path_, Any]] = []
            for name in ("positions", "key_positions", "key_texts", "value_texts"):
                found += [(name, p, v) for p, v in getattr(src.doc, name).items() if p[:2] == body]
            self._subtrees[key] = found
        n = len(src.path)
        return [(name, p[n:], v) for name, p, v in self._subtrees[key] if p[:n] == src.path]

    def graft(self, dst: Document, at: Path_, src: Place) -> None:
        """Place the value written at `src` at `at` of `dst`: its positions (and texts) are the source's."""
        dst.value_texts.pop(at, None)
        for name, rest, value in self._subtree(src):
            if name == "key_positions" and not rest:
                continue  # the key keeps its place in the topology
            getattr(dst, name)[at + rest] = value

    def merge(self, dst: Document, node: dict, at: Path_, override: dict, src: Place, cluster: bool = False) -> None:
        """Merge `override` (the value at `src`) into `node` (the value at `at` of `dst`), key by key. Of a
        cluster (`cluster`), a null key of its `config` or `tags` removes the topology's."""
        for key, value in override.items():
            here, there = at + (key,), Place(src.doc, src.path + (key,))
            removable = cluster and key in REMOVABLE
            if isinstance(value, dict) and isinstance(node.get(key), dict):
                if removable:
                    for name in [k for k, v in value.items() if v is None]:
                        node[key].pop(name, None)
                    value = _without_nulls(value)
                self.merge(dst, node[key], here, value, there)
                continue
            node[key] = _without_nulls(value) if removable else copy_tree(value)
            self.graft(dst, here, there)
            dst.key_positions.setdefault(here, src.doc.where_key(there.path))

    def into(self, place: Place, src: Place, cluster: bool = False) -> None:
        """Merge the environment's value at `src` into the topology's value at `place`."""
        dst = self.by_id[id(place.doc)]
        node: Any = dst.data
        for p in place.path:
            node = node[p]
        if isinstance(node, dict):
            self.merge(dst, node, place.path, src.value, src, cluster)

    def add(self, section: str, src: Place) -> None:
        """The environment's `section` where the topology has none: in the environment's own document."""
        dst = self.by_id[id(src.doc)]
        dst.data[section] = copy_tree(src.value)
        self.graft(dst, (section,), src)
        dst.key_positions[(section,)] = src.where


def _without_nulls(value: Any) -> Any:
    """A cluster's `config`/`tags` as an environment writes them: its null keys are no keys."""
    return {k: copy_tree(v) for k, v in value.items() if v is not None} if isinstance(value, dict) else copy_tree(value)


def merged(docs: list[Document], env: Environment) -> list[Document]:
    """The documents with `env` merged in and `environments:` left out (pure: `docs` are not changed)."""
    base = _base(docs)
    out = _Resolved(docs)
    for alias, src in env.clusters.items():
        out.into(base.clusters[alias], src, cluster=True)
    for name, src in env.flows.items():
        for place in base.flows[name]:
            out.into(place, src)
    for name, src in env.residency.items():
        for place in base.residency[name]:
            out.into(place, src)
    for section, src in env.singletons.items():
        if section in base.singletons:
            out.into(base.singletons[section], src)
        else:
            out.add(section, src)
    return out.docs


def resolve(docs: list[Document], env: str | None, diags: Diagnostics) -> tuple[list[Document], str | None] | None:
    """The documents of environment `env` (see the module) and the environment's name; the documents as they are
    (and None) when they declare no environments and `env` is None; None on errors (in `diags`)."""
    if not declares(docs) and env is None:
        return docs, None
    chosen = choose(docs, env, diags)
    if chosen is None:
        return None
    return merged(docs, chosen), chosen.name


def bindings(docs: list[Document], but: str | None) -> Iterator[tuple[str, str, Document, Path_]]:
    """(environment, cluster alias, document, path) of every cluster binding of the environments but `but`, for
    the checks of a cluster's settings that hold whatever the environment (secrets, principals)."""
    for doc in docs:
        if not isinstance(doc.data, dict):
            continue
        for name, body in _mapping(doc.data.get(SECTION)).items():
            if name == but:
                continue
            for alias, binding in _mapping(_mapping(body).get("clusters")).items():
                if isinstance(alias, str) and isinstance(binding, dict):
                    yield name, alias, doc, (SECTION, name, "clusters", alias)


# --- promote: the differences between two environments -------------------------------------------


#: The order of the sections in `differences` (within one, the order the environments write them in).
ORDER = ("clusters", "defaults", "flows", "policies", "prune", "slo")
#: How a value no environment or topology sets is shown.
UNSET = "(unset)"
SECRET = "(secret, not shown)"


@dataclass(frozen=True)
class Difference:
    """One setting whose value differs between two environments: its path (`clusters.west.bootstrap_servers`,
    `defaults.job.parallelism`, `flows.west->east.topics.include`, `prune.topics`) and each environment's value
    as shown (JSON; a secret's `${NAME}` reference as written, never a value)."""

    path: str
    before: str
    after: str


def _leaves(value: Any, path: Path_, out: dict[Path_, None]) -> None:
    """The path of every leaf of an environment's value (a list, a scalar or an empty mapping is a leaf)."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _leaves(item, path + (key,), out)
    else:
        out[path] = None


def _declared_paths(env: Environment) -> dict[Path_, None]:
    """Every path an environment sets, as `differences` names them (the order they are written in)."""
    out: dict[Path_, None] = {}
    for alias, place in env.clusters.items():
        for key, value in _mapping(place.value).items():
            if key in REMOVABLE and isinstance(value, dict):
                for name in value:
                    out[("clusters", alias, key, name)] = None
            else:
                out[("clusters", alias, key)] = None
    for name, place in env.flows.items():
        _leaves(place.value, ("flows", name), out)
    for name, place in env.residency.items():
        for key in _mapping(place.value):
            out[("policies", "residency", name, key)] = None
    for section, place in env.singletons.items():
        _leaves(place.value, (section,), out)
    return out


_MISSING = object()


def _get(value: Any, path: Path_) -> Any:
    for p in path:
        if not isinstance(value, dict) or p not in value:
            return _MISSING
        value = value[p]
    return value


def _effective(base: _Base, path: Path_) -> Any:
    """The value at `path` (a `_declared_paths` path) of the resolved documents (`base`), else what it inherits: a
    flow's setting from `defaults:`, a `defaults:` setting from the built-in defaults, `prune`/`slo` from the
    registry."""
    kind = path[0]
    if kind == "clusters":
        return _get(base.clusters[path[1]].value, path[2:]) if path[1] in base.clusters else _MISSING
    if kind == "policies":
        places = base.residency.get(str(path[2])) or []
        return _get(places[0].value, path[3:]) if places else _MISSING
    if kind == "flows":
        places = base.flows.get(str(path[1])) or []
        found = _get(places[0].value, path[2:]) if places else _MISSING
        return found if found is not _MISSING else _effective(base, ("defaults", *path[2:]))
    section = base.singletons.get(str(kind))
    found = _get(section.value, path[1:]) if section is not None else _MISSING
    if found is not _MISSING:
        return found
    if kind == "defaults":
        return _get(BUILTIN_FLOW_DEFAULTS, path[1:])
    setting = TOPOLOGY_BY_NAME.get(_path_text(path))
    return setting.default if setting is not None else _MISSING


def _shown(path: Path_, value: Any) -> str:
    if value is _MISSING or value is None:
        return UNSET
    secret = len(path) == 4 and path[0] == "clusters" and path[2] == "config" and secrets.is_secret_key(str(path[3]))
    if secret and not secrets.is_env_reference(str(value)):
        return SECRET
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _path_text(path: Path_) -> str:
    return ".".join(str(p) for p in path)


def differences(docs: list[Document], a: str, b: str, diags: Diagnostics) -> list[Difference] | None:
    """Every setting environment `a` or `b` declares whose value (the environment's, else the one it inherits)
    differs between them, in the order they are written; None on errors (either environment unknown, or the
    topology's `environments:` wrong)."""
    envs = environments(docs, diags)
    if envs is None:
        return None
    for name in (a, b):
        if choose(docs, name, diags) is None:
            return None
    declared = list({**_declared_paths(envs[a]), **_declared_paths(envs[b])})
    first = {p: i for i, p in enumerate(declared)}
    group: dict[Path_, int] = {}
    for p in declared:
        group.setdefault(p[:2], len(group))
    paths = sorted(declared, key=lambda p: (ORDER.index(str(p[0])), group[p[:2]], first[p]))
    resolved = {name: _base(merged(docs, envs[name])) for name in (a, b)}
    out = []
    for path in paths:
        before, after = (_shown(path, _effective(resolved[name], path)) for name in (a, b))
        if before != after:
            out.append(Difference(_path_text(path), before, after))
    return out


def load_differences(paths: Iterable[str | Path], a: str, b: str) -> tuple[list[Difference] | None, Diagnostics]:
    """`differences` of the topology files or directories `paths` (read as `load_topology` reads them)."""
    diags = Diagnostics()
    docs = load_paths(paths, diags)
    return (differences(docs, a, b, diags) if diags.ok else None), diags
