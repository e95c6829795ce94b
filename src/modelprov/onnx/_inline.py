"""modelprov.inline: calls of functionize's functions back to the flat graph.

Every call of a function in ``pkg.torch.aten`` or ``pkg.torch.module`` is replaced by a
copy of its body, nested calls too. A call's ``modelprov.inline`` record restores its own
node and value names, metadata and types (the body holds the first call's); a call
without one gets the body's, with names made unique. Body copies of external constants
become the constant they copied again (by name; an initializer when nothing else makes
it). Functions no call uses any more are removed; other functions are left alone.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterable, Mapping
from typing import Any, overload

import onnx
import onnx_ir as ir

from modelprov.onnx._call_provenance import rewrite_table
from modelprov.onnx._convert import to_ir_copy, to_kind
from modelprov.onnx._provenance import Provenance
from modelprov.onnx._wrap import (
    ATEN_DOMAIN,
    CONSTANT_OF_KEY,
    INLINE_KEY,
    INLINE_VERSION,
    MODULE_DOMAIN,
    type_from_json,
)

__all__ = ["InlinePass", "inline"]

_DOMAINS = (ATEN_DOMAIN, MODULE_DOMAIN)


def _record(call: ir.Node) -> list[dict[str, Any]] | None:
    text = call.metadata_props.get(INLINE_KEY)
    if not text:
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return None
    if not isinstance(document, dict) or document.get("version") != INLINE_VERSION:
        return None
    nodes = document.get("nodes")
    return nodes if isinstance(nodes, list) else None


class InlinePass(ir.passes.InPlacePass):
    """Replaces calls of functionize's functions (``pkg.torch.aten``, ``pkg.torch.module``)
    by their bodies, restoring each call's own names and metadata."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        provenance = Provenance.read(model)
        graph = model.graph
        functions = model.functions
        names = _Names(node.name for node in graph if node.name)
        placeholders: list[tuple[ir.Node, str]] = []
        expanded = 0
        pending = collections.deque(node for node in graph if _is_ours(node, functions))
        while pending:
            call = pending.popleft()
            new_nodes = _expand(call, functions[call.op_identifier()], names, placeholders)
            graph.insert_before(call, new_nodes)
            for old, new in zip(call.outputs, _function_outputs(call, new_nodes), strict=True):
                old.replace_all_uses_with(new, replace_graph_outputs=True)
            graph.remove(call, safe=True)
            expanded += 1
            pending.extendleft(reversed([node for node in new_nodes if _is_ours(node, functions)]))
        _resolve_constants(graph, placeholders)
        _drop_unused_functions(model)
        if expanded:
            rewrite_table(model, provenance.table)
        return ir.passes.PassResult(model, modified=expanded > 0)


def _is_ours(node: ir.Node, functions: Mapping[ir.OperatorIdentifier, ir.Function]) -> bool:
    return node.domain in _DOMAINS and node.op_identifier() in functions


class _Names:
    """Names in use; ``unique(name)`` gives ``name`` or the first free ``name_2``, ``name_3``…
    (remembering where each base name's search stopped, so repeats cost O(1))."""

    def __init__(self, used: Iterable[str]) -> None:
        self._used = set(used)
        self._next: dict[str, int] = {}

    def unique(self, name: str) -> str:
        candidate, count = name, self._next.get(name, 1)
        if count > 1:
            candidate = f"{name}_{count}"
        while candidate in self._used:
            count += 1
            candidate = f"{name}_{count}"
        self._next[name] = count
        self._used.add(candidate)
        return candidate


def _function_outputs(call: ir.Node, new_nodes: list[ir.Node]) -> list[ir.Value]:
    mapping: dict[str, ir.Value] = call.meta["modelprov.outputs"]
    return [mapping[str(index)] for index in range(len(call.outputs))]


