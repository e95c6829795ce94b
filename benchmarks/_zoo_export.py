"""The zoo's plain exports, cached between runs (bench_zoo, bench_optimize, check_output_bytes).

Imports nothing of modelprov, so a script comparing two modelprov versions reads the same
exports for both.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import onnx_ir as ir
import torch

from benchmarks._zoo_cases import CASES, builders_fingerprint


def cached_export(name: str, cache: str) -> tuple[ir.Model, list[np.ndarray]]:
    """The zoo case's plain export (``torch.onnx.export(optimize=False)``) and its inputs,
    from the cache when present."""
    import transformers

    versions = f"torch{torch.__version__}-tf{transformers.__version__}"
    tag = f"{name}-{versions}-zoo{builders_fingerprint()}".replace("+", "_")
    path = os.path.join(cache, f"{tag}.onnx")
    torch.manual_seed(0)
    case = CASES[name]
    module, args = case.build()
    inputs = [arg.numpy() for arg in args]
    if os.path.exists(path):
        return ir.load(path), inputs
    shapes = case.dynamic_shapes() if case.dynamic_shapes is not None else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            module, args, dynamo=True, optimize=False, verbose=False, dynamic_shapes=shapes
        )
    os.makedirs(cache, exist_ok=True)
    partial = f"{path}.partial"
    ir.save(program.model, partial)
    os.replace(partial, path)
    return ir.load(path), inputs  # as every later run sees it
