"""Writes ``pkg.modelprov.source_node`` on each ONNX node: its node of the user's program.

torch.onnx decomposes the ExportedProgram before translating it, which renames nodes
(``pkg.torch.onnx.fx_node`` names the decomposed node). The StableHLO lowering decomposes
differently. Both exporters therefore also write the name of the node in the user's
``torch.export`` program (``modelprov._fx_lineage``): ONNX under this key (kept in the
sources table like every original key), StableHLO in ``modelprov.source_node`` and the op
locations, so ``modelprov.join_sources`` can join ONNX nodes and StableHLO ops.
"""

from __future__ import annotations

import json

import torch

from modelprov._correspond import all_nodes
from modelprov._fx_lineage import export_node_names
from modelprov._sources import fx_node_name
from modelprov.keys import SOURCE_NODE_KEY

__all__ = ["SOURCE_NODE_KEY", "format_source_nodes", "record_source_nodes"]


def format_source_nodes(names: tuple[str, ...]) -> str:
    """One name as is; several as a JSON array (the format of ``modelprov.source_node``)."""
    if len(names) == 1:
        return names[0]
    return json.dumps(list(names), ensure_ascii=False)


def record_source_nodes(
    program: torch.onnx.ONNXProgram, original_graph_id: int | None = None
) -> int:
    """Write the key on every ONNX node made from an FX node; returns how many got it.

    ``original_graph_id`` is ``id()`` of the user's ExportedProgram graph when the user
    passed one; otherwise the roots of each node's ``from_node`` chain are used.
    """
    exported = program.exported_program
    if exported is None:
        return 0
    values: dict[str, str] = {}
    for node in exported.graph.nodes:
        if node.op != "call_function":
            continue
        names = export_node_names(node, original_graph_id)
        if names:
            values[node.name] = format_source_nodes(names)
    count = 0
    for onnx_node in all_nodes(program.model.graph):
        value = values.get(fx_node_name(onnx_node.metadata_props))
        if value is not None:
            onnx_node.metadata_props[SOURCE_NODE_KEY] = value
            count += 1
    return count
