"""Identity anchors, for in-process passes: a node or value that is the same Python object
before and after the change survived; replacements are read off surviving consumers, graph
outputs, (for onnxscript's rewriter) names taken over by fresh outputs, and removed nodes a
node of the graph duplicates (common subexpression elimination merged them into it)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import onnx_ir as ir

from modelprov.core._correspond._graph import Matching, Snapshot
from modelprov.core._walks import attribute_dict

__all__ = ["literal_key", "match_by_identity"]


def match_by_identity(
    before: Snapshot,
    graphs: list[ir.Graph],
    after_nodes: list[ir.Node],
    value_anchors: Mapping[ir.Value, ir.Value] | None = None,
) -> Matching:
    """Matches the graph (changed in place; ``graphs``: it and its subgraphs, ``all_graphs``)
    against ``before`` by object identity; ``value_anchors`` adds new value -> old value
    pairs known otherwise."""
    old_nodes = before.inputs  # a dict by old node: membership without another set
    same = {node: node for node in after_nodes if node in old_nodes}
    # A surviving node is its own old node: ``same`` answers for both sides.
    new_nodes = [node for node in after_nodes if node not in same]
    removed = [node for node in before.nodes if node not in same]
    removed_set = set(removed)
    replaced = _value_replacements(before, graphs, same, value_anchors)
    _rename_anchors(before, new_nodes, removed_set, replaced)
    _merged_twins(before, after_nodes, removed, replaced)
    return Matching(
        same=same,
        new_nodes=new_nodes,
        removed=removed,
        replaced=replaced,
        claimable=removed_set | _superseded(graphs, same, replaced),
        values_persist=True,
    )


def _superseded(
    graphs: list[ir.Graph],
    same: Mapping[ir.Node, ir.Node],
    replaced: Mapping[ir.Value, list[ir.Value]],
) -> set[ir.Node]:
    """Surviving nodes whose every output was replaced in place and is now unused: a pass
    left them dead for a later pass to remove, so they are claimable like removed nodes."""
    replaced_olds = {old for olds in replaced.values() for old in olds}
    outputs_now = {value for each in graphs for value in each.outputs}
    superseded: set[ir.Node] = set()
    for node in same:
        outputs = list(node.outputs)
        if (
            outputs
            and any(value in replaced_olds for value in outputs)
            and all(not value.uses() and value not in outputs_now for value in outputs)
        ):
            superseded.add(node)
    return superseded


def _value_replacements(
    before: Snapshot,
    graphs: list[ir.Graph],
    surviving: Iterable[ir.Node],
    anchors: Mapping[ir.Value, ir.Value] | None,
) -> dict[ir.Value, list[ir.Value]]:
    """New value -> old values it replaced, read off surviving consumers and the outputs of
    ``graphs`` (the graph and its subgraphs)."""
    replaced: dict[ir.Value, list[ir.Value]] = {}

    def record(old: ir.Value | None, new: ir.Value | None) -> None:
        if old is None or new is None or old is new:
            return
        olds = replaced.setdefault(new, [])
        if old not in olds:
            olds.append(old)

    old_inputs = before.inputs
    for node in surviving:
        inputs = node.inputs
        if old_inputs[node] is inputs:
            continue  # the same tuple: onnx_ir replaces a node's inputs, never edits them
        for old, new in zip(old_inputs[node], inputs, strict=False):
            record(old, new)
    for each in graphs:
        old_outputs = before.graph_outputs.get(each)
        if old_outputs is None:
            continue
        for old, new in zip(old_outputs, each.outputs, strict=False):
            record(old, new)
    for new, old in (anchors or {}).items():
        record(old, new)
    return replaced


def _rename_anchors(
    before: Snapshot,
    new_nodes: Iterable[ir.Node],
    removed: set[ir.Node],
    replaced: dict[ir.Value, list[ir.Value]],
) -> None:
    """A fresh output that took the name of a removed node's output replaced that value.

    onnxscript's rewriter gives a rule's new outputs the names of the values they replace;
    without this, two new nodes of one rewrite (a merged Reshape feeding a new Gemm) would
    look like one cluster and each claim the other's work. Shapes and dtypes must agree.
    """
    old_by_name: dict[str, ir.Value] | None = None
    for node in new_nodes:
        for value in node.outputs:
            if not value.name or value in replaced or before.knows(value):
                continue
            if old_by_name is None:
                old_by_name = {
                    old.name: old
                    for old, producer in before.producer.items()
                    if old.name and producer in removed
                }
            old = old_by_name.get(value.name)
            if old is None or not _compatible(old, value):
                continue
            replaced[value] = [old]


_Key = tuple[str, str, tuple[object, ...]]


def _merged_twins(
    before: Snapshot,
    after_nodes: list[ir.Node],
    removed: list[ir.Node],
    replaced: dict[ir.Value, list[ir.Value]],
) -> None:
    """A removed node that computed what a node of the graph computes (same op, attributes
    and inputs, up to such twins and equal small literals) was merged into it (common
    subexpression elimination): its outputs are replaced by that node's outputs. So each
    node of a merged chain takes its own twin, and nothing upstream of what it reads."""
    ops = {(n.domain, n.op_type) for n in removed if n.op_type != "Constant" and n.outputs}
    if not ops:
        return
    now_of: dict[ir.Value, ir.Value] = {}
    for new, olds in replaced.items():
        for each in olds:
            now_of.setdefault(each, new)
    literals: dict[tuple[object, ...], ir.Value] = {}
    literal_keys: dict[ir.Node, tuple[object, ...] | None] = {}  # one key per Constant

    def canonical(value: ir.Value | None, producer: ir.Node | None) -> object:
        if value is None:
            return None
        value = now_of.get(value, value)
        if producer is not None and producer.op_type == "Constant":
            if producer in literal_keys:
                key = literal_keys[producer]
            else:
                key = literal_keys[producer] = literal_key(producer)
            if key is not None:
                return literals.setdefault(key, value)
        return value

    index: dict[_Key, list[ir.Node]] = {}
    for node in after_nodes:
        op = (node.domain, node.op_type)
        if op in ops:
            # Lists, not generators, into tuple(): cheaper on every node of the graph.
            inputs = tuple(
                [canonical(v, v.producer() if v is not None else None) for v in node.inputs]
            )
            index.setdefault((*op, inputs), []).append(node)
    if not index:
        return
    producer_of = before.producer.get
    for old in removed:
        op = (old.domain, old.op_type)
        if op not in ops:
            continue
        inputs = tuple(
            [canonical(v, producer_of(v) if v is not None else None) for v in before.inputs[old]]
        )
        candidates = index.get((*op, inputs))
        if not candidates:
            continue
        attributes = _attribute_key(old)
        twin = next(
            (
                node
                for node in candidates
                if len(node.outputs) == len(before.outputs[old])
                and _attribute_key(node) == attributes
            ),
            None,
        )
        if twin is None or attributes is None:
            continue
        for mine, theirs in zip(before.outputs[old], twin.outputs, strict=True):
            olds = replaced.setdefault(theirs, [])
            if mine not in olds:
                olds.append(mine)
            now_of[mine] = theirs


def _attribute_key(node: ir.Node) -> tuple[tuple[str, str], ...] | None:
    """A node's attributes as text (None for a node with subgraphs: no twin)."""
    key = []
    for name, attr in node.attributes.items():
        if attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
            return None
        key.append((name, str(attr)))
    return tuple(sorted(key))


