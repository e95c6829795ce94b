"""modelprov.structural_hash: a name-independent digest of a graph or function body.

Each value gets a label from what computes it (graph inputs by position, initializers by
their bytes, node outputs by the node's label and output index); a node's label is the
digest of its domain, op type, overload, attributes (subgraphs hashed recursively with
their captured outer values) and its inputs' labels. The digest of the graph is that of
its outputs' labels plus the sorted labels of every node, so it is invariant under
renaming values and nodes, reordering independent nodes and metadata, and sensitive to
op types, domains, attributes, topology and constant values. Value types and shapes are
not hashed (function bodies are untyped).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np
import onnx_ir as ir

from modelprov._model_io._convert import GRAPH_KINDS, GraphInput, ModelInput, as_ir, graph_input

__all__ = [
    "RegionHasher",
    "hash_and_labels",
    "node_labels",
    "region_hash_and_labels",
    "structural_hash",
]


def _digest(*parts: bytes | str) -> bytes:
    """sha256 of the parts, each prefixed by its 8-byte little-endian length."""
    chunks: list[bytes] = []
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        chunks.append(len(data).to_bytes(8, "little"))
        chunks.append(data)
    return hashlib.sha256(b"".join(chunks)).digest()


def _tensor_digest(tensor: ir.TensorProtocol) -> bytes:
    array = np.ascontiguousarray(tensor.numpy())
    data = array.tobytes() if array.dtype != object else repr(array.tolist()).encode()
    return _digest("tensor", str(tensor.dtype), repr(tuple(tensor.shape)), data)


def _attribute_digest(attribute: ir.Attr, outer: Mapping[ir.Value, bytes]) -> bytes:
    kind = attribute.type
    if attribute.is_ref():
        return _digest("ref", attribute.name, str(kind), attribute.ref_attr_name or "")
    value = attribute.value
    if kind in _PLAIN_KINDS:
        # Layers repeat the same plain attributes: digest each distinct one once (its
        # repr, exact unlike ==, is the key).
        key = (attribute.name, kind, repr(value))
        digest = _PLAIN_DIGESTS.get(key)
        if digest is None:
            if len(_PLAIN_DIGESTS) >= _PLAIN_DIGESTS_LIMIT:
                _PLAIN_DIGESTS.clear()
            digest = _PLAIN_DIGESTS[key] = _plain_attribute_digest(attribute.name, kind, value)
        return digest
    if kind == ir.AttributeType.GRAPH:
        body = _graph_digest(attribute.as_graph(), outer)
    elif kind == ir.AttributeType.GRAPHS:
        body = _digest(*(_graph_digest(graph, outer) for graph in attribute.as_graphs()))
    # The value of a TENSOR(S) attribute is its tensor(s): as_tensor()'s protocol check
    # is slow at scale and says nothing more.
    elif kind == ir.AttributeType.TENSOR:
        body = _tensor_digest(value)
    elif kind == ir.AttributeType.TENSORS:
        body = _digest(*(_tensor_digest(tensor) for tensor in value))
    else:
        return _plain_attribute_digest(attribute.name, kind, value)
    return _digest("attr", attribute.name, str(kind), body)


_PLAIN_KINDS = frozenset(
    {
        ir.AttributeType.FLOAT,
        ir.AttributeType.INT,
        ir.AttributeType.STRING,
        ir.AttributeType.FLOATS,
        ir.AttributeType.INTS,
        ir.AttributeType.STRINGS,
    }
)
_PLAIN_DIGESTS: dict[tuple[str, ir.AttributeType, str], bytes] = {}
_PLAIN_DIGESTS_LIMIT = 65536
"""Digests of plain attribute values, by name, kind and the value's repr."""


def _plain_attribute_digest(name: str, kind: ir.AttributeType, value: Any) -> bytes:
    if kind in (ir.AttributeType.FLOAT, ir.AttributeType.FLOATS):
        body = np.asarray(value, dtype=np.float32).tobytes()
    else:
        body = repr(value).encode()
    return _digest("attr", name, str(kind), body)


