"""Independent checks used by the tests: numerics in onnxruntime, dataflow ancestry."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort


def run(model: ir.Model | onnx.ModelProto, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Runs a model in onnxruntime (all optimizations off) and returns its outputs."""
    proto = ir.to_proto(model) if isinstance(model, ir.Model) else model
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    names = [entry.name for entry in session.get_inputs()]
    return session.run(None, dict(zip(names, inputs, strict=True)))


def run_all_values(model: ir.Model, inputs: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Every typed node output of the main graph, by value name, from one onnxruntime run."""
    proto = onnx.shape_inference.infer_shapes(ir.to_proto(model))
    known = {info.name: info for info in proto.graph.value_info}
    outputs = {output.name for output in proto.graph.output}
    for node in proto.graph.node:
        for name in node.output:
            if name and name not in outputs and name in known:
                proto.graph.output.append(known[name])
                outputs.add(name)
    values = run(proto, inputs)
    return {
        output.name: value
        for output, value in zip(proto.graph.output, values, strict=True)
        if isinstance(value, np.ndarray)
    }


def ancestors(graph: ir.Graph, values: Sequence[ir.Value]) -> set[ir.Node]:
    """Nodes that (transitively) produce any of ``values``."""
    seen: set[ir.Node] = set()
    stack = [value.producer() for value in values]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        stack.extend(value.producer() for value in node.inputs if value is not None)
    return seen


def region_violations(
    before: ir.Model, after: ir.Model, inputs: Sequence[np.ndarray]
) -> tuple[list[tuple[str, str]], int]:
    """Sources of ``after``'s nodes that do not feed what the node computes.

    A node's output is matched numerically to values of ``before`` (same shape, dtype and
    contents); each of the node's sources must be a source of some ancestor of a matched
    value. Nodes whose outputs match nothing are checked through their nearest consumers
    that do. Returns the violations (node, source id) and the number of nodes checked.
    """
    from modelprov import sources

    before_values = run_all_values(before, inputs)
    after_values = run_all_values(after, inputs)
    by_name = {value.name: value for node in before.graph for value in node.outputs}
    before_sources = {node: {s.id for s in sources(before, node)} for node in before.graph}

    def matches(array: np.ndarray) -> list[ir.Value]:
        return [
            by_name[key]
            for key, candidate in before_values.items()
            if key in by_name
            and candidate.shape == array.shape
            and candidate.dtype == array.dtype
            and np.allclose(candidate, array, rtol=1e-5, atol=1e-6)
        ]

    violations: list[tuple[str, str]] = []
    checked = 0
    for node in after.graph:
        targets: list[ir.Value] = []
        for output in node.outputs:
            # Each output separately: matched directly, or through its nearest consumers.
            # A tensor may coincide with an unrelated one (a reshape chain that restores its
            # input), so matches are gathered down to the first value matching something
            # downstream of every coincidence: up to three consumer levels.
            frontier: list[tuple[ir.Value, int]] = [(output, 0)]
            seen: set[ir.Value] = set()
            while frontier:
                value, depth = frontier.pop(0)
                if value in seen or depth > 3:
                    continue
                seen.add(value)
                found = matches(after_values[value.name]) if value.name in after_values else []
                targets.extend(found)
                if not found or depth < 1:
                    frontier.extend(
                        (out, depth + 1) for use in value.uses() for out in use.node.outputs
                    )
        if not targets:
            continue
        region = set().union(*(before_sources[n] for n in ancestors(before.graph, targets)))
        violations.extend(
            (node.name or node.op_type, s.id) for s in sources(after, node) if s.id not in region
        )
        checked += 1
    return violations, checked
