"""Wraps a region of a graph into a call of a model-local function, sharing equal bodies.

The engine under functionize: a :class:`Region` (nodes, the values that become function
inputs in order, external constants to copy into the body, call attributes) becomes one
call node. Bodies are deduplicated by structural hash (the first 12 hex digits are the
``overload``). The first call of a function is its body; every other call carries, under
the reserved node key ``modelprov.inline`` (JSON), what inline needs to restore its own
nodes: per body node its name, output names, metadata (as a diff against the call's) and
value types. Format: docs/metadata-format.md.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import onnx_ir as ir

from modelprov.keys import (
    ATEN_DOMAIN,
    CONSTANT_OF_KEY,
    FUNCTION_NAME_KEY,
    INLINE_KEY,
    MODULE_DOMAIN,
    VARIANT_KEY,
)
from modelprov.onnx.functions._structural_hash import RegionHasher

__all__ = [
    "ATEN_DOMAIN",
    "CONSTANT_OF_KEY",
    "FUNCTION_NAME_KEY",
    "INLINE_KEY",
    "INLINE_VERSION",
    "MODULE_DOMAIN",
    "VARIANT_KEY",
    "Region",
    "Wrapper",
    "constant_node",
    "function_name",
    "has_subgraphs",
    "is_constant",
    "type_from_json",
    "type_json",
]

INLINE_VERSION = 1
_OVERLOAD_DIGITS = 12
_NON_IDENTIFIER = re.compile(r"\W")


def function_name(target: str) -> str:
    """The function name of an ATen target: ``aten::addmm.default`` -> ``aten_addmm_default``."""
    name = _NON_IDENTIFIER.sub("_", target.replace("::", "_"))
    return name if name and not name[0].isdigit() else f"_{name}"


@dataclasses.dataclass
class Region:
    """Nodes to wrap and the call's signature.

    Attributes:
        nodes: the nodes, in graph order (main graph only, no subgraph attributes).
        inputs: the call's inputs in function-input order (None: an absent argument).
        input_names: the function's input names, parallel to ``inputs``.
        external_constants: external constants the body gets a copy of.
        constants: the body's Constant nodes copying them (made before wrapping).
        attributes: the call's attributes; ``declared`` every function attribute name.
        key: names the call node (``call_<key>``).
    """

    nodes: list[ir.Node]
    inputs: list[ir.Value | None]
    input_names: list[str]
    domain: str
    name: str
    key: str
    external_constants: list[ir.Value] = dataclasses.field(default_factory=list)
    constants: list[ir.Node] = dataclasses.field(default_factory=list)
    attributes: list[ir.Attr] = dataclasses.field(default_factory=list)
    declared: list[str] = dataclasses.field(default_factory=list)
    function_metadata: dict[str, str] = dataclasses.field(default_factory=dict)
    doc_string: str | None = None


def has_subgraphs(node: ir.Node) -> bool:
    """True when a node holds graph attributes (If, Loop, Scan)."""
    return any(
        attribute.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
        for attribute in node.attributes.values()
    )


def is_constant(value: ir.Value) -> bool:
    """True for an initializer (not a graph input) or the output of a plain Constant node."""
    producer = value.producer()
    if producer is None:
        return value.const_value is not None and not value.is_graph_input()
    return (
        producer.op_type == "Constant"
        and producer.domain == ""
        and len(producer.attributes) == 1
        and not has_subgraphs(producer)
    )


def constant_node(value: ir.Value) -> ir.Node:
    """A Constant node computing ``value`` (an initializer or a Constant's output)."""
    producer = value.producer()
    if producer is None:
        assert value.const_value is not None
        attributes: list[ir.Attr] = [ir.AttrTensor("value", value.const_value)]
    else:
        attributes = [_copy_attr(attribute) for attribute in producer.attributes.values()]
    node = ir.Node(
        "", "Constant", [], attributes, metadata_props={CONSTANT_OF_KEY: value.name or ""}
    )
    node.outputs[0].name = value.name
    node.outputs[0].type = value.type
    node.outputs[0].shape = value.shape
    return node


def _copy_attr(attribute: ir.Attr) -> ir.Attr:
    return ir.Attr(
        attribute.name,
        attribute.type,
        attribute.value,
        ref_attr_name=attribute.ref_attr_name,
        doc_string=attribute.doc_string,
    )


def type_json(value: ir.Value) -> Any:
    """A value's tensor type and shape as JSON ([dtype, dims] or None)."""
    if not isinstance(value.type, ir.TensorType):
        return None
    dims: list[Any] | None = None
    if value.shape is not None:
        dims = [dim if isinstance(dim, int) else str(dim) for dim in value.shape]
    return [int(value.type.dtype), dims]


def type_from_json(value: ir.Value, entry: Any) -> None:
    """Sets a value's type and shape from :func:`type_json`'s form."""
    if not isinstance(entry, list) or len(entry) != 2:
        return
    value.type = ir.TensorType(ir.DataType(entry[0]))
    value.shape = None if entry[1] is None else ir.Shape(entry[1])


def _metadata_diff(metadata: Mapping[str, str], base: Mapping[str, str]) -> dict[str, str | None]:
    diff: dict[str, str | None] = {k: v for k, v in metadata.items() if base.get(k) != v}
    diff.update({k: None for k in base if k not in metadata})
    return diff


class Wrapper:
    """Wraps regions of one model's main graph; collects the functions it makes."""

    def __init__(self, model: ir.Model) -> None:
        self.model = model
        self.graph = model.graph
        self.functions: dict[ir.OperatorIdentifier, ir.Function] = {}
        self._hashes: dict[ir.OperatorIdentifier, str] = {}
        self._by_hash: dict[tuple[str, str, str], ir.Function] = {}
        self._names = {node.name for node in self.graph if node.name}
        self.opset_imports = dict(model.opset_imports)
        self.replaced: dict[ir.Value, ir.Value] = {}
        """Values of wrapped nodes -> the call outputs that replaced them outside."""
        self._slots: dict[ir.OperatorIdentifier, dict[bytes, list[int]]] = {}
        """Per function, the body positions of each node label (read by every later call)."""
        self._places: dict[tuple[ir.OperatorIdentifier, object], list[int]] = {}
        """Per function and region key, the body position of each region node."""
        self._hasher = RegionHasher()
        self._order: dict[ir.Node, int] | None = None
        """Graph positions (a call takes its last node's); None when they must be re-read."""

    def _positions(self) -> dict[ir.Node, int]:
        if self._order is None:
            self._order = {node: index for index, node in enumerate(self.graph)}
        return self._order

    def current(self, value: ir.Value | None) -> ir.Value | None:
        """The value now standing for ``value`` (a call output once its producer is wrapped)."""
        while value is not None and value in self.replaced:
            value = self.replaced[value]
        return value

    def _call_name(self, key: str) -> str:
        base = f"call_{key}"
        name, count = base, 1
        while name in self._names:
            count += 1
            name = f"{base}_{count}"
        self._names.add(name)
        return name

    def outputs_of(self, nodes: Sequence[ir.Node]) -> list[ir.Value]:
        """Values the nodes produce that are read outside them or are graph outputs."""
        inside = set(nodes)
        graph_outputs = set(self.graph.outputs)
        return [
            value
            for node in nodes
            for value in node.outputs
            if value in graph_outputs or any(use.node not in inside for use in value.uses())
        ]

    def is_convex(self, nodes: Sequence[ir.Node], order: Mapping[ir.Node, int]) -> bool:
        """True when no path leaves the nodes and comes back (they can become one node)."""
        inside = set(nodes)
        last = max(order[node] for node in nodes)
        stack = [
            use.node
            for node in nodes
            for value in node.outputs
            for use in value.uses()
            if use.node not in inside
        ]
        seen: set[ir.Node] = set()
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            if node in inside:
                return False
            if order.get(node, last + 1) > last:
                continue
            seen.add(node)
            stack.extend(use.node for value in node.outputs for use in value.uses())
        return True

    def wrap(self, region: Region, metadata: Mapping[str, str]) -> ir.Node:
        """Replaces the region by one call node with ``metadata``; returns the call."""
        nodes = region.nodes
        outputs = self.outputs_of(nodes)
        inside = set(nodes)
        order = self._positions()
        moved_after = self._dependents(nodes, outputs, order)
        anchor = max(nodes, key=order.__getitem__)
        call_outputs = [
            ir.Value(
                name=value.name,
                type=value.type,
                shape=value.shape,
                metadata_props=dict(value.metadata_props),
            )
            for value in outputs
        ]
        region.inputs = [self.current(value) for value in region.inputs]
        for old, new in zip(outputs, call_outputs, strict=True):
            self.replaced[old] = new
            for use in list(old.uses()):
                if use.node not in inside:
                    use.node.replace_input_with(use.idx, new)
            for index, graph_output in enumerate(self.graph.outputs):
                if graph_output is old:
                    self.graph.outputs[index] = new
        constants = list(region.constants)
        body_nodes = [*constants, *nodes]
        digest, body_labels, shape = self._hasher(
            region.inputs, body_nodes, outputs, region.declared
        )
        # The call takes the place of the region's last node: inserted after it before the
        # region leaves the graph.
        call = ir.Node(
            region.domain,
            region.name,
            region.inputs,
            region.attributes,
            outputs=call_outputs,
            name=self._call_name(region.key),
            metadata_props=dict(metadata),
        )
        self.graph.insert_after(anchor, call)
        order[call] = order[anchor]
        self.graph.remove(nodes, safe=False)
        for node in nodes:
            del order[node]
        function = self._known(digest, region)
        if function is None:
            function = self._new_function(region, body_nodes, outputs, digest, body_labels)
        else:
            # Another call's nodes are the body: these only leave their record, under the
            # names the body would have given them.
            _name_as_in_a_body(body_nodes, _body_input_names(region))
            external = {value for value in region.inputs if value is not None}
            for node in nodes:
                for index, value in enumerate(node.inputs):
                    if value is not None and value in external:
                        node.replace_input_with(index, None)
            call.metadata_props[INLINE_KEY] = self._record(
                body_nodes, body_labels, shape, function, metadata
            )
        call.overload = function.overload
        if moved_after:
            self.graph.remove(moved_after, safe=False)
            self.graph.insert_after(call, moved_after)
            self._order = None  # rare: read the positions again on the next wrap
        return call

    def _new_function(
        self,
        region: Region,
        body_nodes: Sequence[ir.Node],
        outputs: Sequence[ir.Value],
        digest: str,
        body_labels: Sequence[bytes],
    ) -> ir.Function:
        """The function whose body is this region's nodes (out of the graph by now)."""
        body_inputs: list[ir.Value] = []
        slot: dict[ir.Value, ir.Value] = {}
        for value, name in zip(region.inputs, _body_input_names(region), strict=True):
            body_input = ir.Value(name=name)
            body_inputs.append(body_input)
            if value is not None:
                slot.setdefault(value, body_input)
        for node in region.nodes:
            for index, value in enumerate(node.inputs):
                if value is not None and value in slot:
                    node.replace_input_with(index, slot[value])
        opsets = {**self.opset_imports, region.domain: 1}
        body = ir.Graph(body_inputs, list(outputs), nodes=body_nodes, opset_imports=opsets)
        attributes = {
            name: ir.Attr(name, _declared_type(name, region.attributes), None)
            for name in region.declared
        }
        function = ir.Function(region.domain, region.name, "", graph=body, attributes=attributes)
        overload = self._free_overload(digest, region)
        function.overload = overload
        function.metadata_props.update(region.function_metadata)
        function.metadata_props[FUNCTION_NAME_KEY] = region.name
        function.metadata_props[VARIANT_KEY] = overload
        if region.doc_string:
            function.doc_string = region.doc_string
        key = (region.domain, region.name, overload)
        self.functions[key] = function
        self._hashes[key] = digest
        self.model.functions[key] = function
        self.model.opset_imports.setdefault(region.domain, 1)
        shared: dict[bytes, list[int]] = {}
        for index, label in enumerate(body_labels):
            shared.setdefault(label, []).append(index)
        self._slots[key] = shared
        return function

    def _dependents(
        self, nodes: Sequence[ir.Node], outputs: Sequence[ir.Value], order: Mapping[ir.Node, int]
    ) -> list[ir.Node]:
        """Nodes placed among the region that read its outputs: they move after the call."""
        if not outputs:
            return []
        inside = set(nodes)
        last = max(order[node] for node in nodes)
        found: set[ir.Node] = set()
        stack = [use.node for value in outputs for use in value.uses()]
        while stack:
            node = stack.pop()
            if node in inside or node in found or order.get(node, last + 1) > last:
                continue
            found.add(node)
            stack.extend(use.node for value in node.outputs for use in value.uses())
        return sorted(found, key=order.__getitem__)

    def _known(self, digest: str, region: Region) -> ir.Function | None:
        """The function made earlier with this digest, name and domain, if any."""
        digits = _OVERLOAD_DIGITS
        while True:
            key = (region.domain, region.name, digest[:digits])
            existing = self.functions.get(key)
            if existing is None:
                return None
            if self._hashes[key] == digest:
                return existing
            digits += 4

    def _free_overload(self, digest: str, region: Region) -> str:
        """The shortest prefix of ``digest`` (12 digits, then 4 more at a time) not taken."""
        digits = _OVERLOAD_DIGITS
        while (region.domain, region.name, digest[:digits]) in self.functions:
            digits += 4
        return digest[:digits]

    def _record(
        self,
        body: Sequence[ir.Node],
        body_labels: Sequence[bytes],
        shape: object,
        function: ir.Function,
        metadata: Mapping[str, str],
    ) -> str:
        """This call's own names, metadata and types, aligned with the shared body."""
        identifier = function.identifier()
        places = self._places.get((identifier, shape)) if shape is not None else None
        if places is None:
            slots = {label: list(indices) for label, indices in self._slots[identifier].items()}
            places = [slots[label].pop(0) for label in body_labels]
            if shape is not None:
                self._places[(identifier, shape)] = places
        base = {k: v for k, v in metadata.items() if k != INLINE_KEY}
        entries: list[dict[str, Any]] = [{} for _ in range(len(function))]
        for node, index in zip(body, places, strict=True):
            entry: dict[str, Any] = {"name": node.name or ""}
            constant_of = node.metadata_props.get(CONSTANT_OF_KEY)
            if constant_of is not None:
                entry["constant_of"] = constant_of
            else:
                diff = _metadata_diff(node.metadata_props, base)
                if diff:
                    entry["meta"] = diff
                entry["outputs"] = [value.name or "" for value in node.outputs]
                entry["types"] = [type_json(value) for value in node.outputs]
                values_meta = [dict(value.metadata_props) for value in node.outputs]
                if any(values_meta):
                    entry["value_meta"] = values_meta
            entries[index] = entry
        document = {"version": INLINE_VERSION, "nodes": entries}
        return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def _body_input_names(region: Region) -> list[str]:
    """The function's input names: the argument names, made unlike the body's value names."""
    internal = {v.name for node in region.nodes for v in node.outputs}
    names: list[str] = []
    for name in region.input_names:
        while name in internal:
            name = f"{name}_"
        names.append(name)
    return names


def _name_as_in_a_body(nodes: Sequence[ir.Node], input_names: Iterable[str]) -> None:
    """Names unnamed nodes and values as onnx_ir's Graph does when it is built from them
    (``node_<op>_<n>``, ``val_<n>``, counting per graph), so a call's record reads the
    same whether or not its nodes became a body."""
    node_names: set[str] = set()
    value_names = set(input_names)
    node_count = value_count = 0
    for node in nodes:
        if node.name is None:
            node.name, node_count = _fresh_name(f"node_{node.op_type}_", node_count, node_names)
        node_names.add(node.name)
        for value in node.outputs:
            if value.name is None:
                value.name, value_count = _fresh_name("val_", value_count, value_names)
            value_names.add(value.name)


def _fresh_name(prefix: str, count: int, taken: set[str]) -> tuple[str, int]:
    """``<prefix><n>`` for the first n from ``count`` not in ``taken``, and the count after
    it (onnx_ir's counter: it goes on from there)."""
    while f"{prefix}{count}" in taken:
        count += 1
    return f"{prefix}{count}", count + 1


def _declared_type(name: str, attributes: Iterable[ir.Attr]) -> ir.AttributeType:
    for attribute in attributes:
        if attribute.name == name:
            return attribute.type
    return ir.AttributeType.STRING
