"""Layered layout of the nodes of one module group, computed once at generation time.

Each group is drawn on its own: layer = longest path from the group's first nodes over
edges inside the group; a layer wider than ``MAX_COLUMNS`` wraps onto further rows. Edges
between groups are not drawn (the node details list them), so a 2,000-node graph stays
a few thousand SVG elements.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

__all__ = [
    "GAP_X",
    "GAP_Y",
    "MAX_COLUMNS",
    "NODE_H",
    "NODE_W",
    "PAD",
    "GroupLayout",
    "layout_group",
]

NODE_W = 132
NODE_H = 30
GAP_X = 14
GAP_Y = 22
PAD = 10
MAX_COLUMNS = 6


@dataclasses.dataclass(frozen=True)
class GroupLayout:
    """Positions (top-left corner) of a group's nodes, its size and its inner edges."""

    positions: Mapping[int, tuple[int, int]]
    width: int
    height: int
    edges: Sequence[tuple[int, int]]


def _by_barycenter(
    nodes: list[int], predecessors: Mapping[int, Sequence[int]], column: Mapping[int, float]
) -> list[int]:
    """Orders a layer by the mean column of each node's predecessors (one sweep)."""
    keys: dict[int, tuple[float, int]] = {}
    for i, node in enumerate(nodes):
        cols = [column[p] for p in predecessors.get(node, ()) if p in column]
        keys[node] = (sum(cols) / len(cols) if cols else float(i), i)
    return sorted(nodes, key=keys.__getitem__)


def layout_group(members: Sequence[int], predecessors: Mapping[int, Sequence[int]]) -> GroupLayout:
    """Lays out ``members`` (node indices in graph order, a topological order).

    ``predecessors`` maps a node to the nodes producing its inputs (any group).
    """
    inside = set(members)
    layer: dict[int, int] = {}
    edges: list[tuple[int, int]] = []
    for node in members:
        inner = [p for p in predecessors.get(node, ()) if p in inside and p in layer]
        edges.extend((p, node) for p in dict.fromkeys(inner))
        layer[node] = 1 + max((layer[p] for p in inner), default=-1)
    layers: dict[int, list[int]] = {}
    for node in members:
        layers.setdefault(layer[node], []).append(node)
    column: dict[int, float] = {}
    positions: dict[int, tuple[int, int]] = {}
    row = 0
    widest = 1
    for depth in sorted(layers):
        nodes = layers[depth]
        if depth > 0:
            nodes = _by_barycenter(nodes, predecessors, column)
        for start in range(0, len(nodes), MAX_COLUMNS):
            chunk = nodes[start : start + MAX_COLUMNS]
            widest = max(widest, len(chunk))
            for col, node in enumerate(chunk):
                column[node] = col
                positions[node] = (PAD + col * (NODE_W + GAP_X), PAD + row * (NODE_H + GAP_Y))
            row += 1
    width = 2 * PAD + widest * NODE_W + (widest - 1) * GAP_X
    height = 2 * PAD + row * NODE_H + max(row - 1, 0) * GAP_Y
    return GroupLayout(positions=positions, width=width, height=height, edges=edges)
