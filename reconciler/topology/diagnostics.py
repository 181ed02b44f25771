"""Diagnostics: every problem found in a topology, with where it is and what to do about it.

All stages collect diagnostics instead of raising, so one run reports every error.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from reconciler.textutil import cut_values, term


@dataclass(frozen=True, order=True)
class SourceLocation:
    """1-based line and column in a topology file."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Diagnostic:
    severity: Severity
    message: str
    where: SourceLocation | None = None
    hint: str | None = None
    related: tuple[SourceLocation, ...] = ()

    def __post_init__(self) -> None:
        """Values echoed in a message or hint are cut to their start and length (textutil.cut_values)."""
        object.__setattr__(self, "message", cut_values(self.message))
        if self.hint is not None:
            object.__setattr__(self, "hint", cut_values(self.hint))

    def render(self) -> str:
        """`FILE:LINE:COL: severity: message` for a terminal; names in it shown through `term` (issue 44)."""
        head = f"{term(self.where)}: " if self.where else ""
        lines = [f"{head}{self.severity.value}: {term(self.message)}"]
        lines += [f"  {term(loc)}: see also" for loc in self.related]
        if self.hint:
            lines.append(f"  hint: {term(self.hint)}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "severity": self.severity.value,
            "message": self.message,
            "file": self.where.file if self.where else None,
            "line": self.where.line if self.where else None,
            "col": self.where.col if self.where else None,
            "hint": self.hint,
        }


@dataclass
class Diagnostics:
    """An ordered collection; `errors` decide the exit code, `warnings` are shown."""

    items: list[Diagnostic] = field(default_factory=list)

    def error(
        self,
        message: str,
        where: SourceLocation | None = None,
        hint: str | None = None,
        related: tuple[SourceLocation, ...] = (),
    ) -> None:
        self.items.append(Diagnostic(Severity.ERROR, message, where, hint, related))

    def warning(
        self,
        message: str,
        where: SourceLocation | None = None,
        hint: str | None = None,
        related: tuple[SourceLocation, ...] = (),
    ) -> None:
        self.items.append(Diagnostic(Severity.WARNING, message, where, hint, related))

    def extend(self, other: Diagnostics) -> None:
        self.items.extend(other.items)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity is Severity.WARNING]

    @property
    def ok(self) -> bool:
        return not self.errors

    def sorted(self) -> list[Diagnostic]:
        far = SourceLocation("\uffff", 0, 0)
        return sorted(self.items, key=lambda d: (d.where or far, d.severity != Severity.ERROR))

    def render(self) -> str:
        return "\n".join(d.render() for d in self.sorted())


class TopologyError(Exception):
    """Raised at a stage boundary when diagnostics contain errors; carries them all."""

    def __init__(self, diagnostics: Diagnostics):
        self.diagnostics = diagnostics
        super().__init__(diagnostics.render())
