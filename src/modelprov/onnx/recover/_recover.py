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
First, recover makes sure the tool's model computes what the original computes: both run
on the same random inputs when they can (``_correspondence_run``), else their structure is
compared (``_correspondence_check``); ``force`` overrides either refusal, with a warning.

One onnx_ir pipeline (:func:`recover_model`, returning :class:`Recovered`): each model is
read once as onnx_ir at the edge, the tool's metadata repaired once there (a ModelProto's
repeated keys merged by policy and invalid UTF-8 replaced before onnx_ir reads it; an
onnx_ir model's invalid text replaced), then attributed. Only :func:`recover` of a
ModelProto copies the metadata (the model's, every node's and every named value's, in
subgraphs too) onto the tool's own proto, so that what it returns is the tool's proto, byte
for byte, plus metadata: ``ir.to_proto`` would rewrite the tool's value_info (dropping or
adding entries, sorting keys) and serialize every weight again.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, overload

import onnx
import onnx_ir as ir
import onnx_ir.passes.common as common_passes

from modelprov._model_io._convert import ModelInput, model_input
from modelprov._model_io._duplicate_keys import merged_entries
from modelprov._model_io._ir_check import checked_clone, metadata_holders
from modelprov._model_io._proto_check import check_proto, read_proto
from modelprov._model_io._proto_walk import subgraphs
from modelprov.core._correspond import Change, Snapshot, correspond
from modelprov.core._policy import Policies
from modelprov.core._printable import printable_lines
from modelprov.core._provenance import Provenance
from modelprov.core._walks import all_nodes
from modelprov.errors import CorrespondenceError, keyword
from modelprov.keys import CONFIDENCE_KEY, RECOVER_REPORT_FORMAT
from modelprov.onnx._pass_options import RecoverOptions
from modelprov.onnx.recover._anchors_blocked import anchor_blocked_convs
from modelprov.onnx.recover._anchors_structure import (
    anchor_by_structure,
    anchored_producer,
    duplicate_values,
    merged_duplicates,
    reads_other_constant,
    same_attributes,
    same_inputs,
    same_type,
)
from modelprov.onnx.recover._correspondence_check import correspondence_problems
from modelprov.onnx.recover._correspondence_run import RunComparison, compare_by_running, runnable

if TYPE_CHECKING:
    from torch.onnx import ONNXProgram

__all__ = [
    "CONFIDENCE_KEY",
    "RecoverOptions",
    "Recovered",
    "RecoveryReport",
    "recover",
    "recover_ir",
    "recover_model",
    "recover_with_report",
]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class RecoveryReport:
    """What recover found: how many nodes it attributed at each confidence, the nodes it
    could not attribute, the original sources no node computes any more, and the invalid
    metadata it repaired."""

    nodes: int
    exact: int
    named: int
    inferred: int
    unattributed: tuple[str, ...]
    lost_sources: tuple[str, ...]
    repaired: tuple[str, ...]
    correspondence: str = ""
    """Which check decided that the models correspond: ``computed: ...`` (both ran on the
    same random inputs and agree), ``structure: ...`` (they could not run; interface, op
    kinds and size agree) or ``forced: ...`` (a check refused and ``force`` overrode it)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``"format": "modelprov.recover-report", "version": 1``)."""
        fields = dataclasses.asdict(self)
        fields = {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}
        return {"format": RECOVER_REPORT_FORMAT, "version": 1, **fields}

    def to_json(self) -> str:
        """The JSON report (:meth:`to_dict`) as text."""
        return json.dumps(self.to_dict(), indent=2)

    def to_text(self) -> str:
        """A summary line, then one line per unattributed node, lost source, repair."""
        lines = [
            f"recovered {self.nodes} nodes: {self.exact} exact, {self.named} named, "
            f"{self.inferred} inferred, {len(self.unattributed)} without sources; "
            f"{len(self.lost_sources)} original sources lost"
        ]
        lines += [f"  no sources: {name}" for name in self.unattributed]
        lines += [f"  lost: {source}" for source in self.lost_sources]
        lines += [f"  repaired: {what}" for what in self.repaired]
        if self.correspondence:
            lines.append(f"  correspondence {self.correspondence}")
        return printable_lines(lines)


