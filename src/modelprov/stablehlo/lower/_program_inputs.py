"""The lowered function's inputs: an ExportedProgram's states and its user inputs' avals.

torchax 0.0.13 gets both wrong on programs it was not tested with, so modelprov builds them:

- states: ``torchax.export._extract_states_from_exported_program`` lists parameters, then
  buffers, then lifted constants, but the program's placeholders follow its
  ``graph_signature.input_specs``, where torch.export may put constants before buffers (a
  transformers Falcon: ``fused_qkv[..., [-2], :]`` lifts the index ``[-2]`` as a constant
  between the parameters and the rotary buffers). The values then land on the wrong
  placeholders (a float buffer as ``aten.index``'s indexer). :func:`program_states` takes them
  in placeholder order.
- avals: ``torchax.export.extract_avals`` gives every symbolic dimension its own
  ``jax.export.SymbolicScope``, and JAX refuses to mix scopes ("Invalid mixing of symbolic
  scopes"), so an export with two dynamic dimensions failed. :func:`user_input_avals` makes
  all of them in one scope, with each dimension's range as constraints.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.export.graph_signature import InputKind

from modelprov.errors import StableHLOError
from modelprov.stablehlo.lower._torchax_compat import import_torchax

__all__ = ["program_states", "user_input_avals"]


def _placeholders_and_specs(
    program: torch.export.ExportedProgram,
) -> list[tuple[torch.fx.Node, Any]]:
    placeholders = [node for node in program.graph.nodes if node.op == "placeholder"]
    specs = list(program.graph_signature.input_specs)
    if len(placeholders) != len(specs):
        raise StableHLOError(
            f"the ExportedProgram has {len(placeholders)} placeholders but its graph signature "
            f"lists {len(specs)} inputs; export the model again with torch.export.export"
        )
    return list(zip(placeholders, specs, strict=True))


def program_states(program: torch.export.ExportedProgram) -> list[Any]:
    """Parameters, buffers and lifted constants in the order of the program's placeholders
    (all of them come before the user inputs, which is how the lowered function takes them)."""
    states: list[Any] = []
    seen_user_input = False
    for placeholder, spec in _placeholders_and_specs(program):
        if spec.kind == InputKind.USER_INPUT:
            seen_user_input = True
            continue
        if seen_user_input:
            raise StableHLOError(
                f"placeholder {placeholder.name!r} ({spec.kind.name}) comes after a user input; "
                "modelprov lowers programs whose states precede their inputs (torch.export's "
                "order): export the model again with torch.export.export"
            )
        states.append(_state_value(program, spec))
    return states


def _state_value(program: torch.export.ExportedProgram, spec: Any) -> Any:
    # Parameters and persistent buffers are in state_dict; lifted constants and
    # non-persistent buffers in constants.
    for table in (program.state_dict, program.constants):
        if spec.target in table:
            return table[spec.target]
    raise StableHLOError(
        f"input {spec.arg.name!r} ({spec.kind.name} {spec.target!r}) has no value in the "
        "ExportedProgram's state_dict or constants; export the model again"
    )


def user_input_avals(program: torch.export.ExportedProgram) -> list[Any]:
    """``jax.ShapeDtypeStruct`` of each user input, every symbolic dimension in one scope."""
    import jax

    import_torchax()
    from torchax.ops import mappings

    scope = _symbolic_scope(program.range_constraints)
    dims: dict[str, Any] = {}

    def dim(size: Any) -> Any:
        if not isinstance(size, torch.SymInt):
            return int(size)
        expression = str(size.node.expr)
        if expression not in dims:
            (dims[expression],) = jax.export.symbolic_shape(expression, scope=scope)
        return dims[expression]

    avals = []
    for placeholder, spec in _placeholders_and_specs(program):
        if spec.kind != InputKind.USER_INPUT:
            continue
        value = placeholder.meta.get("val")
        if isinstance(value, bool | int | float):
            avals.append(jax.ShapeDtypeStruct((), type(value)))
        elif isinstance(value, torch.Tensor):
            shape = tuple(dim(size) for size in value.shape)
            avals.append(jax.ShapeDtypeStruct(shape, mappings.t2j_dtype(value.dtype)))
        else:
            raise StableHLOError(
                f"user input {placeholder.name!r} is a {type(value).__name__}; modelprov lowers "
                "tensor, int, float and bool inputs"
            )
    return avals


def _symbolic_scope(range_constraints: Any) -> Any:
    """One ``jax.export.SymbolicScope`` whose constraints are the symbols' ranges."""
    import jax

    constraints: list[str] = []
    for symbol, value_range in range_constraints.items():
        if not getattr(symbol, "is_symbol", False):
            continue  # expressions (2*s0) follow from their symbols' ranges
        name = str(symbol)
        lower, upper = value_range.lower, value_range.upper
        if lower.is_finite and int(lower) > 1:
            constraints.append(f"{name} >= {int(lower)}")
        if upper.is_finite:
            constraints.append(f"{name} <= {int(upper)}")
    return jax.export.SymbolicScope(tuple(constraints))
