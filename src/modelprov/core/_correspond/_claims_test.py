"""The claim phase on its own, step by step, on graphs changed in place as passes change
them: fusion (step 2), constant folding (step 3), a rule emitting several nodes (step 4)
and dead code, which nobody claims."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir

from modelprov.core._correspond import Snapshot
from modelprov.core._correspond._anchors_identity import match_by_identity
from modelprov.core._correspond._claims import assign_claims
from modelprov.core._correspond._graph import Change
from modelprov.core._walks import all_graphs, all_nodes

HEADER = '<ir_version: 10, opset_import: ["" : 18]>\n'


def _model(text: str) -> ir.Model:
    model = ir.from_proto(onnx.parser.parse_model(HEADER + text))
    for index, node in enumerate(model.graph):
        node.name = f"n{index}"
    return model


def _claims(before: Snapshot, model: ir.Model) -> Change:
    after = all_nodes(model.graph)
    return assign_claims(before, after, match_by_identity(before, all_graphs(model.graph), after))


def _replace(graph: ir.Graph, old: ir.Node, new: ir.Node) -> None:
    graph.insert_before(old, new)
    ir.convenience.replace_all_uses_with(old.outputs, new.outputs, replace_graph_outputs=True)


def test_a_fused_node_claims_every_node_it_replaced() -> None:
    model = _model(
        """g (float[2,3] x, float[3,4] w, float[4] b) => (float[2,4] y) {
            a = MatMul (x, w)
            y = Add (a, b)
        }"""
    )
    matmul, add = list(model.graph)
    before = Snapshot.of(model.graph)
    gemm = ir.node("Gemm", [*matmul.inputs, add.inputs[1]], name="fused")
    _replace(model.graph, add, gemm)
    model.graph.remove([add, matmul], safe=True)
    change = _claims(before, model)
    assert change.absorbed == {gemm: {matmul, add}}
    assert change.new_nodes == [gemm] and change.eliminated == []
    assert change.replaced == {gemm.outputs[0]: [add.outputs[0]]}


def test_a_reader_of_a_folded_constant_claims_what_computed_it() -> None:
    model = _model(
        """g (float[2] x) => (float[2] y) {
            c = Constant <value = float[2] {1.0, 2.0}> ()
            d = Neg (c)
            y = Add (x, d)
        }"""
    )
    constant, neg, add = list(model.graph)
    before = Snapshot.of(model.graph)
    folded = ir.Value(name="d_folded", const_value=ir.tensor(np.array([-1.0, -2.0], np.float32)))
    model.graph.register_initializer(folded)
    add.replace_input_with(1, folded)
    model.graph.remove([neg, constant], safe=True)
    change = _claims(before, model)
    assert change.absorbed == {add: {constant, neg}}
    assert change.same == {add: add} and change.eliminated == []


def test_new_nodes_of_one_rule_share_the_claims_of_their_cluster() -> None:
    model = _model(
        """g (float[2] x) => (float[2] y) {
            y = Relu (x)
        }"""
    )
    (relu,) = list(model.graph)
    before = Snapshot.of(model.graph)
    first = ir.node("Neg", [relu.inputs[0]], name="first")
    second = ir.node("Neg", [first.outputs[0]], name="second")
    model.graph.insert_before(relu, first)
    _replace(model.graph, relu, second)
    model.graph.remove(relu, safe=True)
    change = _claims(before, model)
    assert change.absorbed == {first: {relu}, second: {relu}}
    assert change.unanchored == []


def test_a_removed_node_nobody_reads_is_dead_code() -> None:
    model = _model(
        """g (float[2] x) => (float[2] y) {
            unused = Relu (x)
            y = Neg (x)
        }"""
    )
    relu, neg = list(model.graph)
    before = Snapshot.of(model.graph)
    model.graph.remove(relu, safe=True)
    change = _claims(before, model)
    assert change.eliminated == [relu]
    assert change.absorbed == {} and change.same == {neg: neg}
