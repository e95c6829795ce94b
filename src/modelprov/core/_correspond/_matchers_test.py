"""Each matcher of the correspondence engine on its own, and the claim phase shared by both."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import onnx
import onnx_ir as ir
import onnx_ir.passes.common as common

from modelprov.core._correspond import Snapshot, correspond
from modelprov.core._correspond._anchors_identity import match_by_identity
from modelprov.core._correspond._anchors_named import match_by_anchors
from modelprov.core._correspond._claims import assign_claims
from modelprov.core._walks import all_graphs, all_nodes

HEADER = '<ir_version: 10, opset_import: ["" : 18]>\n'


def _model(text: str) -> ir.Model:
    model = ir.from_proto(onnx.parser.parse_model(HEADER + text))
    for index, node in enumerate(model.graph):
        node.name = f"n{index}"
    return model


def _names(nodes: object) -> list[str]:
    return sorted(node.name or "" for node in nodes)  # type: ignore[attr-defined]


def test_identity_pairs_surviving_objects_and_reads_replacements_off_consumers() -> None:
    model = _model(
        """g (float[2] x) => (float[2] y) {
            a = Relu (x)
            b = Relu (x)
            y = Add (a, b)
        }"""
    )
    before = Snapshot.of(model.graph)
    common.CommonSubexpressionEliminationPass()(model)
    matching = match_by_identity(before, all_graphs(model.graph), all_nodes(model.graph))
    kept_relu, add = list(model.graph)
    assert matching.same == {kept_relu: kept_relu, add: add}
    assert _names(matching.removed) == ["n1"]
    assert matching.new_nodes == []
    assert matching.values_persist
    (removed,) = matching.removed
    assert matching.replaced == {kept_relu.outputs[0]: [removed.outputs[0]]}


def test_identity_makes_a_node_left_dead_by_an_in_place_replacement_claimable() -> None:
    model = _model(
        """g (float[2] x) => (float[2] y) {
            a = Neg (x)
            y = Relu (a)
        }"""
    )
    neg, relu = list(model.graph)
    before = Snapshot.of(model.graph)
    fused = ir.node("Abs", [neg.inputs[0]])
    model.graph.insert_before(relu, fused)
    relu.replace_input_with(0, fused.outputs[0])
    matching = match_by_identity(before, all_graphs(model.graph), all_nodes(model.graph))
    assert neg in matching.same
    assert neg in matching.claimable
    assert relu not in matching.claimable
    change = assign_claims(before, all_nodes(model.graph), matching)
    assert change.absorbed[fused] == {neg}


def test_named_anchors_pair_rebuilt_nodes_and_their_values() -> None:
    original = _model(
        """g (float[2] x) => (float[2] y) {
            a = Neg (x)
            b = Relu (a)
            y = Abs (b)
        }"""
    )
    rebuilt = ir.from_proto(ir.to_proto(original))
    neg, relu, abs_ = list(original.graph)
    new_neg, new_relu, new_abs = list(rebuilt.graph)
    rebuilt.graph.remove(new_relu, safe=False)
    new_abs.replace_input_with(0, new_neg.outputs[0])
    before = Snapshot.of(original.graph)
    anchors = {new_neg: neg, new_abs: abs_}
    after = all_nodes(rebuilt.graph)
    matching = match_by_anchors(before, rebuilt.graph, after, anchors)
    assert not matching.values_persist
    assert matching.same == anchors
    assert matching.removed == [relu]
    assert matching.claimable == {relu}
    assert matching.replaced[new_neg.outputs[0]] == [neg.outputs[0], relu.outputs[0]]
    change = assign_claims(before, after, matching)
    assert change.absorbed == {new_neg: {relu}}
    direct = correspond(before, rebuilt.graph, node_anchors=anchors)
    assert direct.absorbed == change.absorbed
    assert direct.eliminated == change.eliminated == []


def test_the_engine_loads_no_torch_jax_or_onnxscript() -> None:
    code = "import sys, modelprov.core._correspond; "
    code += "print(sorted(m for m in ('torch', 'jax', 'onnxscript') if m in sys.modules))"
    src = pathlib.Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(src)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert result.stdout.strip() == "[]"
