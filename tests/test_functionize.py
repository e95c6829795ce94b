"""functionize / inline / find_calls on real exports, checked by onnx and onnxruntime."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch

import modelprov
from modelprov._cli import _examples
from modelprov.errors import InvalidModelError, MetadataError, UsageError
from modelprov.onnx.export._aten_record import record_aten_calls
from modelprov.onnx.functions._find_calls import find_calls
from modelprov.onnx.functions._functionize import FunctionizePass, functionize
from modelprov.onnx.functions._inline import inline
from modelprov.onnx.functions._wrap import ATEN_DOMAIN, MODULE_DOMAIN

LEVELS = [
    ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
]


def _modelprov_export(layers: int) -> ir.Model:
    model, args = _examples.gpt2(layers, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, args, dynamo=True, optimize=False, verbose=False)
    record_aten_calls(program)
    return modelprov.optimize(program.model)


@functools.cache
def gpt2_export(layers: int = 2, copy: int = 0) -> ir.Model:
    """GPT-2 (width 64) as modelprov.export makes it, with the aten_call record."""
    return _modelprov_export(layers)


@functools.cache
def gpt2_inputs(layers: int = 2) -> list[np.ndarray]:
    return [arg.numpy() for arg in _examples.gpt2(layers, 64)[1]]


@functools.cache
def functionized(layers: int = 2, level: str = "aten", copy: int = 0) -> ir.Model:
    return functionize(gpt2_export(layers, copy), level=level)  # type: ignore[arg-type]


def run(model: ir.Model, inputs: list[np.ndarray], level: ort.GraphOptimizationLevel) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    session = ort.InferenceSession(
        ir.to_proto(model).SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    names = [entry.name for entry in session.get_inputs()]
    return session.run(None, dict(zip(names, inputs, strict=True)))[0]  # type: ignore[no-any-return]


def node_for_node(before: ir.Model, after: ir.Model) -> list[str]:
    """Differences in ops, attributes, topology (by value names) and metadata."""

    def key(node: ir.Node) -> tuple[object, ...]:
        attributes = sorted(
            (name, ir.to_proto(attribute).SerializeToString())
            for name, attribute in node.attributes.items()
        )
        return (
            node.domain,
            node.op_type,
            node.overload,
            attributes,
            [value.name if value is not None else "" for value in node.inputs],
            [value.name for value in node.outputs],
            dict(node.metadata_props),
            [dict(value.metadata_props) for value in node.outputs],
            [(value.type, value.shape) for value in node.outputs],
        )

    problems = []
    a, b = list(before.graph), list(after.graph)
    if [n.name for n in a] != [n.name for n in b]:
        problems.append("node names or order differ")
    for x, y in zip(a, b, strict=False):
        if key(x) != key(y):
            problems.append(f"node {x.name} differs")
    if dict(before.metadata_props) != dict(after.metadata_props):
        problems.append("model metadata differs")
    if sorted(before.graph.initializers) != sorted(after.graph.initializers):
        problems.append("initializers differ")
    if [v.name for v in before.graph.outputs] != [v.name for v in after.graph.outputs]:
        problems.append("graph outputs differ")
    if dict(before.opset_imports) != dict(after.opset_imports) or list(before.functions) != list(
        after.functions
    ):
        problems.append("opsets or functions differ")
    return problems


def test_aten_functionize_checks_and_runs_at_every_level() -> None:
    original, result = gpt2_export(), functionized()
    onnx.checker.check_model(ir.to_proto(result), full_check=True)
    inputs = gpt2_inputs()
    expected = run(original, inputs, LEVELS[0])
    for level in LEVELS:
        np.testing.assert_allclose(run(result, inputs, level), expected, atol=1e-5, rtol=0)


def test_functionize_of_a_modelprov_export_needs_no_torch(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The model's schema pool gives every call's arguments: functionize, at both levels,
    and inline run without importing torch (which costs seconds and memory)."""
    path = tmp_path / "gpt2.onnx"
    onnx.save(ir.to_proto(gpt2_export()), path)
    code = (
        "import sys\n"
        "from modelprov.cli import main\n"
        "model, functionized, inlined = sys.argv[1:]\n"
        "for level in ('aten', 'module'):\n"
        "    assert main(['-q', 'functionize', '--level', level, model, '-o', functionized]) == 0\n"
        "    assert main(['-q', 'inline', functionized, '-o', inlined]) == 0\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'torch'))\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(root, "src"), root])}
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), str(tmp_path / "f.onnx"), str(tmp_path / "i.onnx")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
    assert len(onnx.load(tmp_path / "i.onnx").graph.node) == len(gpt2_export().graph)