def _load(model: ModelInput, role: str) -> onnx.ModelProto | ir.Model:
    return model_input(
        model, where=f"recover: the {role} model", path_as="proto", check_text=False
    )


def _text(item: object) -> str:
    if isinstance(item, bytes):
        return item.decode("utf-8", "replace")
    return str(item)


def _clean(entries: list[Any]) -> bool:
    """True when metadata entries need no repair: text keys and values, no key twice."""
    keys = set()
    for entry in entries:
        key, value = entry.key, entry.value
        if type(key) is not str or type(value) is not str or key in keys:
            return False
        keys.add(key)
    return True


@dataclasses.dataclass(frozen=True)
class _Entry:
    key: str
    value: str


def _repair_proto(proto: onnx.ModelProto, policies: Policies | None = None) -> list[str]:
    """Merges duplicate metadata keys by their policies and replaces invalid UTF-8, in
    place."""
    repaired: list[str] = []

    def fix(entries: object, where: str) -> None:
        items = list(entries)  # type: ignore[call-overload]
        if _clean(items):
            return
        texts = [_Entry(_text(entry.key), _text(entry.value)) for entry in items]
        bad = any(
            text.key != entry.key or text.value != entry.value
            for text, entry in zip(texts, items, strict=True)
        )
        merged = merged_entries(texts, where=where, policies=policies)
        if bad or len(merged) != len(items):
            repaired.append(where)
            del entries[:]  # type: ignore[attr-defined]
            for key, value in merged.items():
                new = entries.add()  # type: ignore[attr-defined]
                new.key, new.value = key, value

    def walk(graph: onnx.GraphProto, prefix: str) -> None:
        for index, node in enumerate(graph.node):
            fix(node.metadata_props, f"{prefix}node {node.name or index!r}")
            for subgraph in subgraphs(node):
                walk(subgraph, f"{prefix}{node.name}/")
        for info in [*graph.input, *graph.output, *graph.value_info]:
            fix(info.metadata_props, f"{prefix}value {info.name!r}")

    fix(proto.metadata_props, "model")
    walk(proto.graph, "")
    return repaired


def _repair_ir(model: ir.Model) -> list[str]:
    """Replaces metadata keys and values that are not text, in place: the model's and every
    graph's, node's and value's (functions and subgraphs included)."""
    repaired: list[str] = []
    for where, props in metadata_holders(model):
        items = list(props.items())
        if any(type(k) is not str or type(v) is not str for k, v in items):
            props.clear()
            props.update({_text(k): _text(v) for k, v in items})
            repaired.append(where)
    return repaired


def _anchors(
    original: ir.Model, optimized: ir.Model
) -> tuple[
    dict[ir.Node, ir.Node], dict[ir.Value, ir.Value], dict[ir.Value, list[ir.Value]], set[ir.Value]
]:
    """Node and value anchors between the two models, from names, graph boundaries and
    structure; per new value, the further old values it equals (duplicates a tool merged
    into it); and the anchored values that hold their old value in a blocked layout."""
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
        if old is not None and same_type(old, value):
            value_anchors[value] = old
    # Paired by position; under force the two may differ in number.
    for new, old in zip(optimized.graph.outputs, original.graph.outputs, strict=False):
        value_anchors.setdefault(new, old)
    duplicates = duplicate_values(old_nodes)
    node_anchors: dict[ir.Node, ir.Node] = {}
    rewritten: list[tuple[ir.Node, ir.Node]] = []
    taken: set[ir.Node] = set()
    for node in new_nodes:
        old_node = anchored_producer(node, value_anchors)
        if (
            old_node is None
            or old_node in taken
            or old_node.op_type != node.op_type
            or old_node.domain != node.domain
            or len(old_node.outputs) != len(node.outputs)
        ):
            continue
        if same_attributes(node, old_node) and same_inputs(
            node, old_node, value_anchors, duplicates
        ):
            node_anchors[node] = old_node
            taken.add(old_node)
        else:
            rewritten.append((node, old_node))
    anchor_by_structure(
        (original.graph, old_nodes),
        (optimized.graph, new_nodes),
        duplicates,
        node_anchors,
        value_anchors,
        taken,
    )
    blocked = anchor_blocked_convs(new_nodes, value_anchors)
    _anchor_rewritten(rewritten, node_anchors, value_anchors, taken, duplicates)
    merged = merged_duplicates(node_anchors, duplicates, taken)
    return node_anchors, value_anchors, merged, blocked


