"""export_stablehlo: torch.export → torchax/JAX lowering → attributes → StableHLOProgram."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

import torch

from modelprov._stack_trace import TraceOptions
from modelprov.annotation import annotations as stored_annotations
from modelprov.annotation import module_paths, normalize_annotations
from modelprov.errors import StableHLOError
from modelprov.policy import DEFAULT_POLICIES, Policies
from modelprov.stablehlo._attach import attach
from modelprov.stablehlo._fx_nodes import fx_node_infos
from modelprov.stablehlo._jax_compat import ir_context, module_to_bytecode
from modelprov.stablehlo._lower import ROOT_SCOPE, lower
from modelprov.stablehlo._program import StableHLOProgram
from modelprov.stablehlo._torchax_compat import import_torchax

__all__ = ["export_stablehlo", "program_from_exported_program"]

_LOG = logging.getLogger(__name__)

AnnotationValue = str | int | float | bool


def export_stablehlo(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any] | None = None,
    *,
    annotations: Mapping[str, Mapping[str, AnnotationValue]] | None = None,
    policies: Policies | None = None,
    dynamic_shapes: Any = None,
    trace_options: TraceOptions | None = None,
) -> StableHLOProgram:
    """Export ``model`` to StableHLO; every op names its FX node, module and user metadata.

    ``annotations`` maps module paths (as in ``model.named_modules()``, '' for the root) to
    ``{key: value}``; they are added to what ``modelprov.annotate`` stored on the modules
    (the argument wins per key). ``policies`` (default ``DEFAULT_POLICIES``) decides which
    keys are value-scoped (only on the ops producing the module's outputs) and how values
    merge. ``dynamic_shapes`` is passed to ``torch.export.export``. ``trace_options``
    rewrites or strips the file paths of stack traces (``modelprov.stack``, ``.sources``).

    Raises MissingDependencyError without jax/torchax, AnnotationError for an unknown module
    path, StableHLOError (naming the FX node and its source line) when lowering fails.
    """
    import_torchax()  # fail before the slow torch.export when the extra is missing
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"export_stablehlo needs a torch.nn.Module, got {type(model).__name__}")
    chosen = DEFAULT_POLICIES if policies is None else policies
    merged = _merged_annotations(model, annotations)

    exported_program = torch.export.export(
        model, tuple(args), dict(kwargs or {}), dynamic_shapes=dynamic_shapes
    )
    return program_from_exported_program(
        exported_program, merged, chosen, trace_options=trace_options
    )


def program_from_exported_program(
    exported_program: torch.export.ExportedProgram,
    annotations: Mapping[str, Mapping[str, str]],
    policies: Policies,
    *,
    trace_options: TraceOptions | None = None,
) -> StableHLOProgram:
    """Lower ``exported_program`` and label its ops (``annotations`` already normalized)."""
    lowered = lower(exported_program)
    infos = fx_node_infos(
        lowered.decomposed.graph, exported_program.graph, trace_options=trace_options
    )

    with ir_context():
        module = lowered.exported.mlir_module(serialized=False)
        result = attach(module, ROOT_SCOPE, infos, annotations, policies)
        if not module.operation.verify():
            raise StableHLOError("the StableHLO module does not verify after adding attributes")
        # JAX's own serializer (the one jax.export used), so the artifact stays portable.
        serialized = module_to_bytecode(module)
        text = module.operation.get_asm(enable_debug_info=False)
        text_with_locations = module.operation.get_asm(enable_debug_info=True)

    exported = dataclasses.replace(lowered.exported, mlir_module_serialized=serialized)
    program = StableHLOProgram(
        text=text,
        text_with_locations=text_with_locations,
        exported=exported,
        weights=lowered.weights,
        ops=result.ops,
        nodes=infos,
        annotations={path: dict(values) for path, values in annotations.items()},
        exported_program=lowered.decomposed,
    )
    _LOG.info(
        "exported %d StableHLO ops, %d without an FX node (coverage %.3f)",
        len(program.ops),
        len(program.unattributed_ops),
        program.coverage,
    )
    return program


def _merged_annotations(
    model: torch.nn.Module, given: Mapping[str, Mapping[str, AnnotationValue]] | None
) -> dict[str, dict[str, str]]:
    known = set(module_paths(model))
    explicit = normalize_annotations(given or {}, known)
    merged = {path: dict(values) for path, values in stored_annotations(model).items()}
    for path, values in explicit.items():
        merged.setdefault(path, {}).update(values)
    return merged