def test_every_fx_node_becomes_an_aten_call() -> None:
    result = functionized()
    for node in result.graph:
        assert node.domain == ATEN_DOMAIN, f"{node.name} ({node.op_type}) is not an ATen call"
        function = result.functions[node.op_identifier()]
        assert node.op_type.startswith("aten_")
        assert function.metadata_props["pkg.modelprov.aten_target"].startswith("aten::")
        assert modelprov.sources(result, node), node.name


def test_equal_bodies_share_a_function_and_different_bodies_differ() -> None:
    result = functionized()
    bodies: dict[tuple[str, str], str] = {}
    calls: dict[ir.OperatorIdentifier, int] = {}
    for node in result.graph:
        calls[node.op_identifier()] = calls.get(node.op_identifier(), 0) + 1
    for key, function in result.functions.items():
        digest = modelprov_hash(function)
        assert key[2] == digest[:12]
        assert (key[1], digest) not in bodies, "equal bodies in two functions"
        bodies[(key[1], digest)] = key[2]
    assert max(calls.values()) >= 4  # e.g. the layers' addmm share bodies
    names = [key[1] for key in result.functions]
    assert len(names) > len(set(names)), "some op has several overloads"


def modelprov_hash(function: ir.Function) -> str:
    from modelprov.onnx.functions._structural_hash import structural_hash

    return structural_hash(function)


def test_two_exports_give_identical_names_and_overloads() -> None:
    first = functionized(2, "aten", 0)
    second = functionized(2, "aten", 1)
    assert list(first.functions) == list(second.functions)
    assert [(n.op_type, n.overload) for n in first.graph] == [
        (n.op_type, n.overload) for n in second.graph
    ]


def test_call_keeps_sources_metadata() -> None:
    original, result = gpt2_export(), functionized()
    by_fx = {modelprov.sources(original, n)[0].fx_node: n for n in original.graph}
    addmm = find_calls(result, "aten::addmm.default")
    assert len(addmm) == 8
    call, function = addmm[0]
    assert function.name == "aten_addmm_default"
    assert [value.name for value in function.inputs] == ["self", "mat1", "mat2"]
    assert list(function.attributes) == ["beta", "alpha"]
    assert call.metadata_props["pkg.torch.onnx.fx_node"].startswith("%addmm :")
    body_gemm = next(node for node in function if node.op_type == "Gemm")
    assert dict(body_gemm.metadata_props) == dict(by_fx["addmm"].metadata_props)
    assert find_calls(ir.to_proto(result), "aten.addmm.default")[0][0].name == call.name


def test_seed001_transpose_attributes_are_the_aten_arguments() -> None:
    model, args = _examples.double_transpose()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, args, dynamo=True, optimize=False, verbose=False)
    plain = program.model.clone()
    record_aten_calls(program)
    assert "pkg.modelprov.aten_call" in program.model.graph.node(0).metadata_props
    for source in (plain, program.model):
        result = functionize(source)
        calls = find_calls(result, "aten::transpose.int")
        assert len(calls) == 2
        for call, function in calls:
            assert list(function.attributes) == ["dim0", "dim1"]
            assert [value.name for value in function.inputs] == ["self"]
            assert list(call.attributes) == ["dim0", "dim1"]
        assert [call.attributes["dim0"].value for call, _ in calls] == [1, -2]
        assert calls[0][0].overload != calls[1][0].overload  # different permutations
        inputs = [arg.numpy() for arg in args]
        np.testing.assert_allclose(
            run(result, inputs, LEVELS[3]), run(plain, inputs, LEVELS[0]), atol=1e-6
        )


@pytest.mark.parametrize("level", ["aten", "module"])
def test_inline_restores_the_model_node_for_node(level: str) -> None:
    original = gpt2_export(4 if level == "module" else 2)
    result = functionized(4 if level == "module" else 2, level)
    assert node_for_node(original, inline(result)) == []


def test_inline_of_a_plain_export(export_of) -> None:  # type: ignore[no-untyped-def]
    plain = export_of("gpt2")
    result = plain.clone()
    outcome = FunctionizePass()(result)
    assert outcome.calls > 100 and outcome.modified
    assert all("SequenceAt" in r.reason or "no FX" in r.reason for r in outcome.skipped)
    assert node_for_node(plain, inline(result)) == []
    onnx.checker.check_model(ir.to_proto(result), full_check=True)