def _anchor_rewritten(
    rewritten: list[tuple[ir.Node, ir.Node]],
    node_anchors: dict[ir.Node, ir.Node],
    value_anchors: dict[ir.Value, ir.Value],
    taken: set[ir.Node],
    duplicates: dict[ir.Value, ir.Value],
) -> None:
    """Anchors what nodes that kept an original node's output names but read other tensors
    (``rewritten``: new node, old node) still say.

    A rewritten node still reads, slot by slot, what stands in for the old node's inputs:
    a tensor the tool made fresh in that slot takes the old input's place. When the node
    is otherwise unchanged (op, attributes, arity, and every other slot reads what the old
    node read there) and reads a tensor that took the name of a value whose producer is
    gone (a tool folded a Mul into a Gemm and gave its output the Gemm's old name),
    structure wins over the name: the tensor is the value the node used to read. Not when
    rewritten readers of that tensor read different values there before (a tool fused
    each of them with what it read: the name is right, the readers changed) or the node
    reads other tensors too (new starts and ends of two fused Slices).
    """

    def canonical(value: ir.Value) -> ir.Value:
        return duplicates.get(value, value)

    wanted: dict[ir.Value, set[ir.Value]] = {}
    for node, old_node in rewritten:
        if len(node.inputs) == len(old_node.inputs):
            for new_input, old_input in zip(node.inputs, old_node.inputs, strict=True):
                if new_input is not None and old_input is not None:
                    wanted.setdefault(new_input, set()).add(canonical(old_input))
    for node, old_node in rewritten:
        if len(node.inputs) != len(old_node.inputs) or any(
            new_input is not None
            and new_input not in value_anchors
            and reads_other_constant(new_input, old_input)
            for new_input, old_input in zip(node.inputs, old_node.inputs, strict=True)
        ):
            continue  # it reads other constants: slots say nothing (two Slices made one)
        pairs = [
            (new_input, old_input)
            for new_input, old_input in zip(node.inputs, old_node.inputs, strict=True)
            if new_input is not None and old_input is not None
        ]
        for new_input, old_input in pairs:
            if new_input not in value_anchors:
                value_anchors[new_input] = old_input
        unchanged_op = same_attributes(node, old_node) and len(pairs) == sum(
            value is not None for value in node.inputs
        )
        moved = [
            (new_input, old_input)
            for new_input, old_input in pairs
            if canonical(value_anchors[new_input]) is not canonical(old_input)
        ]
        if unchanged_op and len(moved) == 1:
            ((new_input, old_input),) = moved
            named = value_anchors[new_input]
            if (
                named.producer() is not None
                and named.producer() not in taken
                and len(wanted[new_input]) == 1
                and same_type(old_input, new_input)
            ):
                value_anchors[new_input] = old_input
        if (
            same_attributes(node, old_node)
            and old_node not in taken
            and same_inputs(node, old_node, value_anchors, duplicates)
        ):
            node_anchors[node] = old_node
            taken.add(old_node)


def _confidence(
    change: Change,
    node: ir.Node,
    produces_known: set[ir.Node],
    own: dict[ir.Node, frozenset[int]],
    provenance: Provenance,
) -> str:
    """exact: the node the tool left unchanged, with exactly its own sources; named: its
    outputs are known tensors; inferred: structure only."""
    if node in change.same:
        kept = provenance.node_sources.get(node, frozenset())
        if kept - provenance.kept_for_recall.get(node, frozenset()) == own[node]:
            return "exact"
    return "named" if node in change.same or node in produces_known else "inferred"


def _judge_correspondence(
    original: ir.Model, optimized: ir.Model, comparison: RunComparison | None, force: bool
) -> str:
    """Which check decides, and what it says (``RecoveryReport.correspondence``).

    When both models ran, their outputs decide; otherwise the structural checks of
    ``_correspondence_check`` do. A refusal raises CorrespondenceError unless ``force``,
    which logs a warning saying what it overrode.
    """
    if comparison is not None and comparison.ran:
        if comparison.equal:
            return f"computed: {comparison.summary()}"
        decided, problems = "computed", [comparison.summary()]
    else:
        why_not = comparison.summary() if comparison is not None else "not run"
        decided, problems = f"structure ({why_not})", correspondence_problems(original, optimized)
        if not problems:
            return f"{decided}: interface, op kinds and size agree"
    if not force:
        raise CorrespondenceError(
            "the optimized model does not correspond to the original: "
            + "; ".join(problems)
            + "; pass the model the tool was given, or "
            + keyword("force", "force=True")
            + " to recover anyway"
        )
    logger.warning(
        "modelprov: warning: recover forced (force=True / --force) past the %s check: %s",
        decided.split(" ", 1)[0],
        "; ".join(problems),
    )
    return f"forced past the {decided} check: " + "; ".join(problems)


