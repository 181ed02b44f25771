"""Stage: schema-valid documents -> one Topology model, with the semantic checks the schema cannot make.

Files of a directory merge into one topology: clusters and flows from every file, `defaults`,
`prune`, `slo` and `metadata` from at most one. Defining a thing twice is an error naming both places.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from reconciler import settings
from reconciler.deployer_kinds import DeployerKind, local_threads
from reconciler.mirror.filters import (
    PATTERN_HINT,
    ConfigPropertyFilter,
    GroupFilter,
    PatternFilter,
    TopicFilter,
    pattern_problem,
)
from reconciler.mirror.policy import PolicyKind, ReplicationPolicy
from reconciler.topology import environments, secrets, settings_registry
from reconciler.topology.choices import OnRefusedRecord
from reconciler.topology.defaults import BUILTIN_FLOW_DEFAULTS, merge
from reconciler.topology.diagnostics import Diagnostics, SourceLocation, TopologyError
from reconciler.topology.k8s_names import RISKY_SERVICE_ACCOUNTS, SYSTEM_NAMESPACES
from reconciler.topology.loader import Document, load_paths, load_text, too_many_flows
from reconciler.topology.model import (
    Cluster,
    Delivery,
    Emitter,
    Flow,
    FlowSettings,
    Heartbeats,
    JobSettings,
    OffsetSyncsLocation,
    Prune,
    RateLimit,
    ResidencyRule,
    Slo,
    SyncSettings,
    Topology,
    flow_name,
)
from reconciler.topology.principals import principal_problem
from reconciler.topology.schema import validate_document
from reconciler.topology.spark_operator import spark_conf_problems

SINGLETON_SECTIONS = ("defaults", "prune", "slo", "metadata", "owner")
PATTERN_LISTS = (
    ("topics", "include"),
    ("topics", "exclude"),
    ("topics", "builtin_exclude"),
    ("groups", "include"),
    ("groups", "exclude"),
    ("groups", "builtin_exclude"),
    ("config_properties", "exclude"),
)


@dataclass
class _Sources:
    """Where each part of the merged topology came from."""

    clusters: dict[str, tuple[Document, tuple]] = field(default_factory=dict)
    flows: list[tuple[Document, tuple]] = field(default_factory=list)
    singletons: dict[str, tuple[Document, tuple]] = field(default_factory=dict)
    residency: list[tuple[Document, tuple]] = field(default_factory=list)


def _merge_documents(docs: list[Document], diags: Diagnostics) -> _Sources:
    src = _Sources()
    for doc in docs:
        data = doc.data if isinstance(doc.data, dict) else {}
        clusters = data.get("clusters")
        for alias in clusters if isinstance(clusters, dict) else {}:
            path = ("clusters", alias)
            if not isinstance(alias, str):  # `1:`, `true:`, `~:` are read as an int, a bool, None
                text = doc.written(path, key=True)
                diags.error(
                    f"cluster name {text} is not a string: quote it ('{text}')",
                    doc.where_key(path),
                    hint="YAML reads an unquoted 1, true, yes, null or ~ as a number, a boolean or nothing",
                )
                continue
            if alias in src.clusters:
                first_doc, first_path = src.clusters[alias]
                diags.error(
                    f"cluster {alias!r} is defined twice",
                    doc.where_key(path),
                    hint="define each cluster once across all topology files",
                    related=(first_doc.where_key(first_path),),
                )
                continue
            src.clusters[alias] = (doc, path)
        flows = data.get("flows")
        for i, raw in enumerate(flows if isinstance(flows, list) else []):
            if isinstance(raw, dict) and isinstance(raw.get("source"), str) and isinstance(raw.get("target"), str):
                src.flows.append((doc, ("flows", i)))
        for section in SINGLETON_SECTIONS:
            if section in data:
                if section in src.singletons:
                    first_doc, first_path = src.singletons[section]
                    diags.error(
                        f"`{section}` is defined in more than one document",
                        doc.where_key((section,)),
                        hint=f"keep a single `{section}` block for the whole topology",
                        related=(first_doc.where_key(first_path),),
                    )
                    continue
                src.singletons[section] = (doc, (section,))
        policies = data.get("policies")
        rules = policies.get("residency") if isinstance(policies, dict) else None
        for i, _ in enumerate(rules if isinstance(rules, list) else []):
            src.residency.append((doc, ("policies", "residency", i)))
    return src


def _get(doc: Document, path: tuple) -> Any:
    value: Any = doc.data
    for p in path:
        value = value[p]
    return value


def _check_patterns(doc: Document, diags: Diagnostics) -> None:
    """Every filter pattern of a document must compile. Defensive: runs on schema-invalid documents too."""
    data = doc.data if isinstance(doc.data, dict) else {}
    places: list[tuple[tuple[str | int, ...], Any]] = [(("defaults",), data.get("defaults"))]
    flows = data.get("flows")
    places += [(("flows", i), f) for i, f in enumerate(flows)] if isinstance(flows, list) else []
    for base, raw in places:
        for section, key in PATTERN_LISTS:
            block = raw.get(section) if isinstance(raw, dict) else None
            patterns = block.get(key) if isinstance(block, dict) else None
            for i, pattern in enumerate(patterns if isinstance(patterns, list) else []):
                if isinstance(pattern, str):
                    _check_regex(pattern, doc.where(base + (section, key, i)), diags)


def _check_regex(pattern: str, where: SourceLocation, diags: Diagnostics) -> bool:
    """A pattern the linear-time matcher reads (`mirror/filters.py:pattern_problem`, the filters' own check:
    at most 1,000 characters, no construct RE2 cannot express, each named with the fix). True when it is fine."""
    if not isinstance(pattern, str):
        return True  # the schema reports the type
    problem = pattern_problem(pattern)
    if problem is None:
        return True
    diags.error(f"pattern {pattern!r} {problem}", where, hint=PATTERN_HINT)
    return False


def _check_secrets(alias: str, doc: Document, path: tuple, diags: Diagnostics, scope: str = "") -> None:
    """The secrets rules (topology/secrets.py) on cluster `alias`'s settings at `path`: the cluster's, or one
    environment's binding of it (`scope` names it)."""
    raw = _get(doc, path)
    config = raw.get("config") if isinstance(raw, dict) else None
    config = {k: v for k, v in config.items() if v is not None} if isinstance(config, dict) else {}  # null: removed
    bootstrap = raw.get("bootstrap_servers") if isinstance(raw, dict) else None
    for problem in secrets.reference_problems(alias, _stringify(bootstrap or ""), config):
        key_path = ("bootstrap_servers",) if problem.key == secrets.BOOTSTRAP else ("config", problem.key)
        diags.error(f"{scope}cluster {alias!r}: {problem.message}", doc.where(path + key_path), hint=problem.hint)
    for key, value in config.items():
        if secrets.is_secret_key(str(key)) and not secrets.is_env_reference(_stringify(value)):
            env_name = secrets.suggested_env_name(alias, str(key))
            diags.error(
                f"{scope}cluster {alias!r}: {key} is a literal secret",
                doc.where(path + ("config", key)),
                hint=f"never commit secrets: write `{key}: ${{{env_name}}}` and set {env_name} in the environment",
            )


