"""One op per constant value, its location naming every op that built the value.

JAX builds the same constant value once per FX node: each node's ``broadcast_in_dim`` of
one shared scalar constant (a LayerNorm's epsilon, a mean's divisor, GELU's ``erf``
coefficients). Compilers merge identical constant values into one op (MLIR's folder while
JAX lowers the call, XLA's CSE) and, measured on jaxlib 0.10.2, drop the location when they
do, even when the copies' locations are equal: the merged HLO instruction is named by no
node (``op_name="jit(call)/call_exported"``), and so is every copy XLA's fusion makes of it.
A value that is one op already keeps its location. So :func:`merge_constant_values` merges
them first, as MLIR's passes do, but keeps every copy's location in the survivor's
(a ``FusedLoc``, MLIR's own way to say "made from these ops").

A *constant-only* op has no operands or only constant-only operands, at function level
(``_constant_chains``). Two of them compute the same value when their op names, result
types, attributes and operand values are equal; a constant is compared by its splat value
(any other constant is its own value: its data is never printed); ops with regions are
never merged, and results of calls, custom calls and tokens are no constants (as for
``_constant_chains``, which labels the merged ops). The survivor is the first copy (it
dominates the others: one block per function). The values computed are the same, so is
what the model computes; only the number of ops changes.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

__all__ = ["NOT_VALUES", "merge_constant_values"]

# Ops never merged: calls, side effects, tokens (nor ops with regions or without results).
NOT_VALUES = frozenset(
    {
        "func.call",
        "func.return",
        "stablehlo.custom_call",
        "stablehlo.after_all",
        "stablehlo.create_token",
    }
)


def merge_constant_values(module: Any) -> int:
    """Merge the identical constant-only ops of every function of ``module`` (an
    ``ir.Module``, edited in place, inside its context); returns how many ops were removed."""
    from jaxlib.mlir import ir

    removed = 0
    for function in module.body.operations:
        if function.operation.name != "func.func":
            continue
        for region in function.operation.regions:
            for block in region.blocks:
                removed += _merge_block(ir, block)
    return removed


def _merge_block(ir: Any, block: Any) -> int:
    keys: dict[Any, Hashable] = {}  # constant-only op -> its value
    groups: dict[Hashable, list[Any]] = {}
    for op in block.operations:
        operation = op.operation
        operands = []
        for operand in operation.operands:
            owner = operand.owner
            producer = getattr(owner, "operation", None)
            if producer is None or producer not in keys:
                break  # a block argument or model data
            operands.append((keys[producer], operand.result_number))
        else:
            if operation.name in NOT_VALUES:
                continue  # a call's result, a side effect: not a constant
            own = _signature(ir, operation)
            if own is None:
                keys[operation] = ("op", len(keys))  # constant-only, its own value
                continue
            key = (own, tuple(operands))
            keys[operation] = key
            groups.setdefault(key, []).append(operation)
    removed = 0
    for copies in groups.values():
        if len(copies) < 2:
            continue
        survivor, rest = copies[0], copies[1:]
        survivor.location = ir.Location.fused([copy.location for copy in copies])
        for copy in rest:
            for mine, kept in zip(copy.results, survivor.results, strict=True):
                mine.replace_all_uses_with(kept)
            copy.erase()
            removed += 1
    return removed


def _signature(ir: Any, operation: Any) -> tuple[str, ...] | None:
    """The op's name, result types and attributes; None when it is never merged."""
    if operation.name in NOT_VALUES or len(operation.regions) or not len(operation.results):
        return None
    parts = [operation.name, *(str(result.type) for result in operation.results)]
    attributes = operation.attributes
    for position in range(len(attributes)):
        named = attributes[position]
        attribute = named.attr.maybe_downcast()
        if operation.name == "stablehlo.constant" and not (
            isinstance(attribute, ir.DenseElementsAttr) and attribute.is_splat
        ):
            return None
        parts.append(f"{named.name}={attribute}")
    return tuple(parts)
