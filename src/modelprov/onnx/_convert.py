"""Model kinds at the edges: the core works on onnx_ir.Model, callers may hold protos."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

import onnx
import onnx_ir as ir

from modelprov._io import load_model
from modelprov._proto_check import read_proto
from modelprov.core._correspond import all_nodes
from modelprov.core.policy import Policies
from modelprov.onnx._duplicates import has_duplicate_keys, merge_duplicate_keys
from modelprov.onnx._ir_check import checked_clone

__all__ = [
    "AnyModel",
    "ModelLike",
    "as_ir",
    "run_on_copy",
    "to_ir_copy",
    "without_duplicate_keys",
]

ModelLike = TypeVar("ModelLike", onnx.ModelProto, ir.Model)
ResultT = TypeVar("ResultT", bound=ir.passes.PassResult)
AnyModel = ir.Model | onnx.ModelProto | str | os.PathLike[str]


def as_ir(model: AnyModel) -> ir.Model:
    """The model as an onnx_ir.Model, for reading (files are read without their weights)."""
    if isinstance(model, ir.Model):
        return model
    if isinstance(model, onnx.ModelProto):
        return read_proto(without_duplicate_keys(model))
    return load_model(model)


def without_duplicate_keys(
    proto: onnx.ModelProto, policies: Policies | None = None
) -> onnx.ModelProto:
    """``proto``, or a copy whose repeated metadata keys are merged by their policies."""
    if not has_duplicate_keys(proto):
        return proto
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    merge_duplicate_keys(copy, policies)
    return copy


def to_ir_copy(model: onnx.ModelProto | ir.Model, policies: Policies | None = None) -> ir.Model:
    """An onnx_ir model the caller may change freely: the input stays untouched.

    Weights are shared with an ``ir.Model`` input (modelprov never writes weights; onnx_ir
    names an initializer's tensor after its value whenever either model is saved, so both
    stay as they were). Tensors held by attributes get their own tensor objects over the same
    data: once folded into an initializer of the copy, they are named when the copy is saved,
    and the input's Constant node must not see that name. A
    ModelProto is copied first: onnx_ir's tensors read from a proto write their name back
    into it (onnxscript's optimizer names Constant values, renaming a value renames its
    initializer), which would change the caller's proto.
    """
    if isinstance(model, ir.Model):
        copy = checked_clone(model)
        _detach_attribute_tensors(copy)
        return copy
    if isinstance(model, onnx.ModelProto):
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        merge_duplicate_keys(copy, policies)
        return read_proto(copy)
    raise TypeError(
        f"expected onnx.ModelProto or onnx_ir.Model, got {type(model).__name__}; "
        "load files with onnx.load or onnx_ir.load first"
    )


def _detach_attribute_tensors(model: ir.Model) -> None:
    """Gives every tensor attribute of ``model`` (graphs, subgraphs, functions) a tensor
    object of its own; an ``ir.Tensor``'s data is shared, a tensor read from a proto gets a
    copy of its proto, other kinds are read into an ``ir.Tensor``."""
    nodes = all_nodes(model.graph)
    for function in model.functions.values():
        nodes.extend(ir.traversal.RecursiveGraphIterator(function))
    tensor_type = ir.AttributeType.TENSOR
    for node in nodes:
        attributes = node.attributes
        # ``Attributes`` is a UserDict: its ``data`` dict iterates without per-item calls.
        data = getattr(attributes, "data", attributes)
        if not data:
            continue
        tensors = [
            (name, attribute) for name, attribute in data.items() if attribute.type == tensor_type
        ]
        for name, attribute in tensors:
            # The value of a TENSOR attribute is its tensor: as_tensor()'s runtime protocol
            # check costs more than the copy.
            tensor = attribute.value
            if isinstance(tensor, ir.serde.TensorProtoTensor):
                # Read from a proto: a copy of the proto is a tensor of its own, cheaper
                # than reading the data into an array.
                proto = onnx.TensorProto()
                proto.CopyFrom(tensor.raw)
                node.attributes[name] = ir.AttrTensor(name, ir.serde.TensorProtoTensor(proto))
                continue
            data = tensor.raw if isinstance(tensor, ir.Tensor) else tensor.numpy()
            own = ir.Tensor(
                data,
                dtype=tensor.dtype,
                shape=tensor.shape,
                name=tensor.name,
                doc_string=tensor.doc_string,
            )
            node.attributes[name] = ir.AttrTensor(name, own)


def run_on_copy(
    pass_: Callable[[ir.Model], ResultT], model: ModelLike, policies: Policies | None = None
) -> tuple[ModelLike, ResultT]:
    """Runs an in-place pass on a copy of ``model``: the copying entry points (optimize,
    functionize, inline) in one place. Returns the changed copy, of the same kind as
    ``model``, and the pass's result; ``model`` itself is never modified. ``policies``
    merge a proto's duplicate metadata keys."""
    result = pass_(to_ir_copy(model, policies))
    if isinstance(model, onnx.ModelProto):
        return ir.to_proto(result.model), result
    return result.model, result
