"""modelprov.export: torch.onnx.export(dynamo=True) with provenance kept through optimization."""

from __future__ import annotations

import os
from typing import Any

import torch

from modelprov._io import save_model
from modelprov._stack_trace import TraceOptions
from modelprov.onnx._optimize import OptimizeProvenancePass
from modelprov.onnx._provenance import Provenance
from modelprov.policy import Policies

__all__ = ["export"]


def export(
    model: torch.nn.Module | torch.export.ExportedProgram,
    args: tuple[Any, ...] = (),
    f: str | os.PathLike[str] | None = None,
    *,
    policies: Policies | None = None,
    optimize: bool = True,
    rules: list[Any] | None = None,
    trace_options: TraceOptions | None = None,
    **kwargs: Any,
) -> torch.onnx.ONNXProgram:
    """A drop-in for ``torch.onnx.export(model, args, f, dynamo=True, ...)``.

    torch.onnx captures and translates the model (``optimize=False``); when ``optimize``
    is true, :func:`modelprov.optimize`'s pass runs on the result so every node keeps
    its provenance. Other keyword arguments go to torch.onnx.export unchanged.

    Returns:
        The torch.onnx.ONNXProgram; its ``model`` carries the provenance. Saved to ``f``
        (atomically) when given.
    """
    if kwargs.pop("dynamo", True) is not True:
        raise ValueError("modelprov.export works with the dynamo exporter only (dynamo=True)")
    external_data = kwargs.pop("external_data", None)
    export_params = kwargs.pop("export_params", True)
    program = torch.onnx.export(model, args, None, dynamo=True, optimize=False, **kwargs)
    if optimize:
        OptimizeProvenancePass(policies=policies, rules=rules, trace_options=trace_options)(
            program.model
        )
    elif trace_options is not None:
        provenance = Provenance.read(program.model, trace_options=trace_options)
        provenance.write(program.model, policies=policies, trace_options=trace_options)
    if f is not None:
        initializers = dict(program.model.graph.initializers)
        if not export_params:
            program.model.graph.initializers.clear()
        try:
            save_model(program.model, f, external_data=external_data)
        finally:
            if not export_params:
                program.model.graph.initializers.update(initializers)
    return program
