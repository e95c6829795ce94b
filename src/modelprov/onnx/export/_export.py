"""modelprov.export: torch.onnx.export(dynamo=True) with provenance kept through optimization."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, BinaryIO

import onnx_ir as ir
import torch
import torch.onnx.verification

from modelprov._model_io._files import PROTOBUF_LIMIT, save_model
from modelprov.annotation import annotations as stored_annotations
from modelprov.annotation import module_paths, normalize_annotations
from modelprov.annotation._fx_custom import fx_custom_metadata
from modelprov.annotation._module_outputs import module_output_nodes, per_output_modules
from modelprov.core._policy import DEFAULT_POLICIES, Policies
from modelprov.core._provenance import Provenance
from modelprov.core._stack_trace import TraceOptions
from modelprov.errors import AnnotationError, ExportError, VerificationError, keyword
from modelprov.onnx._annotations import apply_annotations
from modelprov.onnx._source_nodes import record_source_nodes
from modelprov.onnx.export._aten_record import record_aten_calls
from modelprov.onnx.export._capture import capture_program
from modelprov.onnx.export._export_report import OutputCheck, provenance_counts, write_export_report
from modelprov.onnx.export._onnx_program import ProvenanceONNXProgram

__all__ = ["export"]


_TORCHSCRIPT_ONLY: dict[str, tuple[object, str]] = {
    "training": (torch.onnx.TrainingMode.EVAL, "put the model in eval() or train() yourself"),
    "operator_export_type": (
        torch.onnx.OperatorExportTypes.ONNX,
        "the dynamo exporter emits standard ONNX only",
    ),
    "do_constant_folding": (True, "pass optimize=False to skip all optimization"),
    "custom_opsets": (None, "use custom_translation_table"),
    "export_modules_as_functions": (
        False,
        'use modelprov.functionize(model, level="module") on the result',
    ),
    "autograd_inlining": (True, "the dynamo exporter always inlines autograd functions"),
}
"""torch.onnx.export keywords of the TorchScript exporter only, their defaults and what to do."""

_PASSED_TO_TORCH = frozenset(
    {
        "kwargs",
        "verbose",
        "input_names",
        "output_names",
        "opset_version",
        "dynamic_shapes",
        "custom_translation_table",
        "profile",
        "dump_exported_program",
        "artifacts_dir",
        "dynamic_axes",
    }
)

_MAX_ABS_DIFF = 5e-3
_MAX_REL_DIFF = 1e-1
"""torch.onnx.export(verify=True)'s own accuracy thresholds."""


def export(
    model: torch.nn.Module | torch.export.ExportedProgram,
    args: tuple[Any, ...] = (),
    f: str | os.PathLike[str] | BinaryIO | None = None,
    *,
    policies: Policies | None = None,
    optimize: bool = True,
    rules: list[Any] | None = None,
    trace_options: TraceOptions | None = None,
    annotations: Mapping[str, Mapping[str, object]] | None = None,
    verify: bool = False,
    report: bool = False,
    export_params: bool = True,
    keep_initializers_as_inputs: bool = False,
    external_data: bool | None = None,
    **kwargs: Any,
) -> torch.onnx.ONNXProgram:
    """A drop-in for ``torch.onnx.export(model, args, f, dynamo=True, ...)``.

    torch.onnx captures and translates the model (``optimize=False``); when ``optimize``
    is true, :func:`modelprov.optimize`'s pass runs on the result so every node keeps
    its provenance. torch's keywords work as in torch, and ``verify`` / ``report`` apply
    to the model returned and saved (the optimized one): ``verify=True`` runs it with
    onnxruntime against torch and raises VerificationError when an output differs beyond
    torch's own thresholds (abs 5e-3, rel 1e-1), before anything is saved; ``report=True`` writes
    ``modelprov_export_<time>.md`` into ``artifacts_dir``. Keywords of the TorchScript
    exporter only (``training``, ``export_modules_as_functions``...) raise ExportError
    unless left at their defaults. ``f`` is a path or a binary file object.

    ``annotations`` (``{module_path: {key: value}}``, e.g. a :func:`modelprov.calibrate`
    result) are added to what :func:`modelprov.annotate` stored on the modules and what
    ``torch.fx.traceback.annotate`` recorded on FX nodes; unknown module paths raise
    AnnotationError with close matches.

    Returns:
        The torch.onnx.ONNXProgram; its ``model`` carries the provenance, and its
        ``optimize()`` is modelprov's (provenance kept, these policies and rules), not
        torch's. Saved to ``f`` (atomically) when given.
    """
    if kwargs.pop("dynamo", True) is not True:
        raise ExportError("modelprov.export works with the dynamo exporter only (dynamo=True)")
    _check_keywords(kwargs)
    if f is not None and not isinstance(f, str | os.PathLike) and not hasattr(f, "write"):
        raise ExportError(f"f must be a path or a binary file object, got {type(f).__name__}")
    policies = policies if policies is not None else DEFAULT_POLICIES
    normalized = _collect_annotations(model, annotations)
    captured = capture_program(model, tuple(args), kwargs)
    exported = torch.onnx.export(
        captured if captured is not None else model,
        args,
        None,
        dynamo=True,
        optimize=False,
        **kwargs,
    )
    program = ProvenanceONNXProgram(
        exported.model,
        exported.exported_program,
        policies=policies,
        rules=rules,
        trace_options=trace_options,
    )
    record_aten_calls(program)
    record_source_nodes(program, captured.graph if captured is not None else None)
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
    before = provenance_counts(program.model) if report else None
    if optimize:
        program.optimize_pass(program.model)
    elif trace_options is not None and not (normalized or fx_custom):
        provenance = Provenance.read(program.model, trace_options=trace_options)
        provenance.write(program.model, policies=policies, trace_options=trace_options)
    checks = _verify(program, args, kwargs.get("kwargs")) if verify else None
    failed = [check for check in checks or () if not check.ok]
    saved_to = None
    if f is not None and not failed:
        _save(program.model, f, export_params, keep_initializers_as_inputs, external_data)
        saved_to = os.fspath(f) if isinstance(f, str | os.PathLike) else repr(f)
    if report:
        assert before is not None
        write_export_report(
            kwargs.get("artifacts_dir", "."),
            model_name=type(model).__name__,
            before=before,
            after=provenance_counts(program.model),
            checks=checks,
            saved_to=saved_to,
        )
    if failed:
        bad = ", ".join(
            f"{c.name} (max abs diff {c.max_abs_diff:.3g}, rel {c.max_rel_diff:.3g})"
            for c in failed
        )
        raise VerificationError(
            f"{keyword('verify', 'verify=True')}: the optimized model's outputs differ from "
            f"torch's: {bad}; nothing was saved. A rewrite rule or optimization changed the "
            f"numerics: export with {keyword('optimize', 'optimize=False')} or without your "
            "rules to find which"
        )
    return program


