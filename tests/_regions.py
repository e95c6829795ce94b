"""A provenance check that trusts values, not names.

Both models run in onnxruntime with every node output of the main graph exposed. A value of
the transformed model *matches* a value of the original when dtype, shape and contents agree.
A transformed node's *region* is the set of original nodes between the values its dynamic
inputs match and the values its outputs match, plus the constant subgraphs feeding them.
Every source the node claims must be a source of some node in its region.

Two readings keep the region honest: ``Shape`` and ``Size`` read only the metadata of their
input and ``CastLike`` only the dtype of its second (the walk does not go through them),
and when a tensor matches several original values on one chain (an identity, a cancelling
pair), the most upstream one bounds the region, so an eliminated no-op may go to the producer
or to the consumer of the value replacing it. A node whose outputs match only values its
inputs were computed from, or values its inputs equal (glue a fusion adds, such as a Reshape
undoing a view so that a fused attention gets its layout; a layout conversion that moves no
element, its input equal to an Identity's input and output, a graph input included),
computes nothing new: its region is that of its consumers.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import onnx
import onnx_ir as ir

from modelprov.keys import KEPT_FOR_RECALL_KEY
from modelprov.onnx._lookup import node_sources
from tests._checks import run

METADATA_READERS = frozenset({"Shape", "Size"})
"""Ops that read only the shape of their input, never its contents."""


def run_every_value(model: ir.Model, inputs: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Every node output of the main graph, by name, from one onnxruntime run."""
    proto = ir.to_proto(model)
    exposed = {output.name for output in proto.graph.output}
    for node in proto.graph.node:
        for name in node.output:
            if name and name not in exposed:
                proto.graph.output.append(onnx.ValueInfoProto(name=name))
                exposed.add(name)
    values = run(proto, inputs)
    return {
        output.name: value
        for output, value in zip(proto.graph.output, values, strict=True)
        if isinstance(value, np.ndarray)
    }


def data_inputs(node: ir.Node) -> list[ir.Value]:
    """The inputs whose contents the node reads."""
    inputs = list(node.inputs)
    if node.domain in ("", "ai.onnx"):
        if node.op_type in METADATA_READERS:
            return []
        if node.op_type == "CastLike":
            inputs = inputs[:1]
    return [value for value in inputs if value is not None]


def dynamic_values(graph: ir.Graph) -> set[ir.Value]:
    """Values whose contents depend on a graph input (initializers are not inputs here):
    what a node computes from their contents, and the shape of one whose dimensions the
    inputs' symbolic dimensions set (a ``Shape`` in a dynamic-shape export: its output
    changes with the input, it is the operation's own shape arithmetic, not a constant)."""
    initializers = set(graph.initializers.values())
    inputs = [value for value in graph.inputs if value not in initializers]
    dynamic = set(inputs)
    symbolic = any(value.shape is not None and not value.shape.is_static() for value in inputs)
    for node in graph:
        if any(value in dynamic for value in data_inputs(node)) or (
            symbolic and _reads_a_varying_shape(node, dynamic)
        ):
            dynamic.update(node.outputs)
    return dynamic


def _reads_a_varying_shape(node: ir.Node, dynamic: set[ir.Value]) -> bool:
    """True for a ``Shape`` or ``Size`` of a value computed from the inputs whose shape is
    not known to be static."""
    if node.domain not in ("", "ai.onnx") or node.op_type not in METADATA_READERS:
        return False
    value = node.inputs[0] if node.inputs else None
    return value in dynamic and (value.shape is None or not value.shape.is_static())


