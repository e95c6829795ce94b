"""all_nodes / all_graphs walk nested subgraphs in onnx_ir's recursive order."""

from __future__ import annotations

import onnx
import onnx_ir as ir
from onnx import TensorProto, helper

from modelprov.core._walks import all_graphs, all_nodes, nodes_and_graphs, nodes_graphs_and_tensors


def _branch(name: str, depth: int) -> onnx.GraphProto:
    nodes = [helper.make_node("Identity", ["x"], [f"{name}_o"], name=f"{name}_id")]
    output = f"{name}_o"
    if depth:
        nodes.append(
            helper.make_node(
                "If",
                ["c"],
                [f"{name}_if"],
                then_branch=_branch(f"{name}t", depth - 1),
                else_branch=_branch(f"{name}e", depth - 1),
                name=f"{name}_if",
            )
        )
        output = f"{name}_if"
    return helper.make_graph(
        nodes, name, [], [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)]
    )


def _nested_model() -> ir.Model:
    graph = helper.make_graph(
        [
            helper.make_node(
                "If", ["c"], ["y"], then_branch=_branch("a", 2), else_branch=_branch("b", 2)
            ),
            helper.make_node("Identity", ["y"], ["z"], name="last"),
        ],
        "main",
        [
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]),
        ],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
    )
    return ir.from_proto(helper.make_model(graph))


def test_all_nodes_follows_the_recursive_iterator() -> None:
    model = _nested_model()
    assert all_nodes(model.graph) == list(ir.traversal.RecursiveGraphIterator(model.graph))
    assert len(all_nodes(model.graph)) == 22


def test_all_graphs_lists_each_nodes_subgraphs_when_reached() -> None:
    model = _nested_model()
    expected = [model.graph]
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        for attribute in node.attributes.values():
            if attribute.type == ir.AttributeType.GRAPH:
                expected.append(attribute.as_graph())
    graphs = all_graphs(model.graph)
    assert len(graphs) == 15
    assert all(a is b for a, b in zip(graphs, expected, strict=True))


def test_nodes_graphs_and_tensors_walks_like_nodes_and_graphs() -> None:
    model = _nested_model()
    inner = model.graph.node(0).attributes["then_branch"].as_graph()
    constant = ir.node("Constant", [], {"value": ir.tensor([1.0])})
    inner.append(constant)
    walk, tensors = nodes_graphs_and_tensors(model.graph)
    assert walk == nodes_and_graphs(model.graph)
    assert tensors == [(constant, "value", constant.attributes["value"])]
