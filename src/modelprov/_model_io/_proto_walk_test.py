"""The raw-proto walk visits nodes in onnx_ir's recursive order, subgraphs included."""

from __future__ import annotations

import onnx
import onnx_ir as ir
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from modelprov._model_io._proto_walk import graph_nodes, subgraphs


def _branch(name: str, depth: int, width: int) -> onnx.GraphProto:
    nodes = [
        helper.make_node("Identity", ["x"], [f"{name}_{i}"], name=f"{name}_{i}")
        for i in range(width)
    ]
    output = nodes[-1].output[0]
    if depth:
        nodes.append(
            helper.make_node(
                "If",
                ["c"],
                [f"{name}_if"],
                name=f"{name}_if",
                then_branch=_branch(f"{name}t", depth - 1, width),
                else_branch=_branch(f"{name}e", depth - 1, width),
            )
        )
        output = f"{name}_if"
    return helper.make_graph(
        nodes, name, [], [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)]
    )


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 3), st.integers(1, 3))
def test_graph_nodes_follow_onnx_irs_recursive_order(depth: int, width: int) -> None:
    graph = _branch("g", depth, width)
    walked = [node.name for node in graph_nodes(graph)]
    expected = [
        node.name for node in ir.traversal.RecursiveGraphIterator(ir.serde.deserialize_graph(graph))
    ]
    assert walked == expected
    assert len(walked) == len(set(walked))


def test_subgraphs_are_in_attribute_order() -> None:
    node = helper.make_node(
        "If", ["c"], ["y"], then_branch=_branch("t", 0, 1), else_branch=_branch("e", 0, 1)
    )
    in_order = [attribute.g.name for attribute in node.attribute]
    assert sorted(in_order) == ["e", "t"]
    assert [graph.name for graph in subgraphs(node)] == in_order
    assert list(subgraphs(helper.make_node("Relu", ["x"], ["y"]))) == []