@dataclasses.dataclass(frozen=True)
class Recovered:
    """What recover's pipeline returns: the tool's model with provenance written on it (an
    onnx_ir model, a copy: the input is never modified), the report, and the provenance as
    the engine holds it (sources per node and value, the sources lost), which is what the
    model's metadata says, so a caller building on it (the quantizer) need not read it back.
    """

    model: ir.Model
    report: RecoveryReport
    provenance: Provenance


def recover_ir(
    original: ir.Model,
    optimized: ir.Model,
    *,
    policies: Policies | None = None,
    force: bool = False,
    comparison: RunComparison | None = None,
    repaired: Iterable[str] = (),
) -> Recovered:
    """Writes provenance onto ``optimized`` (an onnx_ir model whose metadata is valid text,
    changed in place) and returns it with the report and the provenance written.

    ``comparison`` is what running both models showed (``_correspondence_run``); without
    one, or when they could not run, structure decides. Raises CorrespondenceError saying
    what differs when ``optimized`` does not correspond to ``original``, unless ``force``.
    ``repaired`` says where the metadata of ``optimized`` was repaired, for the report.
    """
    decided = _judge_correspondence(original, optimized, comparison, force)
    logger.info("recover: correspondence %s", decided)
    provenance = Provenance.read(original)
    node_anchors, value_anchors, merged, blocked = _anchors(original, optimized)
    change = correspond(
        Snapshot.of(original.graph),
        optimized.graph,
        node_anchors=node_anchors,
        value_anchors=value_anchors,
        equal_values=merged,
    )
    produces_known = {
        node
        for node in all_nodes(optimized.graph)
        if any(value in change.replaced for value in node.outputs)
    }
    own = {node: provenance.node_sources.get(old, frozenset()) for node, old in change.same.items()}
    provenance.apply(change, optimized.graph)
    for value in blocked:  # its elements in another order: not the old value's tensor
        provenance.value_sources[value] = frozenset()
    for node in all_nodes(optimized.graph):
        node.metadata_props.clear()
    provenance.write(optimized, policies=policies)
    counts = {"exact": 0, "named": 0, "inferred": 0}
    unattributed: list[str] = []
    for node in all_nodes(optimized.graph):
        if not provenance.node_sources.get(node):
            unattributed.append(node.name or node.op_type)
            continue
        level = _confidence(change, node, produces_known, own, provenance)
        counts[level] += 1
        node.metadata_props[CONFIDENCE_KEY] = level
    report = RecoveryReport(
        nodes=len(all_nodes(optimized.graph)),
        exact=counts["exact"],
        named=counts["named"],
        inferred=counts["inferred"],
        unattributed=tuple(unattributed),
        lost_sources=tuple(provenance.table.ids(provenance.lost)),
        repaired=tuple(repaired),
        correspondence=decided,
    )
    return Recovered(optimized, report, provenance)


def _copy_metadata(source: ir.Model, target: onnx.ModelProto) -> None:
    """Copies the metadata of an ir model onto the proto it was read from (node for node):
    the model's, and per graph (subgraphs included) the graph's, every node's, and every
    named value's (graph inputs and outputs, initializers, node outputs) where onnx_ir's
    serializer writes it: on the value's entries in ``input``, ``output`` and
    ``value_info``, and on a new ``value_info`` entry for a value that has none."""
    _replace_entries(target.metadata_props, source.metadata_props)
    _copy_graph_metadata(source.graph, target.graph)


