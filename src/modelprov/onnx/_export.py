"""modelprov.export: torch.onnx.export(dynamo=True) with provenance kept through optimization."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch

from modelprov._io import save_model
from modelprov._stack_trace import TraceOptions
from modelprov.annotation import annotations as stored_annotations
from modelprov.annotation import module_paths, normalize_annotations
from modelprov.annotation._fx_custom import fx_custom_metadata
from modelprov.annotation._module_outputs import module_output_nodes, per_output_modules
from modelprov.errors import AnnotationError
from modelprov.onnx._annotations import apply_annotations
from modelprov.onnx._aten_record import record_aten_calls
from modelprov.onnx._optimize import OptimizeProvenancePass
from modelprov.onnx._provenance import Provenance
from modelprov.onnx._source_nodes import record_source_nodes
from modelprov.policy import DEFAULT_POLICIES, Policies

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
    annotations: Mapping[str, Mapping[str, object]] | None = None,
    **kwargs: Any,
) -> torch.onnx.ONNXProgram:
    """A drop-in for ``torch.onnx.export(model, args, f, dynamo=True, ...)``.

    torch.onnx captures and translates the model (``optimize=False``); when ``optimize``
    is true, :func:`modelprov.optimize`'s pass runs on the result so every node keeps
    its provenance. Other keyword arguments go to torch.onnx.export unchanged.

    ``annotations`` (``{module_path: {key: value}}``, e.g. a :func:`modelprov.calibrate`
    result) are added to what :func:`modelprov.annotate` stored on the modules and what
    ``torch.fx.traceback.annotate`` recorded on FX nodes; unknown module paths raise
    AnnotationError with close matches.

    Returns:
        The torch.onnx.ONNXProgram; its ``model`` carries the provenance. Saved to ``f``
        (atomically) when given.
    """
    if kwargs.pop("dynamo", True) is not True:
        raise ValueError("modelprov.export works with the dynamo exporter only (dynamo=True)")
    external_data = kwargs.pop("external_data", None)
    export_params = kwargs.pop("export_params", True)
    policies = policies if policies is not None else DEFAULT_POLICIES
    normalized = _collect_annotations(model, annotations)
    with torch.fx.traceback.preserve_node_meta():
        program = torch.onnx.export(model, args, None, dynamo=True, optimize=False, **kwargs)
    record_aten_calls(program)
    original_graph = model.graph if isinstance(model, torch.export.ExportedProgram) else None
    record_source_nodes(program, id(original_graph) if original_graph is not None else None)
    fx_custom = (
        fx_custom_metadata(program.exported_program) if program.exported_program is not None else {}
    )
    if normalized or fx_custom:
        per_output = per_output_modules(normalized)
        output_nodes = (
            module_output_nodes(model, tuple(args), kwargs.get("kwargs"), per_output)
            if per_output and isinstance(model, torch.nn.Module)
            else {}
        )
        apply_annotations(program.model, normalized, fx_custom, policies, output_nodes)
        if not optimize:
            provenance = Provenance.read(program.model, trace_options=trace_options)
            provenance.write(program.model, policies=policies, trace_options=trace_options)
    if optimize:
        OptimizeProvenancePass(policies=policies, rules=rules, trace_options=trace_options)(
            program.model
        )
    elif trace_options is not None and not (normalized or fx_custom):
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


def _collect_annotations(
    model: object, annotations: Mapping[str, Mapping[str, object]] | None
) -> dict[str, dict[str, str]]:
    """Annotations stored on the modules, overridden per key by the ``annotations`` argument."""
    if not isinstance(model, torch.nn.Module):
        if annotations:
            raise AnnotationError(
                "annotations need the nn.Module (module paths are resolved against it); "
                f"got {type(model).__name__}"
            )
        return {}
    paths = module_paths(model)
    merged: dict[str, dict[str, str]] = {k: dict(v) for k, v in stored_annotations(model).items()}
    for path, keys in normalize_annotations(annotations or {}, paths).items():
        merged.setdefault(path, {}).update(keys)
    return {path: keys for path, keys in merged.items() if keys}
