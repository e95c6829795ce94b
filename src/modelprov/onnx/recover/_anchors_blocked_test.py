"""Tests for _anchors_blocked: blocked Convs paired with the original Convs by structure."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from modelprov.onnx.recover._anchors_blocked import anchor_blocked_convs

_DOMAIN = "com.microsoft.nchwc"


def _weight(graph: ir.Graph, name: str, shape: tuple[int, ...]) -> ir.Value:
    value = ir.Value(name=name, shape=ir.Shape(shape), type=ir.TensorType(ir.DataType.FLOAT))
    value.const_value = ir.tensor(np.ones(shape, np.float32), name=name)
    graph.register_initializer(value)
    return value


def _input() -> ir.Value:
    return ir.Value(name="x", shape=ir.Shape([1, 8, 4, 4]), type=ir.TensorType(ir.DataType.FLOAT))


def _original() -> tuple[ir.Graph, list[ir.Node]]:
    """x -> Conv 3x3 -> Relu -> Conv 1x1 (stride 1) -> out, and Relu -> Conv 1x1 (stride 2)."""
    x = _input()
    graph = ir.Graph([x], [], nodes=[], opset_imports={"": 20})
    first = ir.node(
        "Conv",
        [x, _weight(graph, "w0", (8, 8, 3, 3))],
        attributes={"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1]},
    )
    relu = ir.node("Relu", first.outputs)
    second = ir.node(
        "Conv",
        [relu.outputs[0], _weight(graph, "w1", (8, 8, 1, 1))],
        attributes={"kernel_shape": [1, 1], "pads": [0, 0, 0, 0], "strides": [1, 1]},
    )
    shortcut = ir.node(
        "Conv",
        [relu.outputs[0], _weight(graph, "w2", (8, 8, 1, 1))],
        attributes={"kernel_shape": [1, 1], "pads": [0, 0, 0, 0], "strides": [2, 2]},
    )
    nodes = [first, relu, second, shortcut]
    for index, node in enumerate(nodes):
        node.outputs[0].name = f"v{index}"
        graph.append(node)
    graph.outputs.extend([second.outputs[0], shortcut.outputs[0]])
    return graph, nodes


def _blocked(activation: str) -> tuple[ir.Graph, list[ir.Node], ir.Value]:
    """The same in a blocked layout: the first Conv with its activation fused; the value
    between the blocked Convs is fresh. Returns the fresh value too."""
    x = _input()
    graph = ir.Graph([x], [], nodes=[], opset_imports={"": 20, _DOMAIN: 1})
    reorder = ir.node("ReorderInput", [x], domain=_DOMAIN)
    first = ir.node(
        "Conv",
        [reorder.outputs[0], _weight(graph, "r0", (16, 8, 3, 3))],
        attributes={
            "kernel_shape": [3, 3],
            "pads": [1, 1, 1, 1],
            "strides": [1, 1],
            "activation": activation,
        },
        domain=_DOMAIN,
    )
    shortcut = ir.node(
        "Conv",
        [first.outputs[0], _weight(graph, "r2", (16, 8, 1, 1))],
        attributes={"kernel_shape": [1, 1], "pads": [0, 0, 0, 0], "strides": [2, 2]},
        domain=_DOMAIN,
    )
    second = ir.node(
        "Conv",
        [first.outputs[0], _weight(graph, "r1", (16, 8, 1, 1))],
        attributes={"kernel_shape": [1, 1], "pads": [0, 0, 0, 0], "strides": [1, 1]},
        domain=_DOMAIN,
    )
    nodes = [reorder, first, shortcut, second]
    for index, node in enumerate(nodes):
        node.outputs[0].name = f"blocked_{index}"
        graph.append(node)
    return graph, nodes, first.outputs[0]


def test_the_fresh_value_between_blocked_convs_is_what_the_original_convs_read() -> None:
    _, old_nodes = _original()
    _, new_nodes, fresh = _blocked("Relu")
    new_input, old_input = new_nodes[0].inputs[0], old_nodes[0].inputs[0]
    assert new_input is not None and old_input is not None
    anchors = {new_input: old_input}
    anchor_blocked_convs(new_nodes, anchors)
    assert anchors[fresh] is old_nodes[1].outputs[0]  # the Relu's output


def test_a_fused_activation_the_original_does_not_have_pairs_nothing() -> None:
    _, old_nodes = _original()
    _, new_nodes, fresh = _blocked("Sigmoid")
    new_input, old_input = new_nodes[0].inputs[0], old_nodes[0].inputs[0]
    assert new_input is not None and old_input is not None
    anchors = {new_input: old_input}
    anchor_blocked_convs(new_nodes, anchors)
    assert fresh not in anchors


def test_nothing_anchors_without_an_anchored_input() -> None:
    _, new_nodes, _ = _blocked("Relu")
    anchors: dict[ir.Value, ir.Value] = {}
    anchor_blocked_convs(new_nodes, anchors)
    assert anchors == {}
