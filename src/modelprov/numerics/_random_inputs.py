"""Random arrays for an ONNX model's graph inputs, by their element type and shape."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from modelprov.errors import UsageError
from modelprov.numerics._onnx_values import graph_input_names

__all__ = ["random_inputs"]

_SYMBOLIC_SIZE = 2
"""The size given to a symbolic dimension (batch, sequence)."""


def random_inputs(model: ir.Model, generator: np.random.Generator) -> tuple[np.ndarray, ...]:
    """One array per graph input: floats standard normal, integers in [0, 10), booleans
    random; symbolic dimensions get size 2."""
    wanted = set(graph_input_names(model))
    arrays = []
    for value in model.graph.inputs:
        if value.name not in wanted:
            continue
        if value.dtype is None or value.shape is None:
            raise UsageError(
                f"graph input {value.name!r} has no element type or shape; give --inputs"
            )
        shape = tuple(d if isinstance(d, int) else _SYMBOLIC_SIZE for d in value.shape)
        dtype = value.dtype.numpy()
        if value.dtype.is_floating_point():
            arrays.append(generator.standard_normal(shape).astype(dtype))
        elif value.dtype == ir.DataType.BOOL:
            arrays.append(generator.integers(0, 2, shape).astype(bool))
        else:
            arrays.append(generator.integers(0, 10, shape).astype(dtype))
    return tuple(arrays)
