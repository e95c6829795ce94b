"""Seed 000: the double transpose keeps both source lines after modelprov.export(optimize=True)."""

from __future__ import annotations

import warnings

import onnx
import pytest

import modelprov
from modelprov._cli import _examples


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    module, args = _examples.double_transpose()
    path = tmp_path_factory.mktemp("seed000") / "double_transpose.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = modelprov.export(module, args, path, input_names=["k"], verbose=False)
    return program.model, path


def test_one_transpose_remains_with_both_sources(exported):
    model, _ = exported
    transposes = [node for node in model.graph if node.op_type == "Transpose"]
    assert len(transposes) == 1
    node = transposes[0]
    found = modelprov.sources(model, node)
    assert [source.fx_node for source in found] == ["transpose", "transpose_1"]
    trace = node.metadata_props["pkg.torch.onnx.stack_trace"]
    assert "k = k.transpose(1, 2)" in trace
    assert "k = k.transpose(-2, -1)" in trace
    lines = {source.line for source in found}
    assert len(lines) == 2


def test_namespace_follows_the_output(exported):
    """The merged transpose is laid out where its output is computed: the second transpose."""
    model, _ = exported
    node = next(node for node in model.graph if node.op_type == "Transpose")
    namespace = node.metadata_props["namespace"]
    by_fx = {source.fx_node: source for source in modelprov.sources(model, node)}
    assert namespace == by_fx["transpose_1"].metadata["namespace"]
    assert namespace != by_fx["transpose"].metadata["namespace"]
    assert namespace.split("/")[0].endswith("DoubleTranspose")


def test_saved_file_carries_the_same_provenance(exported):
    _model, path = exported
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    node = next(node for node in proto.graph.node if node.op_type == "Transpose")
    assert [source.fx_node for source in modelprov.sources(proto, node)] == [
        "transpose",
        "transpose_1",
    ]


def test_export_equals_optimize_of_plain_export(exported):
    model, _ = exported
    module, args = _examples.double_transpose()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = modelprov.export(module, args, optimize=False, input_names=["k"], verbose=False)
    again = modelprov.optimize(plain.model)
    assert [dict(n.metadata_props) for n in again.graph] == [
        dict(n.metadata_props) for n in model.graph
    ]
