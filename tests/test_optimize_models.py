"""modelprov.optimize on real exports: full provenance, same graph and numerics as onnxscript."""

from __future__ import annotations

import collections

import numpy as np
import onnx
import onnx_ir as ir
import onnxscript.optimizer
import pytest

import modelprov
from modelprov.audit._diff import dynamic_nodes
from tests._checks import region_violations, run
from tests.conftest import example_inputs

MODELS = ["double_transpose", "cnn", "transformer_encoder", "gpt2"]


def _inputs(name: str) -> list[np.ndarray]:
    return [tensor.numpy() for tensor in example_inputs(name)]


@pytest.fixture(scope="module", params=MODELS)
def optimized(request):
    from tests.conftest import plain_export

    base = plain_export(request.param)
    before = ir.to_proto(base).SerializeToString()
    proto = ir.to_proto(base)
    proto_before = proto.SerializeToString()
    optimized = modelprov.optimize(base)  # the very object: it must stay as it was
    assert ir.to_proto(base).SerializeToString() == before
    ir.to_proto(optimized)  # saving the result names its folded constants' tensors ...
    assert ir.to_proto(base).SerializeToString() == before  # ... not the input's
    modelprov.optimize(proto)  # a ModelProto too (onnx_ir writes tensor names into protos)
    assert proto.SerializeToString() == proto_before
    return request.param, base, optimized


def test_every_node_has_sources_and_recall_is_one(optimized):
    name, base, ours = optimized
    report = modelprov.diff(base, ours)
    assert report.nodes_without_sources == ()
    for recall in (
        report.fx_nodes,
        report.fx_nodes_dyn,
        report.source_lines,
        report.source_lines_dyn,
        report.module_paths,
        report.module_paths_dyn,
    ):
        assert recall.value == 1.0, (name, recall.lost)
    assert report.fx_nodes_dyn.total > 0


def _independent_copy(model: ir.Model) -> ir.Model:
    """A copy sharing no tensor with ``model``: onnxscript names the tensors of the model it
    optimizes, and ``ir.Model.clone`` shares them with the cached export."""
    return ir.from_proto(ir.to_proto(model))


def test_onnxscript_alone_loses_provenance(optimized):
    name, base, _ = optimized
    theirs = onnxscript.optimizer.optimize(_independent_copy(base))
    report = modelprov.diff(base, theirs)
    assert report.fx_nodes.value < 1.0, name


def test_same_graph_as_onnxscript(optimized):
    _name, base, ours = optimized
    theirs = onnxscript.optimizer.optimize(_independent_copy(base))
    assert collections.Counter(n.op_type for n in ours.graph) == collections.Counter(
        n.op_type for n in theirs.graph
    )
    assert [n.op_type for n in ours.graph] == [n.op_type for n in theirs.graph]


def test_outputs_equal_unoptimized(optimized):
    name, base, ours = optimized
    inputs = _inputs(name)
    for expected, actual in zip(run(base, inputs), run(ours, inputs), strict=True):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


def test_input_model_is_not_modified(optimized):
    _name, base, _ = optimized
    assert "modelprov.sources" not in base.metadata_props
    assert all("modelprov.sources" not in node.metadata_props for node in base.graph)


def test_sources_lie_in_the_nodes_dataflow_region(optimized):
    """Each source of a node feeds what the node computes (checked numerically)."""
    name, base, ours = optimized
    violations, checked = region_violations(base, ours, _inputs(name))
    assert violations == []
    assert checked >= len(ours.graph) // 2


def test_dynamic_nodes_counted_like_anchors(optimized):
    _name, base, _ = optimized
    dynamic = dynamic_nodes(base.graph)
    assert dynamic and all(node.op_type != "Identity" for node in dynamic)


