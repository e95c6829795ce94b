"""modelprov.audit on real exports and on hand-made broken models."""

from __future__ import annotations

import json

import onnx
import onnx_ir as ir
import pytest
from onnx import helper

import modelprov
from modelprov.audit import AuditReport, FunctionUse, InvalidMetadata, audit
from modelprov.errors import UsageError


def test_same_report_for_proto_ir_and_path(export_of, tmp_path):
    model = export_of("transformer_encoder")
    proto = ir.to_proto(model)
    path = tmp_path / "model.onnx"
    onnx.save(proto, path)
    from_proto, from_ir, from_path = audit(proto), audit(model), audit(str(path))
    assert from_proto == from_path
    assert from_proto.to_dict() == from_ir.to_dict()
    assert isinstance(from_proto, AuditReport)
    assert from_proto.nodes == len(proto.graph.node)
    assert from_proto.nodes_without_sources == ()
    assert "layers.0.self_attn" in from_proto.module_paths
    assert all(item.fraction == 1.0 for item in from_proto.key_coverage)


def test_json_is_versioned_and_round_trips(export_of):
    report = audit(export_of("double_transpose"))
    text = report.to_json()
    assert isinstance(text, str)  # JSON, as the README says; the dict is to_dict()
    document = json.loads(text)
    assert document["format"] == "modelprov.audit" and document["version"] == 1
    assert document == report.to_dict()
    diff_report = modelprov.diff(export_of("double_transpose"), export_of("double_transpose"))
    assert json.loads(diff_report.to_json()) == diff_report.to_dict()
    assert diff_report.to_dict()["format"] == "modelprov.diff"


def test_coverage_and_nodes_without_sources(export_of):
    model = export_of("double_transpose")
    nodes = list(model.graph)
    nodes[0].metadata_props.clear()
    del nodes[1].metadata_props["pkg.torch.onnx.stack_trace"]
    report = audit(model)
    assert report.nodes_without_sources == (nodes[0].name,)
    coverage = {item.key: item for item in report.key_coverage}
    assert coverage["pkg.torch.onnx.stack_trace"].nodes == 3
    assert coverage["pkg.torch.onnx.stack_trace"].fraction == pytest.approx(3 / 5)
    assert coverage["namespace"].nodes == 4


def test_largest_values_name_node_and_key(export_of):
    model = export_of("double_transpose")
    node = list(model.graph)[2]
    node.metadata_props["user.blob"] = "x" * 5000
    report = audit(model)
    top = report.largest_values[0]
    assert (top.where, top.key, top.bytes) == (node.name, "user.blob", 5000)
    assert report.metadata_bytes_by_scope["nodes"] >= 5000 + len("user.blob")


def _invalid_model() -> onnx.ModelProto:
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    for key, value in [("a", "1"), ("a", "2"), ("bad.value", "VALUEPLACE"), ("KEYPLACE", "v")]:
        entry = node.metadata_props.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    data = proto.SerializeToString()
    data = data.replace(b"VALUEPLACE", b"\xff\xfeVALUEPLA").replace(b"KEYPLACE", b"\xffKEYPLAC")
    broken = onnx.ModelProto()
    broken.ParseFromString(data)
    return broken


def test_invalid_metadata_found_on_the_raw_proto(tmp_path):
    proto = _invalid_model()
    report = audit(proto)
    assert report.invalid_metadata == (
        InvalidMetadata("relu", "a", "duplicate key (2 entries)"),
        InvalidMetadata("relu", "bad.value", "value is not valid UTF-8"),
        InvalidMetadata("relu", "\\xffKEYPLAC", "key is not valid UTF-8"),
    )
    assert report.nodes == 1 and report.nodes_without_sources == ()
    coverage = {item.key: item.nodes for item in report.key_coverage}
    assert coverage == {"a": 1, "bad.value": 1, "\\xffKEYPLAC": 1}
    path = tmp_path / "bad.onnx"
    path.write_bytes(proto.SerializeToString())
    assert audit(str(path)).invalid_metadata == report.invalid_metadata
    assert "relu: key 'a': duplicate key (2 entries)" in report.to_text()


def _model_with_overloads() -> onnx.ModelProto:
    def function(overload: str, op: str) -> onnx.FunctionProto:
        body = [helper.make_node(op, ["x"], ["y"])]
        made = helper.make_function(
            "pkg.torch.aten", "aten_abs", ["x"], ["y"], body, [helper.make_opsetid("", 18)]
        )
        made.overload = overload
        return made

    calls = []
    for index, overload in enumerate(["default", "default", "out"]):
        call = helper.make_node(
            "aten_abs",
            ["x" if index == 0 else f"t{index}"],
            [f"t{index + 1}"],
            domain="pkg.torch.aten",
            name=f"call{index}",
        )
        call.overload = overload
        calls.append(call)
    graph = helper.make_graph(
        calls,
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("t3", onnx.TensorProto.FLOAT, [2])],
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("pkg.torch.aten", 1)],
        functions=[function("default", "Abs"), function("out", "Abs")],
    )


def test_functions_and_overloads_with_call_counts():
    proto = _model_with_overloads()
    expected = (
        FunctionUse("pkg.torch.aten", "aten_abs", "default", nodes=1, calls=2),
        FunctionUse("pkg.torch.aten", "aten_abs", "out", nodes=1, calls=1),
    )
    assert audit(proto).functions == expected
    assert audit(ir.from_proto(proto)).functions == expected
    text = audit(proto).to_text()
    assert "  pkg.torch.aten::aten_abs (overload 'out'): 1 nodes, 1 calls" in text


def test_rejects_other_types():
    with pytest.raises(UsageError, match=r"audit: got builtins.int; pass an onnx_ir.Model"):
        audit(42)  # type: ignore[arg-type]
