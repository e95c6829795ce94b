"""recover: a tool's output that dropped every node's metadata gets each node's sources
back; a model that computes something else is refused; the inputs are never modified."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from modelprov._cli._examples import optimized_export_bytes
from modelprov.errors import CorrespondenceError
from modelprov.onnx._lookup import node_sources
from modelprov.onnx.recover._recover import recover, recover_with_report


def _original() -> onnx.ModelProto:
    return onnx.load_from_string(optimized_export_bytes("mlp"))


def _stripped(proto: onnx.ModelProto, rename: bool) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    del copy.metadata_props[:]
    for index, node in enumerate(copy.graph.node):
        del node.metadata_props[:]
        if rename:
            node.name = f"tool_{index}"
    for info in [*copy.graph.input, *copy.graph.output, *copy.graph.value_info]:
        del info.metadata_props[:]
    return copy


@pytest.mark.parametrize("rename", [False, True])
def test_every_node_gets_its_sources_back(rename: bool) -> None:
    original = _original()
    optimized = _stripped(original, rename)
    kept = (original.SerializeToString(), optimized.SerializeToString())
    recovered, report = recover_with_report(original, optimized)
    assert isinstance(recovered, onnx.ModelProto)
    assert (original.SerializeToString(), optimized.SerializeToString()) == kept
    before = [sorted(s.id for s in found) for _, found in node_sources(ir.from_proto(original))]
    after = [sorted(s.id for s in found) for _, found in node_sources(ir.from_proto(recovered))]
    assert after == before
    assert report.nodes == len(original.graph.node)
    assert report.unattributed == () and report.lost_sources == ()
    assert report.correspondence.startswith("computed")


def test_a_model_computing_something_else_is_refused() -> None:
    original = _original()
    other = _stripped(original, rename=False)
    for tensor in other.graph.initializer:
        array = onnx.numpy_helper.to_array(tensor)
        if array.dtype == np.float32 and array.size > 1:
            tensor.CopyFrom(onnx.numpy_helper.from_array(array + 1.0, tensor.name))
    with pytest.raises(CorrespondenceError):
        recover(original, other)


def test_an_onnx_ir_model_comes_back_as_one() -> None:
    original = ir.from_proto(_original())
    recovered = recover(original, ir.from_proto(_stripped(_original(), rename=True)))
    assert isinstance(recovered, ir.Model)
    assert all(found for _, found in node_sources(recovered))
