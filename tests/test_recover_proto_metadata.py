"""modelprov.recover of a ModelProto writes the metadata recover of an onnx_ir model writes.

recover is one onnx_ir pipeline; given the tool's ModelProto it copies the metadata back
onto that proto (so that the tool's bytes stay as they are). Every holder counts: the
model, each graph, each node (subgraphs included), each named value (graph inputs and
outputs, initializers, node outputs) and each function. Compared through modelprov's
readers (``modelprov.sources``) and through the raw metadata_props, on random sourced
graphs after simulated black-box tools, and on real exports after onnxruntime.
"""

from __future__ import annotations

import random
from typing import Any

import onnx
import onnx_ir as ir
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import modelprov
from modelprov.onnx.recover import _tools
from tests._black_box import REWRITES, apply_tool
from tests._seeded import seeded
from tests._sourced_graphs import SourcedGraph, sourced_graphs
from tests.conftest import fresh_export

_KEPT_KEY = "test.kept_by_the_tool"
"""A key a tool left on a value (as onnxruntime keeps value_info metadata)."""


def _graphs(graph: ir.Graph) -> list[ir.Graph]:
    """A graph and its subgraphs, parents first, in node and attribute order."""
    found = [graph]
    for node in graph:
        for attribute in node.attributes.values():
            if isinstance(attribute, ir.Attr) and attribute.type == ir.AttributeType.GRAPH:
                found.extend(_graphs(attribute.as_graph()))
            elif isinstance(attribute, ir.Attr) and attribute.type == ir.AttributeType.GRAPHS:
                for subgraph in attribute.as_graphs():
                    found.extend(_graphs(subgraph))
    return found


def _values(graph: ir.Graph) -> dict[str, ir.Value]:
    values = {value.name: value for value in graph.inputs}
    values.update(graph.initializers)
    values.update((v.name, v) for node in graph for v in node.outputs if v.name)
    values.update((value.name, value) for value in graph.outputs)
    return values


def _read(model: ir.Model) -> dict[str, Any]:
    """Every piece of metadata of ``model`` as onnx_ir reads it, and every node's sources as
    modelprov.sources reads them (by graph and position)."""
    found: dict[str, Any] = {"model": dict(model.metadata_props)}
    for index, graph in enumerate(_graphs(model.graph)):
        found[f"graph {index}"] = dict(graph.metadata_props)
        for position, node in enumerate(graph):
            where = f"graph {index} node {position}"
            found[where] = dict(node.metadata_props)
            found[f"{where} sources"] = [
                (source.id, dict(source.metadata)) for source in modelprov.sources(model, node)
            ]
        for name, value in _values(graph).items():
            found[f"graph {index} value {name!r}"] = dict(value.metadata_props)
    for key, function in model.functions.items():
        found[f"function {key}"] = dict(function.metadata_props)
        for position, node in enumerate(function):
            found[f"function {key} node {position}"] = dict(node.metadata_props)
    return found


def _raw(proto: onnx.ModelProto) -> dict[str, dict[str, str]]:
    """Every metadata_props of a proto, by holder: a value's entries in input, output and
    value_info together (onnx_ir reads them as one), tensors' own apart."""
    found: dict[str, dict[str, str]] = {"model": _entries(proto.metadata_props)}

    def walk(graph: onnx.GraphProto, prefix: str) -> None:
        found[f"{prefix}graph"] = _entries(graph.metadata_props)
        for position, node in enumerate(graph.node):
            found[f"{prefix}node {position}"] = _entries(node.metadata_props)
            for attribute in node.attribute:
                subgraphs = [attribute.g] if attribute.HasField("g") else list(attribute.graphs)
                for number, subgraph in enumerate(subgraphs):
                    walk(subgraph, f"{prefix}node {position} {attribute.name} {number}/")
        for info in [*graph.input, *graph.output, *graph.value_info]:
            found.setdefault(f"{prefix}value {info.name!r}", {}).update(
                _entries(info.metadata_props)
            )
        for tensor in graph.initializer:
            found[f"{prefix}tensor {tensor.name!r}"] = _entries(tensor.metadata_props)

    walk(proto.graph, "")
    for function in proto.functions:
        key = (function.domain, function.name, function.overload)
        found[f"function {key}"] = _entries(function.metadata_props)
        for position, node in enumerate(function.node):
            found[f"function {key} node {position}"] = _entries(node.metadata_props)
    return {holder: props for holder, props in found.items() if props}


def _entries(entries: Any) -> dict[str, str]:
    return {entry.key: entry.value for entry in entries}


