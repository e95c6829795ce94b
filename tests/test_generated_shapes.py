"""A ``Shape`` a tool splits off a shape computation keeps the sources of what it computes.

onnxruntime's transpose optimizer makes ``Shape(Transpose(x, perm))`` a new ``Shape`` of
``x`` (the old node's name, a fresh output) and a ``Gather`` of ``perm`` from it (the old
output's name): together they compute what the old ``Shape`` did, so both carry its source
(dynamic BERT's attention: the ``Shape`` was left with no source at all). Random sequence
graphs (tests._sourced_graphs' blocks, with attention-like blocks reshaping a value to the
shape of its transpose mixed in) go through tests._black_box's ``split_shape``, alone or
with other rewrites of the same tool, then modelprov.recover: the properties of
tests._generated_checks hold, and no node whose value region holds sources is left without
one.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelprov.onnx._lookup import node_sources
from tests._generated_checks import Step, check_case, run_case
from tests._regions import check_regions, dynamic_values
from tests._seeded import seeded
from tests._sourced_graphs import SEQUENCE_BLOCKS, SourcedGraph, _Builder, _sequence_block

_OTHER_REWRITES = ("rename_values", "rename_nodes", "reorder", "constants_to_initializers")
_SHAPE = (4, 8)


def _reshape_to_transpose(b: _Builder, h: ir.Value, i: int) -> ir.Value:
    """``u = h[None]; (u.permute(2, 0, 1) + u.reshape(u.permute(2, 0, 1).shape))`` permuted
    back and squeezed, the reshape's target read off the transpose (a shape of three
    dimensions, [1, 4, 8] once split: no other value of the graph equals it)."""
    module = f"layers.{i}"
    b.begin("unsqueeze", "aten.unsqueeze.default", module)
    axes = b.constant(np.array([0], np.int64))
    lifted = b.node("Unsqueeze", [h, axes])
    b.begin("permute", "aten.permute.default", module)
    permuted = b.node("Transpose", [lifted], perm=[2, 0, 1])
    b.begin("view", "aten.view.default", module)
    viewed = b.node("Reshape", [lifted, b.node("Shape", [permuted])])
    b.begin("add", "aten.add.Tensor", module)
    total = b.node("Add", [permuted, viewed])
    b.begin("permute", "aten.permute.default", module)
    back = b.node("Transpose", [total], perm=[1, 2, 0])
    b.begin("squeeze", "aten.squeeze.dim", module)
    return b.node("Squeeze", [back, axes])


def build(blocks: tuple[str, ...], seed: int) -> SourcedGraph:
    """A sequence graph of ``blocks`` (SEQUENCE_BLOCKS, or ``reshape_to_transpose``)."""
    rng = np.random.default_rng(seed)
    x = ir.Value(name="x", shape=ir.Shape(_SHAPE), type=ir.TensorType(ir.DataType.FLOAT))
    b = _Builder(x, rng)
    h, history = x, [x]
    for i, kind in enumerate(blocks):
        if kind == "reshape_to_transpose":
            h = _reshape_to_transpose(b, h, i)
        else:
            h = _sequence_block(b, kind, h, history, i)
        h.shape, h.type = ir.Shape(_SHAPE), ir.TensorType(ir.DataType.FLOAT)
        history.append(h)
    b.graph.outputs.append(h)
    model = ir.Model(b.graph, ir_version=10, producer_name="pytorch")
    inputs = [rng.standard_normal(_SHAPE).astype(np.float32)]
    return SourcedGraph(model, inputs, ("sequence", tuple(blocks), seed))


def _check(graph: SourcedGraph, steps: list[Step]) -> None:
    check_case(graph, steps)
    after, _ = run_case(graph, steps)
    regions = check_regions(graph.model, after, graph.inputs)
    expected = {s.id for _, found in node_sources(graph.model) for s in found}
    bare = [
        label
        for position, (node, found) in enumerate(node_sources(after))
        if not {s.id for s in found} & expected
        and regions.regions.get(label := node.name or f"{node.op_type}@{position}")
    ]
    assert bare == [], f"{graph.recipe} {steps}: no source, though their regions hold some"


@st.composite
def _cases(draw: st.DrawFn) -> tuple[tuple[str, ...], int, list[Step]]:
    kinds = st.sampled_from(("reshape_to_transpose", *SEQUENCE_BLOCKS))
    blocks = draw(st.lists(kinds, min_size=0, max_size=4))
    blocks.insert(draw(st.integers(0, len(blocks))), "reshape_to_transpose")
    before = draw(st.lists(st.sampled_from(_OTHER_REWRITES), max_size=1))
    after = draw(st.lists(st.sampled_from(_OTHER_REWRITES), max_size=1))
    tool = Step(
        "tool", (*before, "split_shape", *after), draw(st.integers(0, 999)), draw(st.booleans())
    )
    return tuple(blocks), draw(st.integers(0, 2**16)), [tool]


@seeded(60)
@given(case=_cases())
def test_a_split_shape_keeps_the_source_of_what_it_computes(case) -> None:
    blocks, seed, steps = case
    _check(build(blocks, seed), steps)


@pytest.mark.parametrize(
    "blocks",
    [
        pytest.param(("reshape_to_transpose",), id="shape-of-a-transpose"),
        pytest.param(("linear", "reshape_to_transpose", "act"), id="between-other-blocks"),
    ],
)
def test_split_shape_regression(blocks) -> None:
    _check(build(blocks, 0), [Step("tool", ("split_shape",))])


@pytest.mark.parametrize(("batch", "computed"), [("batch", True), (2, False)])
def test_the_oracle_reads_a_shape_of_symbolic_dimensions_as_computed(batch, computed) -> None:
    """With a symbolic dimension, a ``Shape`` changes with the input: it is shape arithmetic
    of its operation, not a constant an exporter shared (tests._regions.dynamic_values)."""
    x = ir.Value(name="x", shape=ir.Shape([batch, 8]), type=ir.TensorType(ir.DataType.FLOAT))
    relu = ir.node("Relu", [x])
    relu.outputs[0].shape = ir.Shape([batch, 8])
    shape = ir.node("Shape", [relu.outputs[0]])
    reshape = ir.node("Reshape", [x, shape.outputs[0]])
    graph = ir.Graph([x], reshape.outputs, nodes=[relu, shape, reshape], opset_imports={"": 18})
    assert (shape.outputs[0] in dynamic_values(graph)) is computed
    assert reshape.outputs[0] in dynamic_values(graph)
