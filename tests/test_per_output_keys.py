"""Per-output keys of a multi-output module land on the node/op producing that output."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import modelprov


class _Halves(nn.Module):  # type: ignore[misc]
    """Two outputs made by different ops: tanh of one half, twice the relu of the other."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = x.chunk(2, dim=-1)
        return torch.tanh(b), torch.relu(a) * 2


class _Model(nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.halves = _Halves()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p, q = self.halves(x)
        return self.fc(p + q)


def _model() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return _Model().eval(), (torch.randn(2, 8),)


def test_calibrated_per_output_keys_follow_each_output_in_onnx() -> None:
    model, args = _model()
    ranges = modelprov.calibrate(model, [torch.randn(2, 8) for _ in range(4)])
    keys = ranges["halves"]
    assert "custom.output0.max" in keys and "custom.output1.max" in keys
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = modelprov.export(model, args, annotations=ranges, optimize=False, verbose=False)
    carrying = {
        key: [node.op_type for node in program.model.graph if key in node.metadata_props]
        for key in ("custom.output0.max", "custom.output1.max", "custom.max")
    }
    assert carrying["custom.output0.max"] == ["Tanh"]
    assert carrying["custom.output1.max"] == ["Mul"]
    assert sorted(carrying["custom.max"]) == ["Gemm", "Mul", "Tanh"]  # fc, and both halves
    tanh = next(node for node in program.model.graph if node.op_type == "Tanh")
    assert tanh.metadata_props["custom.output0.max"] == repr(keys["custom.output0.max"])


def test_per_output_keys_follow_each_output_in_stablehlo() -> None:
    pytest.importorskip("jax")
    model, args = _model()
    annotations = {"halves": {"custom.output0.max": 1.0, "custom.output1.max": 7.5}}
    program = modelprov.export_stablehlo(model, args, annotations=annotations)
    first = [op.op_name for op in program.ops if "custom.output0.max" in op.attributes]
    second = [op.op_name for op in program.ops if "custom.output1.max" in op.attributes]
    assert first == ["stablehlo.tanh"]
    assert second == ["stablehlo.multiply"]
    (op,) = [op for op in program.ops if "custom.output1.max" in op.attributes]
    assert op.attributes["custom.output1.max"] == 7.5
    assert op.attributes["modelprov.source_node"] == "mul"
