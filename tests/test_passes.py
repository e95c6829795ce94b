"""modelprov's passes behave as onnx-ir expects: truthful ``modified``, results returned, not
kept, options as frozen fields, and the per-pass optimizer graph-for-graph equal to
onnxscript's ``optimize_ir``."""

from __future__ import annotations

import dataclasses

import onnx
import onnx_ir as ir
import onnxscript.optimizer
import pytest
from hypothesis import given
from hypothesis import strategies as st

import modelprov
from modelprov.onnx.functions._functionize import FunctionizePass
from modelprov.onnx.functions._inline import InlineProvenancePass
from modelprov.onnx.optimize._optimize import OptimizeProvenancePass
from tests._random_nets import random_net
from tests._seeded import seeded
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
    assert not InlineProvenancePass()(model).modified
    functionized = modelprov.functionize(model)
    assert InlineProvenancePass()(functionized).modified


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


def _written(model: ir.Model) -> bytes:
    return ir.to_proto(model).SerializeToString()


def _reloaded(model: ir.Model) -> ir.Model:
    return ir.from_proto(onnx.load_from_string(_written(model)))


_PASSES = {
    "optimize": OptimizeProvenancePass,
    "optimize-per-pass": lambda: OptimizeProvenancePass(per_pass=True),
    "functionize-aten": FunctionizePass,
    "functionize-module": lambda: FunctionizePass(level="module"),
    "inline": InlineProvenancePass,
}


@pytest.mark.parametrize("name", ["double_transpose", "cnn", "transformer_encoder", "gpt2"])
@pytest.mark.parametrize("which", list(_PASSES))
def test_modified_is_true_exactly_when_the_written_model_changes(name: str, which: str) -> None:
    """Run to the fixpoint (in memory, then from a file, as a user's model comes): every run
    reports ``modified`` exactly when the model it writes differs, and the fixpoint is
    reached (onnxscript's optimizer needs two runs on the transformer layer)."""
    make = _PASSES[which]
    model = modelprov.optimize(fresh_export(name))
    if which == "inline":
        model = modelprov.functionize(model, level="module")
    reports = []
    for reload in (False, False, True, False):
        if reload:
            model = _reloaded(model)
        before = _written(model)
        result = make()(model)
        assert result.modified == (_written(model) != before), (which, reports)
        reports.append(result.modified)
    assert reports[-2:] == [False, False], reports


def test_early_stop_stops_on_a_model_read_from_a_file() -> None:
    """The issue's case: a modelprov-optimized GPT-2 read back; nothing to do, so the
    manager stops after the first step."""
    model = _reloaded(modelprov.optimize(fresh_export("gpt2")))
    counter = _CountCalls()
    manager = ir.passes.PassManager([OptimizeProvenancePass(), counter], steps=5, early_stop=True)
    assert not manager(model).modified
    assert counter.runs == 1


_SEEDS = st.integers(min_value=0, max_value=2**31)


@seeded(8)
@given(_SEEDS, st.booleans())
def test_generated_models_at_the_fixpoint_report_no_change(seed: int, per_pass: bool) -> None:
    model = ir.from_proto(random_net(seed))
    first = OptimizeProvenancePass(per_pass=per_pass)(model)
    assert first.modified  # the sources are written as a table at least
    for candidate in (model, _reloaded(model)):
        before = _written(candidate)
        again = OptimizeProvenancePass(per_pass=per_pass)(candidate)
        assert not again.modified and _written(candidate) == before
        assert all(step.new_nodes == step.removed_nodes == 0 for step in again.steps)
    counter = _CountCalls()
    passes = [
        OptimizeProvenancePass(per_pass=per_pass),
        FunctionizePass(),
        InlineProvenancePass(),
        counter,
    ]
    manager = ir.passes.PassManager(passes, steps=4, early_stop=True)
    assert not manager(_reloaded(model)).modified
    assert counter.runs == 1
