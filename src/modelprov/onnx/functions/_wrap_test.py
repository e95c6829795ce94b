"""Wrapper: regions become call nodes; equal regions share one function; the model
computes what it computed; a region a path leaves and re-enters is not convex."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
from hypothesis import given, settings
from hypothesis import strategies as st

from modelprov.onnx.functions._wrap import Region, Wrapper

_OPS = ("Relu", "Neg", "Abs", "Sigmoid", "Tanh")


def _chain(ops: list[str]) -> ir.Model:
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([3]))
    value, nodes = x, []
    for index, op in enumerate(ops):
        node = ir.node(op, [value], name=f"n{index}")
        node.outputs[0].name = f"v{index}"
        node.outputs[0].type = ir.TensorType(ir.DataType.FLOAT)
        node.outputs[0].shape = ir.Shape([3])
        nodes.append(node)
        value = node.outputs[0]
    graph = ir.Graph([x], [value], nodes=nodes, opset_imports={"": 18, "pkg.test": 1}, name="g")
    return ir.Model(graph, ir_version=10)


def _run(model: ir.Model, x: np.ndarray) -> np.ndarray:
    data = ir.to_proto(model).SerializeToString()
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]  # type: ignore[no-any-return]


def _region(nodes: list[ir.Node], key: str) -> Region:
    return Region(
        nodes=nodes,
        inputs=[nodes[0].inputs[0]],
        input_names=["input_0"],
        domain="pkg.test",
        name="Block",
        key=key,
    )


@settings(max_examples=15, deadline=None)
@given(st.lists(st.sampled_from(_OPS), min_size=1, max_size=3), st.integers(0, 2))
def test_equal_regions_share_one_function_and_the_model_computes_the_same(
    block: list[str], gap: int
) -> None:
    ops = [*block, *(["Neg"] * gap), *block]
    model = _chain(ops)
    x = np.array([-1.5, 0.0, 2.0], np.float32)
    expected = _run(model, x)
    nodes = list(model.graph)
    first, second = nodes[: len(block)], nodes[len(block) + gap :]
    wrapper = Wrapper(model)
    calls = [wrapper.wrap(_region(first, "a"), {}), wrapper.wrap(_region(second, "b"), {})]
    assert [call.name for call in calls] == ["call_a", "call_b"]
    assert len(wrapper.functions) == 1
    assert calls[0].op_identifier() == calls[1].op_identifier()
    assert [node.op_type for node in model.graph].count("Block") == 2
    assert len(model.graph) == 2 + gap
    np.testing.assert_allclose(_run(model, x), expected, rtol=1e-6)


def test_a_region_that_a_path_leaves_and_reenters_is_not_convex() -> None:
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([3]))
    a = ir.node("Relu", [x], name="a")
    b = ir.node("Neg", [a.outputs[0]], name="b")
    c = ir.node("Add", [a.outputs[0], b.outputs[0]], name="c")
    graph = ir.Graph([x], c.outputs, nodes=[a, b, c], opset_imports={"": 18}, name="g")
    wrapper = Wrapper(ir.Model(graph, ir_version=10))
    order = {node: index for index, node in enumerate(graph)}
    assert not wrapper.is_convex([a, c], order)  # a -> b -> c, b outside
    assert wrapper.is_convex([a, b], order)
    assert wrapper.is_convex([b, c], order)
    assert wrapper.outputs_of([a, b]) == [a.outputs[0], b.outputs[0]]
    assert wrapper.outputs_of([a, b, c]) == [c.outputs[0]]