def _copy_graph_metadata(graph: ir.Graph, proto: onnx.GraphProto) -> None:
    if len(graph) != len(proto.node):
        raise AssertionError("node count changed while recovering; this is a modelprov bug")
    _replace_entries(proto.metadata_props, graph.metadata_props)
    values: dict[str, ir.Value] = {value.name: value for value in graph.inputs if value.name}
    for name, value in graph.initializers.items():
        values.setdefault(name, value)
    for node, proto_node in zip(graph, proto.node, strict=True):
        _replace_entries(proto_node.metadata_props, node.metadata_props)
        for output in node.outputs:
            if output.name:
                values.setdefault(output.name, output)
        for attribute in proto_node.attribute:
            held = node.attributes.get(attribute.name)
            if attribute.type == onnx.AttributeProto.GRAPH and isinstance(held, ir.Attr):
                _copy_graph_metadata(held.as_graph(), attribute.g)
            elif attribute.type == onnx.AttributeProto.GRAPHS and isinstance(held, ir.Attr):
                for subgraph, subgraph_proto in zip(
                    held.as_graphs(), attribute.graphs, strict=True
                ):
                    _copy_graph_metadata(subgraph, subgraph_proto)
    for value in graph.outputs:
        if value.name:
            values.setdefault(value.name, value)
    described: set[str] = set()
    for info in [*proto.input, *proto.output, *proto.value_info]:
        named = values.get(info.name)
        described.add(info.name)
        # An entry naming no value of this graph is one onnx_ir does not read (nor write):
        # it holds no metadata of the model's.
        _replace_entries(info.metadata_props, named.metadata_props if named is not None else {})
    for name, value in values.items():
        if value.metadata_props and name not in described:
            info = proto.value_info.add()
            info.name = name
            _replace_entries(info.metadata_props, value.metadata_props)


def _replace_entries(entries: Any, props: Mapping[str, str]) -> None:
    """Makes repeated StringStringEntryProto ``entries`` hold ``props``, in its order (left
    as they are when they do already)."""
    if len(entries) == len(props) and all(
        entry.key == key and entry.value == value
        for entry, (key, value) in zip(entries, props.items(), strict=True)
    ):
        return
    del entries[:]
    for key, value in props.items():
        entry = entries.add()
        entry.key, entry.value = key, value


@overload
def recover(
    original: ModelInput,
    optimized: ir.Model | ONNXProgram,
    *,
    policies: Policies | None = ...,
    force: bool = ...,
) -> ir.Model: ...
@overload
def recover(
    original: ModelInput,
    optimized: onnx.ModelProto | str | os.PathLike[str],
    *,
    policies: Policies | None = ...,
    force: bool = ...,
) -> onnx.ModelProto: ...
def recover(
    original: ModelInput,
    optimized: ModelInput,
    *,
    policies: Policies | None = None,
    force: bool = False,
) -> onnx.ModelProto | ir.Model:
    """Returns ``optimized`` with every node's provenance restored from ``original``.

    First it checks that ``optimized`` computes what ``original`` computes: when both can
    run (onnxruntime, weights in memory or beside the files, at most
    ``_correspondence_run.MAX_WEIGHT_BYTES``), by running both once on the same random
    inputs; otherwise by structure (interface, op kinds, size).

    Args:
        original: the model the tool was given (with provenance, e.g. from
            modelprov.export); a ModelProto, an onnx_ir.Model, a path or a
            torch.onnx.ONNXProgram.
        optimized: the model the tool wrote, of the same kinds.
            External weights are read only by onnxruntime, for the run check.
        policies: merge policies (default modelprov.DEFAULT_POLICIES).
        force: recover even when the models do not correspond (CorrespondenceError says
            what differs: outputs on random inputs when both models run, else interface, op
            kinds or size); a warning is logged saying what was overridden.

    Returns:
        The optimized model with metadata restored, as an onnx_ir.Model when ``optimized``
        is one (or an ONNXProgram), else as an onnx.ModelProto. Neither input is modified.
    """
    return recover_with_report(original, optimized, policies=policies, force=force)[0]


def recover_with_report(
    original: ModelInput,
    optimized: ModelInput,
    *,
    policies: Policies | None = None,
    force: bool = False,
) -> tuple[onnx.ModelProto | ir.Model, RecoveryReport]:
    """:func:`recover`, also returning what it found (:class:`RecoveryReport`).

    Returns:
        (the recovered model, of the same kind as :func:`recover` returns, and the report).
    """
    recovered, proto = _recover(original, optimized, policies=policies, force=force)
    if proto is None:
        return recovered.model, recovered.report
    _copy_metadata(recovered.model, proto)
    return proto, recovered.report


