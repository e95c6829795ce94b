"""External attribute tensors: read beside the model, embedded only while saving."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

from modelprov._model_io._external_tensors import embedded_external_tensors, set_base_dir
from modelprov.errors import OutputError


def _external(values: np.ndarray) -> onnx.TensorProto:
    tensor = numpy_helper.from_array(values, "k")
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "w.bin"), ("offset", "0"), ("length", str(values.nbytes))):
        tensor.external_data.add(key=key, value=value)
    return tensor


def _model_with_a_function_constant(folder: Path, values: np.ndarray) -> ir.Model:
    values.tofile(folder / "w.bin")
    body = [
        helper.make_node("Constant", [], ["k"], value=_external(values)),
        helper.make_node("Add", ["x", "k"], ["y"]),
    ]
    function = helper.make_function("local", "f", ["x"], ["y"], body, [helper.make_opsetid("", 18)])
    graph = helper.make_graph(
        [helper.make_node("f", ["x"], ["y"], domain="local")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    proto = helper.make_model(
        graph,
        functions=[function],
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("local", 1)],
    )
    return ir.from_proto(proto)


def _constant(model: ir.Model) -> ir.TensorProtocol:
    (function,) = model.functions.values()
    value = next(iter(function)).attributes["value"].value
    assert value is not None
    return value  # type: ignore[no-any-return]


def test_a_function_bodys_constant_is_read_beside_the_model(tmp_path: Path) -> None:
    values = np.array([0.0, 1.0, 2.0], np.float32)
    model = _model_with_a_function_constant(tmp_path, values)
    set_base_dir(model, str(tmp_path))
    constant = _constant(model)
    assert isinstance(constant, ir.ExternalTensor) and constant.base_dir == str(tmp_path)
    np.testing.assert_array_equal(constant.numpy(), values)


def test_embedding_is_undone_after_the_save(tmp_path: Path) -> None:
    values = np.array([0.0, 1.0, 2.0], np.float32)
    model = _model_with_a_function_constant(tmp_path, values)
    set_base_dir(model, str(tmp_path))
    before = _constant(model)
    with embedded_external_tensors(model, limit=1 << 20):
        inside = _constant(model)
        assert not isinstance(inside, ir.ExternalTensor)
        proto = ir.to_proto(model)
    assert _constant(model) is before
    tensor = proto.functions[0].node[0].attribute[0].t
    assert tensor.data_location == TensorProto.DEFAULT and not tensor.external_data
    np.testing.assert_array_equal(numpy_helper.to_array(tensor), values)
    too_small = embedded_external_tensors(model, limit=4)
    with pytest.raises(OutputError, match="more than an ONNX file can embed"), too_small:
        pass
    assert _constant(model) is before
