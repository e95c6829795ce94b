"""modelprov.sources: the original operations behind a node."""

from __future__ import annotations

import onnx
import onnx_ir as ir

from modelprov._correspond import all_nodes
from modelprov._sources import Source, collect_sources, node_label
from modelprov.errors import UsageError
from modelprov.keys import ATEN_DOMAIN, MODULE_DOMAIN
from modelprov.onnx._duplicates import merged_entries

__all__ = ["function_body_sources", "node_sources", "proto_nodes", "sources"]


def node_sources(model: ir.Model) -> list[tuple[ir.Node, list[Source]]]:
    """Every node of the model (subgraphs included) with its sources, in graph order."""
    nodes = all_nodes(model.graph)
    table, node_ids = collect_sources(
        dict(model.metadata_props),
        [
            (node_label(node.name, node.op_type, i), dict(node.metadata_props))
            for i, node in enumerate(nodes)
        ],
    )
    return [
        (node, [table.by_id(i) for i in ids]) for node, ids in zip(nodes, node_ids, strict=True)
    ]


def function_body_sources(model: ir.Model) -> list[tuple[ir.Node, list[Source]]]:
    """The nodes in the bodies of the model's own (user) functions with their sources.

    Bodies functionize made (the ATen and module function domains) are left out:
    they hold the first call's nodes, whose sources the calls carry.
    """
    own = (ATEN_DOMAIN, MODULE_DOMAIN)
    nodes = [
        node
        for function in model.functions.values()
        if function.domain not in own
        for node in ir.traversal.RecursiveGraphIterator(function)
    ]
    if not nodes:
        return []
    table, node_ids = collect_sources(
        dict(model.metadata_props),
        [
            (f"{node.name or node.op_type}@body{i}", dict(node.metadata_props))
            for i, node in enumerate(nodes)
        ],
    )
    return [
        (node, [table.by_id(i) for i in ids]) for node, ids in zip(nodes, node_ids, strict=True)
    ]


def proto_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Every node of a GraphProto and of its subgraphs, parents before children."""
    result: list[onnx.NodeProto] = []
    for node in graph.node:
        result.append(node)
        for attribute in node.attribute:
            if attribute.HasField("g"):
                result.extend(proto_nodes(attribute.g))
            for subgraph in attribute.graphs:
                result.extend(proto_nodes(subgraph))
    return result


def sources(model: onnx.ModelProto | ir.Model, node: onnx.NodeProto | ir.Node) -> list[Source]:
    """The original operations a node computes, in source order.

    Works for any model modelprov wrote (it reads the model's sources table) and for a
    plain torch.onnx export (one source per node, from the node's own metadata).

    Args:
        model: the model holding ``node`` (onnx.ModelProto or onnx_ir.Model).
        node: one of its nodes, of the same form (onnx.NodeProto or onnx_ir.Node).
    """
    if isinstance(model, ir.Model) and isinstance(node, ir.Node):
        for each, found in node_sources(model):
            if each is node:
                return found
        raise UsageError(f"node {node.name!r} is not a node of this model")
    if isinstance(model, onnx.ModelProto) and isinstance(node, onnx.NodeProto):
        nodes = proto_nodes(model.graph)
        entries = [
            (
                node_label(n.name, n.op_type, i),
                merged_entries(n.metadata_props, where=node_label(n.name, n.op_type, i)),
            )
            for i, n in enumerate(nodes)
        ]
        table, node_ids = collect_sources(
            merged_entries(model.metadata_props, where="model"), entries
        )
        for candidate, ids in zip(nodes, node_ids, strict=True):
            if candidate is node or candidate == node:
                return [table.by_id(i) for i in ids]
        raise UsageError(f"node {node.name!r} is not a node of this model")
    else:
        raise TypeError(
            "sources(model, node) takes an onnx.ModelProto with one of its onnx.NodeProto, "
            f"or an onnx_ir.Model with one of its onnx_ir.Node; got {type(model).__name__} "
            f"and {type(node).__name__}"
        )