def recover_model(
    original: ModelInput,
    optimized: ModelInput,
    *,
    policies: Policies | None = None,
    force: bool = False,
    paths: tuple[str | None, str | None] = (None, None),
    run_check: bool = True,
) -> Recovered:
    """recover as one onnx_ir pipeline: both models read once as onnx_ir, the tool's one's
    metadata repaired, the correspondence checked, provenance written (:class:`Recovered`).

    modelprov's own callers (the CLI, the quantizer) use it; :func:`recover` and
    :func:`recover_with_report` are it, with the model given back as the kind passed.
    ``paths`` name the files the two models were read from (their external weights lie
    beside them), for the run check; ``run_check=False`` (a caller whose pair computes
    differently on purpose, e.g. a quantized model without its Q/DQ) leaves the decision to
    structure.
    """
    return _recover(
        original, optimized, policies=policies, force=force, paths=paths, run_check=run_check
    )[0]


def _recover(
    original: ModelInput,
    optimized: ModelInput,
    *,
    policies: Policies | None,
    force: bool,
    paths: tuple[str | None, str | None] = (None, None),
    run_check: bool = True,
) -> tuple[Recovered, onnx.ModelProto | None]:
    """:func:`recover_model`, and for a ModelProto ``optimized`` its repaired copy (the
    proto :func:`recover` returns once the metadata is copied onto it), else None."""
    before = _load(original, "original")
    after = _load(optimized, "optimized")
    # Repaired before anything reads them: the run check serializes both models.
    if isinstance(before, ir.Model):
        before = checked_clone(before, "the original model")
        _repair_ir(before)
    if isinstance(after, ir.Model):
        working = checked_clone(after, "the optimized model")
        repaired = _repair_ir(working)
        proto = None
        after = working
    else:
        proto, repaired = _repaired(after, policies)
        repaired = list(dict.fromkeys(repaired))  # two holders may share a name
        working = read_proto(proto, "the optimized model")
    comparison = (
        compare_by_running(
            runnable(before, _path_of(original, paths[0]), "original"),
            runnable(after, _path_of(optimized, paths[1]), "optimized"),
        )
        if run_check
        else None
    )
    original_ir = _original_ir(before, policies)
    recovered = recover_ir(
        original_ir,
        working,
        policies=policies,
        force=force,
        comparison=comparison,
        repaired=repaired,
    )
    return recovered, proto


def _original_ir(before: onnx.ModelProto | ir.Model, policies: Policies | None) -> ir.Model:
    """The original as an onnx_ir model of its own, with inferred shapes (``before``, when
    it is one, is already the clone)."""
    if isinstance(before, ir.Model):  # already a repaired clone of the caller's
        _infer_shapes(before)
        return before
    return _inferred_ir(_repaired(before, policies)[0], "the original model")


def _path_of(model: ModelInput, path: str | None) -> str | None:
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    return path


def _inferred_ir(proto: onnx.ModelProto, where: str) -> ir.Model:
    """The original as onnx_ir with inferred shapes: onnx's shape inference run on the proto
    at hand (the pass on an ir model would serialize it and read it back once more)."""
    check_proto(proto, where)
    try:
        inferred = onnx.shape_inference.infer_shapes(
            proto, check_type=True, strict_mode=True, data_prop=True
        )
    except Exception as error:  # e.g. over 2 GB: the pass below sets big weights aside
        logger.info("shape inference on the original proto failed: %s", error)
        model = read_proto(proto, where)
        _infer_shapes(model)
        return model
    # Shape inference only adds value_info to the proto checked above.
    return read_proto(inferred, where, check=False)


def _infer_shapes(model: ir.Model) -> None:
    """Fills in value shapes of the original (used to recognise no-op chains), if it can."""
    try:
        common_passes.ShapeInferencePass()(model)
    except Exception as error:  # shape inference is a hint; any failure just skips it
        logger.info("shape inference on the original model failed: %s", error)


def _repaired(
    proto: onnx.ModelProto, policies: Policies | None
) -> tuple[onnx.ModelProto, list[str]]:
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    return copy, _repair_proto(copy, policies)