def _graph_digest(
    graph: ir.Graph | ir.Function, outer: Mapping[ir.Value, bytes] | None = None
) -> bytes:
    node_labels, outputs = _labels(graph, outer)
    return _digest("graph", _digest(*outputs), _digest(*sorted(node_labels)))


def node_labels(graph: ir.Graph | ir.Function) -> list[bytes]:
    """Each node's structural label, in graph order (equal nodes of equal graphs match)."""
    return _labels(graph, None)[0]


def _labels(
    graph: ir.Graph | ir.Function, outer: Mapping[ir.Value, bytes] | None
) -> tuple[list[bytes], list[bytes]]:
    labels: dict[ir.Value, bytes] = dict(outer or {})
    for position, value in enumerate(graph.inputs):
        labels[value] = _digest("input", str(position))
    if isinstance(graph, ir.Graph):
        for value in graph.initializers.values():
            if value.const_value is not None and value not in labels:
                labels[value] = _digest("initializer", _tensor_digest(value.const_value))
    return _walk(graph, graph.outputs, labels)


def _walk(
    nodes: Iterable[ir.Node], outputs: Sequence[ir.Value], labels: dict[ir.Value, bytes]
) -> tuple[list[bytes], list[bytes]]:
    """Labels of ``nodes`` (in order) and of ``outputs``, given the labels of what they read."""
    node_labels: list[bytes] = []
    for node in nodes:
        inputs = [b"" if value is None else _label_of(value, labels) for value in node.inputs]
        attributes = sorted(
            _attribute_digest(attribute, labels) for attribute in node.attributes.values()
        )
        label = _digest(
            "node",
            node.domain,
            node.op_type,
            node.overload,
            str(len(node.outputs)),
            _digest(*inputs),
            _digest(*attributes) if attributes else _EMPTY,
        )
        node_labels.append(label)
        for index, value in enumerate(node.outputs):
            labels[value] = _digest(label, str(index))
    return node_labels, [_label_of(value, labels) for value in outputs]


_EMPTY = _digest()


def _label_of(value: ir.Value, labels: Mapping[ir.Value, bytes]) -> bytes:
    """A value's label; a value computed outside (free) is labelled by its name."""
    label = labels.get(value)
    return label if label is not None else _digest("free", value.name or "")


def hash_and_labels(function: ir.Function) -> tuple[str, list[bytes]]:
    """``structural_hash(function)`` and ``node_labels(function)`` from one walk."""
    labels, outputs = _labels(function, None)
    return _function_digest(labels, outputs, function.attributes), labels


def region_hash_and_labels(
    inputs: Sequence[ir.Value | None],
    nodes: Sequence[ir.Node],
    outputs: Sequence[ir.Value],
    attribute_names: Iterable[str],
) -> tuple[str, list[bytes]]:
    """:func:`hash_and_labels` of the function that ``nodes`` would form, read in place.

    The function's inputs are ``inputs`` in order (None: an input nothing reads; a value
    listed twice is read through its first position), its outputs ``outputs`` and its
    attributes ``attribute_names``; the nodes stay where they are.
    """
    labels: dict[ir.Value, bytes] = {}
    for position, value in enumerate(inputs):
        if value is not None and value not in labels:
            labels[value] = _digest("input", str(position))
    node_labels, output_labels = _walk(nodes, outputs, labels)
    return _function_digest(node_labels, output_labels, attribute_names), node_labels