#: The cluster fields that name a principal (issue 45): each names exactly one identity.
PRINCIPAL_FIELDS = ("replication_principal", "reconciler_principal", "plan_principal")


def _check_principals(alias: str, doc: Document, path: tuple, diags: Diagnostics, scope: str = "") -> None:
    raw = _get(doc, path)
    for key in PRINCIPAL_FIELDS:
        if not isinstance(raw, dict) or not isinstance(raw.get(key), str):
            continue  # absent, or not a string: the schema says so
        problem = principal_problem(raw[key])
        if problem is not None:
            diags.error(
                f"{scope}cluster {alias!r}: {key} {raw[key]!r} is not one principal: {problem}",
                doc.where(path + (key,)),
                hint="name one principal, e.g. `User:mirror`: the replication principal is granted WRITE on every "
                "remote topic of the cluster (docs/security.md)",
            )


def _build_cluster(alias: str, doc: Document, path: tuple) -> Cluster:
    raw = _get(doc, path)
    return Cluster(
        alias=alias,
        bootstrap_servers=raw["bootstrap_servers"],
        config={str(k): _stringify(v) for k, v in (raw.get("config") or {}).items()},
        tags={str(k): str(v) for k, v in (raw.get("tags") or {}).items()},
        replication_principal=raw.get("replication_principal"),
        where=doc.where_key(path),
        reconciler_principal=raw.get("reconciler_principal"),
        plan_principal=raw.get("plan_principal"),
        acls_enforced=raw.get("acls_enforced"),
    )


