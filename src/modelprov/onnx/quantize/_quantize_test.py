"""quantize: Q/DQ nodes get the sources of what they quantize, the float model is never
modified; bad calibration batches and options are one clear error each."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
import torch

from modelprov._cli._examples import optimized_export_bytes
from modelprov.errors import QuantizationError
from modelprov.onnx._lookup import node_sources
from modelprov.onnx.quantize._quantize import _feed, choose_reduce_range, quantize


def _batches(model: onnx.ModelProto) -> list[np.ndarray]:
    dims = [d.dim_value or 1 for d in model.graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.default_rng(0)
    return [rng.standard_normal(dims).astype(np.float32) for _ in range(4)]


def test_every_quantized_node_has_sources_and_the_input_is_kept() -> None:
    original = onnx.load_from_string(optimized_export_bytes("mlp"))
    quantized = quantize(original, calibration_batches=_batches(original), reduce_range=False)
    assert original.SerializeToString() == optimized_export_bytes("mlp")
    assert isinstance(quantized, onnx.ModelProto)
    ops = [node.op_type for node in quantized.graph.node]
    assert "QuantizeLinear" in ops and "DequantizeLinear" in ops
    pairs = node_sources(ir.from_proto(quantized))
    assert all(found for _, found in pairs), [n.name for n, found in pairs if not found]
    float_ids = {s.id for _, found in node_sources(ir.from_proto(original)) for s in found}
    assert {s.id for _, found in pairs for s in found} <= float_ids


def test_calibration_batches_must_match_the_graph_inputs() -> None:
    with pytest.raises(QuantizationError, match=r"batch 2: has 2 arrays for 1 graph inputs"):
        _feed((np.zeros(2), np.zeros(2)), ["x"], 2)
    with pytest.raises(QuantizationError, match=r"\['y'\] are not graph inputs"):
        _feed({"y": np.zeros(2)}, ["x"], 0)
    with pytest.raises(QuantizationError, match="expected a numpy array or torch tensor"):
        _feed([[1.0, 2.0]], ["x"], 0)
    fed = _feed(torch.ones(2), ["x"], 0)
    np.testing.assert_array_equal(fed["x"], np.ones(2, np.float32))


def test_reduce_range_as_given_or_refused() -> None:
    assert choose_reduce_range("int8", "int8", True).value is True
    assert choose_reduce_range("int8", "int8", False).value is False
    with pytest.raises(QuantizationError, match="give True, False or None"):
        choose_reduce_range("int8", "int8", 1)  # type: ignore[arg-type]
    with pytest.raises(QuantizationError, match="format='qint'"):
        quantize(onnx.load_from_string(optimized_export_bytes("mlp")), format="qint")
