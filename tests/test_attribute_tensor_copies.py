"""Copies of an in-memory export keep every attribute tensor serializable.

torch.onnx's in-memory model holds its weights as tensors over torch Parameters (which
require grad). Once such a tensor sits in a node attribute (a folded constant, or a caller's
own graph), the copy modelprov works on must still serialize, and the caller's model must
not change.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
import torch

from modelprov._model_io._convert import to_ir_copy


def _parameter_tensors() -> list[ir.TensorProtocol]:
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    program = torch.onnx.export(module, (torch.randn(2, 3),), dynamo=True, optimize=False)
    assert program is not None
    tensors = [
        value.const_value
        for value in program.model.graph.initializers.values()
        if value.const_value is not None
    ]
    assert tensors, "the export holds its weights as initializers"
    return tensors


@pytest.fixture(scope="module")
def parameter_tensors() -> list[ir.TensorProtocol]:
    return _parameter_tensors()


def test_attribute_tensors_over_parameters_survive_the_copy(
    parameter_tensors: list[ir.TensorProtocol],
) -> None:
    for tensor in parameter_tensors:
        _check_copy_of_constant(tensor)


def _check_copy_of_constant(tensor: ir.TensorProtocol) -> None:
    output = ir.Value(name="constant_out")
    node = ir.Node(
        "", "Constant", [], attributes=[ir.AttrTensor("value", tensor)], outputs=[output]
    )
    graph = ir.Graph([], [output], nodes=[node], opset_imports={"": 18})
    model = ir.Model(graph, ir_version=10)

    copy = to_ir_copy(model)
    proto = ir.serde.serialize_model(copy)

    copied = copy.graph.node(0).attributes["value"].as_tensor()
    assert copied is not tensor
    np.testing.assert_array_equal(copied.numpy(), tensor.numpy())
    np.testing.assert_array_equal(
        ir.serde.deserialize_tensor(proto.graph.node[0].attribute[0].t).numpy(), tensor.numpy()
    )
    assert model.graph.node(0).attributes["value"].value is tensor


def test_a_function_body_referring_to_a_tensor_attribute_is_copied() -> None:
    # Constant(value=@v) in a function body: the reference holds no tensor to copy.
    reference = ir.Node(
        "", "Constant", [], [ir.RefAttr("value", "v", ir.AttributeType.TENSOR)], num_outputs=1
    )
    body = ir.Graph([], list(reference.outputs), nodes=[reference], opset_imports={"": 18})
    function = ir.Function(
        "local", "F", graph=body, attributes=[ir.Attr("v", ir.AttributeType.TENSOR, None)]
    )
    call = ir.Node(
        "local", "F", [], [ir.AttrTensor("v", ir.tensor([1.0], name="t"))], num_outputs=1
    )
    graph = ir.Graph(
        [], list(call.outputs), nodes=[call], opset_imports={"": 18, "local": 1}, name="main"
    )
    model = ir.Model(graph, ir_version=10, functions=[function])

    copy = to_ir_copy(model)

    copied = next(iter(copy.functions.values())).graph.node(0).attributes["value"]
    assert copied.is_ref() and copied.ref_attr_name == "v"
    assert copy.graph.node(0).attributes["v"].value is not call.attributes["v"].value
