"""Ops from no FX node that only constants feed: named by the ops that consume them.

JAX hoists constants out of the scope of the FX node that made them (their location is
``loc(unknown)``) and shares one constant op among every node using the value; ops that
consume only such constants (a ``broadcast_in_dim`` of a splat, JAX's folded causal mask)
come out the same way. XLA then names their HLO instructions after the caller
(``op_name="jit(call)/call_exported"``). Each such op computes part of the inputs of its
consumer, so it takes that consumer's FX nodes when every op using its results has the same
ones; the ops inside its regions take the same. A constant several FX nodes share (JAX makes
one op per value) stays without nodes: one location naming all of them would merge their
attributes into lists and say nothing about any one. So do ops whose results no node uses
(the shape checks of JAX's dynamic-shape wrapper).

Pure Python over indices, so the rule is tested without MLIR.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

__all__ = ["ChainOp", "adopted_nodes"]


@dataclasses.dataclass(frozen=True)
class ChainOp:
    """One op as the rule sees it (indices into the same pre-order list).

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


def adopted_nodes(ops: Sequence[ChainOp], order: Mapping[str, int]) -> dict[int, tuple[str, ...]]:
    """Index -> FX nodes for every op without nodes fed only by constants (and ops so fed)
    whose consumers all have the same nodes. ``order`` (node name -> graph position) is
    accepted for callers that rank names; consumers' tuples are already in graph order."""
    by_index = {op.index: op for op in ops}
    fed: set[int] = set()
    for op in ops:  # pre-order: producers and parents come first
        if op.nodes or not op.labellable:
            continue
        if op.parent is not None:
            if op.parent in fed:
                fed.add(op.index)
        elif all(p is not None and p in fed for p in op.producers):
            fed.add(op.index)

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
        if op.index not in fed or op.parent is not None:
            continue
        consumers = {owner_nodes(user) for user in op.users}
        if len(consumers) == 1 and () not in consumers:
            (resolved[op.index],) = consumers
    for op in ops:  # region bodies after their op, in pre-order
        if op.index in fed and op.parent is not None and op.parent in resolved:
            resolved[op.index] = resolved[op.parent]
    return resolved