def test_metadata_bytes_do_not_grow(optimized):
    """Nothing grows but the lossless record of merged scopes (policy scope_lists: a line per
    absorbed source's name_scopes / class_hierarchy), which is itself bounded by the export's
    values of those keys."""
    name, base, ours = optimized
    scope_keys = ("pkg.torch.onnx.name_scopes", "pkg.torch.onnx.class_hierarchy")

    def size(model) -> int:
        nodes = sum(len(k) + len(v) for n in model.graph for k, v in n.metadata_props.items())
        values = sum(
            len(k) + len(v)
            for n in model.graph
            for value in n.outputs
            for k, v in value.metadata_props.items()
        )
        return nodes + values + sum(len(k) + len(v) for k, v in model.metadata_props.items())

    def note_bytes(model) -> int:  # the lines after the first, with their line breaks
        return sum(
            len(line) + 1
            for n in model.graph
            for key in scope_keys
            for line in n.metadata_props.get(key, "").split("\n")[1:]
        )

    def scope_bytes(model) -> int:
        return sum(len(n.metadata_props.get(key, "")) for n in model.graph for key in scope_keys)

    notes = note_bytes(ours)
    assert size(ours) - notes <= size(base), name
    assert notes <= scope_bytes(base), name


def test_optimizing_twice_keeps_every_source(optimized):
    """A second optimize (onnxscript may fuse more) keeps every source; metadata stays bounded."""
    _name, base, ours = optimized
    again = modelprov.optimize(ours)
    first = {s.id for n in ours.graph for s in modelprov.sources(ours, n)}
    second = {s.id for n in again.graph for s in modelprov.sources(again, n)}
    assert first == second
    assert modelprov.diff(base, again).fx_nodes.value == 1.0
    table = again.metadata_props.get("modelprov.sources", "")
    assert len(table) <= len(ours.metadata_props.get("modelprov.sources", "")) + 64


def test_per_pass_tracking_gives_the_same_graph_and_names_each_pass(optimized):
    name, base, ours = optimized
    model = _independent_copy(base)
    tracked = modelprov.OptimizeProvenancePass(per_pass=True)
    result = tracked(model)
    assert [n.op_type for n in model.graph] == [n.op_type for n in ours.graph]
    assert modelprov.diff(base, model).fx_nodes.value == 1.0
    names = [step.name for step in result.steps]
    assert "onnxscript.optimizer: fold constants (1)" in names
    assert "onnxscript.optimizer: common subexpression elimination" in names
    assert sum(step.removed_nodes for step in result.steps) >= len(base.graph) - len(model.graph)
    violations, _ = region_violations(base, model, _inputs(name))
    assert violations == []


_USER_FUNCTION = """
<ir_version: 10, opset_import: ["" : 18, "user" : 1]>
g (float[2,8] x) => (float[2,8] y) {
    a = Relu (x)
    y = user.block (a)
}
<domain: "user", opset_import: ["" : 18]>
block (p) => (q) {
    s = Sigmoid (p)
    q = Mul (s, p)
}
"""


def _fx(entries, name: str, line: int) -> None:  # type: ignore[no-untyped-def]
    entries.add(key="pkg.torch.onnx.fx_node", value=f"%{name} : [num_users=1] = x")
    entries.add(key="pkg.torch.onnx.stack_trace", value=f'File "/m.py", line {line}, in f')


def test_user_function_bodies_keep_their_provenance_and_diff_counts_them() -> None:
    proto = onnx.parser.parse_model(_USER_FUNCTION)
    _fx(proto.graph.node[0].metadata_props, "relu", 1)
    _fx(proto.graph.node[1].metadata_props, "block", 2)
    _fx(proto.functions[0].node[0].metadata_props, "sigmoid", 3)
    _fx(proto.functions[0].node[1].metadata_props, "mul", 4)
    assert set(modelprov.audit(proto).fx_nodes) == {"relu", "block", "sigmoid", "mul"}
    theirs = onnxscript.optimizer.optimize(ir.from_proto(proto))
    assert modelprov.diff(proto, theirs).fx_nodes.value < 1.0  # body sources lost: visible
    ours = modelprov.optimize(proto)
    report = modelprov.diff(proto, ours)
    assert report.fx_nodes.total == 4 and report.fx_nodes.value == 1.0
    fx = {n.op_type: {s.fx_node for s in modelprov.sources(ours, n)} for n in ours.graph.node}
    assert fx["Sigmoid"] >= {"sigmoid"} and fx["Mul"] >= {"mul"}
    assert [n.op_type for n in ours.graph.node] == [n.op_type for n in theirs.graph]
