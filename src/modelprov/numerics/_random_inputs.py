"""Random arrays for an ONNX model's graph inputs, by their element type and shape."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from modelprov.errors import UsageError
from modelprov.numerics._onnx_values import graph_input_names
from modelprov.onnx.recover._correspondence_run import random_array

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
        dtype = np.dtype(value.dtype.numpy())
        arrays.append(random_array(generator, dtype, shape, integers_below=10))
    return tuple(arrays)
