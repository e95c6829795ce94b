"""Structural anchors on small graphs written in ONNX text: what each rule anchors."""

from __future__ import annotations

import onnx
import onnx_ir as ir

from modelprov.core._walks import all_nodes
from modelprov.onnx.recover._anchors_structure import anchor_by_structure, duplicate_values

HEADER = '<ir_version: 10, opset_import: ["" : 18]>\n'


def _model(text: str) -> ir.Model:
    return ir.from_proto(onnx.parser.parse_model(HEADER + text))


def _anchor(
    old: ir.Model, new: ir.Model, named: dict[str, str], same: tuple[str, ...] = ()
) -> tuple[dict[str, str], dict[str, str]]:
    """Runs the structural anchors from value anchors by name (``named``: new -> old name,
    graph inputs and initializers included) and node anchors by name (``same``: outputs
    whose producers are the old producers of that name, as recover's name stage finds
    them); returns node anchors (new op@index -> old op@index) and value anchors by name."""
    old_nodes, new_nodes = all_nodes(old.graph), all_nodes(new.graph)
    old_values = {v.name: v for n in old_nodes for v in n.outputs}
    old_values.update({v.name: v for v in old.graph.inputs})
    old_values.update(old.graph.initializers)
    new_values = {v.name: v for n in new_nodes for v in n.outputs}
    new_values.update({v.name: v for v in new.graph.inputs})
    new_values.update(new.graph.initializers)
    value_anchors = {new_values[a]: old_values[b] for a, b in named.items()}
    node_anchors: dict[ir.Node, ir.Node] = {}
    for name in same:
        new_node, old_node = new_values[name].producer(), old_values[name].producer()
        assert new_node is not None and old_node is not None
        node_anchors[new_node] = old_node
    taken = set(node_anchors.values())
    anchor_by_structure(
        (old.graph, old_nodes),
        (new.graph, new_nodes),
        duplicate_values(old_nodes),
        node_anchors,
        value_anchors,
        taken,
    )

    def label(node: ir.Node, nodes: list[ir.Node]) -> str:
        return f"{node.op_type}@{nodes.index(node)}"

    return (
        {label(n, new_nodes): label(o, old_nodes) for n, o in node_anchors.items()},
        {n.name or "": o.name or "" for n, o in value_anchors.items()},
    )


def test_a_renamed_chain_anchors_node_by_node() -> None:
    old = _model("g (float[2] x) => (float[2] y) { a = Relu (x)\n b = Neg (a)\n y = Tanh (b) }")
    new = _model("g (float[2] x) => (float[2] y) { p = Relu (x)\n q = Neg (p)\n y = Tanh (q) }")
    nodes, values = _anchor(old, new, {"x": "x", "y": "y"})
    assert nodes == {"Relu@0": "Relu@0", "Neg@1": "Neg@1", "Tanh@2": "Tanh@2"}
    assert values["p"] == "a" and values["q"] == "b"


def test_a_cancelling_transpose_pair_is_seen_through() -> None:
    old = _model("g (float[2,3] x) => (float[2,3] y) { y = Relu (x) }")
    new = _model(
        """g (float[2,3] x) => (float[2,3] y) {
            t = Transpose <perm = [1, 0]> (x)
            u = Transpose <perm = [1, 0]> (t)
            y = Relu (u)
        }"""
    )
    nodes, _ = _anchor(old, new, {"x": "x"})
    assert nodes == {"Relu@2": "Relu@0"}


def test_a_transpose_pair_that_does_not_cancel_is_not() -> None:
    old = _model("g (float[2,2] x) => (float[2,2] y) { y = Relu (x) }")
    new = _model(
        """g (float[2,2] x) => (float[2,2] y) {
            t = Transpose <perm = [1, 0]> (x)
            y = Relu (t)
        }"""
    )
    nodes, _ = _anchor(old, new, {"x": "x"})
    assert nodes == {}


