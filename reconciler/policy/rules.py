"""The built-in YAML rules: a policy file of `kind: Policy` with a list of `rules`, each one check and optional
selectors (docs/policy.md):

    apiVersion: reconciler/v1
    kind: Policy
    rules:
      - name: replication-factor-in-production   # optional: the check's key by default
        min_replication_factor: 3                 # the check (exactly one of CHECKS)
        clusters: {env: production}               # optional: clusters by tag (every tag must match; a list: any
                                                  #   of its values), or a list of cluster aliases
        topics: ['orders\\..*']                   # optional: topic names, full-match patterns (RE2)
        severity: warning                         # optional: report, do not fail (default: error)

Each rule judges the plan JSON's actions (plan/document.py), as a Rego policy would: what the plan would create or
change, not what the clusters already hold. Patterns are the reconciler's user patterns
(`mirror.filters.compile_user_pattern`: RE2, matched in linear time).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.mirror.filters import compile_user_pattern, pattern_problem
from reconciler.mirror.policy import HEARTBEATS_TOPIC
from reconciler.plan.policy_record import PolicyFinding
from reconciler.plan.risk import Risk
from reconciler.topology.diagnostics import Diagnostics
from reconciler.topology.loader import Document

API_VERSION = "reconciler/v1"
KIND = "Policy"
#: Topic configs the config checks read.
MIN_INSYNC_REPLICAS = "min.insync.replicas"
RETENTION_MS = "retention.ms"

RISKS = ", ".join(r.value for r in Risk)


@dataclass(frozen=True)
class Target:
    """One action of the plan JSON as a rule sees it."""

    action: Mapping[str, Any]

    @property
    def kind(self) -> str:
        return str(self.action.get("kind", ""))

    @property
    def cluster(self) -> str:
        return str(self.action.get("cluster", ""))

    @property
    def topic(self) -> str | None:
        """The topic the action is about (ACLs: their topic), None for job actions."""
        if isinstance(self.action.get("acl"), Mapping):
            return str(self.action["acl"].get("topic", ""))
        topic = self.action.get("topic")
        return str(topic) if topic is not None else None

    @property
    def object(self) -> str:
        """What the action is about, for a policy line: `topic T`, `flow F`, `ACL ...`."""
        acl = self.action.get("acl")
        if isinstance(acl, Mapping):
            return f"ACL {acl.get('permission')} {acl.get('principal')} {acl.get('operation')} on {acl.get('topic')}"
        if self.action.get("flow"):
            return f"flow {self.action['flow']}"
        return f"topic {self.topic}"

    @property
    def configs(self) -> Mapping[str, Any]:
        configs = self.action.get("configs")
        return configs if isinstance(configs, Mapping) else {}


@dataclass(frozen=True)
class Rule:
    """One YAML rule: where it is, its check and its selectors."""

    file: str
    line: int
    name: str
    check: str  # a key of CHECKS
    value: Any  # the check's value, validated
    clusters: tuple[str, ...] | None  # cluster aliases; None: every cluster (or as `tags` says)
    tags: tuple[tuple[str, tuple[str, ...]], ...]  # (tag, allowed values)
    topics: tuple[str, ...]  # full-match patterns; (): every topic
    warn: bool

    def selects(self, t: Target, tags_of: Callable[[str], Mapping[str, str]]) -> bool:
        if self.clusters is not None and t.cluster not in self.clusters:
            return False
        tags = tags_of(t.cluster)
        if any(tags.get(tag) not in allowed for tag, allowed in self.tags):
            return False
        if self.topics:
            topic = t.topic
            return topic is not None and any(compile_user_pattern(p).fullmatch(topic) for p in self.topics)
        return True

    def finding(self, t: Target, message: str, risk: Risk | None = None) -> PolicyFinding:
        return PolicyFinding(self.file, self.line, self.name, message, t.cluster, t.object, risk)


# --- the checks: each yields (target, message) of what violates it ----------------------------------------------


def _is_remote_topic(t: Target) -> bool:
    """A topic of the users' records: a remote topic, not MirrorMaker 2's own (heartbeats, replicated or not,
    checkpoints, offset syncs), whose names and configs are MirrorMaker 2's (a name ending in `heartbeats` is one,
    as IdentityReplicationPolicy.looksLikeHeartbeat says)."""
    if t.kind == "create_topic" and t.action.get("role") != "remote":
        return False
    return not str(t.topic or "").endswith(HEARTBEATS_TOPIC)


def _topic_name(rule: Rule, targets: list[Target]) -> Iterator[tuple[Target, str]]:
    patterns = rule.value
    for t in targets:
        if t.kind == "create_topic" and _is_remote_topic(t):
            name = str(t.topic)
            if not any(compile_user_pattern(p).fullmatch(name) for p in patterns):
                shown = " or ".join(f"'{p}'" for p in patterns)
                yield t, f"the name does not match {shown}"


def _min_replication_factor(rule: Rule, targets: list[Target]) -> Iterator[tuple[Target, str]]:
    least = rule.value
    for t in targets:
        if t.kind != "create_topic":
            continue
        rf = t.action.get("replication_factor")
        if rf == -1:
            yield (
                t,
                (
                    f"replication factor: the broker's default, which the plan does not know; the policy asks at least "
                    f"{least} (set the flow's replication_factor)"
                ),
            )
        elif isinstance(rf, int) and rf < least:
            yield t, f"replication factor {rf}, the policy asks at least {least}"


def _config_values(t: Target, key: str) -> Iterator[tuple[Any, str]]:
    """(value, how) of config `key` that the action sets: a created remote topic's config (None: not set), a config
    set, or a config removed (None)."""
    if not _is_remote_topic(t):
        return
    if t.kind == "create_topic":
        yield t.configs.get(key), "created with"
    elif t.kind == "set_config" and t.action.get("key") == key:
        yield t.action.get("value"), "set to"
    elif t.kind == "delete_config" and t.action.get("key") == key:
        yield None, "removed"


def _as_int(value: Any) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def _min_insync_replicas(rule: Rule, targets: list[Target]) -> Iterator[tuple[Target, str]]:
    least = rule.value
    for t in targets:
        for value, how in _config_values(t, MIN_INSYNC_REPLICAS):
            if value is None:
                unset = "removed" if how == "removed" else "not set"
                yield (
                    t,
                    f"{MIN_INSYNC_REPLICAS} {unset}: the broker's default applies; the policy asks at least {least}",
                )
                continue
            number = _as_int(value)
            if number is None or number < least:
                yield t, f"{MIN_INSYNC_REPLICAS} {how} {value}, the policy asks at least {least}"


def _retention_ms(rule: Rule, targets: list[Target]) -> Iterator[tuple[Target, str]]:
    low, high = rule.value.get("min"), rule.value.get("max")
    for t in targets:
        for value, how in _config_values(t, RETENTION_MS):
            if value is None:
                continue  # the broker's default, which the plan does not know: not judged
            number = _as_int(value)
            if number is None:
                yield t, f"{RETENTION_MS} {how} {value!r}, not a number of milliseconds"
            elif number == -1 and high is not None:
                yield t, f"{RETENTION_MS} {how} -1 (kept forever), the policy asks at most {high}"
            elif number != -1 and low is not None and number < low:
                yield t, f"{RETENTION_MS} {how} {number}, the policy asks at least {low}"
            elif number != -1 and high is not None and number > high:
                yield t, f"{RETENTION_MS} {how} {number}, the policy asks at most {high}"


def _max_partitions(rule: Rule, targets: list[Target]) -> Iterator[tuple[Target, str]]:
    most = rule.value
    for t in targets:
        n = t.action.get("partitions") if t.kind == "create_topic" else None
        n = t.action.get("total") if t.kind == "add_partitions" else n
        if isinstance(n, int) and n > most:
            yield t, f"{n} partitions, the policy allows at most {most}"


def _forbid(rule: Rule, targets: list[Target]) -> Iterator[tuple[Target, str]]:
    for t in targets:
        if t.action.get("risk") in rule.value:
            yield t, f"a {t.action['risk']} change is forbidden here: {t.action.get('description', t.kind)}"


def approval_message(t: Target) -> str:
    return f"a {t.action.get('risk')} change needs an approval: {t.action.get('description', t.kind)}"


#: check key -> how it judges the targets
CHECKS: dict[str, Callable[[Rule, list[Target]], Iterator[tuple[Target, str]]]] = {
    "topic_name": _topic_name,
    "min_replication_factor": _min_replication_factor,
    "min_insync_replicas": _min_insync_replicas,
    "retention_ms": _retention_ms,
    "max_partitions": _max_partitions,
    "forbid": _forbid,
    "require_approval": lambda rule, targets: iter(()),  # not a violation: see `approvals`
}
SELECTORS = ("name", "clusters", "topics", "severity")


def evaluate(
    rules: list[Rule], actions: list[Mapping[str, Any]], tags_of: Callable[[str], Mapping[str, str]]
) -> tuple[list[PolicyFinding], list[PolicyFinding], list[PolicyFinding]]:
    """(violations, warnings, approvals required) of `rules` over the plan JSON's `actions`."""
    violations: list[PolicyFinding] = []
    warnings: list[PolicyFinding] = []
    approvals: list[PolicyFinding] = []
    every = [Target(a) for a in actions]
    for rule in rules:
        targets = [t for t in every if rule.selects(t, tags_of)]
        if rule.check == "require_approval":
            approvals += [
                rule.finding(t, approval_message(t), Risk(t.action["risk"]))
                for t in targets
                if t.action.get("risk") in rule.value
            ]
            continue
        found = [rule.finding(t, message) for t, message in CHECKS[rule.check](rule, targets)]
        (warnings if rule.warn else violations).extend(found)
    return violations, warnings, approvals


