"""What the correspondence engine compares: a graph's structure at one moment, and the
record of what one change did to it."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping, Sequence

import onnx_ir as ir

from modelprov.core._walks import nodes_and_graphs

__all__ = [
    "METADATA_READERS",
    "Change",
    "Matching",
    "Snapshot",
    "data_inputs",
    "metadata_inputs",
    "new_and_removed",
]


METADATA_READERS = frozenset({"Shape", "Size"})
"""Ops that read only the shape of their input: folding them never computes the input.
``CastLike`` reads only the dtype of its second input."""

_SUBGRAPH_OPS = frozenset({"If", "Loop", "Scan"})



_PARTIAL_READERS = METADATA_READERS | {"CastLike"}


def data_inputs(node: ir.Node, inputs: Sequence[ir.Value | None]) -> Sequence[ir.Value]:
    """The inputs whose contents the node reads (a Shape or Size reads none)."""
    if node.op_type in _PARTIAL_READERS and node.domain in ("", "ai.onnx"):
        if node.op_type in METADATA_READERS:
            return ()
        inputs = inputs[:1]  # CastLike
    if None in inputs:
        return [value for value in inputs if value is not None]
    return typing.cast("tuple[ir.Value, ...]", tuple(inputs))  # None is not among them


def metadata_inputs(node: ir.Node, inputs: Sequence[ir.Value | None]) -> list[ir.Value]:
    """The inputs of which the node reads only the shape or dtype: the rest of ``inputs``
    after ``data_inputs``."""
    if node.op_type not in _PARTIAL_READERS or node.domain not in ("", "ai.onnx"):
        return []
    read = inputs if node.op_type in METADATA_READERS else inputs[1:]
    return [value for value in read if value is not None]


@dataclasses.dataclass
class Snapshot:
    """The structure of a graph at one moment: nodes, their inputs, outputs and producers."""

    nodes: list[ir.Node]
    inputs: dict[ir.Node, tuple[ir.Value | None, ...]]
    outputs: dict[ir.Node, tuple[ir.Value, ...]]
    producer: dict[ir.Value, ir.Node]
    graph_outputs: dict[ir.Graph, tuple[ir.Value, ...]]
    boundary: set[ir.Value]
    """Graph inputs and initializers: values without a producing node."""
    _constant_nodes: set[ir.Node] | None = dataclasses.field(default=None, repr=False)
    _data_inputs: dict[ir.Node, Sequence[ir.Value]] = dataclasses.field(
        default_factory=dict, repr=False
    )
    _reads: dict[ir.Node, tuple[Sequence[ir.Value], list[ir.Value]]] = dataclasses.field(
        default_factory=dict, repr=False
    )

    @classmethod
    def of(
        cls, graph: ir.Graph, *, walked: tuple[list[ir.Node], list[ir.Graph]] | None = None
    ) -> Snapshot:
        """Takes a snapshot of ``graph`` and all its subgraphs. ``walked``, when given, is
        ``nodes_and_graphs(graph)`` of the graph as it is now (read once by the caller)."""
        nodes, graphs = walked if walked is not None else nodes_and_graphs(graph)
        inputs = {node: tuple(node.inputs) for node in nodes}
        outputs = {node: tuple(node.outputs) for node in nodes}
        producer = {value: node for node in nodes for value in node.outputs}
        boundary: set[ir.Value] = set()
        for each in graphs:
            boundary.update(each.inputs)
            boundary.update(each.initializers.values())
        return cls(
            nodes=nodes,
            inputs=inputs,
            outputs=outputs,
            producer=producer,
            graph_outputs={each: tuple(each.outputs) for each in graphs},
            boundary=boundary,
        )

    def data_inputs_of(self, node: ir.Node) -> Sequence[ir.Value]:
        """``data_inputs`` of a node of the snapshot, over its inputs then (cached)."""
        found = self._data_inputs.get(node)
        if found is None:
            found = self._data_inputs[node] = data_inputs(node, self.inputs[node])
        return found

    def reads_of(self, node: ir.Node) -> tuple[Sequence[ir.Value], list[ir.Value]]:
        """``data_inputs`` and ``metadata_inputs`` of a node of the snapshot, over its
        inputs then (cached)."""
        found = self._reads.get(node)
        if found is None:
            inputs = self.inputs[node]
            found = self._reads[node] = (
                self.data_inputs_of(node),
                metadata_inputs(node, inputs) if node.op_type in _PARTIAL_READERS else [],
            )
        return found

    def constant_nodes(self) -> set[ir.Node]:
        """Nodes whose outputs do not depend on any graph input's contents (constants,
        shape arithmetic): ``Shape`` and ``Size`` read only their input's metadata."""
        cached = self._constant_nodes
        if cached is not None:
            return cached
        graph_inputs: set[ir.Value] = set()
        for graph in self.graph_outputs:
            initializers = set(graph.initializers.values())
            graph_inputs.update(v for v in graph.inputs if v not in initializers)
        dynamic: set[ir.Value] = set(graph_inputs)
        constant: set[ir.Node] = set()
        inputs, outputs = self.inputs, self.outputs
        for node in self.nodes:
            op_type = node.op_type
            read = self.data_inputs_of(node) if op_type in _PARTIAL_READERS else inputs[node]
            if not dynamic.isdisjoint(read) or op_type in _SUBGRAPH_OPS:
                dynamic.update(outputs[node])
            else:
                constant.add(node)
        self._constant_nodes = constant
        return constant

    def knows(self, value: ir.Value) -> bool:
        """True when the value existed in the snapshot."""
        return value in self.producer or value in self.boundary


