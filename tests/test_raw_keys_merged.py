"""A node that stands for other lowerings' nodes, although its output is no source's output,
keeps the layout keys onnxscript's optimizer keeps there (tests/_raw_keys.py, read raw).

A dynamic-shape export computes a size once (``sym_size_int``: ``Shape`` then ``Squeeze``)
and every ``view`` or ``expand`` using it reshapes it to one element for its own shape
``Concat``. onnxscript's optimizer merges those equal reshapes (and, in dynamic BERT, makes
each ``Reshape(Squeeze(s))`` the ``Shape``'s output itself): one node stands for all, its
output no source's output, and onnxscript keeps the first one's metadata there. Without an
output source, ``follow_output`` took the last source (dynamic BERT: the ``sym_size_int``
was named by no node's ``namespace`` any more). Random chains of such uses, with other ops
between, must keep every raw key's recall at least onnxscript's, each node both optimizers
keep must have onnxscript's ``namespace``, and modelprov's own recall must stay 1.00.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx_ir as ir
import onnxscript.optimizer
from hypothesis import given
from hypothesis import strategies as st

import modelprov
from tests._raw_keys import ASPECTS, NAMESPACE, raw_recall
from tests._seeded import seeded
from tests._sourced_graphs import _Builder


def _graph(uses: list[str], seed: int) -> ir.Model:
    """x[batch, seq]; its batch size (Shape, Squeeze), then per item of ``uses`` a ``view``
    reshaping the running value to [size, seq, 1] or back to [size, seq] (the ``seq`` read
    off the value in the view's own lowering), or an activation."""
    x = ir.Value(name="x", shape=ir.Shape(["batch", "seq"]), type=ir.TensorType(ir.DataType.FLOAT))
    b = _Builder(x, np.random.default_rng(seed))
    b.begin("sym_size_int", "aten.sym_size.int")
    size = b.node("Squeeze", [b.node("Shape", [x], start=0, end=1)])
    h, dims = x, ["batch", "seq"]
    for i, use in enumerate(uses):
        module = f"layers.{i}"
        if use == "view":
            b.begin("view", "aten.view.default", module)
            one = b.constant(np.array([1], np.int64))
            parts = [b.node("Reshape", [size, one]), b.node("Shape", [h], start=1, end=2)]
            dims = ["batch", "seq", 1] if len(dims) == 2 else ["batch", "seq"]
            parts += [one] if len(dims) == 3 else []
            h = b.node("Reshape", [h, b.node("Concat", parts, axis=0)])
        else:
            b.begin(use.lower(), f"aten.{use.lower()}.default", module)
            h = b.node(use, [h])
        h.shape, h.type = ir.Shape(dims), ir.TensorType(ir.DataType.FLOAT)
    b.graph.outputs.append(h)
    return ir.Model(b.graph, ir_version=10, producer_name="pytorch")


_USES = st.lists(st.sampled_from(["view", "view", "Tanh", "Sigmoid"]), min_size=1, max_size=6)
"""Activations no optimizer fuses with themselves (``Relu(Relu(x))`` becomes one Relu whose
layout onnxscript takes from the outer one, a rule of its own)."""


@seeded(40)
@given(uses=_USES.filter(lambda uses: "view" in uses), seed=st.integers(0, 2**16))
def test_a_shape_standing_for_reshapes_of_its_size_keeps_onnxscripts_layout(uses, seed) -> None:
    export = _graph(uses, seed)
    ours = modelprov.optimize(export.clone())
    theirs = export.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onnxscript.optimizer.optimize_ir(theirs)
    mine, reference = raw_recall(export, ours), raw_recall(export, theirs)
    below = {
        pair: (mine.value(pair), reference.value(pair), mine.lost[pair])
        for pair in ASPECTS
        if mine.value(pair) < reference.value(pair)
    }
    assert below == {}, uses
    kept = {(node.name, node.op_type): node for node in theirs.graph}
    layouts = {
        node.name: (
            node.metadata_props.get(NAMESPACE),
            reference_node.metadata_props.get(NAMESPACE),
        )
        for node in ours.graph
        if (reference_node := kept.get((node.name, node.op_type))) is not None
    }
    assert {name: pair for name, pair in layouts.items() if pair[0] != pair[1]} == {}, uses
    report = modelprov.diff(export, ours)
    assert report.fx_nodes.value == report.source_lines.value == report.module_paths.value == 1.0