# --- reading a policy file ---------------------------------------------------------------------------------------


class _Reader:
    """Validates one rule, reporting each problem at its FILE:LINE:COL."""

    def __init__(self, doc: Document, diags: Diagnostics):
        self.doc, self.diags = doc, diags

    def error(self, path: tuple, message: str, hint: str | None = None, key: bool = False) -> None:
        where = self.doc.where_key(path) if key else self.doc.where(path)
        self.diags.error(message, where, hint=hint)

    def positive(self, path: tuple, value: Any, what: str) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            self.error(path, f"{what}: {value!r} is not a whole number >= 1")
            return None
        return value

    def patterns(self, path: tuple, value: Any, what: str) -> tuple[str, ...] | None:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items or not all(isinstance(p, str) for p in items):
            self.error(path, f"{what}: a pattern or a list of patterns (full match, RE2), not {value!r}")
            return None
        ok = True
        for i, p in enumerate(items):
            problem = pattern_problem(p)
            if problem is not None:
                self.error(path + ((i,) if isinstance(value, list) else ()), f"{what}: pattern {p!r} {problem}")
                ok = False
        return tuple(items) if ok else None

    def risks(self, path: tuple, value: Any, what: str) -> tuple[str, ...] | None:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            self.error(path, f"{what}: a risk class or a list of them ({RISKS}), not {value!r}")
            return None
        bad = [i for i, r in enumerate(items) if r not in {x.value for x in Risk}]
        for i in bad:
            self.error(
                path + ((i,) if isinstance(value, list) else ()),
                f"{what}: {items[i]!r} is not a risk class",
                hint=f"the risk classes: {RISKS}",
            )
        return None if bad else tuple(items)

    def bounds(self, path: tuple, value: Any, what: str) -> dict[str, int] | None:
        if not isinstance(value, dict) or not value or set(value) - {"min", "max"}:
            self.error(path, f"{what}: {{min: MS, max: MS}} (either or both, milliseconds), not {value!r}")
            return None
        out = {}
        for k, v in value.items():
            number = self.positive(path + (k,), v, f"{what}.{k}")
            if number is None:
                return None
            out[k] = number
        if "min" in out and "max" in out and out["min"] > out["max"]:
            self.error(path, f"{what}: min {out['min']} is above max {out['max']}")
            return None
        return out

    def rule(self, index: int, data: Any) -> Rule | None:
        path: tuple = ("rules", index)
        if not isinstance(data, dict):
            self.error(path, f"rules[{index}]: a mapping with one check ({', '.join(CHECKS)}), not {data!r}")
            return None
        unknown = [k for k in data if k not in CHECKS and k not in SELECTORS]
        for k in unknown:
            self.error(
                path + (k,),
                f"rules[{index}]: unknown key {k!r}",
                hint=f"checks: {', '.join(CHECKS)}; with them: {', '.join(SELECTORS)}",
                key=True,
            )
        checks = [k for k in data if k in CHECKS]
        if len(checks) != 1:
            self.error(
                path,
                f"rules[{index}]: "
                + (f"{len(checks)} checks ({', '.join(checks)}): one per rule" if checks else "no check")
                + f"; the checks: {', '.join(CHECKS)}",
            )
            return None
        check = checks[0]
        at = path + (check,)
        raw = data[check]
        value: Any
        if check == "topic_name":
            value = self.patterns(at, raw, check)
        elif check in ("min_replication_factor", "min_insync_replicas", "max_partitions"):
            value = self.positive(at, raw, check)
        elif check == "retention_ms":
            value = self.bounds(at, raw, check)
        else:
            value = self.risks(at, raw, check)
        name = data.get("name", check.replace("_", "-"))
        if not isinstance(name, str) or not name.strip():
            self.error(path + ("name",), f"rules[{index}].name: a non-empty string, not {name!r}")
        clusters, tags = self.clusters(path + ("clusters",), data.get("clusters"))
        topics = self.patterns(path + ("topics",), data["topics"], "topics") if "topics" in data else ()
        severity = data.get("severity", "error")
        if severity not in ("error", "warning"):
            self.error(path + ("severity",), f"severity: 'error' or 'warning', not {severity!r}")
        if value is None or topics is None or clusters is False or unknown or not isinstance(name, str):
            return None
        return Rule(
            self.doc.file,
            self.doc.where_key(at).line,
            name.strip(),
            check,
            value,
            clusters if isinstance(clusters, tuple) else None,
            tags,
            topics,
            severity == "warning",
        )

    def clusters(self, path: tuple, value: Any) -> tuple[Any, tuple[tuple[str, tuple[str, ...]], ...]]:
        """(aliases or None, tag selectors); (False, ()) after an error."""
        if value is None:
            return None, ()
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return tuple(value), ()
        if isinstance(value, dict) and value:
            tags = []
            for tag, allowed in value.items():
                values = [allowed] if isinstance(allowed, str) else allowed
                if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
                    self.error(path + (tag,), f"clusters.{tag}: a tag value or a list of them, not {allowed!r}")
                    return False, ()
                tags.append((str(tag), tuple(values)))
            return None, tuple(tags)
        self.error(
            path,
            f"clusters: cluster tags ({{env: production}}) or a list of cluster aliases, not {value!r}",
        )
        return False, ()


def read(doc: Document, diags: Diagnostics) -> list[Rule]:
    """The rules of one YAML policy document; its problems go to `diags` at their FILE:LINE:COL."""
    data = doc.data
    reader = _Reader(doc, diags)
    if not isinstance(data, dict):
        reader.error((), f"a policy file is a mapping (apiVersion: {API_VERSION}, kind: {KIND}, rules: [...])")
        return []
    if data.get("kind") != KIND or data.get("apiVersion") != API_VERSION:
        reader.error(
            ("kind",) if "kind" in data else (),
            f"not a policy: a policy file has apiVersion: {API_VERSION} and kind: {KIND}",
            hint="a --policy directory holds policies (*.rego, *.yaml) only; topologies go elsewhere",
        )
        return []
    for k in data:
        if k not in ("apiVersion", "kind", "metadata", "rules"):
            reader.error(
                (k,), f"unknown key {k!r}", hint="a policy file has apiVersion, kind, metadata, rules", key=True
            )
    rules = data.get("rules")
    if not isinstance(rules, list) or not rules:
        reader.error(("rules",) if "rules" in data else (), "rules: a list of rules, each one check")
        return []
    out = [reader.rule(i, r) for i, r in enumerate(rules)]
    return [r for r in out if r is not None]
