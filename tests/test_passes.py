"""modelprov's passes behave as onnx-ir expects: truthful ``modified``, results returned, not
kept, options as frozen fields, and the per-pass optimizer graph-for-graph equal to
onnxscript's ``optimize_ir``."""

from __future__ import annotations

import dataclasses

import onnx
import onnx_ir as ir
import onnxscript.optimizer
import pytest

import modelprov
from modelprov.onnx._functionize import FunctionizePass
from modelprov.onnx._inline import InlinePass
from modelprov.onnx._optimize import OptimizeProvenancePass
from tests.conftest import fresh_export, plain_export


def _graph_text(model: ir.Model) -> str:
    """The model as ONNX text without any metadata: what a graph comparison should see."""
    copy = model.clone()
    copy.metadata_props.clear()
    for graph in (copy.graph, *copy.functions.values()):
        for node in ir.traversal.RecursiveGraphIterator(graph):
            node.metadata_props.clear()
            for value in node.outputs:
                value.metadata_props.clear()
    for value in (*copy.graph.inputs, *copy.graph.initializers.values()):
        value.metadata_props.clear()
    return onnx.printer.to_text(ir.to_proto(copy))


class _CountCalls(ir.passes.InPlacePass):
    """Counts how often a PassManager ran its step; changes nothing."""

    def __init__(self) -> None:
        self.runs = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.runs += 1
        return ir.passes.PassResult(model, modified=False)


@pytest.mark.parametrize("name", ["double_transpose", "cnn", "transformer_encoder", "gpt2"])
@pytest.mark.parametrize("per_pass", [False, True])
def test_graph_equals_optimize_ir_graph_for_graph(name: str, per_pass: bool) -> None:
    theirs = fresh_export(name)
    onnxscript.optimizer.optimize_ir(theirs)
    ours = fresh_export(name)
    result = OptimizeProvenancePass(per_pass=per_pass)(ours)
    assert result.modified and result.model is ours
    assert _graph_text(ours) == _graph_text(theirs)


def test_early_stop_fires_when_the_provenance_pass_changed_nothing() -> None:
    model = fresh_export("cnn")
    counter = _CountCalls()
    manager = ir.passes.PassManager([OptimizeProvenancePass(), counter], steps=5, early_stop=True)
    assert manager(model).modified
    assert counter.runs == 2  # the first step optimized, the second found nothing to do
    again = OptimizeProvenancePass()(model)
    assert not again.modified


def test_one_optimize_pass_on_two_models_gives_independent_results() -> None:
    optimize_pass = OptimizeProvenancePass(per_pass=True)
    first = optimize_pass(fresh_export("double_transpose"))
    second = optimize_pass(fresh_export("cnn"))
    assert first.steps and second.steps
    assert first.steps[0].nodes_before == len(plain_export("double_transpose").graph)
    assert second.steps[0].nodes_before == len(plain_export("cnn").graph)
    assert not hasattr(optimize_pass, "steps")


def test_one_functionize_pass_on_two_models_gives_independent_results() -> None:
    functionize_pass = FunctionizePass()
    first = functionize_pass(fresh_export("mlp"))
    second = functionize_pass(fresh_export("double_transpose"))
    assert first.calls == 3 and second.calls == 4  # linear, relu, linear; transpose ×2, …
    assert first.modified and second.modified
    assert first.model is not second.model


def test_inline_pass_reports_a_model_without_calls_unchanged() -> None:
    model = fresh_export("mlp")
    assert not InlinePass()(model).modified
    functionized = modelprov.functionize(model)
    assert InlinePass()(functionized).modified


def test_options_are_frozen_fields() -> None:
    optimize_pass = OptimizeProvenancePass(rules=[], per_pass=True)
    # The options a command line gives come first (from OptimizeOptions, _pass_options).
    assert [field.name for field in dataclasses.fields(optimize_pass)] == [
        "per_pass",
        "policies",
        "rules",
        "trace_options",
    ]
    assert optimize_pass.rules == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        optimize_pass.per_pass = False  # type: ignore[misc]
    functionize_pass = FunctionizePass(level="module")
    assert [field.name for field in dataclasses.fields(functionize_pass)] == ["level", "policies"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        functionize_pass.level = "aten"  # type: ignore[misc]


def test_copying_entry_points_leave_their_input_alone() -> None:
    proto = ir.to_proto(plain_export("mlp"))
    before = proto.SerializeToString()
    for entry in (modelprov.optimize, modelprov.functionize, modelprov.inline):
        result = entry(proto)
        assert isinstance(result, onnx.ModelProto)
        assert proto.SerializeToString() == before
