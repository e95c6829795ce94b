"""One naming rule for functions at both levels (issue 16, item 7), checked with onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import torch

import modelprov
from modelprov.keys import FUNCTION_NAME_KEY, VARIANT_KEY


class Residual(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.relu(self.fc(x))


class Net(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.Sequential(Residual(), Residual())
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


def _called_inside_bodies(model: ir.Model) -> set[ir.OperatorIdentifier]:
    return {node.op_identifier() for f in model.functions.values() for node in f}


def _check_rule(model: ir.Model) -> None:
    nested = _called_inside_bodies(model)
    assert model.functions
    for key, function in model.functions.items():
        base = function.metadata_props[FUNCTION_NAME_KEY]
        variant = function.metadata_props[VARIANT_KEY]
        assert len(variant) >= 12 and all(c in "0123456789abcdef" for c in variant)
        if key in nested:
            assert (function.name, function.overload) == (f"{base}_{variant}", "")
        else:
            assert (function.name, function.overload) == (base, variant)


def test_both_levels_follow_one_rule_and_run() -> None:
    torch.manual_seed(0)
    net, x = Net().eval(), torch.randn(3, 8)
    exported = modelprov.export(net, (x,)).model
    expected = net(x).detach().numpy()
    for level in ("aten", "module"):
        model = modelprov.functionize(exported, level=level)
        _check_rule(model)
        session = ort.InferenceSession(
            ir.to_proto(model).SerializeToString(), providers=["CPUExecutionProvider"]
        )
        (got,) = session.run(None, {model.graph.inputs[0].name: x.numpy()})
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    module_level = modelprov.functionize(exported, level="module")
    assert _called_inside_bodies(module_level)  # the nested spelling is exercised
    assert modelprov.find_calls(module_level, "Residual")
    aten_level = modelprov.functionize(exported, level="aten")
    assert modelprov.find_calls(aten_level, "aten::linear")
    assert modelprov.find_calls(aten_level, "aten::linear.default")
    assert not modelprov.find_calls(aten_level, "aten::lin")
