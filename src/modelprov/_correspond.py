"""Which original nodes each node of a changed graph now computes.

One engine for every kind of change (modelprov's own passes, onnxscript's optimizer and
rewriter, black-box tools): take a :class:`Snapshot` of the graph before, let the change
happen, then :func:`diff` the graph after against it. Surviving nodes and values are
anchors; every removed node is claimed by the node(s) now computing what it computed:

* a node producing a value that replaced an old value absorbs the removed nodes that fed
  that old value, back to the values it reads (fusion, rewrite, CSE, Identity removal);
* a node reading a value without producer (a folded constant, a graph input) that replaced
  an old value absorbs the removed nodes that computed that old value (constant folding);
* new nodes with nothing to anchor them share the claims of the new nodes they connect to
  through fresh values (a rule that emits several nodes).

Removed nodes nobody claims were dead: their computation no longer exists.
Anchors come from object identity for in-process passes; :mod:`modelprov.onnx._recover`
supplies them from names and structure for black-box tools.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping

import onnx_ir as ir

__all__ = ["Change", "Snapshot", "all_graphs", "all_nodes", "diff"]


METADATA_READERS = frozenset({"Shape", "Size"})
"""Ops that read only the shape of their input: folding them never computes the input.
``CastLike`` reads only the dtype of its second input."""

_SUBGRAPH_OPS = frozenset({"If", "Loop", "Scan"})


def data_inputs(node: ir.Node, inputs: Iterable[ir.Value | None]) -> list[ir.Value]:
    """The inputs whose contents the node reads (a Shape or Size reads none)."""
    if node.domain in ("", "ai.onnx"):
        if node.op_type in METADATA_READERS:
            return []
        if node.op_type == "CastLike":
            inputs = list(inputs)[:1]
    return [value for value in inputs if value is not None]


def all_nodes(graph: ir.Graph) -> list[ir.Node]:
    """Every node of a graph and of its subgraphs, parents before children (the order of
    ``ir.traversal.RecursiveGraphIterator``, walked without its per-node generators)."""
    nodes: list[ir.Node] = []
    _walk(graph, nodes, [])
    return nodes


def all_graphs(graph: ir.Graph) -> list[ir.Graph]:
    """A graph and every subgraph under it (If/Loop/Scan bodies), parents first."""
    graphs = [graph]
    _walk(graph, [], graphs)
    return graphs


def _walk(graph: ir.Graph, nodes: list[ir.Node], subgraphs: list[ir.Graph]) -> None:
    """Appends the nodes of ``graph`` and its subgraphs to ``nodes`` (each node before its
    subgraphs' nodes) and its subgraphs to ``subgraphs`` (in the order nodes hold them)."""
    for node in graph:
        nodes.append(node)
        if not node.attributes:
            continue
        inner: list[ir.Graph] = []
        for attribute in node.attributes.values():
            if attribute.is_ref():
                continue
            if attribute.type == ir.AttributeType.GRAPH:
                inner.append(attribute.as_graph())
            elif attribute.type == ir.AttributeType.GRAPHS:
                inner.extend(attribute.as_graphs())
        subgraphs.extend(inner)
        for subgraph in inner:
            _walk(subgraph, nodes, subgraphs)


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

    @classmethod
    def of(cls, graph: ir.Graph) -> Snapshot:
        """Takes a snapshot of ``graph`` and all its subgraphs."""
        nodes = all_nodes(graph)
        inputs = {node: tuple(node.inputs) for node in nodes}
        outputs = {node: tuple(node.outputs) for node in nodes}
        producer = {value: node for node in nodes for value in node.outputs}
        graphs = all_graphs(graph)
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
        for node in self.nodes:
            if any(v in dynamic for v in data_inputs(node, self.inputs[node])):
                dynamic.update(self.outputs[node])
            elif node.op_type not in _SUBGRAPH_OPS:
                constant.add(node)
            else:
                dynamic.update(self.outputs[node])
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


def _value_replacements(
    before: Snapshot,
    graph: ir.Graph,
    surviving: Iterable[ir.Node],
    anchors: Mapping[ir.Value, ir.Value] | None,
) -> dict[ir.Value, list[ir.Value]]:
    """New value -> old values it replaced, read off surviving consumers and graph outputs."""
    replaced: dict[ir.Value, list[ir.Value]] = {}

    def record(old: ir.Value | None, new: ir.Value | None) -> None:
        if old is None or new is None or old is new:
            return
        olds = replaced.setdefault(new, [])
        if old not in olds:
            olds.append(old)

    for node in surviving:
        for old, new in zip(before.inputs[node], node.inputs, strict=False):
            record(old, new)
    for each in all_graphs(graph):
        old_outputs = before.graph_outputs.get(each)
        if old_outputs is None:
            continue
        for old, new in zip(old_outputs, each.outputs, strict=False):
            record(old, new)
    for new, old in (anchors or {}).items():
        record(old, new)
    return replaced


def diff(
    before: Snapshot,
    graph: ir.Graph,
    *,
    node_anchors: Mapping[ir.Node, ir.Node] | None = None,
    value_anchors: Mapping[ir.Value, ir.Value] | None = None,
) -> Change:
    """Compares ``graph`` (after a change) with the snapshot taken before it.

    Without anchors, nodes and values are matched by identity (in-process passes).
    ``node_anchors`` maps new nodes to the old nodes they are (same computation), and
    ``value_anchors`` maps new values to old values they equal, for graphs rebuilt by
    other tools.
    """
    after_nodes = all_nodes(graph)
    old_of: dict[ir.Node, ir.Node] = {}
    if node_anchors is None:
        old_set = set(before.inputs)
        old_of = {node: node for node in after_nodes if node in old_set}
    else:
        old_of = dict(node_anchors)
    surviving_old = set(old_of.values())
    new_nodes = [node for node in after_nodes if node not in old_of]
    removed = [node for node in before.nodes if node not in surviving_old]
    removed_set = set(removed)

    if node_anchors is None:
        replaced = _value_replacements(before, graph, old_of, value_anchors)
        _rename_anchors(before, new_nodes, removed_set, replaced)
    else:
        replaced = _anchored_replacements(before, graph, old_of, value_anchors)

    # In-process passes may leave a node whose every output was replaced in place, dead,
    # for a later pass to remove: it is superseded now, and claimable like a removed node.
    claimable = set(removed_set)
    if node_anchors is None:
        replaced_olds = {old for olds in replaced.values() for old in olds}
        outputs_now = {value for each in all_graphs(graph) for value in each.outputs}
        for node in old_of:
            outputs = list(node.outputs)
            if (
                outputs
                and any(value in replaced_olds for value in outputs)
                and all(not value.uses() and value not in outputs_now for value in outputs)
            ):
                claimable.add(node)

    producer_now = {value: node for node in after_nodes for value in node.outputs}
    consumers_now: dict[ir.Value, list[ir.Node]] = {}
    for node in after_nodes:
        for value in node.inputs:
            if value is not None:
                consumers_now.setdefault(value, []).append(node)

    def old_equivalents(value: ir.Value) -> list[ir.Value]:
        olds = list(replaced.get(value, ()))
        if before.knows(value) and node_anchors is None:
            olds.append(value)
        return olds

    fallback: dict[ir.Node, set[ir.Node]] = {}

    def region(
        entries: Iterable[ir.Value], stops: set[ir.Value], *, loose: bool = False
    ) -> set[ir.Node]:
        """Removed nodes from ``entries`` back to ``stops``; ``loose`` also reads through
        the input of a Shape or Size (what a fold of it does not compute)."""
        claimed: set[ir.Node] = set()
        stack = [before.producer[v] for v in entries if before.producer.get(v) in claimable]
        while stack:
            node = stack.pop()
            if node in claimed:
                continue
            claimed.add(node)
            read = before.inputs[node] if loose else data_inputs(node, before.inputs[node])
            for value in read:
                if value is None or value in stops:
                    continue
                upstream = before.producer.get(value)
                if upstream is not None and upstream in claimable:
                    stack.append(upstream)
        return claimed

    # What each new node reads, as old values: through the fresh values of other new
    # nodes back to values the old graph knew (a new node computes nothing above them).
    known_reads: dict[ir.Node, set[ir.Value]] = {}
    new_set = set(new_nodes)
    for node in after_nodes:
        if node not in new_set:
            continue
        reads: set[ir.Value] = set()
        for value in node.inputs:
            if value is None:
                continue
            olds = old_equivalents(value)
            if olds:
                reads.update(olds)
                continue
            upstream = producer_now.get(value)
            if upstream is not None and upstream in known_reads:
                reads.update(known_reads[upstream])
        known_reads[node] = reads

    def stops_of(node: ir.Node) -> set[ir.Value]:
        stops: set[ir.Value] = set(known_reads.get(node, ()))
        for value in node.inputs:
            if value is not None:
                stops.update(old_equivalents(value))
        old = old_of.get(node)
        if old is not None:
            stops.update(v for v in before.inputs[old] if v is not None)
        return stops

    absorbed: dict[ir.Node, set[ir.Node]] = {}
    produced: dict[ir.Node, set[ir.Node]] = {}
    producerless: list[tuple[ir.Value, list[ir.Value]]] = []
    for new_value, olds in replaced.items():
        producer = producer_now.get(new_value)
        if producer is None:
            producerless.append((new_value, olds))
            continue
        stops = stops_of(producer)
        produced.setdefault(producer, set()).update(
            before.producer[old] for old in olds if before.producer.get(old) in claimable
        )
        claim = region(olds, stops)
        if claim:
            absorbed.setdefault(producer, set()).update(claim)
        extra = region(olds, stops, loose=True) - claim
        if extra:
            fallback.setdefault(producer, set()).update(extra)
    # A value without producer (folded constant, graph input) took old values' places:
    # each reader absorbs what computed the old value it (or what it absorbed) read.
    for new_value, olds in producerless:
        for consumer in consumers_now.get(new_value, ()):
            old_consumer = old_of.get(consumer)
            if old_consumer is not None:
                read = {v for v in before.inputs[old_consumer] if v is not None}
            else:
                read = {
                    v
                    for node in absorbed.get(consumer, ())
                    for v in before.inputs[node]
                    if v is not None
                }
            # A new reader that took over removed nodes claims only what they read; one
            # without claims of its own may have taken over any of the old readers.
            entries = [old for old in olds if old in read]
            if old_consumer is None and not absorbed.get(consumer):
                entries = list(olds)
            stops = stops_of(consumer) - set(entries)
            claim = region(entries, stops)
            if claim:
                absorbed.setdefault(consumer, set()).update(claim)
            extra = region(entries, stops, loose=True) - claim
            if extra:
                fallback.setdefault(consumer, set()).update(extra)

    unanchored = _share_within_clusters(
        new_nodes,
        absorbed,
        before,
        producer_now,
        old_equivalents,
        lambda value: bool(old_equivalents(value)),
    )
    claimed_all: set[ir.Node] = set()
    for claim in absorbed.values():
        claimed_all.update(claim)
    fallback_all = {node for extra in fallback.values() for node in extra}
    eliminated = [node for node in removed if node not in claimed_all and node not in fallback_all]
    fallback = {
        node: extra - claimed_all for node, extra in fallback.items() if extra - claimed_all
    }
    constant = before.constant_nodes()
    return Change(
        fallback=fallback,
        constant=set(constant),
        produced={node: olds for node, olds in produced.items() if olds},
        absorbed=absorbed,
        replaced=replaced,
        same=old_of,
        new_nodes=new_nodes,
        removed=removed,
        eliminated=eliminated,
        unanchored=unanchored,
    )


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


def _compatible(old: ir.Value, new: ir.Value) -> bool:
    """True unless known dtypes or known shapes differ."""
    if old.dtype is not None and new.dtype is not None and old.dtype != new.dtype:
        return False
    return old.shape is None or new.shape is None or old.shape == new.shape


def _share_within_clusters(
    new_nodes: list[ir.Node],
    absorbed: dict[ir.Node, set[ir.Node]],
    before: Snapshot,
    producer_now: Mapping[ir.Value, ir.Node],
    old_equivalents: Callable[[ir.Value], list[ir.Value]],
    known: Callable[[ir.Value], bool],
) -> list[ir.Node]:
    """New nodes without claims take, from the claims of the new nodes linked to them by
    fresh values, the removed nodes they can compute: those whose inputs from outside the
    claim all lie among what the node reads (directly or through other new nodes)."""
    new_set = set(new_nodes)
    parent: dict[ir.Node, ir.Node] = {node: node for node in new_nodes}

    def find(node: ir.Node) -> ir.Node:
        while parent[node] is not node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    def fresh_producer(value: ir.Value | None) -> ir.Node | None:
        if value is None or known(value):
            return None
        upstream = producer_now.get(value)
        return upstream if upstream is not None and upstream in new_set else None

    for node in new_nodes:
        for value in node.inputs:
            upstream = fresh_producer(value)
            if upstream is not None:
                parent[find(upstream)] = find(node)
    cluster_claims: dict[ir.Node, set[ir.Node]] = {}
    for node in new_nodes:
        claim = absorbed.get(node)
        if claim:
            cluster_claims.setdefault(find(node), set()).update(claim)

    def reads(node: ir.Node) -> set[ir.Value]:
        """Old values a new node depends on, through fresh values of other new nodes."""
        seen: set[ir.Node] = set()
        result: set[ir.Value] = set()
        stack = [node]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            for value in current.inputs:
                if value is None:
                    continue
                upstream = fresh_producer(value)
                if upstream is not None:
                    stack.append(upstream)
                else:
                    result.update(old_equivalents(value))
        return result

    def outside_inputs(target: ir.Node, claim: set[ir.Node]) -> set[ir.Value]:
        """Values the claimed nodes upstream of ``target`` read from outside the claim."""
        seen: set[ir.Node] = set()
        result: set[ir.Value] = set()
        stack = [target]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            for value in before.inputs[current]:
                if value is None:
                    continue
                upstream = before.producer.get(value)
                if upstream is not None and upstream in claim:
                    stack.append(upstream)
                else:
                    result.add(value)
        return result

    unanchored: list[ir.Node] = []
    for node in new_nodes:
        if absorbed.get(node):
            continue
        shared = cluster_claims.get(find(node))
        if not shared:
            unanchored.append(node)
            continue
        available = reads(node)
        computable = {old for old in shared if outside_inputs(old, shared) <= available}
        absorbed[node] = computable or set(shared)
    return unanchored


def _anchored_replacements(
    before: Snapshot,
    graph: ir.Graph,
    old_of: Mapping[ir.Node, ir.Node],
    value_anchors: Mapping[ir.Value, ir.Value] | None,
) -> dict[ir.Value, list[ir.Value]]:
    """Value replacements when nodes were matched by anchors instead of identity."""
    replaced: dict[ir.Value, list[ir.Value]] = {}

    def record(old: ir.Value | None, new: ir.Value | None) -> None:
        if old is None or new is None:
            return
        olds = replaced.setdefault(new, [])
        if old not in olds:
            olds.append(old)

    for new_node, old_node in old_of.items():
        for old, new in zip(before.inputs[old_node], new_node.inputs, strict=False):
            record(old, new)
        for old, new in zip(before.outputs[old_node], new_node.outputs, strict=False):
            record(old, new)
    main_old = next(iter(before.graph_outputs.values()), ())
    for old, new in zip(main_old, graph.outputs, strict=False):
        record(old, new)
    for new, old in (value_anchors or {}).items():
        record(old, new)
    return replaced
