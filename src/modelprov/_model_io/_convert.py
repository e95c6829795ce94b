"""Model kinds at the edges: the core works on onnx_ir.Model, callers may hold protos.

Every public entry point taking an ONNX model reads it through :func:`model_input`, the one
place that says which kinds modelprov takes (:data:`ModelInput`): an ``onnx_ir.Model``, an
``onnx.ModelProto``, a path to an ``.onnx`` file, or the ``torch.onnx.ONNXProgram``
``torch.onnx.export`` / ``modelprov.export`` return. Everything else is a UsageError.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, TypeAlias, TypeVar

import onnx
import onnx_ir as ir

from modelprov._model_io._duplicate_keys import has_duplicate_keys, merge_duplicate_keys
from modelprov._model_io._files import load_model, load_model_proto
from modelprov._model_io._ir_check import (
    all_text,
    check_metadata_text,
    checked_clone,
    holder_dicts,
)
from modelprov._model_io._proto_check import is_plain_and_valid, read_proto
from modelprov._model_io._shared_weights import read_sharing_weights, write_sharing_weights
from modelprov.core._policy import Policies
from modelprov.core._walks import TensorAttribute, Walk, nodes_graphs_and_tensors
from modelprov.errors import InvalidModelError, UsageError

if TYPE_CHECKING:
    from torch.onnx import ONNXProgram

__all__ = [
    "ACCEPTED",
    "GRAPH_KINDS",
    "AnyModel",
    "GraphInput",
    "ModelInput",
    "ModelLike",
    "ModelProto",
    "as_ir",
    "graph_input",
    "model_input",
    "run_on_copy",
    "run_on_walked_copy",
    "to_ir_copy",
    "without_duplicate_keys",
]

ModelProto: TypeAlias = onnx.ModelProto
"""``onnx.ModelProto``, for the passes' signatures: the passes and the core import no onnx
(a ruff rule, TID251, keeps it so), only this edge does."""
ModelLike = TypeVar("ModelLike", onnx.ModelProto, ir.Model)
ResultT = TypeVar("ResultT", bound=ir.passes.PassResult)
ModelInput: TypeAlias = "ir.Model | onnx.ModelProto | str | os.PathLike[str] | ONNXProgram"
"""What every public entry point taking an ONNX model accepts."""
AnyModel = ModelInput

ACCEPTED = (
    "an onnx_ir.Model, an onnx.ModelProto, a path to an .onnx file or the "
    "torch.onnx.ONNXProgram that modelprov.export returns"
)
"""The kinds of :data:`ModelInput`, as error messages name them."""
_ACCEPTED_IN_MEMORY = (
    "an onnx_ir.Model, an onnx.ModelProto or the torch.onnx.ONNXProgram that "
    "modelprov.export returns"
)


def model_input(
    model: object,
    *,
    where: str,
    path_as: Literal["ir", "proto"] | None = "ir",
    load_weights: bool = False,
    check_text: bool = True,
) -> ir.Model | onnx.ModelProto:
    """``model`` as an onnx_ir.Model or an onnx.ModelProto, never a copy of one given.

    An ONNXProgram stands for its ``model`` (an onnx_ir.Model, shared, not copied). A path
    is read as ``path_as`` says (an onnx_ir.Model whose external weights stay on disk, or
    a ModelProto), weights loaded only when ``load_weights``; ``path_as=None`` refuses
    paths (where a path cannot hold the caller's nodes). Anything else raises UsageError
    naming ``where`` (the function and argument), the type and the kinds accepted.
    An onnx_ir.Model whose metadata is not all text is a MetadataError naming where, unless
    ``check_text`` is false (recover repairs it; audit reports it); a proto or a file is
    checked when it is read.
    """
    if isinstance(model, onnx.ModelProto):
        return model
    found = model if isinstance(model, ir.Model) else _onnx_program_model(model)
    if found is not None:
        if check_text:
            check_metadata_text(found, where)
        return found
    if isinstance(model, str | os.PathLike) and path_as is not None:
        if path_as == "ir":
            return load_model(model, load_weights=load_weights)
        return load_model_proto(model, load_weights=load_weights)
    kind = type(model)
    accepted = ACCEPTED if path_as is not None else _ACCEPTED_IN_MEMORY
    if isinstance(model, str | os.PathLike):
        accepted += " (a path cannot hold the node; load the model once and pass it)"
    raise UsageError(f"{where}: got {kind.__module__}.{kind.__qualname__}; pass {accepted}")


def _onnx_program_model(model: object) -> ir.Model | None:
    """The onnx_ir.Model of a ``torch.onnx.ONNXProgram`` (torch is not imported for this:
    without torch loaded, nothing is one)."""
    torch_onnx = sys.modules.get("torch.onnx")
    program_type = getattr(torch_onnx, "ONNXProgram", None)
    if program_type is None or not isinstance(model, program_type):
        return None
    inner = model.model
    if not isinstance(inner, ir.Model):
        raise UsageError(
            f"this torch.onnx.ONNXProgram holds {type(inner).__name__}, not an onnx_ir.Model"
        )
    return inner


def as_ir(model: ModelInput, *, where: str = "model") -> ir.Model:
    """The model as an onnx_ir.Model, for reading (files are read without their weights)."""
    found = model_input(model, where=where)
    if isinstance(found, ir.Model):
        return found
    return read_proto(without_duplicate_keys(found))


GraphInput: TypeAlias = "ir.Graph | ir.Function | onnx.GraphProto | onnx.FunctionProto"
"""A graph or a function body, as onnx_ir objects or their protos."""
GRAPH_KINDS = (ir.Graph, ir.Function, onnx.GraphProto, onnx.FunctionProto)
"""The types of :data:`GraphInput`, for ``isinstance``."""


def graph_input(graph_or_function: GraphInput, *, where: str) -> ir.Graph | ir.Function:
    """An onnx_ir Graph or Function as it is; a GraphProto or FunctionProto read by onnx_ir
    (InvalidModelError naming ``where`` when it cannot read it; the proto is not modified)."""
    if not isinstance(graph_or_function, onnx.GraphProto | onnx.FunctionProto):
        return graph_or_function
    kind = type(graph_or_function).__name__
    try:
        return (
            ir.serde.deserialize_graph(graph_or_function)
            if isinstance(graph_or_function, onnx.GraphProto)
            else ir.serde.deserialize_function(graph_or_function)
        )
    except Exception as error:
        raise InvalidModelError(
            f"{where}: onnx_ir cannot read this {kind} ({type(error).__name__}: "
            f"{' '.join(str(error).split())[:200]})"
        ) from None


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


def to_ir_copy(
    model: onnx.ModelProto | ir.Model,
    policies: Policies | None = None,
    *,
    check_text: str | None = None,
) -> ir.Model:
    """An onnx_ir model the caller may change freely: the input stays untouched.

    With ``check_text`` (where the model was given), an ``ir.Model`` whose metadata is not
    all text is a MetadataError naming it (``check_metadata_text``), checked on the copy:
    onnx_ir's clone copies every holder's metadata as it is, and the copy was just made,
    so reading it is cheaper than reading the model again. When the clone fails, the
    model's own check comes first, as it would before cloning.

    Weights are shared with an ``ir.Model`` input (modelprov never writes weights; onnx_ir
    names an initializer's tensor after its value whenever either model is saved, so both
    stay as they were). Tensors held by attributes get their own tensor objects over the same
    data: once folded into an initializer of the copy, they are named when the copy is saved,
    and the input's Constant node must not see that name. A
    ModelProto is copied first: onnx_ir's tensors read from a proto write their name back
    into it (onnxscript's optimizer names Constant values, renaming a value renames its
    initializer), which would change the caller's proto.
    """
    return _walked_ir_copy(model, policies, check_text=check_text)[0]


def _walked_ir_copy(
    model: onnx.ModelProto | ir.Model,
    policies: Policies | None = None,
    *,
    check_text: str | None = None,
) -> tuple[ir.Model, Walk | None]:
    """``to_ir_copy``, and ``nodes_and_graphs(copy.graph)`` when making the copy walked it
    (an ``ir.Model`` input), else None."""
    if isinstance(model, ir.Model):
        try:
            copy = checked_clone(model)
        except InvalidModelError:
            if check_text is not None:
                check_metadata_text(model, check_text)
            raise
        text, walked = _detach_attribute_tensors(copy, check_text=check_text is not None)
        if check_text is not None:
            check_metadata_text(copy, check_text, known_text=text)
        return copy, walked
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    merge_duplicate_keys(copy, policies)
    return read_proto(copy), None


def _detach_attribute_tensors(model: ir.Model, *, check_text: bool = False) -> tuple[bool, Walk]:
    """Gives every tensor attribute of ``model`` (graphs, subgraphs, functions) a tensor
    object of its own; an ``ir.Tensor``'s data is shared, a tensor read from a proto gets a
    copy of its proto, other kinds are read into an ``ir.Tensor``. Returns whether all the
    model's metadata is text (with ``check_text``: the holders ``check_metadata_text``
    reads, in the same walk; else True) and ``nodes_and_graphs(model.graph)``, which the
    walk found on its way."""
    holders = [model.metadata_props]
    tensors: list[TensorAttribute] = []
    main, main_tensors = nodes_graphs_and_tensors(model.graph)
    walks = [main]
    tensors += main_tensors
    for function in model.functions.values():
        walk, function_tensors = nodes_graphs_and_tensors(function.graph)
        walks.append(walk)
        tensors += function_tensors
    if check_text:
        for body_nodes, graphs in walks:
            holders += holder_dicts(body_nodes, graphs)
    for node, name, attribute in tensors:
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
        # A plain ir.Tensor's raw array is shared; a subclass's raw object (torch's
        # Parameter in a TorchTensor) is read through its own numpy(), which detaches it.
        data = tensor.raw if type(tensor) is ir.Tensor else tensor.numpy()
        own = ir.Tensor(
            data,
            dtype=tensor.dtype,
            shape=tensor.shape,
            name=tensor.name,
            doc_string=tensor.doc_string,
        )
        node.attributes[name] = ir.AttrTensor(name, own)
    return not check_text or all_text(holders), main


def run_on_copy(
    pass_: Callable[[ir.Model], ResultT],
    model: ModelInput,
    policies: Policies | None = None,
    *,
    where: str,
) -> tuple[ir.Model | onnx.ModelProto, ResultT]:
    """Runs an in-place pass on a copy of ``model``: the copying entry points (optimize,
    functionize, inline) in one place. Returns the changed copy and the pass's result: a
    ModelProto for a ModelProto or a path (weights loaded), else an onnx_ir.Model (also for
    an ONNXProgram); ``model`` itself is never modified. A proto's weights are not copied
    (shared, see ``_shared_weights``) unless it repeats metadata keys, which ``policies``
    merge in a copy."""
    return run_on_walked_copy(lambda copy, _walked: pass_(copy), model, policies, where=where)


def run_on_walked_copy(
    pass_: Callable[[ir.Model, Walk | None], ResultT],
    model: ModelInput,
    policies: Policies | None = None,
    *,
    where: str,
) -> tuple[ir.Model | onnx.ModelProto, ResultT]:
    """``run_on_copy`` for a pass that also takes ``nodes_and_graphs(copy.graph)`` when
    making the copy walked it (None when it did not), so that it need not walk it again.
    Whichever way the copy is made, its model-local functions were checked (a proto's by
    the proto checks, an onnx_ir.Model's by ``checked_clone``)."""
    # An onnx_ir model's metadata is checked on its copy (to_ir_copy), not read twice.
    found = model_input(model, where=where, path_as="proto", load_weights=True, check_text=False)
    # The usual proto passes the checks and repeats no key: one walk says both.
    plain = isinstance(found, onnx.ModelProto) and is_plain_and_valid(found)
    if isinstance(found, onnx.ModelProto) and (plain or not has_duplicate_keys(found)):
        # Read in place, weights shared with the caller's proto and never written into it.
        copy = read_proto(found, check=not plain)
        shared = read_sharing_weights(copy)
        result = pass_(copy, None)
        return write_sharing_weights(result.model, shared), result
    result = pass_(*_walked_ir_copy(found, policies, check_text=where))
    if isinstance(found, onnx.ModelProto):
        return ir.to_proto(result.model), result
    return result.model, result
