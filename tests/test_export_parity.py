"""modelprov.export mirrors torch.onnx.export (issue 16, item 3)."""

from __future__ import annotations

import io
from pathlib import Path

import onnx
import onnx_ir as ir
import onnxscript.rewriter.pattern as orp
import pytest
import torch

import modelprov
from modelprov.errors import ExportError, VerificationError


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)
    ).eval()


def _relu_to_sigmoid() -> orp.RewriteRule:
    """A deliberately wrong rule: it changes what the model computes."""

    def target(op, x):  # type: ignore[no-untyped-def]
        return op.Relu(x)

    def replacement(op, x):  # type: ignore[no-untyped-def]
        return op.Sigmoid(x)

    return orp.RewriteRule(target, replacement, name="WrongReluToSigmoid")


ARGS = (torch.randn(3, 8),)


def test_verify_checks_the_optimized_model_and_fails_on_a_wrong_rule(tmp_path: Path) -> None:
    out = tmp_path / "m.onnx"
    with pytest.raises(VerificationError, match="differ from torch's.*nothing was saved"):
        modelprov.export(_mlp(), ARGS, out, rules=[_relu_to_sigmoid()], verify=True)
    assert not out.exists()
    program = modelprov.export(_mlp(), ARGS, out, verify=True)
    assert out.exists() and program.model.graph.node(0) is not None


def test_report_describes_the_returned_model(tmp_path: Path) -> None:
    program = modelprov.export(
        _mlp(), ARGS, tmp_path / "m.onnx", report=True, verify=True, artifacts_dir=tmp_path
    )
    reports = list(tmp_path.glob("modelprov_export_*.md"))
    assert len(reports) == 1
    text = reports[0].read_text()
    returned = len(list(program.model.graph))
    assert "| nodes | " in text and f"| {returned} |" in text
    assert "saved to" in text and "| yes |" in text and "NO |" not in text


def test_f_may_be_a_binary_file_object() -> None:
    buffer = io.BytesIO()
    program = modelprov.export(_mlp(), ARGS, buffer)
    loaded = onnx.load_from_string(buffer.getvalue())
    assert [n.op_type for n in loaded.graph.node] == [n.op_type for n in program.model.graph]
    assert loaded.graph.initializer


def test_keep_initializers_as_inputs_and_export_params(tmp_path: Path) -> None:
    out = tmp_path / "m.onnx"
    program = modelprov.export(_mlp(), ARGS, out, keep_initializers_as_inputs=True)
    loaded = onnx.load(out)
    names = {i.name for i in loaded.graph.input}
    assert {t.name for t in loaded.graph.initializer} <= names and len(names) > 1
    assert len(program.model.graph.inputs) == 1  # the returned model is unchanged
    modelprov.export(_mlp(), ARGS, out, export_params=False)
    assert not onnx.load(out).graph.initializer


@pytest.mark.parametrize(
    ("keyword", "value", "advice"),
    [
        ("export_modules_as_functions", True, "functionize"),
        ("training", torch.onnx.TrainingMode.TRAINING, "eval"),
        ("dynamo", False, "dynamo"),
        ("no_such_option", 1, "unexpected keyword"),
    ],
)
def test_unsupported_keywords_are_refused_clearly(keyword: str, value: object, advice: str) -> None:
    with pytest.raises(ExportError, match=advice):
        modelprov.export(_mlp(), ARGS, **{keyword: value})


def test_torch_keywords_pass_through() -> None:
    program = modelprov.export(
        _mlp(), ARGS, input_names=["features"], output_names=["logits"], opset_version=18
    )
    assert [v.name for v in program.model.graph.inputs] == ["features"]
    assert [v.name for v in program.model.graph.outputs] == ["logits"]
    assert isinstance(program.model, ir.Model)
