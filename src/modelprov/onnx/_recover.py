"""modelprov.recover: put provenance back on a model a black-box tool rewrote.

onnxsim, onnxslim, onnxoptimizer and onnxruntime's offline optimization drop node metadata.
Given the model before the tool ran and the model it wrote, every node of the tool's model is
attributed to the original operations it computes, by the same correspondence engine that
modelprov.optimize uses; only the anchors differ. Anchors are what survives a tool: graph
inputs and outputs, value names, and the dataflow structure around them:

* a value of the new model with the name of an original value is that value;
* a node with the same op and the same output names as an original node is that node
  (``exact``);
* a node producing named (or slot-matched) values absorbs the original nodes that computed
  them, back to what it reads (``named``: fused contrib ops, rewrites);
* a node without any anchor shares the attribution of the new nodes it is wired to, limited
  to what it can compute from its inputs (``inferred``).

Nothing but metadata changes: the tool's nodes, order, names and weights stay as they are.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterable
from typing import overload

import onnx
import onnx_ir as ir
import onnx_ir.passes.common as common_passes

from modelprov._correspond import Change, Snapshot, all_nodes, diff
from modelprov._io import load_model_proto
from modelprov.errors import CorrespondenceError
from modelprov.onnx._lookup import proto_nodes
from modelprov.onnx._provenance import Provenance
from modelprov.policy import Policies

__all__ = ["CONFIDENCE_KEY", "RecoveryReport", "recover", "recover_ir"]

logger = logging.getLogger(__name__)

CONFIDENCE_KEY = "modelprov.confidence"
"""Node key: how sure the attribution is: ``exact``, ``named`` or ``inferred``."""

ModelInput = onnx.ModelProto | ir.Model | str | os.PathLike[str]


@dataclasses.dataclass(frozen=True)
class RecoveryReport:
    """What recover found."""

    nodes: int
    exact: int
    named: int
    inferred: int
    unattributed: tuple[str, ...]
    lost_sources: tuple[str, ...]
    repaired: tuple[str, ...]


def _load(model: ModelInput, role: str) -> onnx.ModelProto | ir.Model:
    if isinstance(model, (onnx.ModelProto, ir.Model)):
        return model
    if isinstance(model, (str, os.PathLike)):
        return load_model_proto(model, load_weights=False)
    raise TypeError(
        f"recover: the {role} model must be an onnx.ModelProto, an onnx_ir.Model or a path, "
        f"got {type(model).__name__}"
    )


def _text(item: object) -> str:
    if isinstance(item, bytes):
        return item.decode("utf-8", "replace")
    return str(item)


def _repair_proto(proto: onnx.ModelProto) -> list[str]:
    """Drops duplicate metadata keys (last wins) and replaces invalid UTF-8, in place."""
    repaired: list[str] = []

    def fix(entries: object, where: str) -> None:
        items = list(entries)  # type: ignore[call-overload]
        merged: dict[str, str] = {}
        bad = False
        for entry in items:
            key, value = _text(entry.key), _text(entry.value)
            bad |= key != entry.key or value != entry.value
            merged[key] = value
        if bad or len(merged) != len(items):
            repaired.append(where)
            del entries[:]  # type: ignore[attr-defined]
            for key, value in merged.items():
                new = entries.add()  # type: ignore[attr-defined]
                new.key, new.value = key, value

    def walk(graph: onnx.GraphProto, prefix: str) -> None:
        for index, node in enumerate(graph.node):
            fix(node.metadata_props, f"{prefix}node {node.name or index!r}")
            for attribute in node.attribute:
                if attribute.HasField("g"):
                    walk(attribute.g, f"{prefix}{node.name}/")
                for subgraph in attribute.graphs:
                    walk(subgraph, f"{prefix}{node.name}/")
        for info in [*graph.input, *graph.output, *graph.value_info]:
            fix(info.metadata_props, f"{prefix}value {info.name!r}")

    fix(proto.metadata_props, "model")
    walk(proto.graph, "")
    return repaired


def _repair_ir(model: ir.Model) -> list[str]:
    """Replaces metadata keys and values that are not valid UTF-8 text, in place."""
    repaired: list[str] = []
    holders: list[tuple[str, dict[str, str]]] = [("model", model.metadata_props)]
    for node in all_nodes(model.graph):
        holders.append((f"node {node.name!r}", node.metadata_props))
        holders.extend((f"value {v.name!r}", v.metadata_props) for v in node.outputs)
    for where, props in holders:
        items = list(props.items())
        if any(not isinstance(k, str) or not isinstance(v, str) for k, v in items):
            props.clear()
            props.update({_text(k): _text(v) for k, v in items})
            repaired.append(where)
    return repaired


def _check_same_interface(original: ir.Model, optimized: ir.Model) -> None:
    def inputs(model: ir.Model) -> list[str]:
        initializers = set(model.graph.initializers)
        return [v.name or "" for v in model.graph.inputs if v.name not in initializers]

    before, after = inputs(original), inputs(optimized)
    if before != after:
        raise CorrespondenceError(
            f"the optimized model does not correspond to the original: graph inputs "
            f"{after} differ from {before}; pass the model the tool was given"
        )
    if len(original.graph.outputs) != len(optimized.graph.outputs):
        raise CorrespondenceError(
            f"the optimized model does not correspond to the original: it has "
            f"{len(optimized.graph.outputs)} graph outputs, the original "
            f"{len(original.graph.outputs)}; pass the model the tool was given"
        )


def _anchors(
    original: ir.Model, optimized: ir.Model
) -> tuple[dict[ir.Node, ir.Node], dict[ir.Value, ir.Value]]:
    """Node and value anchors between the two models, from names and graph boundaries."""
    old_values: dict[str, ir.Value] = {}
    for value in [*original.graph.inputs, *original.graph.initializers.values()]:
        if value.name:
            old_values[value.name] = value
    old_nodes = all_nodes(original.graph)
    for node in old_nodes:
        for value in node.outputs:
            if value.name:
                old_values[value.name] = value
    value_anchors: dict[ir.Value, ir.Value] = {}
    new_values = [*optimized.graph.inputs, *optimized.graph.initializers.values()]
    new_nodes = all_nodes(optimized.graph)
    new_values.extend(value for node in new_nodes for value in node.outputs)
    for value in new_values:
        old = old_values.get(value.name or "")
        if old is not None:
            value_anchors[value] = old
    for new, old in zip(optimized.graph.outputs, original.graph.outputs, strict=True):
        value_anchors.setdefault(new, old)
    node_anchors: dict[ir.Node, ir.Node] = {}
    rewritten: list[tuple[ir.Node, ir.Node]] = []
    taken: set[ir.Node] = set()
    for node in new_nodes:
        olds = [value_anchors.get(value) for value in node.outputs]
        if not olds or any(old is None for old in olds):
            continue
        producers = {old.producer() for old in olds if old is not None}
        if len(producers) != 1:
            continue
        (old_node,) = producers
        if (
            old_node is None
            or old_node in taken
            or old_node.op_type != node.op_type
            or old_node.domain != node.domain
            or len(old_node.outputs) != len(node.outputs)
        ):
            continue
        if _same_attributes(node, old_node) and _same_inputs(node, old_node, value_anchors):
            node_anchors[node] = old_node
            taken.add(old_node)
        else:
            rewritten.append((node, old_node))
    # A rewritten node still reads, slot by slot, what stands in for the old node's inputs:
    # a tensor the tool made fresh in that slot takes the old input's place.
    for node, old_node in rewritten:
        if len(node.inputs) != len(old_node.inputs):
            continue
        for new_input, old_input in zip(node.inputs, old_node.inputs, strict=True):
            if new_input is not None and old_input is not None and new_input not in value_anchors:
                value_anchors[new_input] = old_input
    return node_anchors, value_anchors


_PASS_THROUGH = frozenset({"Identity", "Dropout"})


def _same_inputs(node: ir.Node, old_node: ir.Node, value_anchors: dict[ir.Value, ir.Value]) -> bool:
    """True when the node reads what the old node read.

    An input may be renamed, or may now skip pass-through ops (Identity, Dropout) the tool
    removed. A node that kept its output names but now reads other tensors was rewritten
    (e.g. two transposes folded into the second one): it is not the same node.
    """
    if len(node.inputs) != len(old_node.inputs):
        return False
    for new, old in zip(node.inputs, old_node.inputs, strict=True):
        if (new is None) != (old is None):
            return False
        if new is None or old is None or new not in value_anchors:
            continue
        if not _skips_no_ops(old, value_anchors[new]):
            return False
    return True


def _skips_no_ops(old: ir.Value, wanted: ir.Value) -> bool:
    """True when ``old`` is ``wanted`` seen through ops that change nothing.

    The chain back from ``old`` (first inputs) must reach ``wanted`` through pass-through
    ops (Identity, Dropout), or through any ops when ``old`` has the same known dtype and
    static shape as ``wanted`` (a no-op Reshape, a cancelling Transpose pair).
    """
    same_type = (
        old.dtype is not None
        and old.dtype == wanted.dtype
        and old.shape is not None
        and wanted.shape is not None
        and old.shape.is_static()
        and old.shape == wanted.shape
    )
    current: ir.Value | None = old
    steps = 0
    while current is not None and current is not wanted:
        producer = current.producer()
        if producer is None or not producer.inputs or steps > 8:
            return False
        if producer.op_type not in _PASS_THROUGH and not same_type:
            return False
        current = producer.inputs[0]
        steps += 1
    return current is wanted


def _same_attributes(node: ir.Node, old_node: ir.Node) -> bool:
    if set(node.attributes) != set(old_node.attributes):
        return False
    return all(
        str(node.attributes[name]) == str(old_node.attributes[name]) for name in node.attributes
    )


def _confidence(change: Change, node: ir.Node, produces_known: set[ir.Node]) -> str:
    """exact: the same node; named: its outputs are known tensors; inferred: structure only."""
    if node in change.same and not change.absorbed.get(node):
        return "exact"
    return "named" if node in change.same or node in produces_known else "inferred"


def recover_ir(
    original: ir.Model, optimized: ir.Model, *, policies: Policies | None = None
) -> RecoveryReport:
    """Writes provenance onto ``optimized`` (an onnx_ir model, changed in place)."""
    _check_same_interface(original, optimized)
    repaired = _repair_ir(optimized)
    provenance = Provenance.read(original)
    node_anchors, value_anchors = _anchors(original, optimized)
    change = diff(
        Snapshot.of(original.graph),
        optimized.graph,
        node_anchors=node_anchors,
        value_anchors=value_anchors,
    )
    produces_known = {
        node
        for node in all_nodes(optimized.graph)
        if any(value in change.replaced for value in node.outputs)
    }
    provenance.apply(change, optimized.graph)
    for node in all_nodes(optimized.graph):
        node.metadata_props.clear()
    provenance.write(optimized, policies=policies)
    counts = {"exact": 0, "named": 0, "inferred": 0}
    unattributed: list[str] = []
    for node in all_nodes(optimized.graph):
        if not provenance.node_sources.get(node):
            unattributed.append(node.name or node.op_type)
            continue
        level = _confidence(change, node, produces_known)
        counts[level] += 1
        node.metadata_props[CONFIDENCE_KEY] = level
    return RecoveryReport(
        nodes=len(all_nodes(optimized.graph)),
        exact=counts["exact"],
        named=counts["named"],
        inferred=counts["inferred"],
        unattributed=tuple(unattributed),
        lost_sources=tuple(provenance.table.ids(provenance.lost)),
        repaired=tuple(repaired),
    )


def _copy_metadata(source: ir.Model, target: onnx.ModelProto) -> None:
    """Copies node, value and model metadata from an ir model onto its proto twin."""
    target_nodes = proto_nodes(target.graph)
    source_nodes = all_nodes(source.graph)
    if len(target_nodes) != len(source_nodes):
        raise AssertionError("node count changed while recovering; this is a modelprov bug")
    value_props: dict[str, dict[str, str]] = {}
    for node, proto_node in zip(source_nodes, target_nodes, strict=True):
        del proto_node.metadata_props[:]
        for key, value in node.metadata_props.items():
            entry = proto_node.metadata_props.add()
            entry.key, entry.value = key, value
        for output in node.outputs:
            if output.metadata_props and output.name:
                value_props[output.name] = dict(output.metadata_props)
    del target.metadata_props[:]
    for key, value in source.metadata_props.items():
        entry = target.metadata_props.add()
        entry.key, entry.value = key, value
    infos = {info.name: info for info in [*target.graph.output, *target.graph.value_info]}
    for info in infos.values():
        del info.metadata_props[:]
    for name, props in value_props.items():
        info = infos.get(name)
        if info is None:
            info = target.graph.value_info.add()
            info.name = name
            infos[name] = info
        for key, value in props.items():
            entry = info.metadata_props.add()
            entry.key, entry.value = key, value


@overload
def recover(
    original: ModelInput, optimized: ir.Model, *, policies: Policies | None = ...
) -> ir.Model: ...
@overload
def recover(
    original: ModelInput,
    optimized: onnx.ModelProto | str | os.PathLike[str],
    *,
    policies: Policies | None = ...,
) -> onnx.ModelProto: ...
def recover(
    original: ModelInput, optimized: ModelInput, *, policies: Policies | None = None
) -> onnx.ModelProto | ir.Model:
    """Returns ``optimized`` with every node's provenance restored from ``original``.

    Args:
        original: the model the tool was given (with provenance, e.g. from
            modelprov.export); a ModelProto, an onnx_ir.Model or a path.
        optimized: the model the tool wrote; a ModelProto, an onnx_ir.Model or a path.
            External weights are never loaded.
        policies: merge policies (default modelprov.DEFAULT_POLICIES).

    Returns:
        The optimized model with metadata restored, as an onnx_ir.Model when ``optimized``
        is one, else as an onnx.ModelProto. Neither input is modified.
    """
    return recover_with_report(original, optimized, policies=policies)[0]


def recover_with_report(
    original: ModelInput, optimized: ModelInput, *, policies: Policies | None = None
) -> tuple[onnx.ModelProto | ir.Model, RecoveryReport]:
    """:func:`recover`, also returning what it found."""
    before = _load(original, "original")
    after = _load(optimized, "optimized")
    if isinstance(before, ir.Model):
        original_ir = before.clone()
        _infer_shapes(original_ir)
    else:
        original_ir = _inferred_ir(_repaired(before)[0])
    if isinstance(after, ir.Model):
        result = after.clone()
        report = recover_ir(original_ir, result, policies=policies)
        return result, report
    proto, repaired = _repaired(after)
    working = ir.from_proto(proto)
    report = recover_ir(original_ir, working, policies=policies)
    _copy_metadata(working, proto)
    report = dataclasses.replace(report, repaired=tuple(_dedupe([*repaired, *report.repaired])))
    return proto, report


def _inferred_ir(proto: onnx.ModelProto) -> ir.Model:
    """The original as onnx_ir with inferred shapes: onnx's shape inference run on the proto
    at hand (the pass on an ir model would serialize it and read it back once more)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(
            proto, check_type=True, strict_mode=True, data_prop=True
        )
    except Exception as error:  # e.g. over 2 GB: the pass below sets big weights aside
        logger.info("shape inference on the original proto failed: %s", error)
        model = ir.from_proto(proto)
        _infer_shapes(model)
        return model
    return ir.from_proto(inferred)


def _infer_shapes(model: ir.Model) -> None:
    """Fills in value shapes of the original (used to recognise no-op chains), if it can."""
    try:
        common_passes.ShapeInferencePass()(model)
    except Exception as error:  # shape inference is a hint; any failure just skips it
        logger.info("shape inference on the original model failed: %s", error)


def _repaired(proto: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    return copy, _repair_proto(copy)


def _dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
