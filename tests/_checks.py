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
    """Sources of ``after``'s nodes outside the node's value region (see tests._regions).

    Returns the violations (node, source id) and the number of nodes checked.
    """
    from tests._regions import check_regions

    result = check_regions(before, after, inputs)
    return result.violations, result.checked
