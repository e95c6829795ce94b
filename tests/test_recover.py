"""modelprov.recover after onnxsim, onnxslim, onnxoptimizer and onnxruntime."""

from __future__ import annotations

import functools

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import modelprov
from modelprov.audit._diff import dynamic_nodes
from modelprov.errors import CorrespondenceError, InvalidModelError
from modelprov.onnx.recover import _tools
from tests._checks import region_violations, run
from tests.conftest import example_inputs, fresh_export, plain_export

MODELS = ["double_transpose", "cnn", "transformer_encoder", "gpt2"]
TOOLS = [(s.tool, dict(s.options)) for s in _tools.TOOLS.settings(portable_only=True)]


def _inputs(name: str) -> list[np.ndarray]:
    return [tensor.numpy() for tensor in example_inputs(name)]


@functools.cache
def _with_provenance(name: str) -> onnx.ModelProto:
    return ir.to_proto(modelprov.optimize(fresh_export(name)))


def _strip(proto: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    del copy.metadata_props[:]
    for node in copy.graph.node:
        del node.metadata_props[:]
    for info in [*copy.graph.input, *copy.graph.output, *copy.graph.value_info]:
        del info.metadata_props[:]
    return copy


@functools.cache
def _tool_output(name: str, tool: str, level: str | None) -> onnx.ModelProto:
    original = _with_provenance(name)
    runner = _tools.TOOLS[tool].run
    return runner(original, **({"level": level} if level else {}))


CASES = [(m, t, o.get("level")) for m in MODELS for t, o in TOOLS]


@pytest.fixture(scope="module", params=CASES, ids=[f"{m}-{t}-{lv}" for m, t, lv in CASES])
def recovered(request):
    name, tool, level = request.param
    original = _with_provenance(name)
    optimized = _tool_output(name, tool, level)
    return name, original, optimized, modelprov.recover(original, optimized)


def test_tools_drop_metadata_and_recover_restores_it(recovered):
    name, original, _optimized, result = recovered
    result_ir = ir.from_proto(result)
    dynamic = dynamic_nodes(result_ir.graph)
    for node in dynamic:
        assert modelprov.sources(result_ir, node), (name, node.name, node.op_type)
    report = modelprov.diff(original, result)
    assert report.fx_nodes_dyn.value == 1.0, report.fx_nodes_dyn.lost
    assert report.source_lines_dyn.value == 1.0, report.source_lines_dyn.lost
    assert report.module_paths_dyn.value == 1.0, report.module_paths_dyn.lost
    levels = {
        entry.value
        for node in result.graph.node
        for entry in node.metadata_props
        if entry.key == "modelprov.confidence"
    }
    assert levels <= {"exact", "named", "inferred"} and levels


def test_only_metadata_changes(recovered):
    _, _, optimized, result = recovered
    assert _strip(result).SerializeToString() == _strip(optimized).SerializeToString()


def test_numerics_identical(recovered):
    name, _, optimized, result = recovered
    for expected, actual in zip(
        run(optimized, _inputs(name)), run(result, _inputs(name)), strict=True
    ):
        np.testing.assert_array_equal(actual, expected)


def test_sources_lie_in_the_dataflow_region(recovered):
    name, original, _, result = recovered
    violations, checked = region_violations(
        ir.from_proto(original), ir.from_proto(result), _inputs(name)
    )
    assert violations == []
    assert checked > 0


def test_result_is_valid(recovered):
    _, _, _, result = recovered
    onnx.checker.check_model(result, full_check=True)


@pytest.mark.parametrize("name", MODELS)
def test_agrees_with_exact_tracking(name):
    """Given onnxscript's own (metadata-stripped) output, recover finds what optimize tracked."""
    base = ir.to_proto(plain_export(name))
    tracked = _with_provenance(name)
    result = modelprov.recover(base, _strip(tracked))
    tracked_ir, result_ir = ir.from_proto(tracked), ir.from_proto(result)
    same = sum(
        [s.id for s in modelprov.sources(tracked_ir, a)]
        == [s.id for s in modelprov.sources(result_ir, b)]
        for a, b in zip(tracked_ir.graph, result_ir.graph, strict=True)
    )
    assert same / len(tracked_ir.graph) >= 0.98, (same, len(tracked_ir.graph))
    violations, _ = region_violations(ir.from_proto(base), result_ir, _inputs(name))
    assert violations == []


def test_duplicate_metadata_keys_come_out_valid():
    original = _with_provenance("cnn")
    optimized = _tool_output("cnn", "onnxruntime", "extended")
    broken = onnx.ModelProto()
    broken.CopyFrom(optimized)
    for node in broken.graph.node:
        for value in ("a", "b"):
            entry = node.metadata_props.add()
            entry.key, entry.value = "ort.fused", value
    result = modelprov.recover(original, broken)
    onnx.checker.check_model(result, full_check=True)
    for node in result.graph.node:
        keys = [entry.key for entry in node.metadata_props]
        assert len(keys) == len(set(keys)), node.name
        assert "ort.fused" not in keys


def test_ir_model_in_ir_model_out():
    original = ir.from_proto(_with_provenance("double_transpose"))
    optimized = ir.from_proto(_tool_output("double_transpose", "onnxsim", None))
    result = modelprov.recover(original, optimized)
    assert isinstance(result, ir.Model)
    assert all(not node.metadata_props for node in optimized.graph)


def test_optimize_with_runs_the_tool_and_recovers():
    original = _with_provenance("gpt2")
    result = modelprov.optimize_with("onnxruntime", original, level="extended")
    assert any(node.domain == "com.microsoft" for node in result.graph.node)
    assert modelprov.diff(original, result).fx_nodes_dyn.value == 1.0
    with pytest.raises(ValueError, match="unknown tool 'tvm'"):
        modelprov.optimize_with("tvm", original)


def test_models_that_do_not_correspond_are_refused():
    original = _with_provenance("double_transpose")
    other = _tool_output("cnn", "onnxsim", None)
    with pytest.raises(CorrespondenceError, match="does not correspond"):
        modelprov.recover(original, other)


def test_missing_and_non_onnx_files(tmp_path):
    with pytest.raises(InvalidModelError, match="no such file"):
        modelprov.recover(tmp_path / "a.onnx", tmp_path / "b.onnx")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00\x01 not a model")
    with pytest.raises(InvalidModelError, match="junk.onnx"):
        modelprov.recover(junk, junk)


def test_value_scoped_ranges_follow_the_tensor_through_ort_fusion():
    """Conv+ReLU fused by onnxruntime into FusedConv: it carries ReLU's output range."""
    import warnings

    import torch

    from modelprov._cli import _examples

    module, args = _examples.cnn()
    generator = torch.Generator().manual_seed(3)
    stats = modelprov.calibrate(
        module, [torch.randn(2, 3, 16, 16, generator=generator) for _ in range(2)]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = modelprov.export(module, args, annotations=stats, verbose=False)
    result = modelprov.optimize_with("onnxruntime", ir.to_proto(program.model), level="extended")
    fused = [node for node in result.graph.node if node.op_type == "FusedConv"]
    assert len(fused) == 2
    for block, node in zip(("block1", "block2"), fused, strict=True):
        props = {entry.key: entry.value for entry in node.metadata_props}
        assert props["custom.max"] == repr(stats[f"{block}.2"]["custom.max"])
        assert props["custom.min"] == "0.0"


_CHAIN = """
<ir_version: 10, opset_import: ["" : 18]>
g (float[2,8] x) => (float[2,8] y) {{
    {body}
}}
"""


def _text_model(body: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(_CHAIN.format(body=body))


def test_recover_refuses_an_unrelated_model_with_the_same_interface_names() -> None:
    original = _with_provenance("double_transpose")
    other = ir.to_proto(plain_export("cnn"))
    other.graph.input[0].name = original.graph.input[0].name
    for node in other.graph.node:
        node.input[:] = [original.graph.input[0].name if i == "x" else i for i in node.input]
    before = other.SerializeToString()
    with pytest.raises(CorrespondenceError, match="does not correspond.*graph input 'k' has shape"):
        modelprov.recover(original, other)
    assert other.SerializeToString() == before


def test_recover_judges_by_structure_when_names_and_shapes_agree(monkeypatch) -> None:
    """When the models cannot run (here: the run check is bounded to nothing), structure
    decides."""
    from modelprov.onnx.recover import _correspondence_run

    monkeypatch.setattr(_correspondence_run, "MAX_WEIGHT_BYTES", 0)
    original = _text_model("a = Relu (x)\n b = Sigmoid (a)\n y = Tanh (b)")
    for node in original.graph.node:
        node.metadata_props.add(key="pkg.torch.onnx.fx_node", value=f"%{node.output[0]} : x")
    unrelated = _text_model("p = Sin (x)\n q = Cos (p)\n y = Exp (q)")
    with pytest.raises(CorrespondenceError, match="only 0% of its op kinds.*force=True"):
        modelprov.recover(original, unrelated)
    forced = modelprov.recover(original, unrelated, force=True)
    assert len(forced.graph.node) == 3
    tool_output = _text_model("b = Sigmoid (x)\n y = Tanh (b)")  # a tool dropped the Relu
    kept, report = modelprov.recover_with_report(original, tool_output)
    assert {s.fx_node for n in kept.graph.node for s in modelprov.sources(kept, n)} >= {"b", "y"}
    assert report.correspondence.startswith("structure (the models could not run: the original")
    monkeypatch.undo()
    with pytest.raises(CorrespondenceError, match="its output 'y' differs .* by up to"):
        modelprov.recover(original, tool_output)  # run, it computes something else


def test_cli_recover_refuses_and_force_overrides(tmp_path) -> None:
    from modelprov.cli import main

    original = _text_model("a = Relu (x)\n y = Tanh (a)")
    unrelated = _text_model("p = Sin (x)\n y = Exp (p)")
    onnx.save(original, tmp_path / "o.onnx")
    onnx.save(unrelated, tmp_path / "u.onnx")
    out = tmp_path / "out.onnx"
    assert (
        main(["recover", str(tmp_path / "o.onnx"), str(tmp_path / "u.onnx"), "-o", str(out)]) == 2
    )
    assert not out.exists()
    args = ["recover", str(tmp_path / "o.onnx"), str(tmp_path / "u.onnx"), "-o", str(out)]
    assert main([*args, "--force"]) == 0 and out.exists()


ALL_TOOLS = [(s.tool, dict(s.options)) for s in _tools.TOOLS.settings()]


@pytest.mark.parametrize(
    ("name", "tool", "level"),
    [(m, t, o.get("level")) for m in MODELS for t, o in ALL_TOOLS],
    ids=[f"{m}-{t}-{o.get('level')}" for m in MODELS for t, o in ALL_TOOLS],
)
def test_running_both_models_accepts_every_tool_output(name, tool, level) -> None:
    """The tools reorder float math (ORT's fusions at every level, Conv+BN folding); their
    outputs stay far inside the tolerance, and the run decides."""
    from modelprov.onnx.recover._correspondence_run import compare_by_running, runnable

    original, optimized = _with_provenance(name), _tool_output(name, tool, level)
    comparison = compare_by_running(
        runnable(original, None, "original"), runnable(optimized, None, "optimized")
    )
    assert comparison.ran and comparison.equal, comparison.summary()
    assert all(d.largest <= d.tolerance / 10 for d in comparison.differences), comparison.summary()
    _, report = modelprov.recover_with_report(original, optimized)
    assert report.correspondence.startswith("computed: run on the same random inputs")
