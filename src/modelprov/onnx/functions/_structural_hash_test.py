"""structural_hash: renaming and reordering invariance, attribute and constant sensitivity."""

from __future__ import annotations

import onnx
import onnx_ir as ir

from modelprov.onnx.functions._structural_hash import hash_and_labels, node_labels, structural_hash

TEXT = """
<ir_version: 10, opset_import: ["" : 20]>
g (float[2,3] x) => (float[3,2] y) {
    s = Constant <value = float[1] {2.0}> ()
    a = Mul (x, s)
    b = Relu (x)
    c = Add (a, b)
    y = Transpose <perm = [1, 0]> (c)
}
"""


def _model(text: str = TEXT) -> ir.Model:
    return ir.from_proto(onnx.parser.parse_model(text))


def test_invariant_under_renaming_and_reordering() -> None:
    renamed = TEXT.replace(" a ", " p ").replace("(a,", "(p,").replace(" b ", " q ")
    renamed = renamed.replace(", b)", ", q)").replace("x", "inp").replace("inp)", "inp)")
    reordered = _model(renamed)
    mul, relu = reordered.graph.node(1), reordered.graph.node(2)
    reordered.graph.remove(relu)
    reordered.graph.insert_before(mul, relu)
    for position, node in enumerate(reordered.graph):
        node.name = f"other_{position}"
        node.metadata_props["k"] = "v"
    assert structural_hash(reordered) == structural_hash(_model())


def test_sensitive_to_attributes_constants_and_ops() -> None:
    base = structural_hash(_model())
    assert structural_hash(_model(TEXT.replace("perm = [1, 0]", "perm = [0, 1]"))) != base
    assert structural_hash(_model(TEXT.replace("{2.0}", "{3.0}"))) != base
    assert structural_hash(_model(TEXT.replace("Relu", "Sigmoid"))) != base
    assert structural_hash(_model(TEXT.replace("Add (a, b)", "Add (b, a)"))) != base


def test_functions_hash_their_bodies_and_attribute_names() -> None:
    value = ir.Value(name="u")
    node = ir.Node("", "Relu", [value])
    graph = ir.Graph([value], node.outputs, nodes=[node], opset_imports={"": 20})
    function = ir.Function("d", "f", "", graph=graph, attributes={})
    digest = structural_hash(function)
    assert len(digest) == 64
    function.attributes["dim0"] = ir.Attr("dim0", ir.AttributeType.INT, None)
    assert structural_hash(function) != digest


def test_hash_and_labels_agree_with_the_separate_functions() -> None:
    graph = ir.from_onnx_text(
        """
        <ir_version: 10, opset_import: ["" : 18]>
        g (float[2] x) => (float[2] y) {
            a = Relu(x)
            y = Add(a, x)
        }
        """
    ).graph
    function = ir.Function("pkg.test", "f", "", graph=graph, attributes=[])
    digest, labels = hash_and_labels(function)
    assert digest == structural_hash(function)
    assert labels == node_labels(function)


def test_protos_hash_like_their_onnx_ir_forms() -> None:
    import onnx

    proto = onnx.parser.parse_model(
        """
        <ir_version: 10, opset_import: ["" : 20, "local" : 1]>
        g (float[2] x) => (float[2] y) { y = local.f (x) }
        <domain: "local", opset_import: ["" : 20]>
        f (a) => (b) { b = Relu (a) }
        """
    )
    before = proto.SerializeToString()
    model = ir.from_proto(proto)
    assert structural_hash(proto) == structural_hash(model) == structural_hash(model.graph)
    assert structural_hash(proto.graph) == structural_hash(model.graph)
    function = next(iter(model.functions.values()))
    assert structural_hash(proto.functions[0]) == structural_hash(function)
    assert proto.SerializeToString() == before
