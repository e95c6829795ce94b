"""FunctionizePass: each level is one named behaviour; the functionized model computes what
the flat one did, and inline gives the flat graph back."""

from __future__ import annotations

import typing

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest

import modelprov
from modelprov._cli._examples import EXAMPLES, optimized_export_bytes
from modelprov.errors import UsageError
from modelprov.keys import ATEN_DOMAIN, MODULE_DOMAIN
from modelprov.onnx._pass_options import Level
from modelprov.onnx.functions._functionize import _LEVEL_BEHAVIOURS, FunctionizePass


def _model() -> ir.Model:
    return ir.from_proto(onnx.load_from_string(optimized_export_bytes("mlp")))


def _run(model: ir.Model) -> list[np.ndarray]:
    session = ort.InferenceSession(
        ir.to_proto(model).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    name = session.get_inputs()[0].name
    return session.run(None, {name: EXAMPLES["mlp"]()[1][0].numpy()})  # type: ignore[no-any-return]


def test_each_level_is_one_named_behaviour() -> None:
    assert set(_LEVEL_BEHAVIOURS) == set(typing.get_args(Level))
    for method in _LEVEL_BEHAVIOURS.values():
        assert callable(getattr(FunctionizePass, method))
    with pytest.raises(UsageError, match="level must be 'aten' or 'module', got 'layer'"):
        FunctionizePass(level="layer")  # type: ignore[arg-type]


@pytest.mark.parametrize(("level", "domain"), [("aten", ATEN_DOMAIN), ("module", MODULE_DOMAIN)])
def test_functionized_model_computes_the_same_and_inlines_back(level: Level, domain: str) -> None:
    flat = _model()
    expected = _run(flat)
    model = _model()
    result = FunctionizePass(level=level)(model)
    assert result.modified and result.calls > 0
    calls = [node for node in model.graph if node.domain == domain]
    assert len(calls) == result.calls
    assert all(node.op_identifier() in model.functions for node in calls)
    for got, want in zip(_run(model), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    inlined = modelprov.inline(model)
    assert sorted(n.op_type for n in inlined.graph) == sorted(n.op_type for n in flat.graph)
    again = FunctionizePass(level=level)(model)
    assert not again.modified  # a call stays as it is
