"""Inline SVG drawn without any library: the topology graph and horizontal bar charts.

Pure string building, so an HTML report stays one self-contained file (no scripts, fonts or CDNs).

Graph layout: clusters sit on an ellipse, sources first (more flows out than in) starting at the
left and going clockwise, so two clusters face each other and an aggregation target ends on the
right. Flows are quadratic curves bent to their left, so `A->B` and `B->A` never overlap, with an
arrowhead at the target and a label pill at the middle of the curve.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

COLORS = {
    "ok": "#1a7f37",
    "drift": "#d4a72c",
    "error": "#cf222e",
    "disabled": "#8c959f",
    "info": "#0969da",
    "ink": "#1f2328",
    "muted": "#656d76",
    "grid": "#d0d7de",
    "bg": "#ffffff",
}
_FILL = {"ok": "#dafbe1", "drift": "#fff8c5", "error": "#ffebe9", "disabled": "#f6f8fa", "info": "#ddf4ff"}

NODE_W, NODE_H = 156, 58


@dataclass(frozen=True)
class Node:
    id: str
    label: str
    sublabel: str
    status: str  # key of COLORS
    tooltip: str = ""


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    label: str
    status: str
    dashed: bool = False
    tooltip: str = ""


def _t(text: str) -> str:
    return escape(text, quote=True)


def _layout(nodes: Sequence[Node], edges: Sequence[Edge], width: int, height: int) -> dict[str, tuple[float, float]]:
    if not nodes:
        return {}
    balance = {n.id: 0 for n in nodes}
    for e in edges:
        if e.source in balance:
            balance[e.source] += 1
        if e.target in balance:
            balance[e.target] -= 1
    order = sorted(nodes, key=lambda n: (-balance[n.id], n.id))
    if len(order) == 1:
        return {order[0].id: (width / 2, height / 2)}
    unit = {}
    for i, n in enumerate(order):
        angle = math.pi + 2 * math.pi * i / len(order)  # start left, go around (SVG y points down)
        unit[n.id] = (math.cos(angle), -math.sin(angle))
    # stretch the points to fill the drawing, whatever part of the ellipse they use
    xs, ys = [p[0] for p in unit.values()], [p[1] for p in unit.values()]
    mx, my = NODE_W / 2 + 20, NODE_H / 2 + 28

    def stretch(v: float, lo: float, hi: float, size: float, margin: float) -> float:
        return size / 2 if hi - lo < 1e-9 else margin + (v - lo) / (hi - lo) * (size - 2 * margin)

    return {
        k: (stretch(x, min(xs), max(xs), width, mx), stretch(y, min(ys), max(ys), height, my))
        for k, (x, y) in unit.items()
    }


def _box_exit(center: tuple[float, float], toward: tuple[float, float], pad: float = 4) -> tuple[float, float]:
    """Where the segment from the center of a node box toward `toward` leaves the box."""
    (x, y), (tx, ty) = center, toward
    dx, dy = tx - x, ty - y
    if dx == 0 and dy == 0:
        return center
    scale = min((NODE_W / 2 + pad) / abs(dx) if dx else math.inf, (NODE_H / 2 + pad) / abs(dy) if dy else math.inf)
    return x + dx * scale, y + dy * scale


def topology_graph(nodes: Sequence[Node], edges: Sequence[Edge], width: int = 640, height: int = 400) -> str:
    pos = _layout(nodes, edges, width, height)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
        f'role="img" aria-label="topology graph" class="graph">',
        "<defs>",
    ]
    for key in ("ok", "drift", "error", "disabled"):
        parts.append(
            f'<marker id="arrow-{key}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="13" markerHeight="13" markerUnits="userSpaceOnUse" '
            f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{COLORS[key]}"/></marker>'
        )
    parts.append("</defs>")
    labels = []
    for e in edges:
        if e.source not in pos or e.target not in pos:
            continue
        p0, p2 = pos[e.source], pos[e.target]
        dx, dy = p2[0] - p0[0], p2[1] - p0[1]
        dist = math.hypot(dx, dy) or 1.0
        bend = 0.22 * dist
        # bend to the left of the direction of travel: opposite flows curve apart
        ctrl = ((p0[0] + p2[0]) / 2 + dy / dist * bend, (p0[1] + p2[1]) / 2 - dx / dist * bend)
        start, end = _box_exit(p0, ctrl), _box_exit(p2, ctrl, pad=6)
        color = COLORS[e.status]
        dash = ' stroke-dasharray="7 5"' if e.dashed else ""
        width_px = 3.2 if e.status in ("drift", "error") else 2.2
        parts.append(
            f'<path class="flow flow-{e.status}" d="M{start[0]:.1f},{start[1]:.1f} Q{ctrl[0]:.1f},{ctrl[1]:.1f} '
            f'{end[0]:.1f},{end[1]:.1f}" fill="none" stroke="{color}" stroke-width="{width_px}"{dash} '
            f'marker-end="url(#arrow-{e.status})"><title>{_t(e.tooltip or e.label)}</title></path>'
        )
        mx = 0.25 * start[0] + 0.5 * ctrl[0] + 0.25 * end[0]
        my = 0.25 * start[1] + 0.5 * ctrl[1] + 0.25 * end[1]
        w = 7.0 * len(e.label) + 16
        labels.append(
            f'<g class="edge-label"><rect x="{mx - w / 2:.1f}" y="{my - 11:.1f}" width="{w:.1f}" height="22" '
            f'rx="11" fill="{_FILL[e.status]}" stroke="{color}"/><text x="{mx:.1f}" y="{my + 4:.1f}" '
            f'text-anchor="middle" font-size="12" fill="{COLORS["ink"]}">{_t(e.label)}</text></g>'
        )
    parts += labels
    for n in nodes:
        x, y = pos[n.id]
        color = COLORS[n.status]
        parts.append(
            f'<g class="cluster cluster-{n.status}"><title>{_t(n.tooltip or n.label)}</title>'
            f'<rect x="{x - NODE_W / 2:.1f}" y="{y - NODE_H / 2:.1f}" width="{NODE_W}" height="{NODE_H}" rx="10" '
            f'fill="{_FILL[n.status]}" stroke="{color}" stroke-width="2.5"/>'
            f'<text x="{x:.1f}" y="{y - 4:.1f}" text-anchor="middle" font-size="15" font-weight="600" '
            f'fill="{COLORS["ink"]}">{_t(n.label)}</text>'
            f'<text x="{x:.1f}" y="{y + 15:.1f}" text-anchor="middle" font-size="12" fill="{color}">'
            f"{_t(n.sublabel)}</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class Bar:
    label: str
    value: float | None  # None: no data (shown as text)
    note: str = ""  # shown instead of the value when there is no data


def _fmt(v: float, unit: str) -> str:
    return (f"{v:,.0f}" if v >= 10 or float(v).is_integer() else f"{v:,.1f}") + unit


def bar_chart(
    bars: Sequence[Bar], threshold: float | None = None, unit: str = "", width: int = 640, threshold_label: str = "SLO"
) -> str:
    """Horizontal bars, red beyond `threshold` (drawn as a dashed line), green within, blue without one."""
    label_w, value_w, row_h, top = 170, 90, 30, 26
    plot_w = width - label_w - value_w
    height = top + row_h * max(1, len(bars)) + 12
    values = [b.value for b in bars if b.value is not None]
    scale_max = max([*values, threshold or 0, 1e-9]) * 1.08
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" role="img" class="chart">'
    ]
    parts.append(f'<line x1="{label_w}" y1="{top - 6}" x2="{label_w}" y2="{height - 8}" stroke="{COLORS["grid"]}"/>')
    for i, b in enumerate(bars):
        y = top + i * row_h
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 15}" text-anchor="end" font-size="12" fill="{COLORS["ink"]}">'
            f"{_t(b.label)}</text>"
        )
        if b.value is None:
            parts.append(
                f'<text x="{label_w + 8}" y="{y + 15}" font-size="12" font-style="italic" '
                f'fill="{COLORS["muted"]}">{_t(b.note or "no data")}</text>'
            )
            continue
        over = threshold is not None and b.value > threshold
        color = COLORS["error"] if over else (COLORS["ok"] if threshold is not None else COLORS["info"])
        w = max(2.0, plot_w * b.value / scale_max) if b.value > 0 else 2.0
        parts.append(
            f'<rect class="bar{" bar-over" if over else ""}" x="{label_w}" y="{y + 3}" width="{w:.1f}" '
            f'height="{row_h - 10}" rx="3" fill="{color}"><title>{_t(b.label)}: {_fmt(b.value, unit)}</title></rect>'
        )
        parts.append(
            f'<text x="{label_w + w + 6:.1f}" y="{y + 15}" font-size="12" fill="{COLORS["ink"]}">'
            f"{_t(_fmt(b.value, unit))}</text>"
        )
    if threshold is not None:
        x = label_w + plot_w * threshold / scale_max
        parts.append(
            f'<line x1="{x:.1f}" y1="{top - 8}" x2="{x:.1f}" y2="{height - 8}" stroke="{COLORS["error"]}" '
            f'stroke-width="1.5" stroke-dasharray="5 4"/>'
        )
        parts.append(
            f'<text x="{x:.1f}" y="{top - 12}" text-anchor="middle" font-size="11" fill="{COLORS["error"]}">'
            f"{_t(threshold_label)} {_t(_fmt(threshold, unit))}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def legend(items: Mapping[str, str]) -> str:
    """A row of coloured swatches: status key -> words (HTML, not SVG)."""
    return "".join(
        f'<span class="swatch"><i style="background:{COLORS[k]}"></i>{_t(v)}</span>' for k, v in items.items()
    )