def _expand(
    call: ir.Node,
    function: ir.Function,
    names: _Names,
    placeholders: list[tuple[ir.Node, str]],
) -> list[ir.Node]:
    """Copies of the body's nodes for one call, with the call's own names and metadata."""
    record = _record(call)
    if record is not None and len(record) != len(function):
        record = None
    base = {k: v for k, v in call.metadata_props.items() if k != INLINE_KEY}
    values: dict[ir.Value, ir.Value | None] = {}
    for index, value in enumerate(function.inputs):
        values[value] = call.inputs[index] if index < len(call.inputs) else None
    output_index = {value: index for index, value in enumerate(function.outputs)}
    outputs: dict[str, ir.Value] = {}
    new_nodes: list[ir.Node] = []
    for position, node in enumerate(function):
        entry = record[position] if record is not None else {}
        attributes = [
            ir.Attr(a.name, a.type, a.value, ref_attr_name=a.ref_attr_name, doc_string=a.doc_string)
            for a in node.attributes.values()
        ]
        if record is not None:
            metadata = dict(base)
            for key, value in entry.get("meta", {}).items():
                if value is None:
                    metadata.pop(key, None)
                else:
                    metadata[key] = value
            if "constant_of" in entry:
                metadata = {CONSTANT_OF_KEY: entry["constant_of"]}
        else:
            metadata = dict(node.metadata_props)
        name = entry.get("name", node.name or "")
        copy = ir.Node(
            node.domain,
            node.op_type,
            [None if value is None else values.get(value, value) for value in node.inputs],
            attributes,
            overload=node.overload,
            num_outputs=len(node.outputs),
            name=names.unique(name) if name else None,
            doc_string=node.doc_string,
            metadata_props=metadata,
            version=node.version,
        )
        output_names = entry.get("outputs", [])
        types = entry.get("types", [])
        values_meta = entry.get("value_meta", [])
        for index, (old, new) in enumerate(zip(node.outputs, copy.outputs, strict=True)):
            values[old] = new
            if old in output_index:
                target = call.outputs[output_index[old]]
                new.name = target.name
                new.type = target.type
                new.shape = target.shape
                new.metadata_props.update(target.metadata_props)
                outputs[str(output_index[old])] = new
                continue
            new.name = output_names[index] if index < len(output_names) else old.name
            if record is not None and index < len(types):
                type_from_json(new, types[index])
            else:
                new.type = old.type
                new.shape = old.shape
            meta = values_meta[index] if index < len(values_meta) else old.metadata_props
            new.metadata_props.update(meta if record is not None else old.metadata_props)
        constant_of = copy.metadata_props.get(CONSTANT_OF_KEY)
        if constant_of is not None:
            placeholders.append((copy, constant_of))
        new_nodes.append(copy)
    call.meta["modelprov.outputs"] = outputs
    return new_nodes


def _resolve_constants(graph: ir.Graph, placeholders: list[tuple[ir.Node, str]]) -> None:
    """Body copies of external constants become the constants they copied again."""
    copies = {node for node, _ in placeholders}
    by_name: dict[str, ir.Value] = {}
    for node in graph:
        if node in copies:
            continue
        for value in node.outputs:
            if value.name:
                by_name.setdefault(value.name, value)
    for node, name in placeholders:
        output = node.outputs[0]
        original = by_name.get(name) or graph.initializers.get(name)
        if original is None:
            tensor = node.attributes["value"].as_tensor() if "value" in node.attributes else None
            if tensor is None:
                node.metadata_props.pop(CONSTANT_OF_KEY, None)
                continue
            original = ir.Value(name=name, type=output.type, shape=output.shape, const_value=tensor)
            graph.register_initializer(original)
        output.replace_all_uses_with(original, replace_graph_outputs=True)
        graph.remove(node, safe=True)


def _drop_unused_functions(model: ir.Model) -> None:
    in_graph = {node.op_identifier() for node in ir.traversal.RecursiveGraphIterator(model.graph)}
    while True:
        used = set(in_graph)
        for function in model.functions.values():
            for node in ir.traversal.RecursiveGraphIterator(function):
                used.add(node.op_identifier())
        unused = [key for key in model.functions if key[0] in _DOMAINS and key not in used]
        if not unused:
            break
        for key in unused:
            del model.functions[key]
    domains = {key[0] for key in model.functions}
    domains.update(key[0] for key in in_graph)
    for domain in _DOMAINS:
        if domain not in domains:
            model.opset_imports.pop(domain, None)


@overload
def inline(model: onnx.ModelProto) -> onnx.ModelProto: ...
@overload
def inline(model: ir.Model) -> ir.Model: ...
def inline(model: onnx.ModelProto | ir.Model) -> onnx.ModelProto | ir.Model:
    """Back to a flat graph: every call functionize made becomes its nodes again.

    Args:
        model: an onnx.ModelProto or onnx_ir.Model; not modified.

    Returns:
        The inlined model, of the same kind; for ``inline(functionize(m))`` node for node
        ``m`` (ops, attributes, topology, names, metadata).
    """
    working = to_ir_copy(model)
    InlinePass()(working)
    return to_kind(working, model)