_SMALL_LITERAL = 64
"""Elements of a literal compared by contents (larger ones count as distinct)."""


def literal_key(node: ir.Node) -> tuple[object, ...] | None:
    """A Constant node's contents as a key, for small literals; None for others."""
    attributes = attribute_dict(node)
    if len(attributes) != 1 or node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
        return None
    ((name, attr),) = attributes.items()
    if attr.type == ir.AttributeType.TENSOR:
        # The value of a TENSOR attribute is its tensor: as_tensor()'s runtime protocol
        # check costs more than the rest of this key.
        tensor = attr.value
        if type(tensor) is ir.serde.TensorProtoTensor:
            return _proto_literal_key(name, tensor)
        dims = tuple(tensor.shape.numpy())
        if math.prod(dims) > _SMALL_LITERAL:  # the tensor's size
            return None
        return (name, tensor.dtype, dims, tensor.tobytes())
    lists = (ir.AttributeType.INTS, ir.AttributeType.FLOATS, ir.AttributeType.STRINGS)
    if attr.type in lists and len(attr.value) > _SMALL_LITERAL:
        return None
    return (name, str(attr))


_PLAIN_RAW_DATA_TYPES = frozenset(
    dtype
    for dtype in ir.DataType
    if dtype
    not in (
        ir.DataType.UNDEFINED,
        ir.DataType.STRING,
        ir.DataType.FLOAT6E2M3,  # tobytes() validates their packing first
        ir.DataType.FLOAT6E3M2,
    )
)
"""Element types whose ``raw_data`` in a proto is exactly what ``tobytes()`` returns."""


def _proto_literal_key(name: str, tensor: ir.serde.TensorProtoTensor) -> tuple[object, ...] | None:
    """``literal_key`` of a tensor read from a proto, from the proto's fields: its ``shape``
    and ``dtype`` build new objects on each call, and ``tobytes()`` is its ``raw_data`` when
    the data is stored there (asked of ``tobytes()`` otherwise)."""
    proto = tensor.raw
    dims = tuple(proto.dims)
    if math.prod(dims) > _SMALL_LITERAL:
        return None
    dtype = ir.DataType(proto.data_type)
    # data_location 0 is DEFAULT: the data is in the proto (tobytes() refuses EXTERNAL).
    if dtype in _PLAIN_RAW_DATA_TYPES and proto.data_location == 0 and proto.HasField("raw_data"):
        return (name, dtype, dims, proto.raw_data)
    return (name, dtype, dims, tensor.tobytes())


def _compatible(old: ir.Value, new: ir.Value) -> bool:
    """True unless known dtypes or known shapes differ."""
    if old.dtype is not None and new.dtype is not None and old.dtype != new.dtype:
        return False
    return old.shape is None or new.shape is None or old.shape == new.shape
