"""One op per constant value XLA folds to, not only per identical op.

``_constant_values`` merges constant-only ops that are the same op. Different ops can fold
to the same constant: JAX's variance divides by ``broadcast_in_dim(32)`` and also by
``broadcast_in_dim(32 - 0)`` (its ``N - ddof``). XLA's MLIR folder turns both into one splat
constant and, merging them, drops the location (``_constant_values``): the instruction it
becomes, and the reciprocal XLA's simplifier makes of it, are named by no node.

:func:`merge_folded_constant_values` asks XLA itself which constant-only ops of ``main``
fold to the same constant: a copy of the module whose ``main`` returns every constant-only
value an op of the model reads (the constant-only ops feeding it are part of it) is
converted to HLO by XLA's own MLIR-to-HLO conversion (the one ``jax.jit`` runs, folder
included); two values it returns as the same instruction are one constant. Those ops
are merged as ``_constant_values`` does: the first one stays and gives the value to the
others' users. A copy, and each constant-only op that only fed copies, is removed and named in
the location of the op now giving its value (a ``FusedLoc``); one whose value no op left
gives stays, unread (XLA drops it; it keeps its node's name in the StableHLO). What XLA
computes is the same: it made them one constant anyway. When the conversion fails, nothing
is merged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from modelprov.stablehlo.attach._constant_values import NOT_VALUES
from modelprov.stablehlo.read._op_walk import main_function

__all__ = ["constant_only", "main_block", "merge_folded_constant_values", "values_as_hlo"]

_LOG = logging.getLogger(__name__)

_ROOT_TUPLE = re.compile(r"^\s*ROOT\s+%?[\w.\-]+\s*=.*?\btuple\((?P<operands>[^)]*)\)", re.M)
_INDEX_COMMENT = re.compile(r"/\*.*?\*/")
_NEVER = NOT_VALUES | {"stablehlo.composite", "func.call"}


def merge_folded_constant_values(module: Any, to_hlo: Callable[[str], str]) -> int:
    """Merge the constant-only ops of ``module``'s ``main`` (an ``ir.Module``, edited in
    place, inside its context) that XLA folds to the same constant; ``to_hlo`` converts
    MLIR text to HLO text with XLA. Returns how many ops were removed."""
    from jaxlib.mlir import ir

    block = main_block(module)
    if block is None:
        return 0
    operations = [op.operation for op in block.operations]
    constant = constant_only(operations)
    inside = {operations[i] for i in constant}
    candidates = [  # the values the model's own ops read: constant-only ops feed the rest
        i
        for i in constant
        if len(operations[i].results) == 1
        and isinstance(operations[i].results[0].type, ir.RankedTensorType)
        and ir.RankedTensorType(operations[i].results[0].type).has_static_shape
        and any(
            getattr(use.owner, "operation", use.owner) not in inside
            for use in operations[i].results[0].uses
        )
    ]
    if len(candidates) < 2:
        return 0
    try:
        instructions = _folded_instructions(module, candidates, to_hlo)
    except Exception as error:  # XLA could not convert the copy: merge nothing
        _LOG.debug("constant values not folded by XLA: %s", error)
        return 0
    if len(instructions) != len(candidates):
        return 0
    groups: dict[str, list[int]] = {}
    for index, instruction in zip(candidates, instructions, strict=True):
        groups.setdefault(instruction, []).append(index)
    position = {operation: index for index, operation in enumerate(operations)}
    users = {  # before any op is erased: ops are compared by position afterwards
        index: [
            position.get(getattr(use.owner, "operation", use.owner))
            for result in operations[index].results
            for use in result.uses
        ]
        for index in constant
    }
    absorber: dict[int, int] = {}  # a merged copy -> the op that now gives its value
    for indices in groups.values():
        survivor = operations[indices[0]]
        for index in indices[1:]:
            copy = operations[index]
            if str(copy.results[0].type) == str(survivor.results[0].type):
                copy.results[0].replace_all_uses_with(survivor.results[0])
                absorber[index] = indices[0]
    for index in constant:  # a survivor now also feeds its copies' users
        users[index] += [
            position.get(getattr(use.owner, "operation", use.owner))
            for result in operations[index].results
            for use in result.uses
        ]
    # Copies, and the constant-only ops only they read, are gone; the op now giving their
    # value is made from them: its location names each (XLA folds them into it anyway).
    made_from: dict[int, list[Any]] = {}
    erased: set[int] = set()
    removed = 0
    for index in reversed(constant):
        operation = operations[index]
        if any(list(result.uses) for result in operation.results):
            continue
        target = absorber.get(index)
        if target is None:  # a user that went, last first: the latest value made from it
            target = next(
                (absorber[u] for u in reversed(users[index]) if u in absorber and u != index),
                None,
            )
        seen = {index}
        while target is not None and target in erased and target not in seen:
            seen.add(target)  # it went too: to what took it
            target = absorber.get(target)
        if target in seen:
            target = None
        if target is None:
            continue  # no op left names it: it stays, unread (XLA drops it), with its name
        absorber[index] = target  # and what this op was made from, if it survived a merge
        inherited = made_from.pop(index, [])
        made_from.setdefault(target, []).extend([*inherited, operation.location])
        operation.erase()
        erased.add(index)
        removed += 1
    for survivor, locations in made_from.items():
        if survivor in erased:
            continue
        kept = operations[survivor]
        kept.location = ir.Location.fused([kept.location, *reversed(locations)])
    return removed


def main_block(module: Any) -> Any:
    from jaxlib.mlir import ir

    main = main_function(ir, module)
    return None if main is None else main.regions[0].blocks[0]


def constant_only(operations: list[Any]) -> list[int]:
    """Indices of the constant-only ops: no operands, or only constant-only operands (no
    calls, side effects or regions)."""
    found: dict[Any, int] = {}
    for index, operation in enumerate(operations):
        if operation.name in _NEVER or len(operation.regions) or not len(operation.results):
            continue
        producers = [getattr(operand.owner, "operation", None) for operand in operation.operands]
        if all(producer is not None and producer in found for producer in producers):
            found[operation] = index
    return sorted(found.values())


def _folded_instructions(
    module: Any, candidates: list[int], to_hlo: Callable[[str], str]
) -> list[str]:
    """The HLO instruction XLA makes of each candidate's value, in order."""
    converted = values_as_hlo(module, candidates, to_hlo)
    return [] if converted is None else converted[0]


