"""The structure checks of ``_proto_structure`` for an onnx_ir.Model a caller hands over.

A ModelProto is checked before onnx_ir reads it; an ``ir.Model`` was built by the caller,
so it can hold what a proto check refuses: model-local functions that call themselves
(onnxscript and onnxruntime then fail deep inside), or a node reading a value no earlier
node produces (``Model.clone`` fails). :func:`checked_clone` clones and describes such a
model's problem as an InvalidModelError; :func:`check_functions` is the cheap check of the
function call graph (its cost is that of the function bodies). :func:`check_metadata_text`
refuses metadata that is not text (onnx_ir's dicts take any object; serializing fails later,
deep inside), naming where.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence

import onnx_ir as ir

from modelprov._model_io._proto_structure import cycle_problem
from modelprov.core._walks import nodes_and_graphs
from modelprov.errors import InvalidModelError, MetadataError

__all__ = [
    "all_text",
    "check_functions",
    "check_metadata_text",
    "checked_clone",
    "dataflow_problem",
    "holder_dicts",
    "metadata_holders",
    "metadata_text_problems",
]

_TEXT_FIX = "make it text, or run modelprov recover, which replaces metadata that is not text"


def check_functions(model: ir.Model, where: str = "model") -> None:
    """InvalidModelError naming the cycle when model-local functions call themselves."""
    if not model.functions:
        return
    keys = set(model.functions)
    calls = {
        key: sorted(
            {
                (node.domain, node.op_type, node.overload)
                for node in ir.traversal.RecursiveGraphIterator(function)
            }
            & keys
        )
        for key, function in model.functions.items()
    }
    problem = cycle_problem(calls)
    if problem:
        raise InvalidModelError(f"{where}: {problem}")


def _nodes_problem(
    nodes: Iterable[ir.Node], defined: set[ir.Value], outer: Sequence[set[ir.Value]], where: str
) -> str:
    for index, node in enumerate(nodes):
        label = f"{where}node {node.name or index!r} ({node.op_type})"
        for value in node.inputs:
            if value is not None and value not in defined and not any(value in s for s in outer):
                return (
                    f"{label} reads {value.name!r}, which no input, initializer or earlier node "
                    "of its graph or of the graphs enclosing it produces"
                )
        for attribute in node.attributes.values():
            if attribute.type == ir.AttributeType.GRAPH:
                graphs = [attribute.as_graph()]
            elif attribute.type == ir.AttributeType.GRAPHS:
                graphs = list(attribute.as_graphs())
            else:
                continue
            for graph in graphs:
                inner = set(graph.inputs) | set(graph.initializers.values())
                problem = _nodes_problem(graph, inner, (*outer, defined), f"{label}/")
                if problem:
                    return problem
        defined.update(node.outputs)
    return ""


def dataflow_problem(model: ir.Model) -> str:
    """A node (main graph, subgraphs, function bodies) reading a value not defined before
    it, described; empty when there is none."""
    graph = model.graph
    problem = _nodes_problem(graph, set(graph.inputs) | set(graph.initializers.values()), (), "")
    if problem:
        return problem
    for (domain, name, overload), function in model.functions.items():
        label = f"model-local function '{domain}::{name}" + (f":{overload}" if overload else "")
        problem = _nodes_problem(function, set(function.inputs), (), f"{label}': ")
        if problem:
            return problem
    return ""


def checked_clone(model: ir.Model, where: str = "model") -> ir.Model:
    """``model.clone()`` after :func:`check_functions`; a model onnx_ir cannot clone is an
    InvalidModelError saying which node reads what (else onnx_ir's own words)."""
    check_functions(model, where)
    try:
        return model.clone()
    except Exception as error:
        problem = dataflow_problem(model) or " ".join(f"{type(error).__name__}: {error}".split())
        raise InvalidModelError(f"{where}: {problem[:500]}") from None


def metadata_holders(model: ir.Model) -> Iterator[tuple[str, dict[str, str]]]:
    """(where, metadata) of the model and of every graph, node and value in the main graph,
    its subgraphs and the model-local functions."""
    yield "model", model.metadata_props
    bodies = [("", model.graph)] + [
        (f"function '{domain}::{name}{':' + overload if overload else ''}': ", function.graph)
        for (domain, name, overload), function in model.functions.items()
    ]
    for prefix, body in bodies:
        nodes, graphs = nodes_and_graphs(body)
        for graph in graphs:
            yield f"{prefix}graph {graph.name!r}", graph.metadata_props
            values = [*graph.inputs, *graph.initializers.values(), *graph.outputs]
            yield from ((f"{prefix}value {v.name!r}", v.metadata_props) for v in values)
        for node in nodes:
            yield f"{prefix}node {node.name!r}", node.metadata_props
            yield from ((f"{prefix}value {v.name!r}", v.metadata_props) for v in node.outputs)


def metadata_text_problems(model: ir.Model) -> Iterator[str]:
    """Each metadata key or value of ``model`` that is not a str, described."""
    for where, props in metadata_holders(model):
        if not props:
            continue
        for key, value in props.items():  # onnx_ir's dicts hold whatever was put in
            if type(key) is not str:
                yield f"{where}: metadata key {key!r:.60} is a {type(key).__name__}, not text"
            elif type(value) is not str:
                kind = type(value).__name__
                yield f"{where}: the value of metadata key {key!r} is a {kind}, not text"


_TEXT = frozenset({str})


def holder_dicts(nodes: Sequence[ir.Node], graphs: Sequence[ir.Graph]) -> list[dict[str, str]]:
    """The metadata dicts of these graphs, their inputs, initializers and outputs, these
    nodes and their outputs (the holders ``metadata_holders`` names, without names)."""
    found = [graph.metadata_props for graph in graphs]
    for graph in graphs:
        found += [value.metadata_props for value in graph.inputs]
        found += [value.metadata_props for value in graph.initializers.values()]
        found += [value.metadata_props for value in graph.outputs]
    found += [node.metadata_props for node in nodes]
    found += [value.metadata_props for node in nodes for value in node.outputs]
    return found


def all_text(holders: Sequence[dict[str, str]]) -> bool:
    """True when every key and value of these dicts is a str (False when unsure: the
    caller then asks ``metadata_text_problems``)."""
    chain = itertools.chain.from_iterable
    try:
        # Most holders are empty: dropping them first spares an iterator each.
        holders = list(filter(None, holders))
        # The types of every key and value, gathered in C: no Python-level step per key.
        types = set(map(type, chain(holders)))
        types.update(map(type, chain(map(dict.values, holders))))
    except TypeError:  # a holder that is not a dict
        return False
    return types <= _TEXT


def _all_text(model: ir.Model) -> bool:
    """True when every key and value of the holders ``metadata_holders`` yields is a str:
    the same walk, without naming the holders (what only a problem needs)."""
    holders = [model.metadata_props]
    for body in [model.graph] + [function.graph for function in model.functions.values()]:
        holders += holder_dicts(*nodes_and_graphs(body))
    return all_text(holders)


def check_metadata_text(model: ir.Model, where: str = "model", *, known_text: bool = False) -> None:
    """MetadataError naming the first holders whose metadata is not text, and what to do
    (nothing to check when ``known_text``: the caller's own walk found it all text)."""
    if known_text or _all_text(model):
        return
    problems = []
    for problem in metadata_text_problems(model):
        problems.append(problem)
        if len(problems) == 3:
            break
    if problems:
        raise MetadataError(f"{where}: {'; '.join(problems)}; {_TEXT_FIX}")
