"""Walks of a graph and its subgraphs (If/Loop/Scan bodies), shared by every layer."""

from __future__ import annotations

import onnx_ir as ir

__all__ = ["all_graphs", "all_nodes", "nodes_and_graphs"]

_GRAPH = ir.AttributeType.GRAPH
_GRAPH_KINDS = (_GRAPH, ir.AttributeType.GRAPHS)


def all_nodes(graph: ir.Graph) -> list[ir.Node]:
    """Every node of a graph and of its subgraphs, parents before children (the order of
    ``ir.traversal.RecursiveGraphIterator``, walked without its per-node generators)."""
    nodes: list[ir.Node] = []
    _walk(graph, nodes, [])
    return nodes


def all_graphs(graph: ir.Graph) -> list[ir.Graph]:
    """A graph and every subgraph under it (If/Loop/Scan bodies), parents first."""
    graphs = [graph]
    _walk(graph, [], graphs)
    return graphs


def nodes_and_graphs(graph: ir.Graph) -> tuple[list[ir.Node], list[ir.Graph]]:
    """``all_nodes`` and ``all_graphs`` of a graph, in one walk."""
    nodes: list[ir.Node] = []
    graphs = [graph]
    _walk(graph, nodes, graphs)
    return nodes, graphs


def _walk(graph: ir.Graph, nodes: list[ir.Node], subgraphs: list[ir.Graph]) -> None:
    """Appends the nodes of ``graph`` and its subgraphs to ``nodes`` (each node before its
    subgraphs' nodes) and its subgraphs to ``subgraphs`` (a node's all at once, when the
    walk reaches it)."""
    for node in graph:
        nodes.append(node)
        # ``Attributes`` is a UserDict: its ``data`` dict is read without per-item calls.
        attributes = node.attributes
        attributes = getattr(attributes, "data", attributes)
        if not attributes:
            continue
        inner: list[ir.Graph] = []
        for attribute in attributes.values():
            kind = attribute.type
            if kind not in _GRAPH_KINDS or attribute.is_ref():
                continue
            if kind == _GRAPH:
                inner.append(attribute.as_graph())
            else:
                inner.extend(attribute.as_graphs())
        subgraphs.extend(inner)
        for subgraph in inner:
            _walk(subgraph, nodes, subgraphs)
