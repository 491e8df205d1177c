"""Pictures of a lineage neighbourhood: Graphviz dot, and a self-contained SVG/HTML needing no tools at all.

The SVG is laid out in columns by distance from the dataset asked about (jobs and datasets alternate), which is
what a lineage question looks like: the dataset on one side, its impact fanning out to the other.
"""

from __future__ import annotations

import html
import json

from kafka_lineage.graph.queries import Reached, Traversal

Key = tuple[str, str, str]
BOX_W, BOX_H, GAP_X, GAP_Y = 230, 44, 90, 22


def _key(node: Reached) -> Key:
    return node.kind, node.namespace, node.name


def _label(key: Key) -> str:
    return f"{key[1]}\n{key[2]}"


def to_dot(graph: Traversal) -> str:
    keys = [_key(graph.start), *(_key(n) for n in graph.nodes)]
    ids = {key: f"n{i}" for i, key in enumerate(dict.fromkeys(keys))}
    lines = ["digraph lineage {", "  rankdir=LR;", '  node [fontname="Helvetica", fontsize=10];']
    for key, node_id in ids.items():
        shape = "box" if key[0] == "job" else "ellipse"
        style = ', style=filled, fillcolor="#ffe0b2"' if key == _key(graph.start) else ""
        lines.append(f"  {node_id} [shape={shape}, label={json.dumps(_label(key))}{style}];")
    for a, b in graph.edges:
        if a in ids and b in ids:
            lines.append(f"  {ids[a]} -> {ids[b]};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _column(node: Reached, upstream: bool) -> int:
    column = 2 * node.depth - (1 if node.kind == "job" else 0)
    return -column if upstream else column


def to_svg(graph: Traversal, upstream: bool = False) -> str:
    columns: dict[int, list[Key]] = {0: [_key(graph.start)]}
    for node in graph.nodes:
        if _key(node) != _key(graph.start):
            columns.setdefault(_column(node, upstream), []).append(_key(node))
    order = sorted(columns)
    position: dict[Key, tuple[int, int]] = {}
    for index, column in enumerate(order):
        for row, key in enumerate(columns[column]):
            position.setdefault(key, (20 + index * (BOX_W + GAP_X), 20 + row * (BOX_H + GAP_Y)))
    width = 40 + len(order) * (BOX_W + GAP_X)
    height = 40 + max(len(keys) for keys in columns.values()) * (BOX_H + GAP_Y)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="Helvetica" '
             'font-size="11"><defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
             'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>']
    for a, b in graph.edges:
        if a in position and b in position:
            (ax, ay), (bx, by) = position[a], position[b]
            x1, x2 = (ax + BOX_W, bx) if bx > ax else (ax, bx + BOX_W)
            parts.append(f'<line x1="{x1}" y1="{ay + BOX_H // 2}" x2="{x2}" y2="{by + BOX_H // 2}" stroke="#555" '
                         'marker-end="url(#arrow)"/>')
    for key, (x, y) in position.items():
        fill = "#ffe0b2" if key == _key(graph.start) else ("#e3f2fd" if key[0] == "job" else "#e8f5e9")
        radius = 4 if key[0] == "job" else 20
        parts.append(f'<g><title>{html.escape(key[0])}: {html.escape(key[1])} {html.escape(key[2])}</title>'
                     f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="{radius}" fill="{fill}" '
                     'stroke="#777"/>'
                     f'<text x="{x + 10}" y="{y + 18}" fill="#555">{html.escape(_short(key[1]))}</text>'
                     f'<text x="{x + 10}" y="{y + 34}" font-weight="bold">{html.escape(_short(key[2]))}</text></g>')
    parts.append("</svg>")
    return "".join(parts) + "\n"


def _short(text: str, limit: int = 34) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def to_html(graph: Traversal, title: str, upstream: bool = False) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
            f"<body style='font-family:Helvetica'><h2>{html.escape(title)}</h2>"
            "<p>Jobs are square boxes, datasets round ones; hover a box for its full name.</p>"
            f"{to_svg(graph, upstream)}</body></html>\n")
