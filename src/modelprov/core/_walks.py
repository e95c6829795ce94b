"""Walks of a graph and its subgraphs (If/Loop/Scan bodies), shared by every layer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

import onnx_ir as ir

__all__ = [
    "Walk",
    "all_graphs",
    "all_nodes",
    "attribute_dict",
    "nodes_and_graphs",
    "nodes_graphs_and_tensors",
]

Walk: TypeAlias = tuple[list[ir.Node], list[ir.Graph]]
"""What ``nodes_and_graphs`` returns: every node and every graph, in its walk's order."""
TensorAttribute: TypeAlias = tuple[ir.Node, str, ir.Attr]
"""A node, the name of one of its TENSOR attributes and that attribute."""

_GRAPH = ir.AttributeType.GRAPH
_GRAPHS = ir.AttributeType.GRAPHS
_TENSOR = ir.AttributeType.TENSOR
_GRAPH_KINDS = (_GRAPH, _GRAPHS)


def attribute_dict(node: ir.Node) -> Mapping[str, ir.Attr]:
    """A node's attributes, read-only: ``Attributes`` is a UserDict, and its ``data`` dict is
    read without a Python-level call per item."""
    attributes = node.attributes
    return getattr(attributes, "data", attributes)


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


def nodes_and_graphs(graph: ir.Graph) -> Walk:
    """``all_nodes`` and ``all_graphs`` of a graph, in one walk."""
    nodes: list[ir.Node] = []
    graphs = [graph]
    _walk(graph, nodes, graphs)
    return nodes, graphs


def _walk(
    graph: ir.Graph,
    nodes: list[ir.Node],
    subgraphs: list[ir.Graph],
    tensors: list[TensorAttribute] | None = None,
) -> None:
    """Appends the nodes of ``graph`` and its subgraphs to ``nodes`` (each node before its
    subgraphs' nodes), its subgraphs to ``subgraphs`` (a node's all at once, when the walk
    reaches it) and, when ``tensors`` is given, each TENSOR attribute holding a tensor (not
    a reference, in a function body) to it."""
    for node in graph:
        nodes.append(node)
        attributes = attribute_dict(node)
        if not attributes:
            continue
        inner: list[ir.Graph] = []
        for name, attribute in attributes.items():
            kind = attribute.type
            if kind == _TENSOR:
                if tensors is not None and not attribute.is_ref():
                    tensors.append((node, name, attribute))
            elif kind not in _GRAPH_KINDS or attribute.is_ref():
                continue
            elif kind == _GRAPH:
                inner.append(attribute.as_graph())
            else:
                inner.extend(attribute.as_graphs())
        subgraphs.extend(inner)
        for subgraph in inner:
            _walk(subgraph, nodes, subgraphs, tensors)


def nodes_graphs_and_tensors(graph: ir.Graph) -> tuple[Walk, list[TensorAttribute]]:
    """``nodes_and_graphs`` of a graph, and its nodes' TENSOR attributes that hold a tensor
    (not references to a function's attribute), in node order, in one walk: the attributes
    each node's walk reads anyway."""
    nodes: list[ir.Node] = []
    graphs = [graph]
    tensors: list[TensorAttribute] = []
    _walk(graph, nodes, graphs, tensors)
    return (nodes, graphs), tensors
