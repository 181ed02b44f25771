"""The topology as a graph: Mermaid (pull requests, docs) and Graphviz DOT."""

from __future__ import annotations

import re

from reconciler.textutil import term
from reconciler.topology.model import Delivery, Flow, Topology


def _node_id(alias: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", alias)


def _tag_words(topology: Topology, alias: str) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(topology.clusters[alias].tags.items()))


def _edge_label(flow: Flow) -> str:
    topics = (f"{flow.family}: " if flow.family else "") + ", ".join(flow.topics.include)
    extras = [flow.policy.kind.value]
    if flow.delivery is Delivery.EXACTLY_ONCE:
        extras.append("exactly-once")
    if not flow.enabled:
        extras.append("disabled")
    return f"{topics} ({', '.join(extras)})"


#: Mermaid's entity codes (`#quot;`, `#35;`) for what could end a quoted label or be read as markup in
#: it (HTML, a Markdown string's backticks); one pass, so a code's own `#` is not escaped again.
_MERMAID = {"#": "#35;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "&": "#amp;", "`": "#96;", "|": "#124;"}
_MERMAID_RE = re.compile("[" + re.escape("".join(_MERMAID)) + "]")


def _escape(text: str) -> str:
    """A value in a quoted Mermaid label: controls shown as in `reconciler.textutil.term` (a newline in a
    name is `\\x0a`, not a new line of the diagram), markup and quotes as entity codes (issue 44)."""
    return _MERMAID_RE.sub(lambda m: _MERMAID[m.group()], term(text))


def _dot(text: str) -> str:
    """A value in a quoted DOT string: controls shown as in `term`, backslashes and quotes escaped."""
    return term(text).replace("\\", "\\\\").replace('"', '\\"')


def mermaid(topology: Topology) -> str:
    lines = ["flowchart LR"]
    for alias in sorted(topology.clusters):
        tags = _tag_words(topology, alias)
        label = _escape(alias) + (f"<br/>{_escape(tags)}" if tags else "")
        lines.append(f'  {_node_id(alias)}["{label}"]')
    for flow in topology.flows:
        arrow = "-.->" if not flow.enabled else "-->"
        lines.append(f'  {_node_id(flow.source)} {arrow}|"{_escape(_edge_label(flow))}"| {_node_id(flow.target)}')
    return "\n".join(lines) + "\n"


def dot(topology: Topology) -> str:
    lines = ["digraph topology {", "  rankdir=LR;", "  node [shape=box, style=rounded];"]
    for alias in sorted(topology.clusters):
        tags = _tag_words(topology, alias)
        label = _dot(alias) + (f"\\n{_dot(tags)}" if tags else "")
        lines.append(f'  "{_dot(alias)}" [label="{label}"];')
    for flow in topology.flows:
        style = ", style=dashed" if not flow.enabled else ""
        label = _dot(_edge_label(flow))
        lines.append(f'  "{_dot(flow.source)}" -> "{_dot(flow.target)}" [label="{label}"{style}];')
    lines.append("}")
    return "\n".join(lines) + "\n"
