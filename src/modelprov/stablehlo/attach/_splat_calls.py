"""Small splat constants as calls, so that XLA keeps the name of the op reading them.

XLA's MLIR-to-HLO conversion (the one ``jax.jit`` runs) folds every constant-only value into
a constant (its canonicalizer folds a ``broadcast_in_dim`` of a scalar constant into a splat
constant). ``xla-prepare-for-export`` unfolds a splat of 32 elements or more back into a
``broadcast`` that keeps the location; a smaller one stays a constant, and the conversion
gives constants no metadata (``LowerConstant``), while its builder writes a splat of more
than one element as a scalar ``constant`` and a ``broadcast``. That broadcast is a computing
instruction named by no node: the Llama's epsilons and index bounds at sequence length 8
(``[1, 8]``), and every copy XLA's fusion and simplifier make of it (measured, jaxlib
0.10.2).

The canonicalizer folds within a function, and XLA's call inliner (the first HLO pass) gives
every inlined instruction without metadata the call's. So :func:`call_small_splats` puts the
constant-only ops computing such a value (copies of them, in block order) in a private
function of its own, ``@modelprov_splat_<n>``, called with no operands where the value was
read: the call is located at the op making the value, fused with the locations of the
constant-only ops only it used (they leave ``main``); the body's ops have ``loc(unknown)``
(they take the call's nodes, ``_helper_functions``). XLA folds the body to the same splat,
still unnamed, and its inliner names the broadcast and its scalar constant by the call, so do
the instructions its simplifier makes of them (``x - c`` as ``x + (-c)``). The values and
what XLA computes are the same: the same ops on the same constants.

Which values: those XLA's own conversion of a copy of ``main`` returning every constant-only
value (``_folded_constant_values.values_as_hlo``, printed with metadata) writes as a
``broadcast`` of a ``constant`` without an ``op_name``, read by an op XLA computes (a model
op, or a constant-only op it does not fold, such as the Llama's ``diff`` of its position
ids); a value only returned is left alone. Asking XLA keeps the rule exact (the 32-element
bound is XLA's, not ours).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from modelprov.stablehlo.attach._folded_constant_values import (
    constant_only,
    main_block,
    values_as_hlo,
)

__all__ = ["call_small_splats"]

_LOG = logging.getLogger(__name__)

_PREFIX = "modelprov_splat_"
_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*\S+\s+(?P<opcode>[\w\-]+)\((?P<operands>[^)]*)\)"
    r"(?P<rest>.*)$"
)


def call_small_splats(module: Any, to_hlo: Callable[[str], str]) -> int:
    """Put each op of ``module``'s ``main`` (an ``ir.Module``, edited in place, inside its
    context) whose value XLA writes as an unnamed broadcast of a constant in a private
    function called in its place; ``to_hlo`` converts MLIR text to HLO text with XLA.
    Returns how many ops were moved."""
    from jaxlib.mlir import ir

    block = main_block(module)
    if block is None:
        return 0
    operations = [op.operation for op in block.operations]
    constant = constant_only(operations)
    values = [  # every constant-only value XLA can hand back: the tuple's operands
        i
        for i in constant
        if len(operations[i].results) == 1
        and isinstance(operations[i].results[0].type, ir.RankedTensorType)
        and ir.RankedTensorType(operations[i].results[0].type).has_static_shape
    ]
    if not values:
        return 0
    try:
        converted = values_as_hlo(module, values, to_hlo, debug_info=True)
    except Exception as error:  # XLA could not convert the copy: move nothing
        _LOG.debug("small splats not found by XLA: %s", error)
        return 0
    if converted is None or len(converted[0]) != len(values):
        return 0
    roots, text = converted
    lines: dict[str, re.Match[str]] = {}
    for line in text.splitlines():
        match = _INSTRUCTION.match(line)
        if match is not None:
            lines[match["name"]] = match
    forms = {i: _form(lines, root) for i, root in zip(values, roots, strict=True)}
    position = {operation: index for index, operation in enumerate(operations)}
    # Decided first, positions only: ops hash differently once edited.
    sources = {  # each constant-only op's operands as (producer, result number)
        i: [(position[o.owner.operation], o.result_number) for o in operations[i].operands]
        for i in constant
    }
    read = {i for i in constant if any(list(r.uses) for r in operations[i].results)}
    moves: list[tuple[int, list[tuple[int, int]]]] = []
    for index in values:
        if forms[index] != "unnamed splat" or not len(operations[index].operands):
            continue
        readers = [  # the uses by ops XLA computes (not folded with the value)
            (position[owner], use.operand_number)
            for use in operations[index].results[0].uses
            if (owner := getattr(use.owner, "operation", use.owner)) in position
            and owner.name != "func.return"  # a result: no op reads it
            and forms.get(position[owner], "computed") not in _FOLDED
        ]
        if readers:
            moves.append((index, readers))
    locations = {i: operations[i].location for i in constant}
    taken = _symbols(module)
    calls = []
    for index, readers in moves:
        chain = _chain(index, sources)
        call = _call_in_place(
            ir,
            [(operations[i], sources[i], i) for i in chain],
            [(operations[i], n) for i, n in readers],
            _name(taken),
        )
        calls.append((call, chain))
    erased = set()
    for index in reversed(constant):  # what only the moved ops read goes, named by the call
        if index in read and not any(list(r.uses) for r in operations[index].results):
            operations[index].erase()
            erased.add(index)
    for call, chain in calls:  # made from them too (FusedLoc, as _folded_constant_values)
        gone = [locations[i] for i in chain[:-1] if i in erased]
        if gone:
            call.location = ir.Location.fused([locations[chain[-1]], *gone])
    return len(moves)


def _chain(index: int, sources: dict[int, list[tuple[int, int]]]) -> list[int]:
    """``index`` and the constant-only ops it is computed from, in block order."""
    found = {index}
    stack = [index]
    while stack:
        for producer, _ in sources[stack.pop()]:
            if producer not in found:
                found.add(producer)
                stack.append(producer)
    return sorted(found)


def _name(taken: set[str]) -> str:
    number = 0
    while f"{_PREFIX}{number}" in taken:
        number += 1
    taken.add(f"{_PREFIX}{number}")
    return f"{_PREFIX}{number}"


# What XLA writes a folded value as (``_form``): a constant, or a broadcast of one.
_FOLDED = frozenset({"constant", "named splat", "unnamed splat"})


def _form(lines: dict[str, re.Match[str]], name: str) -> str:
    """``constant``, ``named splat`` / ``unnamed splat`` (a broadcast of a constant with /
    without an ``op_name``), or ``computed``: what the instruction ``name`` is."""
    match = lines.get(name)
    if match is None:
        return "computed"
    if match["opcode"] == "constant":
        return "constant"
    operands = match["operands"].split()  # "%constant.1", or "f32[] %constant.1"
    operand = lines.get(operands[-1].lstrip("%")) if len(operands) else None
    if match["opcode"] != "broadcast" or operand is None or operand["opcode"] != "constant":
        return "computed"
    return "named splat" if "op_name=" in match["rest"] else "unnamed splat"


def _symbols(module: Any) -> set[str]:
    from jaxlib.mlir import ir

    return {
        ir.StringAttr(op.operation.attributes["sym_name"]).value
        for op in module.body.operations
        if "sym_name" in op.operation.attributes
    }


def _call_in_place(
    ir: Any,
    chain: list[tuple[Any, list[tuple[int, int]], int]],
    readers: list[tuple[Any, int]],
    name: str,
) -> Any:
    """Make ``readers`` (``(op, operand number)`` pairs) read a call of a new private
    function ``name`` computing the last op of ``chain`` (``(op, its operands as (producer,
    result number), its position)``, in block order, each fed only by the ones before);
    returns the call."""
    from jaxlib.mlir.dialects import func

    last = chain[-1][0]
    result_type = last.results[0].type
    main = last.parent  # the functions go before it: its ops stay last in printing order
    with ir.InsertionPoint(main), ir.Location.unknown():
        function = func.FuncOp(name, ir.FunctionType.get([], [result_type]))
        function.attributes["sym_visibility"] = ir.StringAttr.get("private")
        entry = function.add_entry_block()
    copies: dict[int, Any] = {}
    with ir.InsertionPoint(entry):
        for operation, operands, index in chain:
            copy = copies[index] = operation.clone()
            for number, (producer, result) in enumerate(operands):
                copy.operands[number] = copies[producer].results[result]
            copy.location = ir.Location.unknown()  # the call's, once XLA inlines it
        func.ReturnOp([copies[chain[-1][2]].results[0]], loc=ir.Location.unknown())
    with ir.InsertionPoint(last), last.location:
        call = func.CallOp([result_type], ir.FlatSymbolRefAttr.get(name), [])
    for owner, number in readers:
        owner.operands[number] = call.result
    return call
