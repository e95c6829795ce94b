"""modelprov.inline: calls of functionize's functions back to the flat graph.

Every call of a function in ``pkg.torch.aten`` or ``pkg.torch.module`` is replaced by a
copy of its body, nested calls too. A call's ``modelprov.inline`` record restores its own
node and value names, metadata and types (the body holds the first call's); a call
without one gets the body's, with names made unique. Body copies of external constants
become the constant they copied again (by name; an initializer when nothing else makes
it). Functions no call uses any more are removed; other functions are left alone. The
main graph gets back the node order functionize recorded (``_node_order``).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

import onnx_ir as ir

from modelprov._base._versioned import header_problem
from modelprov._model_io._convert import ModelInput, ModelProto, run_on_copy
from modelprov.core._walks import all_nodes
from modelprov.errors import MetadataError
from modelprov.keys import (
    ATEN_DOMAIN,
    CONSTANT_OF_KEY,
    INLINE_KEY,
    MODULE_DOMAIN,
)
from modelprov.onnx._pass_options import InlineOptions
from modelprov.onnx.functions._call_provenance import read_table, rewrite_table
from modelprov.onnx.functions._node_order import restore_node_order
from modelprov.onnx.functions._wrap import INLINE_VERSION, type_from_json

if TYPE_CHECKING:
    from torch.onnx import ONNXProgram

__all__ = ["InlineProvenancePass", "inline", "inline_record", "metadata_at"]

_DOMAINS = (ATEN_DOMAIN, MODULE_DOMAIN)
_DATA_TYPES = frozenset(int(member) for member in ir.DataType)


def _record(call: ir.Node, body_size: int) -> list[dict[str, Any]] | None:
    """The call's checked ``modelprov.inline`` record; None when it has none.

    A record that is there but unreadable, of another version, of another length than the
    body, or with fields of the wrong type is a MetadataError naming the call: inlining
    with the body's names and metadata instead would give this call another call's
    provenance.
    """
    return inline_record(call.metadata_props, call.name, call.domain, call.op_type, body_size)


def inline_record(
    metadata: Mapping[str, str], name: str | None, domain: str, op_type: str, body_size: int
) -> list[dict[str, Any]] | None:
    """:func:`_record` of a call with this metadata, name and op (also a call that exists
    only inside another call's record)."""
    text = metadata.get(INLINE_KEY)
    if text is None:
        return None
    where = f"node {name!r}: its {INLINE_KEY!r} record"
    fix = "; restore it from the functionized model or remove the key to inline without it"
    if not isinstance(text, str):
        raise MetadataError(f"{where} is not valid UTF-8{fix}")
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        raise MetadataError(f"{where} is not valid JSON{fix}") from None
    header = header_problem(document, format=None, versions=(INLINE_VERSION,))
    if header is not None and header.field == "document":
        raise MetadataError(f"{where} is not a JSON object{fix}")
    if header is not None:
        raise MetadataError(
            f"{where} has version {header.found!r}; this modelprov reads version "
            f"{INLINE_VERSION}"
        )
    nodes = document.get("nodes")
    if not isinstance(nodes, list) or len(nodes) != body_size:
        raise MetadataError(
            f"{where} must list {body_size} nodes, one per body node of {domain}::{op_type}{fix}"
        )
    for position, entry in enumerate(nodes):
        problem = _entry_problem(entry)
        if problem:
            raise MetadataError(f"{where}, node {position}: {problem}{fix}")
    return nodes


def metadata_at(base: Mapping[str, str], entry: Mapping[str, Any]) -> dict[str, str]:
    """A body node's metadata at one call: the call's (without its record) changed by the
    node's record entry."""
    if "constant_of" in entry:
        return {CONSTANT_OF_KEY: entry["constant_of"]}
    metadata = {k: v for k, v in base.items() if k != INLINE_KEY}
    for key, value in entry.get("meta", {}).items():
        if value is None:
            metadata.pop(key, None)
        else:
            metadata[key] = value
    return metadata


def _is_str_map(value: object, *, nullable: bool = False) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and (isinstance(v, str) or (nullable and v is None))
        for k, v in value.items()
    )


def _entry_problem(entry: object) -> str:
    """What is wrong with one node entry of an inline record ('' when nothing)."""
    if not isinstance(entry, dict):
        return "must be a JSON object"
    for field, value in entry.items():
        check = _ENTRY_CHECKS.get(field)
        if check is not None and not check(value):
            return f"field {field!r} has the wrong type ({str(value)[:40]!r})"
    return ""