@dataclasses.dataclass
class _Original:
    """The original model's values, their producers and their ancestry (as bit sets)."""

    model: ir.Model
    arrays: dict[str, np.ndarray]

    def __post_init__(self) -> None:
        graph = self.model.graph
        self.nodes = list(graph)
        self.position = {node: i for i, node in enumerate(self.nodes)}
        self.dynamic = dynamic_values(graph)
        self.constant = {
            node for node in self.nodes if not any(v in self.dynamic for v in node.outputs)
        }
        self.sources = {node: {s.id for s in found} for node, found in node_sources(self.model)}
        self.operations = {
            source
            for node, ids in self.sources.items()
            if node not in self.constant
            for source in ids
        }
        self.literals = {node for node in self.nodes if _is_literal(node)}
        self.computing = {
            source
            for node, ids in self.sources.items()
            if node not in self.literals
            for source in ids
        }
        self.ancestry: dict[ir.Node, int] = {}
        for i, node in enumerate(self.nodes):
            bits = 1 << i
            for value in node.inputs:
                producer = value.producer() if value is not None else None
                if producer in self.ancestry:
                    bits |= self.ancestry[producer]
            self.ancestry[node] = bits
        self.by_kind: dict[tuple[str, tuple[int, ...]], list[ir.Value]] = {}
        for node in self.nodes:
            for value in node.outputs:
                array = self.arrays.get(value.name or "")
                if array is not None:
                    self.by_kind.setdefault((str(array.dtype), array.shape), []).append(value)
        for value in graph.inputs:
            array = self.arrays.get(value.name or "")
            if array is not None:
                self.by_kind.setdefault((str(array.dtype), array.shape), []).append(value)

    def matches(self, array: np.ndarray, *, dynamic: bool) -> list[ir.Value]:
        found = []
        for value in self.by_kind.get((str(array.dtype), array.shape), ()):
            if dynamic and value not in self.dynamic:
                continue
            candidate = self.arrays[value.name or ""]
            if np.array_equal(candidate, array) or (
                np.issubdtype(array.dtype, np.floating)
                and np.allclose(candidate, array, rtol=1e-4, atol=1e-5)
            ):
                found.append(value)
        return found

    def is_upstream_of(self, upstream: ir.Value, value: ir.Value) -> bool:
        """True when ``upstream`` lies on the chain that computes ``value``."""
        producer = value.producer()
        above = upstream.producer()
        if producer is None or upstream is value:
            return False
        if above is None:
            return upstream in self.model.graph.inputs
        return bool(self.ancestry[producer] >> self.position[above] & 1) and above is not producer

    def region(self, outputs: Iterable[ir.Value], stops: set[ir.Value]) -> set[ir.Node]:
        """Original nodes from ``outputs`` back to ``stops`` (exclusive), through data edges."""
        found: set[ir.Node] = set()
        stack = [value.producer() for value in outputs if value not in stops]
        while stack:
            node = stack.pop()
            if node is None or node in found:
                continue
            found.add(node)
            for value in data_inputs(node):
                if value not in stops:
                    stack.append(value.producer())
        return found


def _is_literal(node: ir.Node) -> bool:
    return node.op_type == "Constant" and not node.inputs


def _most_upstream(original: _Original, candidates: list[ir.Value]) -> list[ir.Value]:
    return [
        value
        for value in candidates
        if not any(original.is_upstream_of(other, value) for other in candidates)
    ]


def _recreates(original: _Original, target: ir.Value, stops: set[ir.Value]) -> bool:
    """True when ``target`` is one of ``stops`` or lies upstream of one: a node producing
    it computes nothing its inputs did not already hold."""
    return target in stops or any(original.is_upstream_of(target, stop) for stop in stops)


@dataclasses.dataclass(frozen=True)
class RegionResult:
    """What the check found: out-of-region claims and how many nodes it could check."""

    violations: list[tuple[str, str]]
    checked: int
    regions: dict[str, set[str]]
    """Node label -> the source ids of its region (for counting other properties)."""
    shared_constants: dict[str, set[str]]
    """Node label -> sources it claims only through constants in its region, although they
    are operations computing on data elsewhere (a constant the exporter shared)."""
    kept_for_recall: dict[str, set[str]]
    """Node label -> sources the node marks as carried only so they are not lost."""
    shared_literals: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    """Node label -> sources it claims only through Constant nodes in its region, although
    they compute something besides literals (a literal the exporter shared)."""


