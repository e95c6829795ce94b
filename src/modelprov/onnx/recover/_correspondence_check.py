"""Does an optimized model come from this original? Judged by structure, not only names.

A tool's output keeps the original's interface (graph inputs and outputs: names, element
types, ranks and static sizes) and, when it keeps no value name inside the graph, at least
mostly its kinds of ops; optimizers shrink graphs rather than grow them severalfold.
:func:`correspondence_problems` lists what differs; recover refuses when anything does.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir

from modelprov.core._walks import all_nodes

__all__ = ["correspondence_problems"]

MIN_SHARED_OPS = 0.5
"""Without a shared value name, at least this share of the new op kinds must be original."""
MAX_GROWTH = 3
"""An optimized graph may have at most this many times the original's nodes (plus 16)."""


def _inputs(model: ir.Model) -> list[ir.Value]:
    initializers = set(model.graph.initializers)
    return [value for value in model.graph.inputs if value.name not in initializers]


def _dims(value: ir.Value) -> tuple[object, ...] | None:
    return None if value.shape is None else tuple(value.shape)


def _value_problem(kind: str, before: ir.Value, after: ir.Value) -> str:
    old_type, new_type = before.type, after.type
    if (
        isinstance(old_type, ir.TensorType)
        and isinstance(new_type, ir.TensorType)
        and old_type.dtype != new_type.dtype
    ):
        return (
            f"{kind} {after.name!r} is {new_type.dtype.name}, the original's {old_type.dtype.name}"
        )
    old_dims, new_dims = _dims(before), _dims(after)
    if old_dims is None or new_dims is None:
        return ""
    if len(old_dims) != len(new_dims):
        return f"{kind} {after.name!r} has shape {list(new_dims)}, the original's {list(old_dims)}"
    for old, new in zip(old_dims, new_dims, strict=True):
        if isinstance(old, int) and isinstance(new, int) and old != new:
            return (
                f"{kind} {after.name!r} has shape {list(new_dims)}, the original's {list(old_dims)}"
            )
    return ""


def _boundary_problems(
    kind: str, before: Sequence[ir.Value], after: Sequence[ir.Value]
) -> list[str]:
    if len(before) != len(after):
        return [f"it has {len(after)} graph {kind}s, the original {len(before)}"]
    names_before = [value.name or "" for value in before]
    names_after = [value.name or "" for value in after]
    if kind == "input" and names_before != names_after:
        return [f"graph inputs {names_after} differ from {names_before}"]
    found = (_value_problem(f"graph {kind}", b, a) for b, a in zip(before, after, strict=True))
    return [problem for problem in found if problem]


def correspondence_problems(original: ir.Model, optimized: ir.Model) -> list[str]:
    """What shows that ``optimized`` was not made from ``original`` (empty: nothing)."""
    problems = _boundary_problems("input", _inputs(original), _inputs(optimized))
    problems += _boundary_problems("output", original.graph.outputs, optimized.graph.outputs)
    old_nodes, new_nodes = all_nodes(original.graph), all_nodes(optimized.graph)
    if len(new_nodes) > MAX_GROWTH * len(old_nodes) + 16:
        problems.append(
            f"it has {len(new_nodes)} nodes, the original {len(old_nodes)} (optimizers shrink "
            "graphs)"
        )
    boundary = {value.name for value in [*optimized.graph.inputs, *optimized.graph.outputs]}
    old_names = {value.name for node in old_nodes for value in node.outputs if value.name}
    shared = any(
        value.name in old_names and value.name not in boundary
        for node in new_nodes
        for value in node.outputs
    )
    new_ops = {(node.domain, node.op_type) for node in new_nodes if node.domain in ("", "ai.onnx")}
    old_ops = {(node.domain, node.op_type) for node in old_nodes}
    if not shared and new_ops:
        common = len(new_ops & old_ops) / len(new_ops)
        if common < MIN_SHARED_OPS:
            unknown = sorted(op for _, op in new_ops - old_ops)[:5]
            problems.append(
                f"no value inside the graph keeps an original name and only {common:.0%} of its "
                f"op kinds occur in the original (not: {', '.join(unknown)})"
            )
    return problems
