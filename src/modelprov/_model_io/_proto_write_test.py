"""write_message writes exactly protobuf's own serialization."""

from __future__ import annotations

import io

import onnx
from onnx import TensorProto, helper

from modelprov._model_io._proto_write import write_message


def _model() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"], name=f"relu{i}", doc_string="é" * i)
        for i in range(300)
    ]
    for node in nodes[::7]:
        helper.set_metadata_props(node, {"pkg.torch.stack": "x" * 200, "k": "ü"})
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [2, "n"])],
        [helper.make_tensor_value_info("v300", TensorProto.FLOAT, [2, "n"])],
        initializer=[helper.make_tensor("w", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])],
        value_info=[helper.make_tensor_value_info("v5", TensorProto.FLOAT, None)],
    )
    function = helper.make_function(
        "pkg.test", "F", ["a"], ["b"], [helper.make_node("Neg", ["a"], ["b"])], []
    )
    model = helper.make_model(graph, functions=[function], producer_name="test")
    model.model_version = 0  # set to its default: present, so serialized
    helper.set_model_props(model, {"modelprov.sources": "[" + "1," * 5000 + "1]"})
    return model


def _written(message: onnx.ModelProto) -> bytes:
    stream = io.BytesIO()
    length = write_message(message, stream)
    assert length == len(stream.getvalue())
    return stream.getvalue()


def test_same_bytes_as_protobuf() -> None:
    model = _model()
    assert _written(model) == model.SerializeToString()


def test_same_bytes_with_an_empty_graph_and_no_graph() -> None:
    model = onnx.ModelProto(ir_version=10)
    assert _written(model) == model.SerializeToString()
    model.graph.SetInParent()
    assert _written(model) == model.SerializeToString()


def test_unknown_fields_survive() -> None:
    extra = b"\xa8\x1f\x05"  # field 501 (unknown to onnx), varint 5
    for where in ("model", "graph"):
        model = _model()
        target = model if where == "model" else model.graph
        target.MergeFromString(extra)
        expected = model.SerializeToString()
        assert extra in expected
        assert _written(model) == expected
