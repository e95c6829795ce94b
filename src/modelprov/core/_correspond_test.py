"""The correspondence engine on small graphs written in ONNX text."""

from __future__ import annotations

from collections.abc import Callable

import onnx
import onnx_ir as ir
import onnx_ir.passes.common as common

from modelprov.core._correspond import Change, Snapshot, correspond
from modelprov.core._provenance import Provenance


def _model(text: str) -> ir.Model:
    """A model from ONNX text, its nodes named n0, n1, ... in order."""
    model = ir.from_proto(onnx.parser.parse_model(text))
    for index, node in enumerate(model.graph):
        node.name = f"n{index}"
    return model


def _track(model: ir.Model, step: Callable[[ir.Model], object]) -> tuple[Provenance, Change]:
    provenance = Provenance.read(model)
    before = Snapshot.of(model.graph)
    step(model)
    change = correspond(before, model.graph)
    provenance.apply(change, model.graph)
    return provenance, change


def _ids(provenance: Provenance, node: ir.Node) -> list[str]:
    return provenance.table.ids(provenance.node_sources[node])


HEADER = '<ir_version: 10, opset_import: ["" : 18]>\n'


def test_cse_merges_the_duplicate_into_the_kept_node() -> None:
    model = _model(
        HEADER
        + """g (float[2] x) => (float[2] y) {
            a = Relu (x)
            b = Relu (x)
            y = Add (a, b)
        }"""
    )
    provenance, change = _track(model, common.CommonSubexpressionEliminationPass())
    relu = next(node for node in model.graph if node.op_type == "Relu")
    assert _ids(provenance, relu) == ["node:n0", "node:n1"]
    assert [node.name for node in change.removed] == ["n1"]


def test_constant_folding_goes_to_the_consumer() -> None:
    model = _model(
        HEADER
        + """g (float[2] x) => (float[2] y) {
            c = Constant <value = float[2] {1.0, 2.0}> ()
            d = Neg (c)
            y = Add (x, d)
        }"""
    )
    import onnxscript.optimizer

    provenance, _change = _track(model, onnxscript.optimizer.optimize_ir)
    (add,) = list(model.graph)
    assert _ids(provenance, add) == ["node:n0", "node:n1", "node:n2"]


def test_dead_nodes_are_reported_as_eliminated() -> None:
    model = _model(
        HEADER
        + """g (float[2] x) => (float[2] y) {
            y = Relu (x)
            unused = Neg (x)
        }"""
    )
    provenance, change = _track(model, common.RemoveUnusedNodesPass())
    assert [node.name for node in change.eliminated] == ["n1"]
    assert provenance.table.ids(provenance.lost) == ["node:n1"]


def test_identity_removal_moves_value_scoped_sources_to_the_producer() -> None:
    model = _model(
        HEADER
        + """g (float[2] x) => (float[2] y) {
            r = Relu (x)
            y = Identity (r)
        }"""
    )
    provenance, _ = _track(model, common.IdentityEliminationPass())
    (relu,) = list(model.graph)
    assert _ids(provenance, relu) == ["node:n0", "node:n1"]
    assert provenance.table.ids(provenance.value_sources[relu.outputs[0]]) == [
        "node:n0",
        "node:n1",
    ]
