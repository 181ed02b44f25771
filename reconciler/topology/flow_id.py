"""The id of a flow: the one place that formats "<source>-><target>[:<name>]" and parses it back.

Jobs, status records, plans, drift reports and deployers all name a flow by this id. Cluster
aliases never contain '>' or ':', so the text form is unambiguous. `name` is the topic family
(several named flows of one source/target pair); None for the flow of a pair.
"""

from __future__ import annotations

from dataclasses import dataclass

ARROW = "->"
#: `<source>-><target>` names a flow; a topic family adds `:<name>` (`west->east:orders`).
FAMILY_SEPARATOR = ":"


@dataclass(frozen=True, order=True)
class FlowId:
    """Like MirrorMaker 2's SourceAndTarget, plus the optional family name."""

    source: str
    target: str
    name: str | None = None

    def __str__(self) -> str:
        return f"{self.source}{ARROW}{self.target}" + (f"{FAMILY_SEPARATOR}{self.name}" if self.name else "")

    @classmethod
    def parse(cls, text: str) -> FlowId:
        """The FlowId of `text`; ValueError when it is not `<source>-><target>[:<name>]`."""
        source, arrow, rest = text.partition(ARROW)
        target, sep, name = rest.partition(FAMILY_SEPARATOR)
        if not arrow or not source or not target:
            raise ValueError(f"flow id {text!r} is not '<source>-><target>'")
        return cls(source, target, name if sep else None)

    @classmethod
    def looks_like(cls, text: str) -> bool:
        """Whether `text` is a flow id (rather than a cluster alias or a topic)."""
        return ARROW in text

    @property
    def pair(self) -> FlowId:
        """The flow id of the source/target pair, without the family name."""
        return FlowId(self.source, self.target)

    def slug(self, sep: str = ".") -> str:
        """A file/resource name: `eu-west->eu-central` -> `eu-west.eu-central` (aliases never contain '.')."""
        return str(self).replace(ARROW, sep)


def flow_name(source: str, target: str, family: str | None = None) -> str:
    """The text form of a flow id."""
    return str(FlowId(source, target, family))


def flow_ends(name: str) -> tuple[str, str, str | None]:
    """(source, target, family) of a flow id text (lenient: no validation, like str.partition)."""
    source, _, rest = name.partition(ARROW)
    target, sep, family = rest.partition(FAMILY_SEPARATOR)
    return source, target, (family if sep else None)
