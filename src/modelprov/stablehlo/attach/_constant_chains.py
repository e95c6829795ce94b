"""Ops that compute no model data: named by the FX nodes that use them.

A *constant-only* op has no operands (a constant, an iota) or is fed only by constant-only
ops (a ``broadcast_in_dim`` of a constant, JAX's folded causal mask); the ops inside its
regions are too. JAX hoists constants out of the scope of the FX node that made them (their
location is ``loc(unknown)``) and shares one constant op among every node using the value;
ops fed only by such constants come out the same way. Such an op takes the FX nodes of the
ops using its results: its one consumer's, or, when several FX nodes use it, all of them in
graph order (as a merged op's location names every op it came from; ``_constant_values``
merges the identical values JAX builds once per node the same way). An op some use of which
no node owns (a function return, the shape checks of JAX's dynamic-shape wrapper, an unused
op) is left without nodes. Constant-only ops hand no value out of a module (value-scoped
keys never go on them).

Pure Python over indices, so the rule is tested without MLIR.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

__all__ = ["ChainOp", "adopted_nodes", "constant_only"]


@dataclasses.dataclass(frozen=True)
class ChainOp:
    """One op as the rules see it (indices into the same pre-order list).

    ``parent``: the enclosing op, None at function level; ``producers``: the op defining each
    operand (None for a block argument); ``users``: the ops using its results (None: a use
    the walk did not see); ``labellable``: False for modules, functions, returns and calls.
    """

    index: int
    parent: int | None
    nodes: tuple[str, ...]
    producers: tuple[int | None, ...]
    users: tuple[int | None, ...]
    labellable: bool = True


def constant_only(ops: Sequence[ChainOp]) -> set[int]:
    """Indices of the constant-only ops (no operands, or fed only by constant-only ops)."""
    found: set[int] = set()
    for op in ops:  # pre-order: producers and parents come first
        if not op.labellable:
            continue
        if op.parent is not None:
            if op.parent in found:
                found.add(op.index)
        elif all(p is not None and p in found for p in op.producers):
            found.add(op.index)
    return found


def adopted_nodes(ops: Sequence[ChainOp], order: Mapping[str, int]) -> dict[int, tuple[str, ...]]:
    """Index -> FX nodes for every constant-only op without nodes whose every use is owned
    by some node: the nodes of all its consumers, in graph order (``order``: node name ->
    graph position)."""
    by_index = {op.index: op for op in ops}
    constants = constant_only(ops)
    resolved: dict[int, tuple[str, ...]] = {}

    def owner_nodes(index: int | None) -> tuple[str, ...]:
        while index is not None:
            op = by_index[index]
            if op.nodes:
                return op.nodes
            if index in resolved:
                return resolved[index]
            if not op.labellable:
                return ()
            index = op.parent
        return ()

    for op in reversed(ops):  # users of a function-level op come after it
        if op.index not in constants or op.parent is not None or op.nodes:
            continue
        consumers = {owner_nodes(user) for user in op.users}
        if consumers and () not in consumers:
            names = {name for nodes in consumers for name in nodes}
            resolved[op.index] = tuple(sorted(names, key=order.__getitem__))
    for op in ops:  # region bodies after their op, in pre-order
        if op.index in constants and not op.nodes and op.parent in resolved:
            resolved[op.index] = resolved[op.parent]
    return resolved