def _assert_same_metadata(original: onnx.ModelProto, tool_output: onnx.ModelProto) -> None:
    original_bytes = original.SerializeToString()
    tool_bytes = tool_output.SerializeToString()
    from_proto = modelprov.recover(original, tool_output)
    from_ir = modelprov.recover(ir.from_proto(original), ir.from_proto(tool_output))
    assert original.SerializeToString() == original_bytes  # inputs never modified
    assert tool_output.SerializeToString() == tool_bytes
    assert _read(ir.from_proto(from_proto)) == _read(from_ir)
    assert _raw(from_proto) == _raw(ir.to_proto(from_ir))


def _value_metadata(proto: onnx.ModelProto) -> int:
    """How many initializers and graph inputs of ``proto`` carry value metadata."""
    model = ir.from_proto(proto)
    values = [*model.graph.inputs, *model.graph.initializers.values()]
    return sum(bool(value.metadata_props) for value in values)


def _keep_on_values(proto: onnx.ModelProto, seed: int) -> onnx.ModelProto:
    """``proto`` with a key on some of its graph inputs, initializers, graph outputs and
    node outputs, as a tool that keeps value metadata leaves them."""
    rng = random.Random(seed)
    model = ir.from_proto(proto)
    values = [value for graph in _graphs(model.graph) for value in _values(graph).values()]
    for value in rng.sample(values, k=rng.randint(1, len(values))):
        value.metadata_props[_KEPT_KEY] = f"kept on {value.name}"
    return ir.to_proto(model)


@seeded(150)
@given(
    graph=sourced_graphs(max_blocks=4),
    rewrites=st.lists(st.sampled_from(sorted(REWRITES)), min_size=1, max_size=3),
    seed=st.integers(0, 999),
    optimize=st.booleans(),
    keep_values=st.booleans(),
)
def test_generated_graphs_get_the_same_metadata_as_proto_and_as_ir(
    graph: SourcedGraph, rewrites: list[str], seed: int, optimize: bool, keep_values: bool
) -> None:
    model = modelprov.optimize(graph.model.clone()) if optimize else graph.model.clone()
    original = ir.to_proto(model)
    tool_output, _, _ = apply_tool(original, rewrites, seed, keep_model_metadata=True)
    if keep_values:
        tool_output = _keep_on_values(tool_output, seed)
    _assert_same_metadata(original, tool_output)


def _with_provenance(name: str) -> onnx.ModelProto:
    return ir.to_proto(modelprov.optimize(fresh_export(name)))


@pytest.mark.parametrize("name", ["cnn", "mlp"])
def test_onnxruntime_output_gets_the_same_metadata_as_proto_and_as_ir(name: str) -> None:
    original = _with_provenance(name)
    tool_output = _tools.TOOLS["onnxruntime"].run(original, level="basic")
    # onnxruntime keeps the value metadata of initializers (onnxscript's folded_from): the
    # case this test is about
    assert _value_metadata(tool_output) > 0
    _assert_same_metadata(original, tool_output)


def test_optimize_with_keeps_the_value_metadata_the_tool_kept() -> None:
    """optimize_with runs the tool on a ModelProto (for either kind of input) and recovers
    that proto: it gives what recover of the onnx_ir models gives."""
    original = _with_provenance("cnn")
    tool_output = _tools.TOOLS["onnxruntime"].run(original, level="basic")
    assert _value_metadata(tool_output) > 0
    expected = _read(modelprov.recover(ir.from_proto(original), ir.from_proto(tool_output)))
    as_proto = modelprov.optimize_with("onnxruntime", original, level="basic")
    as_ir = modelprov.optimize_with("onnxruntime", ir.from_proto(original), level="basic")
    assert _read(ir.from_proto(as_proto)) == expected
    assert _read(as_ir) == expected


class _Branches(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def positive(x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x) * 2.0 + 1.0

        def other(x: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(x) - 1.0

        return torch.cond(x.sum() > 0, positive, other, (x,)) + 1.0


def test_subgraph_values_get_the_same_metadata_as_proto_and_as_ir() -> None:
    program = torch.onnx.export(
        _Branches(), (torch.randn(2, 3),), dynamo=True, optimize=False, verbose=False
    )
    assert program is not None
    original = ir.to_proto(modelprov.optimize(program.model))
    assert any(node.op_type == "If" for node in original.graph.node)
    tool_output = _tools.TOOLS["onnxruntime"].run(original, level="basic")
    _assert_same_metadata(original, _keep_on_values(tool_output, 0))
