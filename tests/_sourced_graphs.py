"""Random small ONNX graphs whose every node carries a known source, as torch.onnx writes it.

A graph is a chain of blocks over one input. Each block is one or a few sources (FX nodes),
each lowered to one or a few ONNX nodes that all carry that source's metadata (namespace,
``pkg.torch.onnx.name_scopes``, ``class_hierarchy``, ``fx_node``, ``stack_trace``), the way
torch's exporter lowers ``aten.linear`` to MatMul + Add. The constant subgraphs are shared
between sources the way the exporter shares them:

* a shape constant computed by one ``view``'s nodes is read by later ``view``s' Reshapes;
* a causal mask built by ``index``-like ops on constants only (Trilu, Equal, Where) is read
  by the attention lowering's Add, and its shape (``Shape`` of it) by the attention's
  Reshape; a literal ``index`` created (an axis) is read by the attention's Gather;
* a zero bias created by the first bias-free Conv is read by the later ones;
* a scale constant created by one attention is read by the next;
* an expression written twice reads two equal literals, one per copy;
* the Slices of a window partition (rows, then columns of each, as Swin's patch merging
  slices ``x[0::2, 0::2]`` …) read literals created by the first Slice needing each.

Every node's value reaches the output (no dead code), so every source must survive any
transformation that keeps the numerics.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir
from hypothesis import strategies as st

__all__ = ["SourcedGraph", "build", "sourced_graphs"]

SEQUENCE_BLOCKS = (
    "linear",
    "act",
    "residual",
    "view",
    "attention",
    "duplicate",
    "noop",
    "norm",
    "windows",
)
IMAGE_BLOCKS = ("conv", "bn", "act", "residual", "duplicate", "noop")
_NOOPS = ("identity", "transpose_pair", "reshape_pair", "cast")
_ACTS = ("Relu", "Tanh", "Sigmoid", "Neg")


@dataclasses.dataclass(frozen=True)
class SourcedGraph:
    """A generated model, the input it runs on, and what it was built from."""

    model: ir.Model
    inputs: list[np.ndarray]
    recipe: tuple[str, tuple[str, ...], int]
    """(family, blocks, seed): ``build(*recipe)`` makes the same model again."""


def _metadata(fx: str, target: str, module: str, line: int) -> dict[str, str]:
    scopes = ["", module, fx] if module else ["", fx]
    classes = ["model.Net", *(["model.Block"] if module else []), target]
    return {
        "namespace": "/".join(f"{s}: {c}" for s, c in zip(scopes, classes, strict=True)),
        "pkg.torch.onnx.name_scopes": repr(scopes),
        "pkg.torch.onnx.class_hierarchy": repr(classes),
        "pkg.torch.onnx.fx_node": (
            f"%{fx} : [num_users=1] = call_function[target=torch.ops.{target}](args = (%x,))"
        ),
        "pkg.torch.onnx.stack_trace": (
            f'File "/src/model.py", line {line}, in forward\n    x = self.{module or "f"}(x)'
        ),
    }


class _Builder:
    """Appends nodes carrying sources; names values and nodes as torch.onnx does."""

    def __init__(self, x: ir.Value, rng: np.random.Generator) -> None:
        self.graph = ir.Graph([x], [], nodes=[], name="generated", opset_imports={"": 18})
        self.rng = rng
        self.counts: dict[str, int] = {}
        self.values = 0
        self.source: dict[str, str] | None = None
        self.shared: dict[str, ir.Value] = {}

    def begin(self, kind: str, target: str, module: str = "") -> str:
        """Starts a new source; later nodes carry it. Returns its FX node name."""
        number = self.counts.get(kind, 0)
        self.counts[kind] = number + 1
        fx = kind if number == 0 else f"{kind}_{number}"
        self.source = _metadata(fx, target, module, 10 + sum(self.counts.values()))
        return fx

    def node(self, op: str, inputs: list[ir.Value | None], outputs: int = 1, **attributes):
        node = ir.node(op, inputs, attributes=attributes or None, num_outputs=outputs)
        node.name = f"node_{op}_{len(self.graph)}"
        assert self.source is not None
        node.metadata_props.update(self.source)
        for value in node.outputs:
            value.name = f"val_{self.values}"
            self.values += 1
        self.graph.append(node)
        return node.outputs[0] if outputs == 1 else list(node.outputs)

    def constant(self, array: np.ndarray) -> ir.Value:
        return self.node("Constant", [], value=ir.tensor(array))

    def weight(self, name: str, shape: tuple[int, ...], scale: float = 0.5) -> ir.Value:
        array = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        value = ir.Value(name=name, shape=ir.Shape(shape), type=ir.TensorType(ir.DataType.FLOAT))
        value.const_value = ir.tensor(array, name=name)
        self.graph.register_initializer(value)
        return value


def _sequence_block(b: _Builder, kind: str, h: ir.Value, history: list[ir.Value], i: int):
    module = f"layers.{i}"
    if kind == "linear":
        b.begin("linear", "aten.linear.default", module)
        w, bias = b.weight(f"layers.{i}.weight", (8, 8)), b.weight(f"layers.{i}.bias", (8,))
        return b.node("Add", [b.node("MatMul", [h, w]), bias])
    if kind == "act":
        op = _ACTS[i % len(_ACTS)]
        b.begin(op.lower(), f"aten.{op.lower()}.default", module)
        return b.node(op, [h])
    if kind == "residual":
        b.begin("add", "aten.add.Tensor", module)
        return b.node("Add", [h, history[(i * 7) % len(history)]])
    if kind == "norm":
        b.begin("layer_norm", "aten.layer_norm.default", module)
        gamma, beta = b.weight(f"layers.{i}.ln.weight", (8,)), b.weight(f"layers.{i}.ln.bias", (8,))
        return b.node("LayerNormalization", [h, gamma, beta], axis=-1)
    if kind == "view":
        fx = b.begin("view", "aten.view.default", module)
        shape = b.shared.get("view_shape")
        if shape is None:  # the first view computes the shape; later ones read it
            shape = b.shared["view_shape"] = b.node(
                "Concat",
                [b.constant(np.array([2], np.int64)), b.constant(np.array([16], np.int64))],
                axis=0,
            )
        flat = b.node("Reshape", [h, shape])
        b.begin("relu", "aten.relu.default", module)
        flat = b.node("Relu", [flat])
        b.begin("view", "aten.view.default", module)
        back = b.shared.get("back_shape")
        if back is None:  # Shape of the graph input: a constant once shapes are static
            back = b.shared["back_shape"] = b.node("Shape", [history[0]])
        del fx
        return b.node("Reshape", [flat, back])
    if kind == "attention":
        return _attention(b, h, i, module)
    if kind == "duplicate":
        # The same expression written twice (``tanh(h) * 2 + tanh(h) * 2``): each copy's
        # Mul reads a literal of its own, equal to the other's.
        copies = []
        for _ in range(2):
            b.begin("tanh", "aten.tanh.default", module)
            copy = b.node("Tanh", [h])
            b.begin("mul", "aten.mul.Tensor", module)
            copies.append(b.node("Mul", [copy, b.constant(np.array(2.0, np.float32))]))
        b.begin("add", "aten.add.Tensor", module)
        return b.node("Add", copies)
    if kind == "windows":
        return _windows(b, h, module)
    return _noop(b, _NOOPS[i % len(_NOOPS)], h, module)


def _windows(b: _Builder, h: ir.Value, module: str) -> ir.Value:
    """Rows even and odd, each split into even and odd columns, concatenated and viewed
    back: six Slices on shared literals (``h`` is 4 x 8; ``x[0::2]`` ends at the largest
    int64, as torch.onnx writes it)."""

    def literal(number: int) -> ir.Value:
        found = b.shared.get(f"slice {number}")
        if found is None:
            found = b.shared[f"slice {number}"] = b.constant(np.array([number], np.int64))
        return found

    def slice_(value: ir.Value, start: int, end: int, axis: int) -> ir.Value:
        b.begin("slice", "aten.slice.Tensor", module)
        return b.node("Slice", [value, literal(start), literal(end), literal(axis), literal(2)])

    end = int(np.iinfo(np.int64).max)
    rows = [slice_(h, start, end, 0) for start in (0, 1)]
    parts = [slice_(row, start, end, 1) for start in (0, 1) for row in rows]
    b.begin("cat", "aten.cat.default", module)
    joined = b.node("Concat", parts, axis=1)
    b.begin("view", "aten.view.default", module)
    return b.node("Reshape", [joined, b.constant(np.array([4, 8], np.int64))])


def _noop(b: _Builder, which: str, h: ir.Value, module: str) -> ir.Value:
    if which == "identity":
        b.begin("alias", "aten.alias.default", module)
        return b.node("Identity", [h])
    if which == "cast":
        b.begin("_to_copy", "aten._to_copy.default", module)
        return b.node("Cast", [h], to=ir.DataType.FLOAT)
    rank = len(h.shape) if h.shape is not None else 2
    if which == "transpose_pair":
        perm = list(reversed(range(rank)))
        b.begin("transpose", "aten.transpose.int", module)
        h = b.node("Transpose", [h], perm=perm)
        b.begin("transpose", "aten.transpose.int", module)
        return b.node("Transpose", [h], perm=perm)
    dims = list(h.shape.numpy()) if h.shape is not None else [4, 8]
    b.begin("view", "aten.view.default", module)
    h = b.node("Reshape", [h, b.constant(np.array([-1], np.int64))])
    b.begin("view", "aten.view.default", module)
    return b.node("Reshape", [h, b.constant(np.array(dims, np.int64))])


def _attention(b: _Builder, h: ir.Value, i: int, module: str) -> ir.Value:
    projections = []
    for name in ("q", "k", "v"):
        b.begin("linear", "aten.linear.default", f"{module}.{name}")
        projections.append(b.node("MatMul", [h, b.weight(f"{module}.{name}.weight", (8, 8))]))
    q, k, v = projections
    mask = b.shared.get("mask")
    if mask is None:  # the causal mask: index-like ops on constants only
        b.begin("ones", "aten.ones.default")
        ones = b.constant(np.ones((4, 4), np.float32))
        b.begin("tril", "aten.tril.default")
        lower = b.node("Trilu", [ones], upper=0)
        b.begin("index", "aten.index.Tensor")
        zero = b.constant(np.array(0.0, np.float32))
        masked = b.node("Equal", [lower, zero])
        mask = b.node("Where", [masked, b.constant(np.array(-1e4, np.float32)), zero])
        # A literal the lowering creates and the exporter shares later (by value).
        axis = b.shared["axis"] = b.constant(np.array([0], np.int64))
        mask = b.shared["mask"] = b.node("Squeeze", [b.node("Unsqueeze", [mask, axis]), axis])
    b.begin("scaled_dot_product_attention", "aten.scaled_dot_product_attention.default", module)
    scale = b.shared.get("scale")
    if scale is None:
        scale = b.shared["scale"] = b.constant(np.array(8**-0.5, np.float32))
    scores = b.node("Mul", [b.node("MatMul", [q, b.node("Transpose", [k], perm=[1, 0])]), scale])
    weights = b.node("Softmax", [b.node("Add", [scores, mask])], axis=-1)
    out = b.node("MatMul", [weights, v])
    # The lowering's Reshape reads the mask's shape (a shape-only read of a shared constant).
    rows = b.node("Gather", [b.node("Shape", [mask]), b.shared["axis"]], axis=0)
    shape = b.node("Concat", [b.constant(np.array([-1], np.int64)), rows], axis=0)
    return b.node("Transpose", [b.node("Reshape", [out, shape])], perm=[1, 0])


def _image_block(b: _Builder, kind: str, h: ir.Value, history: list[ir.Value], i: int):
    module = f"features.{i}"
    if kind == "conv":
        b.begin("convolution", "aten.convolution.default", module)
        w = b.weight(f"{module}.weight", (3, 3, 3, 3), 0.3)
        if i % 2:
            bias = b.weight(f"{module}.bias", (3,))
        else:  # bias-free: one zero bias constant, created by the first, shared
            bias = b.shared.get("zero_bias")
            if bias is None:
                bias = b.shared["zero_bias"] = b.constant(np.zeros(3, np.float32))
        return b.node("Conv", [h, w, bias], pads=[1, 1, 1, 1])
    if kind == "bn":
        b.begin("_native_batch_norm_legit_no_training", "aten.batch_norm.default", module)
        scale, bias = b.weight(f"{module}.weight", (3,)), b.weight(f"{module}.bias", (3,))
        mean = b.weight(f"{module}.running_mean", (3,))
        var = b.weight(f"{module}.running_var", (3,))
        var.const_value = ir.tensor(np.abs(var.const_value.numpy()) + 0.5, name=var.name)
        return b.node("BatchNormalization", [h, scale, bias, mean, var])
    if kind in ("act", "residual", "duplicate"):
        return _sequence_block(b, kind, h, history, i)
    return _noop(b, _NOOPS[i % len(_NOOPS)], h, module)


def build(family: str, blocks: tuple[str, ...], seed: int) -> SourcedGraph:
    """The model of ``blocks`` (names from SEQUENCE_BLOCKS or IMAGE_BLOCKS): family
    ``sequence`` (x[4, 8]), ``image`` (x[1, 3, 5, 5]) or ``pixel`` (image blocks on one pixel,
    x[1, 3, 1, 1]: where onnxruntime's blocked layout holds the plain order)."""
    rng = np.random.default_rng(seed)
    shape = {"sequence": (4, 8), "pixel": (1, 3, 1, 1)}.get(family, (1, 3, 5, 5))
    x = ir.Value(name="x", shape=ir.Shape(shape), type=ir.TensorType(ir.DataType.FLOAT))
    b = _Builder(x, rng)
    h, history = x, [x]
    make = _sequence_block if family == "sequence" else _image_block
    for i, kind in enumerate(blocks):
        h = make(b, kind, h, history, i)
        h.shape = ir.Shape(shape)
        h.type = ir.TensorType(ir.DataType.FLOAT)
        history.append(h)
    b.graph.outputs.append(h)
    model = ir.Model(b.graph, ir_version=10, producer_name="pytorch")
    inputs = [rng.standard_normal(shape).astype(np.float32)]
    return SourcedGraph(model, inputs, (family, tuple(blocks), seed))


@st.composite
def sourced_graphs(
    draw: st.DrawFn, max_blocks: int = 5, required: tuple[str, ...] = ()
) -> SourcedGraph:
    """A random sourced graph of 1..max_blocks blocks, the ``required`` kinds among them
    (each at a random place; kinds both families have)."""
    family = draw(st.sampled_from(["sequence", "image"]))
    kinds = SEQUENCE_BLOCKS if family == "sequence" else IMAGE_BLOCKS
    free = max(max_blocks - len(required), 0)
    blocks = draw(st.lists(st.sampled_from(kinds), min_size=0 if required else 1, max_size=free))
    for kind in required:
        assert kind in kinds, f"{kind} is no {family} block"
        blocks.insert(draw(st.integers(0, len(blocks))), kind)
    seed = draw(st.integers(0, 2**16))
    return build(family, tuple(blocks), seed)
