"""The one walk over a StableHLO module's ops: every op in pre-order, as MLIR visits them.

The exporter numbers ops in this order (``_attach``), and every reader that pairs ops with
those numbers (``_expose``, ``_read``, ``_restore``, ``_composite_ops``) walks the same way.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

__all__ = ["STRUCTURAL_OPS", "main_function", "pre_order"]

STRUCTURAL_OPS = frozenset({"builtin.module", "func.func", "func.return"})
"""Ops that hold or end the program rather than compute: they carry no provenance."""


def pre_order(ir: Any, root: Any, skip: Collection[str] = ()) -> list[Any]:
    """The operations under ``root`` (an op, or a module: its operation), ``root`` first, in
    pre-order, leaving out those named in ``skip``. ``ir`` is the MLIR binding module
    (``jaxlib.mlir.ir`` or another binding's) that parsed ``root``."""
    operation = root.operation
    found: list[Any] = []

    def visit(op: Any) -> Any:
        if op.operation.name not in skip:
            found.append(op.operation)
        return ir.WalkResult.ADVANCE

    operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def main_function(ir: Any, module: Any) -> Any | None:
    """The ``func.func`` named ``main`` at the top of ``module`` (its operation), or None.
    ``ir`` is the MLIR binding module that parsed ``module``."""
    for function in module.body.operations:
        operation = function.operation
        if (
            operation.name == "func.func"
            and ir.StringAttr(operation.attributes["sym_name"]).value == "main"
        ):
            return operation
    return None
