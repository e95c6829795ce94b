"""What a quantized model does to each tensor: its range, scale and zero point.

Read from the model alone: each QuantizeLinear of an activation (its scale and zero point
initializers) and each DequantizeLinear of a weight; ranges from the float tensor's
``custom.min`` / ``custom.max``. For the command line and the report.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnx_ir as ir

from modelprov.core._printable import printable
from modelprov.core._walks import all_nodes
from modelprov.keys import QUANTIZED_TENSORS_FORMAT, RANGE_MAX_KEY, RANGE_MIN_KEY
from modelprov.onnx.quantize._qdq_provenance import is_qdq, quantized_source

__all__ = [
    "QuantizedTensor",
    "quantization_keys",
    "quantized_tensors",
    "table_json",
    "table_text",
]


@dataclasses.dataclass(frozen=True)
class QuantizedTensor:  # one row of `modelprov quantize`'s table
    """One quantized tensor: an activation (QuantizeLinear) or a weight (DequantizeLinear)."""

    tensor: str
    kind: str
    """``activation`` or ``weight``."""
    dtype: str
    scale: tuple[float, ...]
    """One scale per tensor, or one per channel."""
    zero_point: tuple[int, ...]
    range: tuple[float, float] | None
    """The float tensor's ``custom.min`` / ``custom.max``, when it carries them."""


def _constant(value: ir.Value | None) -> np.ndarray | None:
    if value is None:
        return None
    if value.const_value is not None:
        return np.asarray(value.const_value.numpy())
    producer = value.producer()
    if producer is not None and producer.op_type == "Constant" and "value" in producer.attributes:
        tensor = producer.attributes["value"].as_tensor()
        return np.asarray(tensor.numpy())
    return None


def _range(value: ir.Value) -> tuple[float, float] | None:
    props = value.metadata_props
    try:
        return float(props[RANGE_MIN_KEY]), float(props[RANGE_MAX_KEY])
    except (KeyError, ValueError):
        return None


def quantized_tensors(model: ir.Model) -> list[QuantizedTensor]:
    """Every quantized tensor of the model, in graph order."""
    return [item for _, item in _quantizing_nodes(model)]


def quantization_keys(model: ir.Model) -> dict[ir.Node, dict[str, str]]:
    """For each Q/DQ node, its tensor, range, scale and zero point as display text."""
    keys: dict[ir.Node, dict[str, str]] = {}
    for node, item in _quantizing_nodes(model):
        shown = {
            "quantizes": f"{item.tensor} ({item.kind}, {item.dtype})",
            "scale": _numbers(item.scale),
            "zero point": _numbers(item.zero_point),
        }
        if item.range is not None:
            shown["range"] = f"[{item.range[0]:.6g}, {item.range[1]:.6g}]"
        keys[node] = shown
        for use in node.outputs[0].uses():
            if is_qdq(use.node):
                keys.setdefault(use.node, shown)
    return keys


def _quantizing_nodes(model: ir.Model) -> list[tuple[ir.Node, QuantizedTensor]]:
    result: list[tuple[ir.Node, QuantizedTensor]] = []
    graph_outputs = {value.name: value for value in model.graph.outputs}
    for node in all_nodes(model.graph):
        if not is_qdq(node) or len(node.inputs) < 2:
            continue
        source = quantized_source(node)
        if source is None:
            continue
        is_weight = source.const_value is not None or source.is_initializer()
        if node.op_type == "QuantizeLinear" and not is_weight:
            kind = "activation"
        elif node.op_type == "DequantizeLinear" and is_weight and source is node.inputs[0]:
            kind = "weight"
        else:
            continue
        scale = _constant(node.inputs[1])
        zero = _constant(node.inputs[2] if len(node.inputs) > 2 else None)
        if scale is None:
            continue
        ranged = _range(source)
        name = source.name or ""
        if kind == "activation":
            # A quantized graph output's float tensor is renamed; the graph keeps the name.
            for use in node.outputs[0].uses():
                for output in use.node.outputs:
                    if output.name in graph_outputs:
                        ranged, name = ranged or _range(output), output.name or name
        dtype = str(zero.dtype) if zero is not None else "uint8"
        if kind == "weight" and source.dtype is not None:
            dtype = source.dtype.name.lower()
        result.append(
            (
                node,
                QuantizedTensor(
                    tensor=name,
                    kind=kind,
                    dtype=dtype,
                    scale=tuple(float(item) for item in scale.reshape(-1)),
                    zero_point=tuple(
                        int(item) for item in np.reshape(0 if zero is None else zero, -1)
                    ),
                    range=ranged,
                ),
            )
        )
    return result


def _numbers(values: tuple[float, ...] | tuple[int, ...]) -> str:
    if len(values) == 1:
        return f"{values[0]:.6g}"
    return f"{len(values)} channels, {min(values):.3g}..{max(values):.3g}"


def table_text(tensors: list[QuantizedTensor]) -> str:
    """A fixed-width table: tensor, kind, dtype, range, scale, zero point."""
    rows = [("tensor", "kind", "dtype", "range", "scale", "zero point")]
    for item in tensors:
        ranged = f"[{item.range[0]:.6g}, {item.range[1]:.6g}]" if item.range else "-"
        rows.append(
            (
                printable(item.tensor),
                item.kind,
                item.dtype,
                ranged,
                _numbers(item.scale),
                _numbers(item.zero_point),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def table_json(tensors: list[QuantizedTensor]) -> str:
    """The same as JSON (``modelprov.quantized_tensors`` version 1)."""
    document = {
        "format": QUANTIZED_TENSORS_FORMAT,
        "version": 1,
        "tensors": [dataclasses.asdict(item) for item in tensors],
    }
    return json.dumps(document, indent=2)