def _check_keywords(kwargs: Mapping[str, Any]) -> None:
    for name, value in kwargs.items():
        if name in _TORCHSCRIPT_ONLY:
            default, advice = _TORCHSCRIPT_ONLY[name]
            if value != default:
                raise ExportError(
                    f"{name}={value!r} belongs to torch's TorchScript exporter, which "
                    f"modelprov.export does not use (dynamo=True); {advice}"
                )
        elif name not in _PASSED_TO_TORCH:
            raise ExportError(
                f"modelprov.export got an unexpected keyword {name!r}; it takes "
                "torch.onnx.export's keywords and policies, rules, trace_options, annotations"
            )


def _verify(
    program: torch.onnx.ONNXProgram, args: tuple[Any, ...], kwargs: dict[str, Any] | None
) -> list[OutputCheck]:
    """Runs the returned model with onnxruntime against torch, output by output."""
    infos = torch.onnx.verification.verify_onnx_program(program, args, kwargs)
    return [
        OutputCheck(
            name=info.name,
            max_abs_diff=float(info.max_abs_diff),
            max_rel_diff=float(info.max_rel_diff),
            ok=info.max_abs_diff < _MAX_ABS_DIFF and info.max_rel_diff < _MAX_REL_DIFF,
        )
        for info in infos
    ]


def _save(
    model: ir.Model,
    f: str | os.PathLike[str] | BinaryIO,
    export_params: bool,
    keep_initializers_as_inputs: bool,
    external_data: bool | None,
) -> None:
    """Saves like ONNXProgram.save: weights optional, initializers optionally inputs."""
    graph = model.graph
    initializers = dict(graph.initializers)
    added = []
    if keep_initializers_as_inputs:
        present = set(graph.inputs)
        added = [value for value in initializers.values() if value not in present]
        graph.inputs.extend(added)
    if not export_params:
        graph.initializers.clear()
    try:
        if isinstance(f, str | os.PathLike):
            save_model(model, f, external_data=external_data)
        else:
            if external_data:
                raise ExportError(
                    "external_data=True needs f to be a path (the weights go to a file "
                    "beside it), not a file object"
                )
            proto = ir.to_proto(model)
            if proto.ByteSize() > PROTOBUF_LIMIT:
                raise ExportError(
                    "the model is over 2 GB, too big for one protobuf; pass f as a path "
                    "so its weights go to external data"
                )
            f.write(proto.SerializeToString())
    finally:
        for value in added:
            graph.inputs.remove(value)
        if not export_params:
            graph.initializers.update(initializers)


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
    merged = normalize_annotations(stored_annotations(model), paths)
    for path, keys in normalize_annotations(annotations or {}, paths).items():
        merged.setdefault(path, {}).update(keys)
    return {path: keys for path, keys in merged.items() if keys}
