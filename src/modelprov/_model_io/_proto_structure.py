"""Checks a ModelProto's structure before onnx_ir or onnxscript read it.

Every value is defined before it is read: in the main graph, in subgraphs (which may read
the enclosing graphs' values defined before the node holding them, never later ones) and in
model-local function bodies. Model-local functions are defined once per (domain, name,
overload) and never call themselves, directly or through others. onnx_ir reads such models
with a warning or half-way, and onnxscript fails deep inside; these checks say where.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import onnx

from modelprov._model_io._proto_walk import subgraphs

__all__ = ["cycle_problem", "dataflow_problem", "function_problem"]

FunctionKey = tuple[str, str, str]


def _nodes_problem(
    nodes: Iterable[onnx.NodeProto],
    defined: set[str],
    outer: Sequence[set[str]],
    where: str,
    order_hint: str,
) -> str:
    """The first node reading a value defined neither in ``defined`` (this scope, growing
    as nodes are read) nor in ``outer``, or producing a value twice in this scope."""
    for index, node in enumerate(nodes):
        label = f"{where}node {node.name or index!r} ({node.op_type})"
        for name in node.input:
            if name and name not in defined and not any(name in scope for scope in outer):
                return f"{label} reads {name!r}, which {order_hint}"
        inner = list(subgraphs(node)) if node.attribute else []
        for subgraph in inner:
            problem = _graph_problem(subgraph, (*outer, defined), f"{label}/")
            if problem:
                return problem
        for name in node.output:
            if name and name in defined:
                return f"{label} produces {name!r}, which is already defined; names must be unique"
            defined.add(name)
    return ""


_GRAPH_HINT = (
    "no graph input, initializer or earlier node produces; the graph is broken or not in "
    "topological order"
)
_SUBGRAPH_HINT = (
    "neither the subgraph nor its enclosing graphs define before this node; a subgraph may "
    "read only values of the enclosing graph produced before the node holding it"
)


def _graph_problem(graph: onnx.GraphProto, outer: Sequence[set[str]], where: str) -> str:
    defined = {value.name for value in graph.input}
    defined.update(tensor.name for tensor in graph.initializer)
    defined.update(sparse.values.name for sparse in graph.sparse_initializer)
    hint = _SUBGRAPH_HINT if outer else _GRAPH_HINT
    problem = _nodes_problem(graph.node, defined, outer, where, hint)
    if problem:
        return problem
    for output in graph.output:
        if output.name not in defined and not any(output.name in scope for scope in outer):
            return f"{where}graph output {output.name!r} is produced by no node or input"
    return ""


def dataflow_problem(graph: onnx.GraphProto, where: str = "") -> str:
    """A node input no one produces before it, or a value produced twice, in ``graph`` or
    any of its subgraphs, described (empty when there is none)."""
    return _graph_problem(graph, (), where)


def _key(function: onnx.FunctionProto) -> FunctionKey:
    return (function.domain, function.name, function.overload)


def _label(key: FunctionKey) -> str:
    domain, name, overload = key
    return f"{domain}::{name}" + (f":{overload}" if overload else "")


def _body_nodes(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.NodeProto]:
    """The nodes, and those of their subgraphs at any depth (no recursion)."""
    pending = [iter(nodes)]
    while pending:
        node = next(pending[-1], None)
        if node is None:
            pending.pop()
            continue
        yield node
        if node.attribute:
            pending.extend(iter(graph.node) for graph in subgraphs(node))


def _duplicate_problem(functions: Sequence[onnx.FunctionProto]) -> str:
    first: dict[FunctionKey, int] = {}
    for index, function in enumerate(functions):
        key = _key(function)
        if key in first:
            earlier = functions[first[key]]
            return (
                f"model-local function {_label(key)!r} is defined twice (functions "
                f"#{first[key]}, {len(earlier.node)} nodes, and #{index}, {len(function.node)} "
                "nodes); onnx_ir would keep only the last: give each its own name or overload"
            )
        first[key] = index
    return ""


def _cycle(calls: dict[FunctionKey, list[FunctionKey]]) -> list[FunctionKey]:
    """A cycle of the call graph (the path, first function repeated at its end), or []."""
    state: dict[FunctionKey, int] = {}  # 1: on the current path, 2: done
    for root in calls:
        if state.get(root):
            continue
        path = [root]
        pending = [iter(calls[root])]
        state[root] = 1
        while pending:
            callee = next(pending[-1], None)
            if callee is None:
                state[path.pop()] = 2
                pending.pop()
                continue
            if state.get(callee) == 1:
                return [*path[path.index(callee) :], callee]
            if not state.get(callee):
                state[callee] = 1
                path.append(callee)
                pending.append(iter(calls[callee]))
    return []


def _recursion_problem(functions: Sequence[onnx.FunctionProto]) -> str:
    keys = {_key(function) for function in functions}
    calls: dict[FunctionKey, list[FunctionKey]] = {}
    for function in functions:
        callees = {
            (node.domain, node.op_type, node.overload) for node in _body_nodes(function.node)
        }
        calls[_key(function)] = sorted(callees & keys)
    return cycle_problem(calls)


def cycle_problem(calls: dict[FunctionKey, list[FunctionKey]]) -> str:
    """The cycle of a function call graph (function -> the model-local functions its body
    calls), described; empty when there is none."""
    cycle = _cycle(calls)
    if not cycle:
        return ""
    return (
        "model-local functions call themselves ("
        + " -> ".join(_label(key) for key in cycle)
        + "); ONNX functions must not be recursive: inline or rename the call"
    )


def _body_problem(function: onnx.FunctionProto) -> str:
    where = f"model-local function {_label(_key(function))!r}: "
    defined = set(function.input)
    hint = "is no input of the function and no earlier node of its body produces"
    problem = _nodes_problem(function.node, defined, (), where, hint)
    if problem:
        return problem
    for name in function.output:
        if name not in defined:
            return f"{where}output {name!r} is produced by no node or input of its body"
    return ""


def function_problem(proto: onnx.ModelProto) -> str:
    """The first problem of the model's local functions (defined twice, recursive, a body
    reading an undefined value), described; empty when there is none."""
    functions = list(proto.functions)
    if not functions:
        return ""
    problem = _duplicate_problem(functions)
    if problem:
        return problem
    for function in functions:
        problem = _body_problem(function)
        if problem:
            return problem
    return _recursion_problem(functions)
