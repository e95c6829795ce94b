"""A model read over the caller's proto shares its weights and never writes into it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import onnx_ir as ir
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import modelprov
from modelprov._model_io._shared_weights import read_sharing_weights, write_sharing_weights


def _model(sizes: list[int], named_constant: bool) -> onnx.ModelProto:
    """x + w0 + w1 + ... (each w an initializer of ``sizes[i]`` floats, seeded), then a
    Constant node (its tensor named when ``named_constant``) and a Mul by it."""
    rng = np.random.default_rng(len(sizes))
    width = max(sizes)
    nodes, initializers, previous = [], [], "x"
    for index, size in enumerate(sizes):
        weight = np.zeros(width, np.float32)
        weight[:size] = rng.standard_normal(size, dtype=np.float32)
        initializers.append(onnx.numpy_helper.from_array(weight, f"w{index}"))
        nodes.append(onnx.helper.make_node("Add", [previous, f"w{index}"], [f"s{index}"]))
        previous = f"s{index}"
    constant = onnx.numpy_helper.from_array(np.full(width, 2.0, np.float32))
    if named_constant:
        constant.name = "two"
    nodes.append(onnx.helper.make_node("Constant", [], ["c"], value=constant))
    nodes.append(onnx.helper.make_node("Mul", [previous, "c"], ["y"]))
    for position, node in enumerate(nodes):
        node.name = f"n{position}"
        node.metadata_props.add(key="pkg.torch.onnx.stack_trace", value=f"line {position}")
    graph = onnx.helper.make_graph(
        nodes,
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [width])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [width])],
        initializers,
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])


@settings(max_examples=15, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 40), min_size=1, max_size=4),
    named_constant=st.booleans(),
)
def test_optimize_leaves_the_proto_as_it_was_and_writes_what_a_copy_gives(
    sizes: list[int], named_constant: bool
) -> None:
    proto = _model(sizes, named_constant)
    before = proto.SerializeToString()
    optimized = modelprov.optimize(proto)
    assert proto.SerializeToString() == before
    # The same bytes as the model optimized from a copy of the proto, read and written
    # by onnx_ir (which renames the copy's tensors, names and all).
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    expected = ir.to_proto(modelprov.optimize(ir.from_proto(copy)))
    assert optimized.SerializeToString() == expected.SerializeToString()


def test_tensors_read_the_callers_protos_and_keep_renames_to_themselves() -> None:
    proto = _model([5, 7], named_constant=True)
    before = proto.SerializeToString()
    model = ir.from_proto(proto)
    shared = read_sharing_weights(model)
    initializers = list(model.graph.initializers.values())
    # Not copies: each tensor reads the very TensorProto of the caller's model.
    for value, tensor_proto in zip(initializers, proto.graph.initializer, strict=True):
        assert isinstance(value.const_value, ir.serde.TensorProtoTensor)
        assert value.const_value.raw is tensor_proto
    constant = next(node for node in model.graph if node.op_type == "Constant")
    assert constant.attributes["value"].as_tensor().raw is proto.graph.node[2].attribute[0].t
    assert not shared.any_renamed()
    initializers[0].name = "renamed"
    constant.attributes["value"].as_tensor().name = None
    assert shared.any_renamed()
    assert proto.SerializeToString() == before
    written = write_sharing_weights(model, shared)
    assert sorted(tensor.name for tensor in written.graph.initializer) == ["renamed", "w1"]
    assert not written.graph.node[2].attribute[0].t.HasField("name")
    assert proto.SerializeToString() == before


_PEAK_CHILD = textwrap.dedent(
    """
    import gc, resource, sys
    import numpy as np, onnx, onnx.helper
    import modelprov

    def peak_bytes():
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024

    def model(count, size):
        # x + big0 + big1 + ...; weights written into the model tensor by tensor (building
        # them costs one tensor more than they hold).
        float_, names = onnx.TensorProto.FLOAT, ["x"] + [f"b{i}" for i in range(count)]
        nodes = [
            onnx.helper.make_node("Add", [names[i], f"big{i}"], [names[i + 1]])
            for i in range(count)
        ]
        graph = onnx.helper.make_graph(
            nodes,
            "g",
            [onnx.helper.make_tensor_value_info("x", float_, [size])],
            [onnx.helper.make_tensor_value_info(names[-1], float_, [size])],
        )
        proto = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
        for index in range(count):
            tensor = proto.graph.initializer.add()
            tensor.name, tensor.data_type = f"big{index}", float_
            tensor.dims.append(size)
            tensor.raw_data = np.full(size, index + 1, np.float32).tobytes()
        return proto

    count, size = int(sys.argv[1]), int(sys.argv[2])
    modelprov.optimize(model(1, 4))  # libraries loaded before
    proto = model(count, size)
    gc.collect()
    before = peak_bytes()
    optimized = modelprov.optimize(proto)
    assert len(optimized.graph.initializer) == count
    print(peak_bytes() - before)
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="reads the peak from resource.getrusage")
def test_optimize_of_a_proto_holds_its_weights_once_besides_the_output() -> None:
    """The peak memory of optimize(ModelProto) grows by about the weights (the output's
    copy), not twice that (a copy of the input, then the output)."""
    count, size = 8, 3_000_000  # 96 MB of weights, in tensors of 12 MB
    weights = count * size * 4
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_CHILD, str(count), str(size)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    grown = int(done.stdout.split()[-1])
    # Building the weights peaked at 1 + 1/8 of them; shared: the output's copy (1) plus
    # one tensor's bytes read at a time; a copy of the input would add 1 more.
    assert grown < 1.25 * weights, f"peak grew by {grown / weights:.2f}x the weights"