def test_a_fresh_data_input_is_the_old_input_when_the_weight_names_the_node() -> None:
    old = _model(
        """g (float[2,2] x) => (float[2,2] y)
            <float[2,2] w1 = {1, 2, 3, 4}, float[2] b = {1, 2}, float[2,2] w2 = {4, 3, 2, 1}> {
            m = MatMul (x, w1)
            a = Add (m, b)
            y = MatMul (a, w2)
        }"""
    )
    new = _model(
        """g (float[2,2] x) => (float[2,2] y)
            <float[2,2] w1 = {1, 2, 3, 4}, float[2] b = {1, 2}, float[2,2] w2 = {4, 3, 2, 1}> {
            g = Gemm (x, w1, b)
            y = MatMul (g, w2)
        }"""
    )
    nodes, values = _anchor(old, new, {"x": "x", "w1": "w1", "b": "b", "w2": "w2"})
    assert nodes == {"MatMul@1": "MatMul@2"}
    assert values["g"] == "a"  # the Gemm computes what the Add did


def test_constants_anchor_from_their_readers_back() -> None:
    old = _model(
        """g (float[2,4] x) => (float[4,2] y) {
            s = Constant <value = int64[2] {4, 2}> ()
            y = Reshape (x, s)
        }"""
    )
    new = _model(
        """g (float[2,4] x) => (float[4,2] y) {
            k = Constant <value = int64[2] {4, 2}> ()
            y = Reshape (x, k)
        }"""
    )
    nodes, _ = _anchor(old, new, {"x": "x", "y": "y"})
    assert nodes == {"Reshape@1": "Reshape@1", "Constant@0": "Constant@0"}


def test_a_constant_of_other_contents_is_not_anchored() -> None:
    old = _model(
        """g (float[2,4] x) => (float[4,2] y) {
            s = Constant <value = int64[2] {4, 2}> ()
            y = Reshape (x, s)
        }"""
    )
    new = _model(
        """g (float[2,4] x) => (float[4,2] y) {
            k = Constant <value = int64[2] {-1, 2}> ()
            y = Reshape (x, k)
        }"""
    )
    nodes, _ = _anchor(old, new, {"x": "x", "y": "y"})
    assert "Constant@0" not in nodes


def test_duplicates_and_identities_share_one_value() -> None:
    old = _model(
        """g (float[2] x) => (float[2] y) {
            a = Tanh (x)
            b = Tanh (x)
            c = Identity (a)
            y = Add (b, c)
        }"""
    )
    nodes = all_nodes(old.graph)
    duplicates = {k.name: v.name for k, v in duplicate_values(nodes).items()}
    assert duplicates == {"b": "a", "c": "a"}


def test_two_slices_made_one_are_not_the_second() -> None:
    old = _model(
        """g (float[4,8] x) => (float[2,4] y) {
            s = Constant <value = int64[1] {0}> ()
            e = Constant <value = int64[1] {9}> ()
            a0 = Constant <value = int64[1] {0}> ()
            a1 = Constant <value = int64[1] {1}> ()
            t = Constant <value = int64[1] {2}> ()
            r = Slice (x, s, e, a0, t)
            c = Slice (r, s, e, a1, t)
            y = Relu (c)
        }"""
    )
    new = _model(
        """g (float[4,8] x) => (float[2,4] y)
            <int64[2] s = {0, 0}, int64[2] e = {9, 9}, int64[2] a = {0, 1}, int64[2] t = {2, 2}> {
            f = Slice (x, s, e, a, t)
            y = Relu (f)
        }"""
    )
    nodes, values = _anchor(old, new, {"x": "x", "y": "y"}, same=("y",))
    assert nodes == {"Relu@1": "Relu@7"}  # the Slice reads x, where the second read r
    assert values["f"] == "c"  # it computes what the second computed, the first included


def test_a_reshape_of_a_reshape_made_one_computes_the_second() -> None:
    old = _model(
        """g (float[4,8] x) => (float[4,8] y) {
            n = Relu (x)
            s = Constant <value = int64[1] {-1}> ()
            r = Reshape (n, s)
            d = Constant <value = int64[2] {4, 8}> ()
            b = Reshape (r, d)
            y = Tanh (b)
        }"""
    )
    new = _model(
        """g (float[4,8] x) => (float[4,8] y) {
            n = Relu (x)
            d = Constant <value = int64[2] {4, 8}> ()
            f = Reshape (n, d)
            y = Tanh (f)
        }"""
    )
    nodes, values = _anchor(old, new, {"x": "x", "y": "y", "n": "n", "d": "d"})
    assert "Reshape@2" not in nodes  # not the first Reshape (other shape), nor the second
    assert values["f"] == "b"
