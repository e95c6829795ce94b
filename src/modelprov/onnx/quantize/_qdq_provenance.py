"""Provenance for a model a quantizer rewrote: every node, QuantizeLinear/DequantizeLinear included.

onnxruntime's quantizer inserts Q/DQ nodes without metadata, renames tensors around them
(a quantized graph output's float tensor becomes ``X_QuantizeLinear_Input``) and removes
activations it folds into a quantized producer (Relu, Clip). Two steps put provenance back:

1. The operations: a copy of the quantized model with every Q/DQ node bypassed (its output
   read as its input, graph-output names given back to the float tensors) is what the float
   model became; :func:`modelprov.recover` attributes its nodes, and the attribution is
   carried back to the quantized model's nodes.
2. The Q/DQ nodes: a chain quantizing a tensor computed by an operation belongs to the
   operation producing that tensor (the sources whose output the tensor is); a chain on a
   weight or a graph input belongs to the operations consuming it (narrowed to those that
   read that tensor in the float model, when its name tells). Confidence follows:
   the producer's confidence, or for consumers the weakest of theirs, never above ``named``
   (a Q/DQ node is new; it is attributed through the tensor it quantizes).

Value-scoped metadata (``custom.min``...) stays on the float tensors it describes (and on a
graph output that kept the tensor's name); Q/DQ nodes get op-scoped metadata only.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from modelprov.core._policy import Policies
from modelprov.core._provenance import Provenance
from modelprov.core._walks import all_nodes
from modelprov.onnx.recover._recover import CONFIDENCE_KEY, recover_model

__all__ = ["QDQ_OPS", "QdqAttribution", "attribute_quantized", "is_qdq", "quantized_source"]

QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
_QDQ_DOMAINS = frozenset({"", "ai.onnx", "com.microsoft"})
_CONFIDENCE_ORDER = ("inferred", "named", "exact")
_QOPERATOR_SUFFIX = "_quantized"
_ORT_SUFFIXES = ("_quantized", "_DequantizeLinear_Output", "_QuantizeLinear_Output")


def is_qdq(node: ir.Node) -> bool:
    """True for QuantizeLinear / DequantizeLinear (ONNX or com.microsoft)."""
    return node.op_type in QDQ_OPS and node.domain in _QDQ_DOMAINS


@dataclasses.dataclass(frozen=True)
class QdqAttribution:
    """What the attribution found: counts, and nodes left without sources."""

    nodes: int
    qdq_nodes: int
    unattributed: tuple[str, ...]


def _bypassed_copy(
    quantized: ir.Model, original_names: set[str]
) -> tuple[ir.Model, dict[str, str]]:
    """A copy without Q/DQ nodes, and {name in the copy: name in the quantized model}.

    Each Q/DQ output is replaced by the Q/DQ input (graph outputs included); a graph output
    whose float tensor the quantizer had renamed gets its name back, and so does a tensor
    onnxruntime's QOperator format renamed ``X_quantized`` when ``X`` was a tensor of the
    float model, so the copy speaks the float model's names.
    """
    copy = quantized.clone()
    for node in [node for node in all_nodes(copy.graph) if is_qdq(node)]:
        source = node.inputs[0] if node.inputs else None
        if source is None:
            continue
        ir.convenience.replace_all_uses_with(
            list(node.outputs), [source] * len(node.outputs), replace_graph_outputs=True
        )
    for node in [node for node in all_nodes(copy.graph) if is_qdq(node)]:
        graph = node.graph
        if graph is not None and not any(value.uses() for value in node.outputs):
            graph.remove(node, safe=True)
    renamed: dict[str, str] = {}
    for value, wanted in zip(copy.graph.outputs, quantized.graph.outputs, strict=True):
        if wanted.name and value.name != wanted.name and value.producer() is not None:
            renamed[wanted.name] = value.name or ""
            value.name = wanted.name
    present = {value.name for node in all_nodes(copy.graph) for value in node.outputs}
    present.update(value.name for value in copy.graph.inputs)
    for node in all_nodes(copy.graph):
        for value in node.outputs:
            name = value.name or ""
            stem = name.removesuffix(_QOPERATOR_SUFFIX)
            if stem != name and stem in original_names and stem not in present:
                renamed[stem] = name
                value.name = stem
                present.add(stem)
    return copy, renamed


def _weakest(levels: list[str]) -> str:
    known = [level for level in levels if level in _CONFIDENCE_ORDER]
    return min(known, key=_CONFIDENCE_ORDER.index) if known else "inferred"


def attribute_quantized(
    original: ir.Model, quantized: ir.Model, *, policies: Policies | None = None
) -> QdqAttribution:
    """Writes provenance onto ``quantized`` (changed in place), from the float ``original``."""
    original_names = {
        value.name for node in all_nodes(original.graph) for value in node.outputs if value.name
    }
    bypassed, renamed = _bypassed_copy(quantized, original_names)
    # The bypassed copy computes without quantization's rounding: structure decides.
    result = recover_model(original, bypassed, policies=policies, run_check=False)
    recovered, found = result.model, result.provenance
    quantized_values = {
        value.name: value
        for node in all_nodes(quantized.graph)
        for value in node.outputs
        if value.name
    }
    quantized_values.update({v.name: v for v in quantized.graph.inputs if v.name})
    plain = [node for node in all_nodes(quantized.graph) if not is_qdq(node)]
    recovered_nodes = all_nodes(recovered.graph)
    if len(plain) != len(recovered_nodes):
        raise AssertionError("node count changed while attributing; this is a modelprov bug")
    node_sources: dict[ir.Node, frozenset[int]] = {}
    confidence: dict[ir.Node, str] = {}
    for node, twin in zip(plain, recovered_nodes, strict=True):
        node_sources[node] = found.node_sources.get(twin, frozenset())
        confidence[node] = twin.metadata_props.get(CONFIDENCE_KEY, "inferred")
    value_sources: dict[ir.Value, frozenset[int]] = {}
    for value, ids in found.value_sources.items():
        if not value.name or not ids:
            continue
        name = renamed.get(value.name, value.name)
        for target_name in {name, value.name}:
            target = quantized_values.get(target_name)
            if target is not None:
                value_sources[target] = ids
    readers = _original_readers(original, found)
    for node in all_nodes(quantized.graph):
        if is_qdq(node):
            ids, level = _qdq_attribution(node, node_sources, value_sources, confidence, readers)
            node_sources[node] = ids
            confidence[node] = level
    provenance = Provenance(
        table=found.table,
        node_sources=node_sources,
        value_sources=value_sources,
        lost=set(found.lost),
    )
    for node in all_nodes(quantized.graph):
        node.metadata_props.clear()
    provenance.write(quantized, policies=policies)
    unattributed: list[str] = []
    for node in all_nodes(quantized.graph):
        if node_sources.get(node):
            node.metadata_props[CONFIDENCE_KEY] = confidence[node]
        else:
            unattributed.append(node.name or node.op_type)
    return QdqAttribution(
        nodes=len(all_nodes(quantized.graph)),
        qdq_nodes=sum(1 for node in all_nodes(quantized.graph) if is_qdq(node)),
        unattributed=tuple(unattributed),
    )


def quantized_source(node: ir.Node) -> ir.Value | None:
    """The tensor a Q/DQ chain starts from: back through Q/DQ nodes along input 0."""
    current = node.inputs[0] if node.inputs else None
    while current is not None:
        producer = current.producer()
        if producer is None or not is_qdq(producer):
            return current
        current = producer.inputs[0] if producer.inputs else None
    return None


def _consumers(node: ir.Node) -> list[ir.Node]:
    """The non-Q/DQ nodes reading what this node's Q/DQ chain produces."""
    found: list[ir.Node] = []
    pending = [node]
    seen: set[ir.Node] = set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        for value in current.outputs:
            for use in value.uses():
                (pending if is_qdq(use.node) else found).append(use.node)
    return list(dict.fromkeys(found))


