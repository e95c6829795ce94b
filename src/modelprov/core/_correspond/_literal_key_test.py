"""literal_key on Constant nodes read from protos: the key read off the proto's fields is the
key of the tensor's public reading (dtype, shape, tobytes), on generated tensors of every
element type and of both storages (raw_data and the typed fields)."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import onnx_ir as ir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelprov.core._correspond import literal_key

_NUMPY_TYPES = [
    np.float32,
    np.float64,
    np.float16,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.bool_,
]


def _public_key(node: ir.Node) -> tuple[object, ...] | None:
    """The key as the tensor's public API reads it (what literal_key promises)."""
    ((name, attr),) = node.attributes.items()
    tensor = attr.value
    dims = tuple(tensor.shape.numpy())
    if math.prod(dims) > 64:
        return None
    return (name, tensor.dtype, dims, tensor.tobytes())


def _constant(proto: onnx.TensorProto) -> ir.Node:
    node = onnx.helper.make_node("Constant", [], ["c"], value=proto)
    graph = onnx.helper.make_graph(
        [node], "g", [], [onnx.helper.make_value_info("c", onnx.TypeProto())]
    )
    model = ir.from_proto(
        onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    )
    (found,) = model.graph
    assert type(found.attributes["value"].value) is ir.serde.TensorProtoTensor
    return found


@st.composite
def _tensor_protos(draw: st.DrawFn) -> onnx.TensorProto:
    dtype = draw(st.sampled_from(_NUMPY_TYPES))
    shape = draw(st.lists(st.integers(0, 5), max_size=3))
    size = math.prod(shape)
    raw = draw(
        st.binary(
            min_size=size * np.dtype(dtype).itemsize, max_size=size * np.dtype(dtype).itemsize
        )
    )
    array: np.ndarray = (
        np.frombuffer(raw, dtype=np.uint8).view(dtype).reshape(shape)
        if size
        else np.zeros(shape, dtype)
    )
    if dtype is np.bool_:
        array = array.astype(np.uint8).astype(np.bool_)
    proto = onnx.numpy_helper.from_array(array)  # raw_data
    if draw(st.booleans()):  # the typed fields instead (float_data, int32_data, ...)
        typed = onnx.helper.make_tensor(
            "", proto.data_type, shape, array.flatten().tolist(), raw=False
        )
        proto = typed
    return proto


@settings(max_examples=300, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_tensor_protos())
def test_a_proto_constants_key_is_its_public_readings(proto: onnx.TensorProto) -> None:
    node = _constant(proto)
    assert literal_key(node) == _public_key(node)


def test_large_proto_constants_have_no_key_and_equal_small_ones_share_it() -> None:
    large = _constant(onnx.numpy_helper.from_array(np.zeros(65, np.float32)))
    assert literal_key(large) is None
    raw = _constant(onnx.numpy_helper.from_array(np.array([1.5, -2.0], np.float32)))
    typed = _constant(onnx.helper.make_tensor("", onnx.TensorProto.FLOAT, [2], [1.5, -2.0]))
    assert literal_key(raw) == literal_key(typed) is not None
    other = _constant(onnx.numpy_helper.from_array(np.array([1.5, -2.5], np.float32)))
    assert literal_key(other) != literal_key(raw)
