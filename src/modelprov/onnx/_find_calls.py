"""modelprov.find_calls: the call nodes of an ATen op or module class, with their functions."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, overload

import onnx
import onnx_ir as ir

from modelprov._proto_check import read_proto
from modelprov.core.keys import ATEN_DOMAIN, ATEN_TARGET_KEY, MODULE_CLASS_KEY, MODULE_DOMAIN
from modelprov.onnx._convert import ModelInput, model_input
from modelprov.onnx._wrap import function_name

if TYPE_CHECKING:
    from torch.onnx import ONNXProgram

__all__ = ["find_calls"]


def _matches(function: ir.Function, what: str) -> bool:
    if function.domain == ATEN_DOMAIN:
        target = function.metadata_props.get(ATEN_TARGET_KEY, "")
        wanted = what if "::" in what else what.replace(".", "::", 1)
        if target == wanted or function.name == function_name(wanted):
            return True
        # Without an overload (``aten::linear``) every overload of the op matches.
        return "." not in wanted and target.partition(".")[0] == wanted
    if function.domain == MODULE_DOMAIN:
        cls = function.metadata_props.get(MODULE_CLASS_KEY, "")
        return what in (cls, cls.rpartition(".")[2], function.name)
    return False


@overload
def find_calls(
    model: ir.Model | ONNXProgram | str | os.PathLike[str], what: str
) -> list[tuple[ir.Node, ir.Function]]: ...
@overload
def find_calls(
    model: onnx.ModelProto, what: str
) -> list[tuple[onnx.NodeProto, onnx.FunctionProto]]: ...
def find_calls(
    model: ModelInput, what: str
) -> list[tuple[ir.Node, ir.Function]] | list[tuple[onnx.NodeProto, onnx.FunctionProto]]:
    """Every call of ``what`` with the function it calls, main graph first, then bodies.

    Args:
        model: a functionized model (onnx_ir.Model, onnx.ModelProto, a path, read as an
            onnx_ir.Model, or a torch.onnx.ONNXProgram: its onnx_ir.Model).
        what: an ATen qualified name (``"aten::addmm.default"``, also ``aten.addmm.default``;
            without the overload, ``"aten::linear"``, every overload of the op), or a module
            class (``"GPT2Block"`` or its qualified name). Names are those of the exported
            graph: ``nn.Linear`` is ``aten::linear`` (torch.onnx keeps it undecomposed).

    Returns:
        (call node, function) pairs of the same kind as ``model``.
    """
    model = model_input(model, where="find_calls")
    if isinstance(model, onnx.ModelProto):
        found = find_calls(read_proto(model), what)
        functions = {(f.domain, f.name, f.overload): f for f in model.functions}
        nodes = _proto_nodes(model)
        result: list[tuple[onnx.NodeProto, onnx.FunctionProto]] = []
        for node, function in found:
            proto_function = functions[function.identifier()]
            for candidate in nodes:
                if candidate.name == node.name and candidate.op_type == node.op_type:
                    result.append((candidate, proto_function))
                    break
        return result
    wanted = {key for key, function in model.functions.items() if _matches(function, what)}
    graphs: list[ir.Graph | ir.Function] = [model.graph, *model.functions.values()]
    calls: list[tuple[ir.Node, ir.Function]] = []
    for graph in graphs:
        for node in ir.traversal.RecursiveGraphIterator(graph):
            key = node.op_identifier()
            if key in wanted:
                calls.append((node, model.functions[key]))
    return calls


def _proto_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    nodes = list(model.graph.node)
    for function in model.functions:
        nodes.extend(function.node)
    return nodes