def _stringify(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _build_job(job: dict) -> JobSettings:
    return JobSettings(**{**job, "spark_conf": {k: _stringify(v) for k, v in job["spark_conf"].items()}})


def _builtin(raw: dict) -> tuple[str, ...] | None:
    """`builtin_exclude` replaces MM2's built-in excludes (as setting `topics.exclude` does in Kafka)."""
    return None if raw.get("builtin_exclude") is None else tuple(raw["builtin_exclude"])


def _build_flow(raw: dict, where: SourceLocation | None) -> Flow:
    job = raw["job"]
    return Flow(
        source=raw["source"],
        target=raw["target"],
        enabled=raw["enabled"],
        topics=TopicFilter(
            tuple(raw["topics"].get("include", [])), tuple(raw["topics"].get("exclude", [])), _builtin(raw["topics"])
        ),
        groups=GroupFilter(
            tuple(raw["groups"].get("include", [])), tuple(raw["groups"].get("exclude", [])), _builtin(raw["groups"])
        ),
        policy=ReplicationPolicy(PolicyKind(raw["policy"]), raw["separator"], raw["internal_separator"]),
        delivery=Delivery(raw["delivery"]),
        replication_factor=raw["replication_factor"],
        config_properties=ConfigPropertyFilter(tuple(raw["config_properties"].get("exclude", []))),
        sync=SyncSettings(**raw["sync"]),
        heartbeats=Heartbeats(**raw["heartbeats"]),
        checkpoints=Emitter(**raw["checkpoints"]),
        refresh_interval_seconds=raw["refresh_interval_seconds"],
        offset_syncs_location=OffsetSyncsLocation(raw["offset_syncs"]["topic_location"]),
        offset_lag_max=raw["offset_syncs"]["lag_max"],
        on_refused_record=OnRefusedRecord(raw["on_refused_record"]),
        rate_limit=RateLimit(**raw["rate_limit"]),
        job=_build_job(job),
        where=where,
        family=raw.get("name"),
    )


def default_flow(source: str = "source", target: str = "target") -> Flow:
    """A flow that sets nothing: every setting is the built-in default (topology/defaults.py)."""
    return _build_flow(merge(BUILTIN_FLOW_DEFAULTS, {"source": source, "target": target}), None)


def default_settings() -> FlowSettings:
    """The flow defaults (topology/settings_registry.py, their one home) as the settings of a flow that sets nothing."""
    return FlowSettings.of(default_flow())


def _check_flow(
    flow_raw: dict,
    doc: Document,
    path: tuple,
    clusters: Iterable[str],
    seen: dict[tuple[str, str], dict[str | None, SourceLocation]],
    diags: Diagnostics,
) -> bool:
    ok = True
    where = doc.where(path)
    for end in ("source", "target"):
        alias = flow_raw[end]
        if alias not in clusters:
            close = difflib.get_close_matches(alias, list(clusters), n=1)  # noqa: B023
            hint = (
                f"did you mean {close[0]!r}?" if close else f"known clusters: {', '.join(sorted(clusters)) or 'none'}"
            )
            diags.error(f"flow {end} {alias!r} is not a defined cluster", doc.where(path + (end,)), hint=hint)
            ok = False
    source, target = flow_raw["source"], flow_raw["target"]
    if source == target:
        diags.error(
            f"flow {source}->{target} replicates a cluster to itself", where, hint="a flow needs two different clusters"
        )
        ok = False
    else:
        family = flow_raw.get("name")
        same_pair = seen.setdefault((source, target), {})  # by pair: a mesh has tens of thousands of flows
        unnamed = None in same_pair
        if family in same_pair:
            what = f"topic family {family!r}" if family else "flow"
            diags.error(
                f"duplicate {what} {flow_name(source, target, family)}",
                where,
                hint="merge the two flows into one (combine their topic filters), or give each a distinct "
                "`name` to split the pair into topic families",
                related=(same_pair[family],),
            )
            ok = False
        elif same_pair and (family is None or unnamed):
            diags.error(
                f"flow {source}->{target} is defined more than once without a `name` on each",
                where,
                hint="merge them into one flow, or name each (`name: orders`) to split the pair into topic "
                "families whose topic filters cannot select the same topic",
                related=tuple(same_pair.values()),
            )
            ok = False
        same_pair[family] = where
    return ok


def _check_effective(flow: Flow, clusters: dict[str, Cluster], diags: Diagnostics) -> None:
    sep = flow.policy.separator
    for alias in (flow.source, flow.target):
        if flow.policy.kind is PolicyKind.DEFAULT and sep in alias:
            diags.error(
                f"cluster alias {alias!r} contains the separator {sep!r} of flow {flow.name}",
                flow.where,
                hint="remote topic names would be ambiguous; rename the cluster or choose another separator",
            )
    if flow.job.deployer == DeployerKind.SPARK_STANDALONE and not flow.job.master.startswith("spark://"):
        diags.error(
            f"flow {flow.name}: deployer spark-standalone needs job.master spark://HOST:PORT, not {flow.job.master!r}",
            flow.where,
        )
    if flow.job.deployer == DeployerKind.KUBERNETES and not flow.job.image:
        diags.error(
            f"flow {flow.name}: deployer kubernetes needs job.image (an image with the project and Spark)",
            flow.where,
            hint="set `job: {image: registry/reconciler:TAG}` in the flow or in `defaults:`",
        )


def _engine_setting(flow: Flow, name: str) -> object:
    """A flow's `job.<name>` as the flows of one engine must agree on it: a `local[N]` master is raised to the
    engine's task slots anyway (contract/deployers.py `local_slots`), so local masters agree whatever their N; the
    engine's name is the one the flows share (`Flow.engine`: `job.engine`, else the target's alias)."""
    if name == "engine":
        return flow.engine
    value = getattr(flow.job, name)
    if name == "master" and local_threads(str(value)) is not None:
        return "local[N]"
    return value


def _check_engines(flows: list[Flow], diags: Diagnostics) -> None:
    """The enabled flows of one engine run in one Spark application, deployed once: they must agree on its settings
    and its deployment's (else each apply would start it with the settings of whichever flow came last, restarting
    its other flows)."""
    first: dict[str, Flow] = {}
    for flow in flows:
        if not flow.enabled:
            continue
        other = first.setdefault(flow.engine, flow)
        # the settings of the engine's application and of its deployment (their scope, settings_registry), those
        # the flows' deployers read: a local engine has no image to agree on
        names = settings_registry.agreed_job_fields({flow.job.deployer, other.job.deployer})
        differ = [k for k in names if _engine_setting(flow, k) != _engine_setting(other, k)]
        if differ:
            diags.error(
                f"flow {flow.name} runs in engine {flow.engine} with flow {other.name} but its job "
                f"settings {', '.join(differ)} differ: one Spark application runs the engine's flows",
                flow.where,
                hint="set them once for the engine's flows (e.g. in `defaults: {job: ...}`), or give the flow an "
                "engine of its own (`job: {engine: NAME}`)",
                related=tuple(w for w in (other.where,) if w is not None),
            )


def _check_spark_conf_secrets(
    built: list[tuple[Flow, Document, tuple]],
    defaults: tuple[Document, tuple] | None,
    clusters: Mapping[str, Cluster],
    diags: Diagnostics,
) -> None:
    """The secrets rule on `job.spark_conf` (topology/secrets.py), once per place a key is written."""
    said: set[tuple[SourceLocation | None, str]] = set()
    prefixes: tuple[str, ...] | None = None
    for flow, doc, path in built:
        if not flow.job.spark_conf:
            continue
        prefixes = prefixes or tuple(secrets.env_prefix(a) for a in sorted(clusters))
        own = (_get(doc, path).get("job") or {}).get("spark_conf") or {}
        for problem in secrets.spark_conf_problems(flow.job.spark_conf, prefixes):
            if problem.key in own:
                where: SourceLocation | None = doc.where(path + ("job", "spark_conf", problem.key))
            elif defaults is not None:
                where = defaults[0].where(defaults[1] + ("job", "spark_conf", problem.key))
            else:
                where = flow.where
            if (where, problem.key) not in said:
                said.add((where, problem.key))
                diags.error(f"flow {flow.name}: {problem.message}", where, hint=problem.hint)


def _check_spark_conf(
    built: list[tuple[Flow, Document, tuple]], defaults: tuple[Document, tuple] | None, diags: Diagnostics
) -> None:
    """Warn about the `job.spark_conf` keys of a kubernetes flow that the Spark operator's webhook denies (the
    SparkApplication is rejected) or that the deployer or the operator sets itself (topology/spark_operator.py),
    once per place the key is written: the flow's own `job.spark_conf`, else `defaults.job.spark_conf`."""
    said: set[tuple[SourceLocation | None, str]] = set()
    for flow, doc, path in built:
        if flow.job.deployer != DeployerKind.KUBERNETES:
            continue
        own = (_get(doc, path).get("job") or {}).get("spark_conf") or {}
        for problem in spark_conf_problems(flow.job.spark_conf, flow.job.namespace):
            if problem.key in own:
                where: SourceLocation | None = doc.where_key(path + ("job", "spark_conf", problem.key))
            elif defaults is not None:
                ddoc, dpath = defaults
                where = ddoc.where_key(dpath + ("job", "spark_conf", problem.key))
            else:
                where = flow.where
            if (where, problem.key) in said:
                continue
            said.add((where, problem.key))
            what = "the Spark operator rejects the SparkApplication" if problem.denied else "it is not yours to set"
            diags.warning(
                f"flow {flow.name}: job.spark_conf key {problem.key!r}: {what} ({problem.reason})",
                where,
                hint=f"remove {problem.key} from job.spark_conf (kubernetes deployer)",
            )


def _job_key_where(
    flow: Flow, doc: Document, path: tuple, defaults: tuple[Document, tuple] | None, key: str
) -> SourceLocation | None:
    """Where a flow's `job.<key>` is written: the flow's own, else `defaults.job`, else the flow."""
    if key in (_get(doc, path).get("job") or {}):
        return doc.where(path + ("job", key))
    if defaults is not None and key in (_get(*defaults).get("job") or {}):
        return defaults[0].where(defaults[1] + ("job", key))
    return flow.where


def _check_kubernetes_names(
    built: list[tuple[Flow, Document, tuple]], defaults: tuple[Document, tuple] | None, diags: Diagnostics
) -> None:
    """Warn (once per place written) about a kubernetes flow's service account that is the namespace's `default` or
    named after a privileged ClusterRole, and a namespace of the cluster's own components (k8s_names.py). The names'
    form is the schema's (DNS-1123)."""
    said: set[tuple[SourceLocation | None, str]] = set()
    for flow, doc, path in built:
        if flow.job.deployer != DeployerKind.KUBERNETES:
            continue
        account, namespace = flow.job.service_account, flow.job.namespace
        problems = []
        if account in RISKY_SERVICE_ACCOUNTS:
            problems.append(
                (
                    "service_account",
                    f"job.service_account {account!r} is {RISKY_SERVICE_ACCOUNTS[account]}",
                    "give the Spark driver a service account of its own, bound to a Role with only what the Spark "
                    "operator needs (pods, services, configmaps in its namespace; docs/security.md)",
                )
            )
        if namespace in SYSTEM_NAMESPACES:
            problems.append(
                (
                    "namespace",
                    f"job.namespace {namespace!r} is a namespace of the cluster's own components",
                    "run the replication jobs in a namespace of their own",
                )
            )
        if flow.job.metrics_bind is not None:
            problems.append(
                (
                    "metrics_bind",
                    f"job.metrics_bind {flow.job.metrics_bind!r} is ignored on kubernetes: the driver pod listens on "
                    "0.0.0.0, the pod network",
                    "remove it; restrict who reaches the metrics port with a NetworkPolicy (docs/security.md)",
                )
            )
        for key, message, hint in problems:
            where = _job_key_where(flow, doc, path, defaults, key)
            if (where, key) in said:
                continue
            said.add((where, key))
            diags.warning(f"flow {flow.name}: {message}", where, hint=hint)


def _heartbeat_carriers(flows: list[Flow]) -> list[Flow]:
    """MM2's internal topics are per pair: of a pair's families, only the first enabled one by name
    replicates (and emits) heartbeats; the others leave them alone."""
    carrier: dict[str, str] = {}
    for f in sorted((f for f in flows if f.family is not None), key=lambda f: (not f.enabled, f.family)):
        carrier.setdefault(f.pair, f.name)
    return [
        f if f.family is None or carrier.get(f.pair) == f.name else replace(f, carries_heartbeats=False) for f in flows
    ]


def _build_residency(doc: Document, path: tuple, clusters: dict[str, Cluster], diags: Diagnostics) -> ResidencyRule:
    raw = _get(doc, path)
    fine = [_check_regex(pattern, doc.where(path + ("topics", i)), diags) for i, pattern in enumerate(raw["topics"])]
    if clusters and not any(raw["tag"] in c.tags for c in clusters.values()):
        diags.warning(
            f"policy {raw['name']!r}: no cluster has tag {raw['tag']!r}, so no flow may carry its topics",
            doc.where(path + ("tag",)),
            hint=f"tag the clusters, e.g. `tags: {{{raw['tag']}: {raw['allowed'][0]}}}`",
        )
    patterns = tuple(p for p, ok in zip(raw["topics"], fine) if ok)  # the others are errors: no topology is built
    return ResidencyRule(raw["name"], PatternFilter(patterns), raw["tag"], tuple(raw["allowed"]), doc.where(path))


def _list_len(data: dict, key: str) -> int:
    value = data.get(key)
    return len(value) if isinstance(value, list) else 0


def build_topology(docs: list[Document], diags: Diagnostics, env: str | None = None) -> Topology | None:
    """Validate every document, merge them, build the model. None when any error was found.

    A topology that declares `environments:` is built for one of them, `env` (topology/environments.py: its
    bindings and overrides merged into the documents first); one that declares none needs `env` None."""
    if not docs:
        if diags.ok:
            diags.error("no topology documents found", hint="a topology file starts with `apiVersion: reconciler/v1`")
        return None
    env_names = environments.names(docs)
    for name, alias, doc, path in environments.bindings(docs, but=env):  # the rules that hold in every environment
        _check_secrets(alias, doc, path, diags, f"environment {name!r}: ")
        _check_principals(alias, doc, path, diags, f"environment {name!r}: ")
    resolved = environments.resolve(docs, env, diags)
    if resolved is None:
        return None
    docs, env = resolved
    # Each file was read within RECONCILER_MAX_FLOWS (load_text); together they may pass it.
    declared = [(d, ("flows", i)) for d in docs if isinstance(d.data, dict) for i in range(_list_len(d.data, "flows"))]
    limit = settings.max_flows()
    if len(declared) > limit:
        doc, path = declared[limit]
        too_many_flows(len(declared), doc.where(path), diags, limit)
        return None
    valid = [validate_document(d, diags) for d in docs]
    for doc in docs:
        _check_patterns(doc, diags)
    src = _merge_documents(docs, diags)
    for alias, (doc, path) in src.clusters.items():
        _check_secrets(alias, doc, path, diags)
        _check_principals(alias, doc, path, diags)
    seen: dict[tuple[str, str], dict[str | None, SourceLocation]] = {}
    flow_ok = [_check_flow(_get(doc, path), doc, path, src.clusters, seen, diags) for doc, path in src.flows]
    if not all(valid) or diags.errors:
        return None

    clusters = {alias: _build_cluster(alias, doc, path) for alias, (doc, path) in src.clusters.items()}
    defaults_raw = _get(*src.singletons["defaults"]) if "defaults" in src.singletons else {}
    base = merge(BUILTIN_FLOW_DEFAULTS, defaults_raw)
    built = [
        (_build_flow(merge(base, _get(doc, path)), doc.where(path)), doc, path)
        for (doc, path), ok in zip(src.flows, flow_ok)
        if ok
    ]
    flows = [flow for flow, _, _ in built]
    for flow in flows:
        _check_effective(flow, clusters, diags)
    _check_engines(flows, diags)
    _check_spark_conf(built, src.singletons.get("defaults"), diags)
    _check_kubernetes_names(built, src.singletons.get("defaults"), diags)
    _check_spark_conf_secrets(built, src.singletons.get("defaults"), clusters, diags)
    flows = _heartbeat_carriers(flows)

    residency = tuple(_build_residency(doc, path, clusters, diags) for doc, path in src.residency)
    single = {k: _get(*v) for k, v in src.singletons.items()}
    topology = Topology(
        clusters=clusters,
        flows=tuple(flows),
        residency=residency,
        prune=Prune(**single.get("prune", {})),
        slo=Slo(**single.get("slo", {})),
        name=(single.get("metadata") or {}).get("name"),
        files=tuple(dict.fromkeys(d.file for d in docs)),
        default_job=_build_job(base["job"]),
        content_digest=content_digest(docs),
        environment=env,
        environments=env_names,
        owner=single.get("owner"),
    )
    return None if diags.errors else topology


def _keyed(data: Any) -> Any:
    """`data` with every mapping key a string (YAML allows `1:` and `true:` keys; JSON sorts only strings)."""
    if isinstance(data, dict):
        return {f"{type(k).__name__}:{k}" if not isinstance(k, str) else k: _keyed(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_keyed(v) for v in data]
    return data


def content_digest(docs: list[Document]) -> str:
    """sha256 over the documents' data (`${ENV_VAR}`s unresolved): the same for a topology read from the work tree
    or from git objects, whatever the files' names; any value changed, added or removed changes it."""
    texts = sorted(json.dumps(_keyed(d.data), sort_keys=True, separators=(",", ":"), default=repr) for d in docs)
    return hashlib.sha256(json.dumps(texts, separators=(",", ":")).encode("utf-8")).hexdigest()


def load_topology(
    paths: Iterable[str | Path], diags: Diagnostics | None = None, env: str | None = None
) -> tuple[Topology | None, Diagnostics]:
    """Files/directories -> (Topology or None, every diagnostic), for environment `env` when the topology declares
    environments. Analysis is a separate stage."""
    diags = diags if diags is not None else Diagnostics()
    docs = load_paths(paths, diags)
    return build_topology(docs, diags, env), diags


def load_topology_text(text: str, file: str = "<text>", env: str | None = None) -> Topology:
    """Convenience for tests and tools: parse one YAML text or raise TopologyError."""
    diags = Diagnostics()
    topo = build_topology(load_text(text, file, diags), diags, env)
    if topo is None:
        raise TopologyError(diags)
    return topo
