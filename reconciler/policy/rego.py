"""Rego policies, evaluated with an embedded Rego engine (regopy: rego-cpp, Microsoft's implementation of OPA's
language), conftest style: `package reconciler`, a `deny` set of messages (`deny contains msg if {...}`, or OPA
0.x's `deny[msg] {...}`), optionally `warn` (reported, not failing) and `require_approval` (risk classes whose
actions need an approval). `input` is the plan JSON (plan/document.py), `data.topology` the resolved topology
(policy/engine.py `topology_document`).

Each file of `package reconciler` is evaluated on its own, with every file of another package (a library:
`package lib.kafka`, imported as `data.lib.kafka`), so that each message names the file whose rule made it. A
message is a string, or an object with `msg` (and optionally `object` and `cluster`, named in the line).

regopy is imported when a Rego file is read: a reconciler without it runs YAML policies and says so for Rego ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.plan.policy_record import PolicyFinding
from reconciler.plan.risk import Risk
from reconciler.textutil import cut
from reconciler.topology.diagnostics import Diagnostics, SourceLocation

#: The package whose rules are queried (conftest's `--namespace`).
PACKAGE = "reconciler"
#: The rules read, and what each makes.
DENY, WARN, REQUIRE_APPROVAL = "deny", "warn", "require_approval"
_PACKAGE_LINE = re.compile(r"^\s*package\s+([A-Za-z_][\w.]*)", re.MULTILINE)
#: `(error N:NAME|OFFSET|LENGTH` and `(errormsg N:TEXT)` of a RegoError: N is the length of what follows the colon.
_COUNTED = re.compile(r"\((error|errormsg) (\d+):")


class RegoUnavailable(Exception):
    """regopy cannot be imported on this machine."""


def _regopy() -> Any:
    try:
        import regopy  # only where a Rego policy is read
    except ImportError as exc:  # pragma: no cover - regopy is a dependency; a platform without its wheel
        raise RegoUnavailable(
            f"Rego policies need the regopy package (pip install regopy), which cannot be imported here: {exc}"
        ) from None
    return regopy


@dataclass(frozen=True)
class RegoFile:
    path: str
    text: str
    package: str

    @property
    def is_rules(self) -> bool:
        """A file of `package reconciler`: queried (the others are libraries it may import)."""
        return self.package == PACKAGE


def package_of(text: str) -> str | None:
    m = _PACKAGE_LINE.search(text)
    return m.group(1) if m else None


def _counted(text: str, at: int) -> tuple[str, int]:
    """The text after a `N:` prefix at `at` (its length N), and where it ends."""
    m = re.compile(r"(\d+):").match(text, at)
    if m is None:
        return "", at
    n = int(m.group(1))
    return text[m.end() : m.end() + n], m.end() + n


def error_locations(message: str) -> list[tuple[str, int | None, str]]:
    """(module name, byte offset or None, what) of each error in a RegoError's text."""
    out: list[tuple[str, int | None, str]] = []
    name, offset = "", None
    for m in _COUNTED.finditer(message):
        value, end = _counted(message, m.start(2))
        if m.group(1) == "error":
            name, offset = value, None
            tail = re.match(r"\|(\d+)\|(\d+)", message[end:])
            if tail:
                offset = int(tail.group(1))
        else:
            out.append((name, offset, value))
    return out


def _location(path: str, text: str, offset: int | None) -> SourceLocation:
    if offset is None:
        return SourceLocation(path, 1, 1)
    before = text.encode("utf-8")[:offset]
    line = before.count(b"\n") + 1
    col = len(before[before.rfind(b"\n") + 1 :].decode("utf-8", "replace")) + 1
    return SourceLocation(path, line, col)