class RegionHasher:
    """:func:`region_hash_and_labels` for many regions, each distinct structure walked once.

    A region's key spells out everything its digest depends on (ops, attributes as their
    digests' keys, which input or node output each input reads, the outputs and attribute
    names) in plain Python values, which cost far less than the digests; regions with equal
    keys share one digest and label list. Keys may tell apart regions whose digests agree
    (node order), never the reverse. Regions with subgraph attributes are walked each time.
    """

    def __init__(self) -> None:
        self._known: dict[tuple[Any, ...], tuple[str, list[bytes]]] = {}
        self._tensors: dict[int, tuple[ir.TensorProtocol, bytes]] = {}

    def __call__(
        self,
        inputs: Sequence[ir.Value | None],
        nodes: Sequence[ir.Node],
        outputs: Sequence[ir.Value],
        attribute_names: Iterable[str],
    ) -> tuple[str, list[bytes], tuple[Any, ...] | None]:
        """(digest, node labels, key): the key is None for a region walked uncached."""
        key = self._key(inputs, nodes, outputs, attribute_names)
        known = self._known.get(key) if key is not None else None
        if known is None:
            known = region_hash_and_labels(inputs, nodes, outputs, attribute_names)
            if key is not None:
                self._known[key] = known
        return known[0], known[1], key

    def _key(
        self,
        inputs: Sequence[ir.Value | None],
        nodes: Sequence[ir.Node],
        outputs: Sequence[ir.Value],
        attribute_names: Iterable[str],
    ) -> tuple[Any, ...] | None:
        where: dict[ir.Value, Any] = {}
        for position, value in enumerate(inputs):
            if value is not None and value not in where:
                where[value] = position
        parts: list[Any] = []
        for index, node in enumerate(nodes):
            attributes: list[Any] = []
            for attribute in node.attributes.values():
                part = self._attribute_key(attribute)
                if part is None:
                    return None
                attributes.append(part)
            parts.append(
                (
                    node.domain,
                    node.op_type,
                    node.overload,
                    len(node.outputs),
                    tuple(
                        None if value is None else where.get(value, value.name or "")
                        for value in node.inputs
                    ),
                    tuple(attributes),
                )
            )
            for position, value in enumerate(node.outputs):
                where[value] = (index, position)
        ends = tuple(where.get(value, value.name or "") for value in outputs)
        return (tuple(parts), ends, tuple(sorted(attribute_names)))

    def _attribute_key(self, attribute: ir.Attr) -> Any:
        kind = attribute.type
        if attribute.is_ref():
            return (attribute.name, kind, "ref", attribute.ref_attr_name)
        if kind in _PLAIN_KINDS:
            return (attribute.name, kind, repr(attribute.value))
        if kind == ir.AttributeType.TENSOR:
            return (attribute.name, kind, self._tensor_key(attribute.value))
        if kind == ir.AttributeType.TENSORS:
            return (attribute.name, kind, tuple(self._tensor_key(t) for t in attribute.value))
        return None

    def _tensor_key(self, tensor: ir.TensorProtocol) -> bytes:
        known = self._tensors.get(id(tensor))
        if known is None or known[0] is not tensor:
            known = self._tensors[id(tensor)] = (tensor, _tensor_digest(tensor))
        return known[1]


def _function_digest(
    node_labels: Iterable[bytes], output_labels: Sequence[bytes], attribute_names: Iterable[str]
) -> str:
    digest = _digest("graph", _digest(*output_labels), _digest(*sorted(node_labels)))
    return _digest("function", digest, *sorted(attribute_names)).hex()


HashInput: TypeAlias = "GraphInput | ModelInput"


def structural_hash(graph_or_function: HashInput) -> str:
    """A stable hex digest of a graph's or function's structure.

    Invariant under renaming values and nodes, reordering independent nodes, and
    metadata; sensitive to op types, domains, overloads, attributes (attribute names of a
    function too), topology and constant values. A model hashes as its main graph. Takes
    onnx_ir objects or their protos (ModelProto, GraphProto, FunctionProto; a proto and
    its onnx_ir form hash alike), a path or a torch.onnx.ONNXProgram; protos are not
    modified.
    """
    target: ir.Graph | ir.Function
    if isinstance(graph_or_function, GRAPH_KINDS):
        target = graph_input(graph_or_function, where="structural_hash")
    else:
        target = as_ir(
            graph_or_function,
            where="structural_hash (it also takes onnx_ir Graph and Function, onnx GraphProto "
            "and FunctionProto)",
        ).graph
    digest = _graph_digest(target)
    if isinstance(target, ir.Function):
        names = sorted(target.attributes)
        digest = _digest("function", digest, *names)
    return digest.hex()
