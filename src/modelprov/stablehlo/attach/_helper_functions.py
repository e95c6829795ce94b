"""Ops in the private functions JAX emits (``@argmax``, ``@cumsum``) take their callers' nodes.

Some JAX functions stay jitted under ``jax.disable_jit()`` (``jnp.argmax``, ``jnp.cumsum``...),
so their body is a ``func.func private`` called from the node's ops with ``func.call``. The
body's locations start a fresh name stack and name no FX node, so these ops had no
provenance. Every op of such a function that names no node itself is given the nodes of all
the ``func.call`` ops calling the function (one node, or several when JAX shares one
function between nodes); a helper called from a helper gets them in turn. What a helper
returns is what its calls give their users (:func:`call_returns`): a value leaves a module
where a call's result does, not at the helper's ``func.return``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

__all__ = ["call_returns", "function_returns", "label_helper_functions"]


class HelperOp(Protocol):
    """What this module needs of an op record (``_attach._Op``)."""

    operation: Any
    index: int
    function: int | None
    nodes: tuple[str, ...]


def _symbol(attribute: Any, kind: Any) -> str:
    return str(kind(attribute).value)


def label_helper_functions(ops: Sequence[HelperOp], order: Mapping[str, int]) -> int:
    """Give the ops of called functions their callers' nodes (sorted by ``order``, the FX
    graph order); returns how many ops got nodes. ``ops`` are all ops in walk order, index
    ``i`` at position ``i``."""
    from jaxlib.mlir import ir

    functions = {
        _symbol(op.operation.attributes["sym_name"], ir.StringAttr): op.index
        for op in ops
        if op.operation.name == "func.func" and "sym_name" in op.operation.attributes
    }
    own = {op.index for op in ops if op.nodes}
    callers: dict[int, set[str]] = {}
    labelled = 0
    changed = True
    while changed:
        changed = False
        for op in ops:
            if op.operation.name != "func.call" or not op.nodes:
                continue
            callee = functions.get(_symbol(op.operation.attributes["callee"], ir.FlatSymbolRefAttr))
            if callee is None:
                continue
            before = len(callers.setdefault(callee, set()))
            callers[callee].update(op.nodes)
            changed |= len(callers[callee]) != before
        for op in ops:
            nodes = callers.get(op.function) if op.function is not None else None
            if not nodes or op.index in own or op.operation.name in ("func.func", "func.return"):
                continue
            merged = tuple(sorted(nodes, key=lambda name: order.get(name, len(order))))
            if merged != op.nodes:
                labelled += not op.nodes
                op.nodes = merged
                changed = True
    return labelled


def call_returns(operations: Sequence[Any]) -> dict[Any, list[Any]]:
    """Each called function's ``func.return`` -> the ``func.call`` ops calling that function
    (whose results are what the return hands on); ``operations`` are all ops in walk order."""
    from jaxlib.mlir import ir

    callers: dict[str, list[Any]] = {}
    for op in operations:
        if op.name == "func.call":
            callee = _symbol(op.attributes["callee"], ir.FlatSymbolRefAttr)
            callers.setdefault(callee, []).append(op)
    return function_returns(operations, callers)


def function_returns(
    operations: Sequence[Any], callers: Mapping[str, list[Any]]
) -> dict[Any, list[Any]]:
    """Each ``func.return`` of a function named in ``callers`` (function name -> the ops
    calling it: ``func.call``, ``stablehlo.composite``) -> those ops; ``operations`` are all
    ops in walk order."""
    from jaxlib.mlir import ir

    functions = {
        _symbol(op.attributes["sym_name"], ir.StringAttr): op
        for op in operations
        if op.name == "func.func" and "sym_name" in op.attributes
    }
    returns: dict[Any, list[Any]] = {}
    for name, calls in callers.items():
        function = functions.get(name)
        if function is None:
            continue
        for block in function.regions[0].blocks:
            for op in block.operations:
                if op.operation.name == "func.return":
                    returns[op.operation] = calls
    return returns