class RegoPolicies:
    """The Rego files of the --policy paths, checked when read (a syntax error: FILE:LINE:COL)."""

    def __init__(self, files: Sequence[RegoFile], diags: Diagnostics):
        self.files = list(files)
        self.libraries = [f for f in self.files if not f.is_rules]
        self.rules = [f for f in self.files if f.is_rules]
        self._names = {f"policy-{i}.rego": f for i, f in enumerate(self.files)}
        if not self.files:
            return
        try:
            self._regopy = _regopy()
        except RegoUnavailable as exc:
            for f in self.files:
                diags.error(str(exc), SourceLocation(f.path, 1, 1))
            self.rules = []
            return
        if self._interpreter(None, diags) is None:  # the libraries alone first: each error said once
            self.rules = []
        for f in self.rules:
            self._interpreter(f, diags)

    def _module_name(self, f: RegoFile) -> str:
        return next(name for name, g in self._names.items() if g is f)

    def _report(self, exc: Exception, diags: Diagnostics, fallback: RegoFile) -> None:
        found = error_locations(str(exc))
        if not found:
            diags.error(f"Rego: {cut(str(exc), 200)}", SourceLocation(fallback.path, 1, 1))
        for name, offset, what in found:
            f = self._names.get(name.rsplit("/", 1)[-1], fallback)
            diags.error(f"Rego: {what}", _location(f.path, f.text, offset), hint="`opa check FILE` says more")

    def _interpreter(self, f: RegoFile | None, diags: Diagnostics) -> Any:
        """An interpreter holding the libraries and `f` (None: the libraries only); None after an error."""
        rego = self._regopy.Interpreter()
        rego.log_level = self._regopy.LogLevel.NONE  # its errors come back to us, not to stdout
        for g in [*self.libraries, *([f] if f is not None else [])]:
            try:
                rego.add_module(self._module_name(g), g.text)
            except self._regopy.RegoError as exc:
                self._report(exc, diags, g)
                return None
        return rego

    def evaluate(
        self, plan: Mapping[str, Any], topology: Mapping[str, Any], diags: Diagnostics
    ) -> tuple[list[PolicyFinding], list[PolicyFinding], list[tuple[str, Risk]]]:
        """(violations, warnings, (file, risk class) of each class a file requires an approval for); a file the
        engine cannot evaluate is an error in `diags`."""
        violations: list[PolicyFinding] = []
        warnings: list[PolicyFinding] = []
        approvals: list[tuple[str, Risk]] = []
        for f in self.rules:
            rego = self._interpreter(f, diags)
            if rego is None:
                continue
            rego.set_input(plan)
            rego.add_data({"topology": topology})
            for rule, into in ((DENY, violations), (WARN, warnings)):
                for value in self._query(rego, f, rule, diags):
                    into.append(_finding(f, rule, value))
            for value in self._query(rego, f, REQUIRE_APPROVAL, diags):
                try:
                    risk = Risk(value)
                except ValueError:
                    diags.error(
                        f"Rego: require_approval holds {cut(repr(value), 60)}, not a risk class "
                        f"({', '.join(r.value for r in Risk)})",
                        SourceLocation(f.path, 1, 1),
                    )
                    continue
                approvals.append((f.path, risk))
        return violations, warnings, approvals

    def _query(self, rego: Any, f: RegoFile, rule: str, diags: Diagnostics) -> list[Any]:
        try:
            out = rego.query(f"data.{PACKAGE}.{rule}")
        except self._regopy.RegoError as exc:
            self._report(exc, diags, f)
            return []
        if not out.ok():
            diags.error(
                f"Rego: the engine could not evaluate data.{PACKAGE}.{rule} (e.g. one rule name written both as a set, "
                f"`{rule} contains msg if`, and as an object, `{rule}[msg] if`)",
                SourceLocation(f.path, 1, 1),
                hint="`opa check FILE` says more",
            )
            return []
        exprs = out.results[0].expressions if out.results else []
        if not exprs:
            return []  # the rule is not defined in this file
        value = exprs[0]
        if isinstance(value, dict):  # `deny[msg] { ... }` (OPA 0.x's partial set) reads as {msg: true}
            return [k for k, v in value.items() if v is not False]
        if isinstance(value, list):
            return value
        diags.error(
            f"Rego: data.{PACKAGE}.{rule} is {cut(json.dumps(value), 60)}, not a set of messages",
            SourceLocation(f.path, 1, 1),
        )
        return []


def _finding(f: RegoFile, rule: str, value: Any) -> PolicyFinding:
    if isinstance(value, Mapping) and "msg" in value:
        what, cluster = value.get("object"), value.get("cluster")
        return PolicyFinding(
            f.path,
            None,
            rule,
            str(value["msg"]),
            str(cluster) if cluster is not None else None,
            str(what) if what is not None else None,
        )
    return PolicyFinding(f.path, None, rule, value if isinstance(value, str) else json.dumps(value, sort_keys=True))