def _original_readers(original: ir.Model, found: Provenance) -> dict[str, frozenset[int]]:
    """By tensor name: the sources of the float model's nodes reading it (indices of found)."""
    read = Provenance.read(original)
    readers: dict[str, set[int]] = {}
    for node, indices in read.node_sources.items():
        ids = [i for i in read.table.ids(indices) if i in found.table]
        for value in node.inputs:
            if value is not None and value.name:
                readers.setdefault(value.name, set()).update(found.table.index_of(i) for i in ids)
    return {name: frozenset(indices) for name, indices in readers.items()}


def _chain_names(root: ir.Value | None) -> set[str]:
    """Names along a Q/DQ chain from its root tensor, with onnxruntime's suffixes removed."""
    names: set[str] = set()
    pending = [root] if root is not None else []
    while pending:
        value = pending.pop()
        if value.name and value.name not in names:
            names.add(value.name)
            pending.extend(
                output for use in value.uses() if is_qdq(use.node) for output in use.node.outputs
            )
    stems = {name.removesuffix(suffix) for name in names for suffix in _ORT_SUFFIXES}
    return names | stems


def _qdq_attribution(
    node: ir.Node,
    node_sources: dict[ir.Node, frozenset[int]],
    value_sources: dict[ir.Value, frozenset[int]],
    confidence: dict[ir.Node, str],
    readers: dict[str, frozenset[int]],
) -> tuple[frozenset[int], str]:
    root = quantized_source(node)
    producer = root.producer() if root is not None else None
    if root is not None and producer is not None:
        ids = value_sources.get(root) or node_sources.get(producer, frozenset())
        if ids:
            return ids, _weakest([confidence.get(producer, "inferred"), "named"])
    consumers = _consumers(node)
    merged: set[int] = set()
    for consumer in consumers:
        merged.update(node_sources.get(consumer, frozenset()))
    # Narrowed to the operations that read this tensor in the float model, when its name
    # (or onnxruntime's renaming of it) says which: a Gemm that absorbed a Relu keeps both
    # sources, but its weight belongs to the Linear alone.
    reading: set[int] = set()
    for name in _chain_names(root):
        reading.update(readers.get(name, frozenset()))
    narrowed = merged & reading
    levels = [confidence.get(consumer, "inferred") for consumer in consumers]
    return frozenset(narrowed or merged), _weakest([*levels, "named"])
