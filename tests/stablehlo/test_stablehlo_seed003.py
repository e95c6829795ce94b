"""Seed 003: per-layer output ranges as attributes on the StableHLO ops producing each output."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from modelprov.core._policy import Policies, from_output
from modelprov.stablehlo import StableHLOProgram, export_stablehlo, load_exported, read_mlir_sources

pytest.importorskip("jax")

ANNOTATIONS = {
    "0": {"custom.min": -23.5, "custom.max": 18.9},
    "1": {"custom.min": 0.0, "custom.max": 18.9},
    "2": {"custom.min": -7.25, "custom.max": 9.0},
}
RANGE_KEYS = ("custom.min", "custom.max")


@pytest.fixture(scope="module")
def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(28 * 28, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)
    ).eval()


@pytest.fixture(scope="module")
def program(mlp: torch.nn.Module) -> StableHLOProgram:
    policies = Policies({"custom.min": from_output, "custom.max": from_output})
    return export_stablehlo(mlp, (torch.randn(1, 784),), annotations=ANNOTATIONS, policies=policies)


def _ranged(program: StableHLOProgram) -> dict[str, list[tuple[str, object, object]]]:
    found: dict[str, list[tuple[str, object, object]]] = {}
    for op in program.ops:
        if "custom.min" in op.attributes:
            entry = (op.op_name, op.attributes["custom.min"], op.attributes["custom.max"])
            found.setdefault(op.module, []).append(entry)
    return found


def test_ranges_sit_on_the_ops_producing_each_layer_output(program: StableHLOProgram) -> None:
    assert _ranged(program) == {
        "0": [("stablehlo.add", -23.5, 18.9)],
        "1": [("stablehlo.maximum", 0.0, 18.9)],
        "2": [("stablehlo.add", -7.25, 9.0)],
    }
    last = program.ops_for("2")[-1]
    assert last.op_name == "stablehlo.add"
    assert last.attributes["custom.max"] == 9.0 and type(last.attributes["custom.max"]) is float


def test_no_op_carries_a_range_of_a_module_whose_output_it_does_not_produce(
    program: StableHLOProgram,
) -> None:
    for op in program.ops:
        if any(key in op.attributes for key in RANGE_KEYS):
            assert op.attributes["custom.min"] == ANNOTATIONS[op.module]["custom.min"]
    ranged = [op for op in program.ops if "custom.min" in op.attributes]
    assert len(ranged) == 3
    assert all(op.op_name != "stablehlo.dot_general" for op in ranged)


def test_attributes_are_in_text_saved_file_and_portable_artifact(
    program: StableHLOProgram, tmp_path: Path
) -> None:
    expected = re.compile(r"stablehlo\.maximum .*custom\.min = 0\.000000e\+00 : f64")
    assert expected.search(program.text)
    assert "custom.min = -2.350000e+01 : f64" in program.text
    assert "loc(" not in program.text and "loc(" in program.text_with_locations

    text_path, export_path, _ = program.save(tmp_path / "mlp.mlir")
    saved = Path(text_path).read_text(encoding="utf-8")
    assert saved == program.text
    exported, weights = load_exported(text_path)
    round_tripped = exported.mlir_module()
    assert expected.search(round_tripped)
    assert 'modelprov.node = "relu"' in round_tripped
    assert Path(export_path).stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "mlp.mlir",
        "mlp.mlir.jaxexport",
        "mlp.mlir.weights.npz",
    ]  # no temporary files left behind

    x = torch.randn(1, 784)
    out = exported.call(weights, (x.numpy(),))
    np.testing.assert_allclose(np.asarray(out[0]), program.run(x)[0], rtol=0, atol=0)


def test_string_form_is_seed_003s_and_reads_back_like_the_typed_one(
    program: StableHLOProgram, mlp: torch.nn.Module
) -> None:
    """number_attributes="string": the issue's ``{custom.min = "0.0", ...}``, same sources."""
    policies = Policies({"custom.min": from_output, "custom.max": from_output})
    strings = export_stablehlo(
        mlp,
        (torch.randn(1, 784),),
        annotations=ANNOTATIONS,
        policies=policies,
        number_attributes="string",
    )
    assert re.search(r'stablehlo\.maximum .*custom\.min = "0\.0"', strings.text)
    assert _ranged(strings) == {
        module: [(name, repr(low), repr(high)) for name, low, high in entries]
        for module, entries in _ranged(program).items()
    }
    typed_ops, string_ops = (read_mlir_sources(p.text_with_locations) for p in (program, strings))
    assert [op.attributes.get("custom.max") for op in typed_ops if op.sources] == [
        None if value is None else float(value)
        for value in (op.attributes.get("custom.max") for op in string_ops if op.sources)
    ]
    # Source.metadata holds the string form either way, as ONNX metadata does.
    assert [s.metadata for op in typed_ops for s in op.sources] == [
        s.metadata for op in string_ops for s in op.sources
    ]
    with pytest.raises(ValueError, match="number_attributes='float'"):
        export_stablehlo(mlp, (torch.randn(1, 784),), number_attributes="float")  # type: ignore[arg-type]


def test_module_verifies_and_runs_like_torch(
    program: StableHLOProgram, mlp: torch.nn.Module
) -> None:
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    with mlir.make_ir_context():
        assert ir.Module.parse(program.text).operation.verify()
    x = torch.randn(1, 784)
    with torch.no_grad():
        expected = mlp(x).numpy()
    np.testing.assert_allclose(program.run(x)[0], expected, atol=1e-5, rtol=0)


def test_trace_options_rewrite_stack_paths(tmp_path: Path) -> None:
    import os

    import modelprov
    from modelprov._cli import _examples

    module, args = _examples.mlp()
    root = os.path.dirname(os.path.dirname(torch.__file__))
    program = modelprov.export_stablehlo(
        module, args, trace_options=modelprov.TraceOptions(root=root)
    )
    stacks = [line for line in program.text.splitlines() if "modelprov.stack" in line]
    assert stacks and all(root not in line for line in stacks)
    assert any('modelprov.stack = "torch/nn/modules/' in line for line in stacks)


def test_read_mlir_sources_reads_numbers_strings_and_bools_of_any_width() -> None:
    """What a compiler or a user may write: every numeric kind reads back as a Python number."""
    text = """func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {
      %0 = stablehlo.add %a, %a {custom.max = 2.5 : f64, custom.h = 1.5 : f32,
        custom.bits = 4 : i64, custom.neg = -3 : i8, custom.idx = 3 : index, custom.on = true,
        custom.s = "0.0", modelprov.node = "add", plain = 1 : i64} : tensor<2xf32>
      return %0 : tensor<2xf32>
    }"""
    (op,) = read_mlir_sources(text)
    assert dict(op.attributes) == {
        "custom.max": 2.5,
        "custom.h": 1.5,
        "custom.bits": 4,
        "custom.neg": -3,
        "custom.idx": 3,
        "custom.on": True,
        "custom.s": "0.0",
        "modelprov.node": "add",
    }
    assert [type(op.attributes[k]) for k in ("custom.max", "custom.bits", "custom.on")] == [
        float,
        int,
        bool,
    ]
    (source,) = op.sources
    assert source.id == "add"
    assert source.metadata["custom.max"] == "2.5" and source.metadata["custom.on"] == "true"
    assert source.metadata["custom.bits"] == "4" and source.metadata["custom.s"] == "0.0"