def values_as_hlo(
    module: Any, candidates: list[int], to_hlo: Callable[[str], str], *, debug_info: bool = False
) -> tuple[list[str], str] | None:
    """XLA's HLO of a copy of ``module`` whose ``main`` keeps only its constant-only ops and
    returns the values of the ops at ``candidates`` (indices into ``main``'s block): the name
    of the instruction each value is, in order, and the HLO text (with the ops' locations
    as metadata when ``debug_info``); None when the root is no tuple."""
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import func

    copy = ir.Module.parse(module.operation.get_asm(enable_debug_info=debug_info))
    block = main_block(copy)
    operations = [op.operation for op in block.operations]
    keep = set(constant_only(operations))
    values = [operations[i].results[0] for i in candidates]
    function = block.owner
    inputs = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value).inputs
    terminator = operations[-1]
    with ir.InsertionPoint.at_block_terminator(block), terminator.location:
        func.ReturnOp(values)
    terminator.erase()
    for index in reversed(range(len(operations) - 1)):
        if index not in keep:
            operations[index].erase()
    function.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(inputs, [value.type for value in values])
    )
    if "res_attrs" in function.attributes:
        del function.attributes["res_attrs"]
    text = to_hlo(copy.operation.get_asm(enable_debug_info=debug_info))
    match = _ROOT_TUPLE.search(text)
    if match is None:
        return None
    operands = _INDEX_COMMENT.sub("", match["operands"])  # XLA marks every fifth: /*index=5*/
    return [name.split()[-1].lstrip("%") for name in operands.split(",")], text