@dataclasses.dataclass
class Change:
    """What one step did, node by node.

    Attributes:
        absorbed: for each node of the new graph that took over removed nodes' work, those
            removed nodes (a surviving node keeps its own provenance besides).
        replaced: new value -> the old values it replaced (value-scoped data follows it).
        same: surviving node of the new graph -> the old node it is.
        new_nodes: nodes that did not exist before.
        removed: nodes that no longer exist.
        eliminated: removed nodes no node claimed (dead code).
        unanchored: new nodes that no removed node could be attributed to.
        fallback: for new nodes, removed nodes they reach only by reading through the
            input of a ``Shape``/``Size`` (what they compute does not include them); their
            sources go there only when no other node keeps them (recall wins).
        constant: old nodes that computed constants (no graph input's contents).
        produced: for new nodes, the removed nodes whose output values their outputs
            replaced (what the node itself now computes, even when it is a constant).
        after_nodes: every node of the graph after the change (``all_nodes`` order).
        after_graphs: the graph after the change and its subgraphs (``all_graphs``).
    """

    absorbed: dict[ir.Node, set[ir.Node]]
    replaced: dict[ir.Value, list[ir.Value]]
    same: dict[ir.Node, ir.Node]
    new_nodes: list[ir.Node]
    removed: list[ir.Node]
    eliminated: list[ir.Node]
    unanchored: list[ir.Node]
    fallback: dict[ir.Node, set[ir.Node]] = dataclasses.field(default_factory=dict)
    constant: set[ir.Node] = dataclasses.field(default_factory=set)
    produced: dict[ir.Node, set[ir.Node]] = dataclasses.field(default_factory=dict)
    after_nodes: list[ir.Node] = dataclasses.field(default_factory=list)
    after_graphs: list[ir.Graph] = dataclasses.field(default_factory=list)


def new_and_removed(
    before: Snapshot, after_nodes: list[ir.Node], same: Mapping[ir.Node, ir.Node]
) -> tuple[list[ir.Node], list[ir.Node]]:
    """Nodes of the new graph no old node matches, and old nodes no new node matches."""
    surviving_old = set(same.values())
    new_nodes = [node for node in after_nodes if node not in same]
    removed = [node for node in before.nodes if node not in surviving_old]
    return new_nodes, removed


@dataclasses.dataclass(frozen=True)
class Matching:
    """What a matcher found between the snapshot and the graph after the change.

    Attributes:
        same: surviving node of the new graph -> the old node it is.
        new_nodes: nodes of the new graph no old node matches, in graph order.
        removed: old nodes no new node matches, in snapshot order.
        replaced: new value -> the old values it replaced.
        claimable: old nodes whose work new nodes may claim (the removed ones, and for
            in-process passes, surviving nodes left dead because all their outputs were
            replaced).
        values_persist: True when a value the snapshot knew is still that value (identity
            matching), so it is its own old equivalent.
    """

    same: dict[ir.Node, ir.Node]
    new_nodes: list[ir.Node]
    removed: list[ir.Node]
    replaced: dict[ir.Value, list[ir.Value]]
    claimable: set[ir.Node]
    values_persist: bool
