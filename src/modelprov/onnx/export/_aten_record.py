"""Writes the ``pkg.modelprov.aten_call`` record of each FX node onto its ONNX nodes.

Called by modelprov.export right after torch.onnx.export(optimize=False): the ONNX nodes
torch.onnx made from an FX node carry ``pkg.torch.onnx.fx_node`` text starting with
``%<fx name>``; each gets the JSON record of that FX node's ATen call (target, schema,
bound arguments, and for tensor arguments the FX and ONNX value names); each target's
schema is stored once, in the model-level pool ``pkg.modelprov.aten_schemas``.
"""

from __future__ import annotations

from typing import Any

import torch

from modelprov._torch._compat import is_op_overload, op_schema
from modelprov.core._sources import fx_node_name
from modelprov.core._walks import all_nodes
from modelprov.keys import ATEN_CALL_KEY, ATEN_SCHEMAS_KEY
from modelprov.onnx.functions._aten_call import bind, dump_schemas

__all__ = ["record_aten_calls"]


def _onnx_names(program: torch.onnx.ONNXProgram) -> dict[str, str]:
    """FX placeholder and node names -> the ONNX value names torch.onnx gave them."""
    exported = program.exported_program
    assert exported is not None
    signature = exported.graph_signature
    names: dict[str, str] = {}
    names.update(signature.inputs_to_parameters)
    names.update(signature.inputs_to_buffers)
    names.update(signature.inputs_to_lifted_tensor_constants)
    known = {value.name for value in program.model.graph.inputs}
    known.update(program.model.graph.initializers)
    for node in all_nodes(program.model.graph):
        known.update(value.name for value in node.outputs if value.name)
    result: dict[str, str] = {}
    for node in exported.graph.nodes:
        candidate = names.get(node.name, node.name)
        if candidate in known:
            result[node.name] = candidate
    return result


def record_aten_calls(program: torch.onnx.ONNXProgram) -> None:
    """Writes ``pkg.modelprov.aten_call`` on every ONNX node made from an ATen FX node."""
    exported = program.exported_program
    if exported is None:
        return
    onnx_names = _onnx_names(program)
    records: dict[str, str] = {}
    schemas: dict[str, str] = {}
    for node in exported.graph.nodes:
        target = node.target
        if node.op != "call_function" or not is_op_overload(target):
            continue

        def tensor_of(item: Any) -> tuple[str, str]:
            if isinstance(item, torch.fx.Node):
                return item.name, onnx_names.get(item.name, "")
            return "", ""

        try:
            call = bind(op_schema(target), tuple(node.args), dict(node.kwargs), tensor_of)
        except (TypeError, ValueError):
            continue
        records[node.name] = call.to_json()
        schemas[call.target] = call.schema
    for onnx_node in all_nodes(program.model.graph):
        record = records.get(fx_node_name(onnx_node.metadata_props))
        if record is not None:
            onnx_node.metadata_props[ATEN_CALL_KEY] = record
    if schemas:
        program.model.metadata_props[ATEN_SCHEMAS_KEY] = dump_schemas(schemas)