def test_module_level_makes_one_block_function_with_four_calls() -> None:
    original, result = gpt2_export(4), functionized(4, "module")
    blocks = find_calls(result, "GPT2Block")
    assert len(blocks) == 4
    assert len({function.identifier() for _, function in blocks}) == 1
    assert blocks[0][1].domain == MODULE_DOMAIN
    onnx.checker.check_model(ir.to_proto(result), full_check=True)
    inputs = gpt2_inputs(4)
    expected = run(original, inputs, LEVELS[0])
    for level in (LEVELS[0], LEVELS[3]):
        np.testing.assert_allclose(run(result, inputs, level), expected, atol=1e-5, rtol=0)


def test_model_proto_in_and_out_and_input_untouched() -> None:
    proto = ir.to_proto(gpt2_export())
    snapshot = proto.SerializeToString()
    result = functionize(proto)
    assert isinstance(result, onnx.ModelProto)
    assert proto.SerializeToString() == snapshot
    assert isinstance(inline(result), onnx.ModelProto)


def _bad_input_model() -> ir.Model:
    """A plain model: an existing function, an If with subgraphs, nodes without provenance."""
    text = """
    <ir_version: 10, opset_import: ["" : 20, "local" : 1]>
    g (float[2] x, bool c) => (float[2] y) {
        a = local.Twice (x)
        b = Relu (a)
        y = If (c) <
            then_branch = t () => (float[2] o) { o = Neg (b) },
            else_branch = e () => (float[2] o) { o = Identity (b) }
        >
    }
    <domain: "local", opset_import: ["" : 20]>
    Twice (u) => (v) { v = Add (u, u) }
    """
    return ir.from_proto(onnx.parser.parse_model(text))


def test_bad_inputs_are_left_as_they_are_and_reported() -> None:
    model = _bad_input_model()
    for level in ("aten", "module"):
        result = model.clone()
        outcome = FunctionizePass(level=level)(result)  # type: ignore[arg-type]
        assert outcome.calls == 0 and not outcome.modified
        assert outcome.skipped
        assert node_for_node(model, result) == []
        assert node_for_node(model, inline(result)) == []
    with pytest.raises(ValueError, match="level"):
        FunctionizePass(level="layer")  # type: ignore[arg-type]
    with pytest.raises(InvalidModelError, match="model.onnx"):
        functionize("model.onnx")  # a path, but no file there
    with pytest.raises(UsageError, match="functionize: got builtins.int"):
        functionize(42)  # type: ignore[call-overload]


def test_inline_record_is_versioned_json() -> None:
    result = functionized()
    records = [
        node.metadata_props["modelprov.inline"]
        for node in result.graph
        if "modelprov.inline" in node.metadata_props
    ]
    assert records
    document = json.loads(records[0])
    assert document["version"] == 1
    assert all("name" in entry for entry in document["nodes"])


def _second_relu_call(model: ir.Model) -> ir.Node:
    calls = [node for node in model.graph if node.op_type == "aten_relu_default"]
    assert len(calls) == 2 and calls[0].op_identifier() == calls[1].op_identifier()
    return calls[1]


@pytest.mark.parametrize("record", [None, "{not json", '{"version": 1, "nodes": []}'])
def test_inline_never_gives_a_call_another_calls_provenance(export_of, record) -> None:  # type: ignore[no-untyped-def]
    plain = export_of("cnn")
    functionized = modelprov.functionize(plain)
    second = _second_relu_call(functionized)
    own_fx = {
        source.fx_node for source in modelprov.sources(functionized, second) if source.fx_node
    }
    if record is None:
        del second.metadata_props["modelprov.inline"]
    else:
        second.metadata_props["modelprov.inline"] = record
        with pytest.raises(MetadataError, match=f"node {second.name!r}.*modelprov.inline"):
            modelprov.inline(functionized)
        return
    flat = modelprov.inline(functionized)
    relu_fx = [
        {s.fx_node for s in modelprov.sources(flat, node)}
        for node in flat.graph
        if node.op_type == "Relu"
    ]
    assert len(relu_fx) == 2
    assert relu_fx[1] == own_fx and relu_fx[1] != relu_fx[0]
