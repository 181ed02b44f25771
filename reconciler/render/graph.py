"""The topology as a graph: Mermaid (pull requests, docs) and Graphviz DOT."""

from __future__ import annotations

import re

from reconciler.topology.model import Flow, Topology


def _node_id(alias: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", alias)


def _cluster_label(topology: Topology, alias: str) -> str:
    tags = topology.clusters[alias].tags
    return alias + ("<br/>" + ", ".join(f"{k}={v}" for k, v in sorted(tags.items())) if tags else "")


def _edge_label(flow: Flow) -> str:
    topics = (f"{flow.family}: " if flow.family else "") + ", ".join(flow.topics.include)
    extras = [flow.policy.kind.value]
    if flow.delivery.value == "exactly-once":
        extras.append("exactly-once")
    if not flow.enabled:
        extras.append("disabled")
    return f"{topics} ({', '.join(extras)})"


def _escape(text: str) -> str:
    return text.replace('"', "#quot;")


def mermaid(topology: Topology) -> str:
    lines = ["flowchart LR"]
    for alias in sorted(topology.clusters):
        lines.append(f'  {_node_id(alias)}["{_escape(_cluster_label(topology, alias))}"]')
    for flow in topology.flows:
        arrow = "-.->" if not flow.enabled else "-->"
        lines.append(f'  {_node_id(flow.source)} {arrow}|"{_escape(_edge_label(flow))}"| {_node_id(flow.target)}')
    return "\n".join(lines) + "\n"


def dot(topology: Topology) -> str:
    lines = ["digraph topology {", "  rankdir=LR;", "  node [shape=box, style=rounded];"]
    for alias in sorted(topology.clusters):
        label = _cluster_label(topology, alias).replace("<br/>", "\\n").replace('"', '\\"')
        lines.append(f'  "{alias}" [label="{label}"];')
    for flow in topology.flows:
        style = ", style=dashed" if not flow.enabled else ""
        label = _edge_label(flow).replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'  "{flow.source}" -> "{flow.target}" [label="{label}"{style}];')
    lines.append("}")
    return "\n".join(lines) + "\n"