_ENTRY_CHECKS: dict[str, Callable[[Any], bool]] = {
    "name": lambda v: isinstance(v, str),
    "outputs": lambda v: isinstance(v, list) and all(isinstance(i, str) for i in v),
    "types": lambda v: isinstance(v, list) and all(_is_type(i) for i in v),
    "meta": lambda v: _is_str_map(v, nullable=True),
    "value_meta": lambda v: isinstance(v, list) and all(_is_str_map(i) for i in v),
    "constant_of": lambda v: isinstance(v, str),
}
"""The type check of each field an inline record's node entry may hold."""


def _is_type(entry: object) -> bool:
    """True for :func:`type_json`'s form: ``[dtype, dims or null]`` or null."""
    if entry is None:
        return True
    if not isinstance(entry, list) or len(entry) != 2 or type(entry[0]) is not int:
        return False
    if entry[0] not in _DATA_TYPES:
        return False
    dims = entry[1]
    return dims is None or (
        isinstance(dims, list)
        and all(d is None or isinstance(d, str) or (type(d) is int and d >= 0) for d in dims)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class InlineProvenancePass(InlineOptions, ir.passes.InPlacePass):
    """Replaces calls of functionize's functions (``pkg.torch.aten``, ``pkg.torch.module``)
    by their bodies, restoring each call's own names and metadata. A frozen dataclass like
    the other passes; it has no options (fields) yet."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        table = read_table(model)
        graph = model.graph
        functions = model.functions
        names = _Names(node.name for node in graph if node.name)
        placeholders: list[tuple[ir.Node, str]] = []
        expanded = 0
        pending = collections.deque(node for node in graph if _is_ours(node, functions))
        bodies_used: set[ir.OperatorIdentifier] = set()
        plans: dict[ir.OperatorIdentifier, list[_BodyNode]] = {}
        while pending:
            call = pending.popleft()
            identifier = call.op_identifier()
            plan = plans.get(identifier)
            if plan is None:
                plan = plans[identifier] = _body_plan(functions[identifier])
            new_nodes, new_outputs = _expand(
                call,
                plan,
                names,
                placeholders,
                owns_body=identifier not in bodies_used,
            )
            if INLINE_KEY not in call.metadata_props:
                # The body is the nodes of the call without a record, wherever inline
                # meets it; calls with a record before it do not take its place.
                bodies_used.add(identifier)
            graph.insert_before(call, new_nodes)
            for old, new in zip(call.outputs, new_outputs, strict=True):
                old.replace_all_uses_with(new, replace_graph_outputs=True)
            # Nothing reads the call now: it stops reading its inputs and leaves.
            for index in range(len(call.inputs)):
                call.replace_input_with(index, None)
            graph.remove(call)
            expanded += 1
            pending.extendleft(reversed([node for node in new_nodes if _is_ours(node, functions)]))
        _resolve_constants(graph, placeholders)
        dropped = _drop_unused_functions(model)
        if expanded:
            rewrite_table(model, table)
        reordered = restore_node_order(model)
        return ir.passes.PassResult(model, modified=expanded > 0 or dropped or reordered)


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


@dataclasses.dataclass(frozen=True)
class _BodyNode:
    """One body node, read once per function: what each copy reads and stands for."""

    node: ir.Node
    attributes: tuple[ir.Attr, ...]
    inputs: tuple[tuple[int, int] | ir.Value | None, ...]
    """Per input: ``(-1, k)`` the call's input k, ``(i, j)`` output j of body node i, a value
    from outside the body as it is, or None (absent)."""
    ends: tuple[int | None, ...]
    """Per output, the function output it is (its copy stands for that call output)."""
    is_constant_copy: bool


def _body_plan(function: ir.Function) -> list[_BodyNode]:
    where: dict[ir.Value, tuple[int, int]] = {
        value: (-1, index) for index, value in enumerate(function.inputs)
    }
    output_index = {value: index for index, value in enumerate(function.outputs)}
    plan: list[_BodyNode] = []
    for position, node in enumerate(function):
        plan.append(
            _BodyNode(
                node,
                tuple(node.attributes.values()),
                tuple(None if value is None else where.get(value, value) for value in node.inputs),
                tuple(output_index.get(value) for value in node.outputs),
                CONSTANT_OF_KEY in node.metadata_props,
            )
        )
        for index, value in enumerate(node.outputs):
            where[value] = (position, index)
    return plan


def _expand(
    call: ir.Node,
    plan: Sequence[_BodyNode],
    names: _Names,
    placeholders: list[tuple[ir.Node, str]],
    *,
    owns_body: bool,
) -> tuple[list[ir.Node], list[ir.Value]]:
    """Copies of the body's nodes for one call, with the call's own names and metadata,
    and the copies standing for the call's outputs.

    A call without a record takes the body's metadata only when it ``owns_body`` (the
    first call without a record, whose nodes the body is); any other such call gives every
    node its own metadata (its sources), never the first call's. Attributes are shared with the body
    (as onnx_ir's cloner shares them).
    """
    record = _record(call, len(plan))
    base = {k: v for k, v in call.metadata_props.items() if k != INLINE_KEY}
    arguments = call.inputs
    call_outputs = call.outputs
    outputs: list[ir.Value | None] = [None] * len(call_outputs)
    made: list[list[ir.Value]] = []
    new_nodes: list[ir.Node] = []
    for position, body in enumerate(plan):
        node = body.node
        entry = record[position] if record is not None else _NO_ENTRY
        if record is not None:
            if "constant_of" in entry:
                metadata = {CONSTANT_OF_KEY: entry["constant_of"]}
            else:
                metadata = dict(base)
                for key, value in entry.get("meta", _NO_ENTRY).items():
                    if value is None:
                        metadata.pop(key, None)
                    else:
                        metadata[key] = value
        elif owns_body or body.is_constant_copy:
            metadata = dict(node.metadata_props)
        else:
            metadata = dict(base)
        output_names = entry.get("outputs", ())
        types = entry.get("types", ())
        values_meta = entry.get("value_meta", ())
        new_outputs: list[ir.Value] = []
        for index, (old, at) in enumerate(zip(node.outputs, body.ends, strict=True)):
            if at is not None and at < len(call_outputs):
                target = call_outputs[at]
                new = ir.Value(
                    name=target.name,
                    type=target.type,
                    shape=target.shape,
                    metadata_props=dict(target.metadata_props),
                )
                outputs[at] = new
            else:
                new = ir.Value(name=output_names[index] if index < len(output_names) else old.name)
                if record is not None and index < len(types):
                    type_from_json(new, types[index])
                else:
                    new.type = old.type
                    new.shape = old.shape
                if record is not None:
                    meta = values_meta[index] if index < len(values_meta) else old.metadata_props
                    if meta:
                        new.metadata_props.update(meta)
                elif owns_body and old.metadata_props:
                    new.metadata_props.update(old.metadata_props)
            new_outputs.append(new)
        made.append(new_outputs)
        inputs: list[ir.Value | None] = []
        for ref in body.inputs:
            if type(ref) is tuple:
                source, index = ref
                if source >= 0:
                    inputs.append(made[source][index])
                else:
                    inputs.append(arguments[index] if index < len(arguments) else None)
            else:
                inputs.append(ref)  # type: ignore[arg-type]
        name = entry.get("name", node.name or "")
        copy = ir.Node(
            node.domain,
            node.op_type,
            inputs,
            body.attributes,
            overload=node.overload,
            outputs=new_outputs,
            name=names.unique(name) if name else None,
            doc_string=node.doc_string,
            metadata_props=metadata,
            version=node.version,
        )
        constant_of = metadata.get(CONSTANT_OF_KEY)
        if constant_of is not None:
            placeholders.append((copy, constant_of))
        new_nodes.append(copy)
    missing = [index for index, value in enumerate(outputs) if value is None]
    if missing:
        raise MetadataError(
            f"node {call.name!r}: output {missing[0]} of the call is no output of "
            f"{call.domain}::{call.op_type}'s body"
        )
    return new_nodes, [value for value in outputs if value is not None]


_NO_ENTRY: dict[str, Any] = {}


def _resolve_constants(graph: ir.Graph, placeholders: list[tuple[ir.Node, str]]) -> None:
    """Body copies of external constants become the constants they copied again."""
    if not placeholders:
        return
    copies = {node for node, _ in placeholders}
    wanted = {name for _, name in placeholders}
    by_name: dict[str, ir.Value] = {}
    for node in graph:
        for value in node.outputs:
            if value.name in wanted and node not in copies:
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


def _drop_unused_functions(model: ir.Model) -> bool:
    """Removes functionize's functions and domains nothing uses; True when it removed any."""
    dropped = False
    in_graph = {node.op_identifier() for node in all_nodes(model.graph) if node.domain in _DOMAINS}
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
            dropped = True
    domains = {key[0] for key in model.functions}
    domains.update(key[0] for key in in_graph)
    for domain in _DOMAINS:
        if domain not in domains and domain in model.opset_imports:
            del model.opset_imports[domain]
            dropped = True
    return dropped


@overload
def inline(model: ModelProto | str | os.PathLike[str]) -> ModelProto: ...
@overload
def inline(model: ir.Model | ONNXProgram) -> ir.Model: ...
def inline(model: ModelInput) -> ModelProto | ir.Model:
    """Back to a flat graph: every call functionize made becomes its nodes again.

    Args:
        model: an ModelProto, onnx_ir.Model, path or torch.onnx.ONNXProgram; not
            modified.

    Returns:
        The inlined model, of the same kind; for ``inline(functionize(m))`` node for node
        ``m`` (ops, attributes, topology, names, metadata).
    """
    inlined, _ = run_on_copy(InlineProvenancePass(), model, where="inline")
    return inlined
