"""The real value of an integer tensor of a QOperator model (QLinearConv, QLinearMatMul...).

In onnxruntime's QOperator format, operations compute on uint8/int8 tensors whose real
value is ``(q - zero_point) · scale``; each producing op names its output's scale and zero
point among its inputs. Ops that move quantized tensors without computing (MaxPool,
Reshape, Transpose...) keep their input's scale, so the walk follows their first input.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

__all__ = ["dequantize", "output_quantization"]

_OUTPUT_SCALE = {
    # op type: (index of the output's scale, of its zero point) among the op's inputs
    "QuantizeLinear": (1, 2),
    "QLinearConv": (6, 7),
    "QLinearMatMul": (6, 7),
    "QLinearAdd": (6, 7),
    "QLinearMul": (6, 7),
    "QGemm": (7, 8),
    "QLinearSigmoid": (3, 4),
    "QLinearLeakyRelu": (3, 4),
    "QLinearSoftmax": (3, 4),
    "QLinearGlobalAveragePool": (3, 4),
    "QLinearAveragePool": (3, 4),
    "QLinearConcat": (0, 1),
}
_INTEGERS = (ir.DataType.UINT8, ir.DataType.INT8, ir.DataType.UINT16, ir.DataType.INT16)
_MAX_WALK = 64


def output_quantization(value: ir.Value) -> tuple[np.ndarray, np.ndarray] | None:
    """``(scale, zero_point)`` of a quantized integer ``value``, None when it is not one
    (or its scale is not a constant). Types may be unknown (onnxruntime's quantizer writes
    no value info): the caller checks that the array it holds is of integers."""
    if value.dtype is not None and value.dtype not in _INTEGERS:
        return None
    current: ir.Value | None = value
    for _ in range(_MAX_WALK):
        producer = current.producer() if current is not None else None
        if producer is None:
            return None
        positions = _OUTPUT_SCALE.get(producer.op_type)
        if positions is None:  # a mover: the quantization of its first input
            current = producer.inputs[0] if producer.inputs else None
            if current is None or (
                None not in (current.dtype, value.dtype) and current.dtype != value.dtype
            ):
                return None
            continue
        scale, zero = (producer.inputs[i] if i < len(producer.inputs) else None for i in positions)
        scale_array = _constant(scale)
        if scale_array is None:
            return None
        zero_array = _constant(zero)
        return scale_array, zero_array if zero_array is not None else np.zeros((), np.int64)
    return None


def dequantize(array: np.ndarray, quantization: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """``(q - zero_point) · scale`` in float64 (per-tensor, or per-axis-0 channel)."""
    scale, zero = (np.asarray(part, dtype=np.float64) for part in quantization)
    if scale.ndim == 1 and array.ndim >= 2 and scale.size == array.shape[1]:
        shape = (1, -1) + (1,) * (array.ndim - 2)  # per output channel (NCHW)
        scale, zero = scale.reshape(shape), zero.reshape(shape)
    return (array.astype(np.float64) - zero) * scale


def _constant(value: ir.Value | None) -> np.ndarray | None:
    if value is None:
        return None
    tensor = value.const_value
    if tensor is None:
        producer = value.producer()
        if producer is not None and producer.op_type == "Constant":
            attribute = producer.attributes.get("value")
            tensor = attribute.as_tensor() if attribute is not None else None
    return None if tensor is None else np.asarray(tensor.numpy())