def check_regions(before: ir.Model, after: ir.Model, inputs: Sequence[np.ndarray]) -> RegionResult:
    """Checks that every source of every node of ``after`` lies in its value region."""
    # Graph inputs count as values too: a tool's tensor may equal one (a removed Identity).
    given = {
        value.name or "": np.asarray(array)
        for value, array in zip(before.graph.inputs, inputs, strict=False)
    }
    original = _Original(before, {**given, **run_every_value(before, inputs)})
    arrays = run_every_value(after, inputs)
    dynamic = dynamic_values(after.graph)
    graph_inputs = dict(zip(after.graph.inputs, before.graph.inputs, strict=False))

    def matched(value: ir.Value, is_dynamic: bool) -> list[ir.Value]:
        if value in graph_inputs:
            return [graph_inputs[value]]
        array = arrays.get(value.name or "")
        return [] if array is None else original.matches(array, dynamic=is_dynamic)

    def output_matches(value: ir.Value) -> list[ir.Value]:
        # An output matching nothing (an internal layout of a fused op) is read through
        # its nearest consumers that match, up to three levels down.
        return _nearest(
            value,
            lambda current: matched(current, current in dynamic),
            lambda current: [out for use in current.uses() for out in use.node.outputs],
        )

    def input_stops(value: ir.Value) -> list[ir.Value]:
        # An input matching nothing is read through its producer's dynamic inputs.
        def upstream(current: ir.Value) -> list[ir.Value]:
            producer = current.producer()
            if producer is None:
                return []
            return [each for each in data_inputs(producer) if each in dynamic]

        return _nearest(
            value, lambda current: _most_upstream(original, matched(current, True)), upstream
        )

    input_arrays = {
        value: np.asarray(array) for value, array in zip(after.graph.inputs, inputs, strict=False)
    }

    def equals(value: ir.Value) -> list[ir.Value]:
        # Every original value an input equals (a graph input too: an Identity of it).
        array = arrays.get(value.name or "")
        array = input_arrays.get(value) if array is None else array
        return [] if array is None else original.matches(array, dynamic=True)

    violations: list[tuple[str, str]] = []
    regions: dict[str, set[str]] = {}
    shared: dict[str, set[str]] = {}
    marked_all: dict[str, set[str]] = {}
    literals: dict[str, set[str]] = {}
    checked = 0
    for position, (node, found) in enumerate(node_sources(after)):
        if node.graph is not after.graph:
            continue
        stops: set[ir.Value] = set()
        read: set[ir.Value] = set()  # every original value an input equals
        for value in data_inputs(node):
            if value in dynamic:
                stops.update(input_stops(value))
                read.update(equals(value))
        targets = [m for value in node.outputs for m in output_matches(value)]
        if targets and all(_recreates(original, target, stops | read) for target in targets):
            # A no-op in contents (part of a rewrite, e.g. a reshape that a transpose
            # undoes, or one giving a fused op back the layout a view had changed): it
            # belongs to what its consumers compute.
            targets = [
                m
                for value in node.outputs
                for use in value.uses()
                for out in use.node.outputs
                for m in output_matches(out)
            ]
        if not targets:
            continue
        region_nodes = original.region(targets, stops - set(targets))
        allowed: set[str] = set()
        computed: set[str] = set()
        beyond_literals: set[str] = set()
        for each in region_nodes:
            allowed.update(original.sources[each])
            if each not in original.constant:
                computed.update(original.sources[each])
            if each not in original.literals:
                beyond_literals.update(original.sources[each])
        label = node.name or f"{node.op_type}@{position}"
        marked = set(json.loads(node.metadata_props.get(KEPT_FOR_RECALL_KEY, "[]")))
        if marked:
            marked_all[label] = marked
        regions[label] = allowed
        violations.extend(
            (label, s.id) for s in found if s.id not in allowed and s.id not in marked
        )
        through_constants = {
            s.id
            for s in found
            if s.id in allowed
            and s.id not in computed
            and s.id in original.operations
            and s.id not in marked
        }
        if through_constants:
            shared[label] = through_constants
        through_literals = {
            s.id
            for s in found
            if s.id in allowed
            and s.id not in beyond_literals
            and s.id in original.computing
            and s.id not in marked
        }
        if through_literals:
            literals[label] = through_literals
        checked += 1
    return RegionResult(
        violations=violations,
        checked=checked,
        regions=regions,
        shared_constants=shared,
        kept_for_recall=marked_all,
        shared_literals=literals,
    )


def _nearest(
    start: ir.Value,
    match: Callable[[ir.Value], list[ir.Value]],
    next_values: Callable[[ir.Value], list[ir.Value]],
) -> list[ir.Value]:
    """Breadth first from ``start`` (at most three steps away): the matches of the nearest
    values that match, not looking past a value that matched."""
    frontier = [(start, 0)]
    seen: set[ir.Value] = set()
    found: list[ir.Value] = []
    while frontier:
        current, depth = frontier.pop(0)
        if current in seen or depth > 3:
            continue
        seen.add(current)
        here = match(current)
        if here:
            found.extend(here)
            continue
        frontier.extend((each, depth + 1) for each in next_values(current))
    return found
