"""export_stablehlo: torch.export → torchax/JAX lowering → attributes → StableHLOProgram."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

import torch

from modelprov.annotation import annotations as stored_annotations
from modelprov.annotation import module_paths, normalize_annotations
from modelprov.annotation._module_outputs import module_output_nodes, per_output_modules
from modelprov.annotation._values import annotation_value
from modelprov.core._policy import DEFAULT_POLICIES, Policies
from modelprov.core._stack_trace import TraceOptions
from modelprov.errors import StableHLOError
from modelprov.stablehlo._program import StableHLOProgram
from modelprov.stablehlo.attach._attach import attach
from modelprov.stablehlo.attach._composite_ops import finish_composites, locate_composites
from modelprov.stablehlo.attach._constant_values import merge_constant_values
from modelprov.stablehlo.attach._folded_constant_values import merge_folded_constant_values
from modelprov.stablehlo.attach._numbers import NUMBER_ATTRIBUTES, NumberAttributes, number_kinds
from modelprov.stablehlo.attach._splat_calls import call_small_splats
from modelprov.stablehlo.lower._aliases import alias_infos
from modelprov.stablehlo.lower._control_flow import branch_sources
from modelprov.stablehlo.lower._fx_nodes import fx_node_infos, node_info
from modelprov.stablehlo.lower._jax_compat import ir_context, mlir_to_hlo_text, module_to_bytecode
from modelprov.stablehlo.lower._lower import ROOT_SCOPE, lower
from modelprov.stablehlo.lower._torchax_compat import import_torchax

__all__ = ["export_stablehlo", "program_from_exported_program", "program_module_paths"]

_LOG = logging.getLogger(__name__)

AnnotationValue = str | int | float | bool


def export_stablehlo(
    model: torch.nn.Module | torch.export.ExportedProgram,
    args: tuple[Any, ...] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    annotations: Mapping[str, Mapping[str, AnnotationValue]] | None = None,
    policies: Policies | None = None,
    dynamic_shapes: Any = None,
    trace_options: TraceOptions | None = None,
    number_attributes: NumberAttributes = "typed",
    composites: bool = False,
) -> StableHLOProgram:
    """Export ``model`` to StableHLO; every op names its FX node, module and user metadata.

    ``annotations`` maps module paths (as in ``model.named_modules()``, '' for the root) to
    ``{key: value}``; they are added to what ``modelprov.annotate`` stored on the modules
    (the argument wins per key). ``policies`` (default ``DEFAULT_POLICIES``) decides which
    keys are value-scoped (only on the ops producing the module's outputs) and how values
    merge. ``dynamic_shapes`` is passed to ``torch.export.export``. ``trace_options``
    rewrites or strips the file paths of stack traces (``modelprov.stack``, ``.sources``,
    op locations). ``number_attributes``: ``"typed"`` writes numeric user keys
    (``custom.min``...) as ``f64`` / ``i64`` attributes, ``"string"`` as strings (seed 003).

    ``model`` may also be a ``torch.export.ExportedProgram`` (then ``args`` and ``kwargs`` are
    not used, ``dynamic_shapes`` must be None, and annotation paths are checked against the
    module paths the program records); the result is the same as for the module it came from.

    Raises MissingDependencyError without jax/torchax, AnnotationError for an unknown module
    path, StableHLOError (naming the FX node and its source line) when lowering fails, and
    StableHLOError for ``composites=True`` with symbolic shapes.
    """
    import_torchax()  # fail before the slow torch.export when the extra is missing
    chosen = DEFAULT_POLICIES if policies is None else policies
    if number_attributes not in NUMBER_ATTRIBUTES:
        raise ValueError(
            f"number_attributes={number_attributes!r}: give 'typed' (f64/i64 attributes for "
            "numeric keys) or 'string'"
        )
    if isinstance(model, torch.export.ExportedProgram):
        if dynamic_shapes is not None:
            raise ValueError(
                "dynamic_shapes applies when exporting a module; an ExportedProgram already "
                "has its shapes (pass dynamic_shapes to torch.export.export instead)"
            )
        explicit = normalize_annotations(annotations or {}, program_module_paths(model))
        return program_from_exported_program(
            model,
            explicit,
            chosen,
            trace_options=trace_options,
            number_kinds=_number_kinds(None, annotations, number_attributes),
            composites=composites,
        )
    if not isinstance(model, torch.nn.Module):
        raise TypeError(
            "export_stablehlo needs a torch.nn.Module or a torch.export.ExportedProgram, "
            f"got {type(model).__name__}"
        )
    merged = _merged_annotations(model, annotations)

    exported_program = torch.export.export(
        model, tuple(args), dict(kwargs or {}), dynamic_shapes=dynamic_shapes
    )
    per_output = per_output_modules(merged)
    output_nodes = (
        module_output_nodes(model, tuple(args), kwargs, per_output, exported_program.graph)
        if per_output
        else {}
    )
    return program_from_exported_program(
        exported_program,
        merged,
        chosen,
        trace_options=trace_options,
        output_nodes=output_nodes,
        number_kinds=_number_kinds(model, annotations, number_attributes),
        composites=composites,
    )


def _number_kinds(
    model: torch.nn.Module | None,
    given: Mapping[str, Mapping[str, AnnotationValue]] | None,
    number_attributes: NumberAttributes,
) -> dict[str, type[int] | type[float]]:
    """The user keys written as numbers: those whose every value is one (none for "string")."""
    if number_attributes == "string":
        return {}
    typed = {
        path: {key: annotation_value(value, key) for key, value in values.items()}
        for path, values in (given or {}).items()
    }
    return number_kinds([stored_annotations(model) if model is not None else {}, typed])


def program_from_exported_program(
    exported_program: torch.export.ExportedProgram,
    annotations: Mapping[str, Mapping[str, str]],
    policies: Policies,
    *,
    trace_options: TraceOptions | None = None,
    output_nodes: Mapping[str, tuple[str, ...]] | None = None,
    number_kinds: Mapping[str, type[int] | type[float]] | None = None,
    composites: bool = False,
) -> StableHLOProgram:
    """Lower ``exported_program`` and label its ops (``annotations`` already normalized).

    ``output_nodes``: module path -> nodes producing its outputs, for per-output keys;
    ``number_kinds``: user keys written as ``i64`` / ``f64`` attributes (``_numbers``);
    ``composites``: ATen calls as ``stablehlo.composite`` ops (``_composites``).
    """
    lowered = lower(exported_program, composites=composites)
    infos = fx_node_infos(
        lowered.decomposed.graph, exported_program.graph, trace_options=trace_options
    )
    infos.update(  # nodes inside torch.cond / while_loop subgraphs (_control_flow)
        branch_sources(
            lowered.decomposed.graph_module,
            infos,
            lambda node: node_info(node, id(exported_program.graph), trace_options),
        )
    )

    with ir_context():
        module = lowered.exported.mlir_module(serialized=False)
        if lowered.composites is not None:
            locate_composites(module, lowered.composites, ROOT_SCOPE)
        merge_constant_values(module)  # one op per constant value: compilers keep its name
        merge_folded_constant_values(module, mlir_to_hlo_text)  # and per value XLA folds to
        call_small_splats(module, lambda text: mlir_to_hlo_text(text, metadata=True))  # named
        result = attach(
            module,
            ROOT_SCOPE,
            infos,
            annotations,
            policies,
            aliases_for=lambda with_ops: alias_infos(
                lowered.decomposed.graph,
                exported_program.graph,
                infos,
                with_ops,
                trace_options,
            ),
            output_nodes=output_nodes,
            number_kinds=number_kinds,
        )
        ops = result.ops
        if lowered.composites is not None:
            ops = finish_composites(module, lowered.composites, result, infos, policies)
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
        ops=ops,
        nodes=infos,
        aliases=result.aliases,
        scoping=result.scoping,
        exits=result.exits,
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


def program_module_paths(exported_program: torch.export.ExportedProgram) -> list[str]:
    """Module paths an ExportedProgram knows: its module call graph and nn_module_stack."""
    paths: dict[str, None] = {"": None}
    for entry in exported_program.module_call_graph:
        paths[str(entry.fqn)] = None
    for node in exported_program.graph.nodes:
        for path, _ in (node.meta.get("nn_module_stack") or {}).values():
            paths[str(path)] = None
    return list(paths)


def _merged_annotations(
    model: torch.nn.Module, given: Mapping[str, Mapping[str, AnnotationValue]] | None
) -> dict[str, dict[str, str]]:
    known = set(module_paths(model))
    explicit = normalize_annotations(given or {}, known)
    merged = normalize_annotations(stored_annotations(model), known)
    for path, values in explicit.items():
        merged.setdefault(path, {}).update(values)
    return merged
