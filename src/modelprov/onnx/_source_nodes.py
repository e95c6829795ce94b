"""Writes ``pkg.modelprov.source_node`` on each ONNX node: its node of the user's program.

torch.onnx decomposes the ExportedProgram before translating it, which renames nodes
(``pkg.torch.onnx.fx_node`` names the decomposed node). The StableHLO lowering decomposes
differently. Both exporters therefore also write the name of the node in the user's
``torch.export`` program (``modelprov._torch._fx_lineage``): ONNX under this key (kept in the
sources table like every original key), StableHLO in ``modelprov.source_node`` and the op
locations, so ``modelprov.join_sources`` can join ONNX nodes and StableHLO ops.
"""

from __future__ import annotations

import json

import onnx_ir as ir
import torch

from modelprov._torch._fx_lineage import export_node_names
from modelprov.core._sources import fx_node_name
from modelprov.core._walks import all_nodes
from modelprov.keys import SOURCE_NODE_KEY

__all__ = ["SOURCE_NODE_KEY", "format_source_nodes", "record_source_nodes"]

_MAX_CHAIN = 10_000  # first-input chains are short; the bound guards against cycles


def format_source_nodes(names: tuple[str, ...]) -> str:
    """One name as is; several as a JSON array (the format of ``modelprov.source_node``)."""
    if len(names) == 1:
        return names[0]
    return json.dumps(list(names), ensure_ascii=False)


def record_source_nodes(
    program: torch.onnx.ONNXProgram, original: torch.fx.Graph | None = None
) -> int:
    """Write the key on every ONNX node made from an FX node; returns how many got it.

    ``original`` is the graph of the user's program (passed by the user or captured by
    modelprov before torch.onnx decomposed it); without it the roots of each node's
    ``from_node`` chain are used and no-op nodes cannot be aliased (see :func:`_add_aliases`).
    """
    exported = program.exported_program
    if exported is None:
        return 0
    original_graph_id = id(original) if original is not None else None
    values: dict[str, tuple[str, ...]] = {}
    for node in exported.graph.nodes:
        if node.op != "call_function":
            continue
        names = export_node_names(node, original_graph_id)
        if names:
            values[node.name] = names
    named: dict[ir.Node, list[str]] = {}
    for onnx_node in all_nodes(program.model.graph):
        found = values.get(fx_node_name(onnx_node.metadata_props))
        if found is not None:
            named[onnx_node] = list(found)
    if original is not None:
        _add_aliases(original, named, program.model.graph)
    for onnx_node, ids in named.items():
        onnx_node.metadata_props[SOURCE_NODE_KEY] = format_source_nodes(tuple(ids))
    return len(named)


def _add_aliases(
    original: torch.fx.Graph, named: dict[ir.Node, list[str]], graph: ir.Graph
) -> None:
    """Name no-op nodes of the user's program on the ONNX node producing their output.

    torch.onnx's decomposition deletes nodes that compute nothing (a ``to`` cast to the
    dtype the tensor has, ``alias``...): their output is their first input, so the ONNX node
    producing that input produces their output too, as the StableHLO side records
    (``modelprov.stablehlo.lower._aliases``). Each such node's id is appended to the
    ``source_node`` of the nodes whose value leaves its producer's group.
    """
    covered = {name for names in named.values() for name in names}
    graph_outputs = set(graph.outputs)
    for node in original.nodes:
        if node.op != "call_function" or node.name in covered:
            continue
        if node.meta.get("val") is None or not node.users:
            continue  # returns nothing, or dead code: no value anyone reads
        producer = _covered_producer(node, covered)
        if producer is None:
            continue
        for onnx_node in _group_outputs(producer, named, graph_outputs):
            if node.name not in named[onnx_node]:
                named[onnx_node].append(node.name)


def _covered_producer(node: torch.fx.Node, covered: set[str]) -> str | None:
    """The first node up the first-input chain that ONNX nodes name (None at an input)."""
    current = node.args[0] if node.args else None
    steps = 0
    while isinstance(current, torch.fx.Node) and steps < _MAX_CHAIN:
        steps += 1
        if current.op != "call_function":
            return None
        if current.name in covered:
            return str(current.name)
        current = current.args[0] if current.args else None
    return None


def _group_outputs(
    source: str, named: dict[ir.Node, list[str]], graph_outputs: set[ir.Value]
) -> list[ir.Node]:
    """ONNX nodes named after ``source`` whose output is read outside its group."""
    found = []
    for onnx_node, names in named.items():
        if source not in names:
            continue
        for value in onnx_node.outputs:
            if value in graph_outputs or any(
                source not in named.get(user, ()) for user, _ in value.uses()
            ):
                found.append(onnx_node)
                break
    return found
