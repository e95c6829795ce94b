"""Walks of raw protos, for the modules that read a model before onnx_ir does (checks,
duplicate keys, external data, audit, lookups on a ModelProto): the one place that says
where a node keeps its subgraphs (an attribute's ``g``, then its ``graphs``)."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

__all__ = ["attribute_graphs", "graph_nodes", "subgraphs"]


def attribute_graphs(attribute: onnx.AttributeProto) -> Iterator[onnx.GraphProto]:
    """The graphs one attribute holds: ``g`` (when set), then ``graphs``."""
    if attribute.HasField("g"):
        yield attribute.g
    yield from attribute.graphs


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The graphs a node holds (If/Loop/Scan bodies), in attribute order."""
    for attribute in node.attribute:
        yield from attribute_graphs(attribute)


def graph_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Every node of a GraphProto and of its subgraphs, each node before its subgraphs'
    nodes (the order of onnx_ir's recursive iterator)."""
    result: list[onnx.NodeProto] = []
    for node in graph.node:
        result.append(node)
        for subgraph in subgraphs(node):
            result.extend(graph_nodes(subgraph))
    return result
