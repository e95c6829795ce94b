"""Simulated black-box tools: rewrites onnxsim, onnxslim, onnxoptimizer and onnxruntime do,
applied to a copy of a model, with every node's metadata stripped (as the tools drop it).

A tool fuses, splits or re-lays out each node once: a chain of nodes fused or split and then
renamed end to end by a layout conversion leaves nothing (no name, no op) that says which
part computes what, so the rewrites skip nodes an earlier rewrite of the same tool touched.

Each rewrite keeps the numerics and says which nodes it touched; a node no rewrite touched
(same op, attributes, input and output names, and inputs still produced the way they were)
is one the tool left unchanged, and must keep exactly its sources after ``recover``.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import onnx
import onnx_ir as ir

__all__ = ["REWRITES", "apply_tool"]

Rewrite = Callable[[ir.Graph, random.Random, set[ir.Node]], None]


def _fresh(graph: ir.Graph, stem: str) -> str:
    """A name no value of the graph has, nor had when the tool began (a tool reusing an
    old name for another tensor is a different test)."""
    taken = {v.name for node in graph for v in node.outputs} | set(graph.initializers)
    taken |= {v.name for v in graph.inputs} | graph.meta.get("names at start", set())
    index = len(taken)
    while f"{stem}{index}" in taken:
        index += 1
    return f"{stem}{index}"


def _initializer(graph: ir.Graph, name: str, array: np.ndarray) -> ir.Value:
    value = ir.Value(
        name=name,
        shape=ir.Shape(array.shape),
        type=ir.TensorType(ir.DataType.from_numpy(array.dtype)),
    )
    value.const_value = ir.tensor(array, name=name)
    graph.register_initializer(value)
    return value


def _constant_array(value: ir.Value | None) -> np.ndarray | None:
    if value is None:
        return None
    if value.const_value is not None and value.is_initializer():
        return value.const_value.numpy()
    producer = value.producer()
    if producer is not None and producer.op_type == "Constant":
        return producer.attributes["value"].as_tensor().numpy()
    return None


def _replace_node(graph: ir.Graph, old: ir.Node, new: ir.Node, touched: set[ir.Node]) -> None:
    """Puts ``new`` where ``old`` was, taking over its outputs' uses and names."""
    graph.insert_after(old, new)
    for before, after in zip(old.outputs, new.outputs, strict=True):
        name = before.name
        before.replace_all_uses_with(after, replace_graph_outputs=True)
        before.name = None
        after.name = name
    graph.remove(old, safe=True)
    touched.add(new)


def _take_graph_outputs(graph: ir.Graph, before: ir.Value, after: ir.Value) -> None:
    for index, output in enumerate(graph.outputs):
        if output is before:
            graph.outputs[index] = after


def _single_use(value: ir.Value, graph: ir.Graph) -> ir.Node | None:
    uses = list(value.uses())
    if len(uses) != 1 or value in graph.outputs:
        return None
    return uses[0].node


def rename_values(graph: ir.Graph, rng: random.Random, touched: set[ir.Node]) -> None:
    """Fresh names for some node outputs that are not graph outputs."""
    for node in list(graph):
        for value in node.outputs:
            if value not in graph.outputs and rng.random() < 0.4:
                value.name = _fresh(graph, "onnx::t_")
                touched.add(node)


def rename_nodes(graph: ir.Graph, rng: random.Random, touched: set[ir.Node]) -> None:
    """Fresh node names (names are no anchor)."""
    names = {node.name for node in graph}
    for index, node in enumerate(graph):
        if rng.random() < 0.5:
            name = f"{node.op_type}_{index}_renamed"
            while name in names:
                name += "_again"
            names.add(name)
            node.name = name


def reorder(graph: ir.Graph, rng: random.Random, touched: set[ir.Node]) -> None:
    """A random topological order of the nodes."""
    nodes = list(graph)
    ready_values = set(graph.inputs) | set(graph.initializers.values())
    order: list[ir.Node] = []
    pending = list(nodes)
    while pending:
        ready = [n for n in pending if all(v is None or v in ready_values for v in n.inputs)]
        chosen = rng.choice(ready)
        pending.remove(chosen)
        order.append(chosen)
        ready_values.update(chosen.outputs)
    for node in nodes:
        graph.remove(node)
    graph.extend(order)


def constants_to_initializers(graph: ir.Graph, rng: random.Random, touched: set[ir.Node]) -> None:
    """Constant nodes become initializers of the same name; their readers count as
    touched (they now read an initializer)."""
    for node in list(graph):
        if node.op_type != "Constant" or node.outputs[0] in graph.outputs:
            continue
        output = node.outputs[0]
        array = node.attributes["value"].as_tensor().numpy()
        name = output.name or _fresh(graph, "const_")
        output.name = None
        value = _initializer(graph, name, array)
        for use in list(output.uses()):
            touched.add(use.node)
        ir.convenience.replace_all_uses_with(output, value)
        graph.remove(node, safe=True)


def fold_constants(graph: ir.Graph, rng: random.Random, touched: set[ir.Node]) -> None:
    """Evaluates nodes that read only constants (and Shape of static tensors) with the
    reference evaluator; the results become initializers, named like the value they
    replace or fresh."""
    from onnx.reference import ReferenceEvaluator

    changed = True
    while changed:
        changed = False
        for node in list(graph):
            if node.op_type == "Constant":
                continue
            if node.op_type == "Shape" and node.inputs[0].shape is not None:
                if not node.inputs[0].shape.is_static():
                    continue
                arrays = [np.array(node.inputs[0].shape.numpy(), np.int64)]
            else:
                found = [_constant_array(v) for v in node.inputs]
                if not node.inputs or any(a is None for a in found):
                    continue
                model = ir.to_proto(ir.Model(_single_node_graph(node, found), ir_version=10))
                arrays = ReferenceEvaluator(model).run(None, {})
                arrays = [np.asarray(a) for a in arrays]
            if len(arrays) != 1 or node.outputs[0] in graph.outputs:
                continue
            output = node.outputs[0]
            name = output.name if rng.random() < 0.5 and output.name else _fresh(graph, "fold_")
            output.name = None
            value = _initializer(graph, name, arrays[0])
            for use in list(output.uses()):
                touched.add(use.node)
            ir.convenience.replace_all_uses_with(output, value)
            graph.remove(node, safe=True)
            changed = True
            break
    _drop_dead(graph)


def _single_node_graph(node: ir.Node, arrays: list[np.ndarray | None]) -> ir.Graph:
    inputs = []
    graph_initializers = []
    for index, array in enumerate(arrays):
        assert array is not None
        value = ir.Value(name=f"in{index}", shape=ir.Shape(array.shape))
        value.type = ir.TensorType(ir.DataType.from_numpy(array.dtype))
        value.const_value = ir.tensor(array, name=f"in{index}")
        inputs.append(value)
        graph_initializers.append(value)
    copy = ir.node(
        node.op_type,
        inputs,
        attributes=dict(node.attributes),
        num_outputs=len(node.outputs),
    )
    for index, output in enumerate(copy.outputs):
        output.name = f"out{index}"
    return ir.Graph(
        [],
        list(copy.outputs),
        nodes=[copy],
        initializers=graph_initializers,
        opset_imports={"": 18},
    )


def _drop_dead(graph: ir.Graph) -> None:
    for node in reversed(list(graph)):
        if all(not v.uses() and v not in graph.outputs for v in node.outputs):
            graph.remove(node, safe=True)
    used = {v for node in graph for v in node.inputs if v is not None}
    for name, value in list(graph.initializers.items()):
        if value not in used and value not in graph.outputs:
            del graph.initializers[name]


def fuse_gemm(graph: ir.Graph, rng: random.Random, touched: set[ir.Node]) -> None:
    """MatMul(A, W) + Add(., b) with 2-D A and W initializers -> Gemm(A, W, b)."""
    for matmul in list(graph):
        if matmul.op_type != "MatMul" or matmul.graph is not graph or matmul in touched:
            continue
        a, w = matmul.inputs
        add = _single_use(matmul.outputs[0], graph)
        if add is None or add.op_type != "Add" or add in touched:
            continue
        if w is None or not w.is_initializer():
            continue
        bias = add.inputs[1] if add.inputs[0] is matmul.outputs[0] else add.inputs[0]
        if bias is None or not bias.is_initializer() or len(bias.shape or ()) != 1:
            continue
        if a is None or a.shape is None or len(a.shape) != 2:
            continue
        gemm = ir.node("Gemm", [a, w, bias])
        gemm.name = f"{add.name}_gemm"
        _replace_node(graph, add, gemm, touched)
        graph.remove(matmul, safe=True)


def fuse_conv_bn(graph: ir.Graph, rng: random.Random, touched: set[ir.Node]) -> None:
    """Conv followed by its only reader BatchNormalization -> one Conv with folded weights;
    the Conv's output takes the BatchNorm's name or keeps its own (tools do both)."""
    for conv in list(graph):
        if conv.op_type != "Conv" or conv.graph is not graph or conv in touched:
            continue
        bn = _single_use(conv.outputs[0], graph)
        if bn is None or bn.op_type != "BatchNormalization" or bn in touched:
            continue
        arrays = [_constant_array(v) for v in [*conv.inputs[1:], *bn.inputs[1:]]]
        if len(arrays) != 6 or any(a is None for a in arrays):
            continue
        w, b, scale, shift, mean, var = arrays
        epsilon = bn.attributes["epsilon"].as_float() if "epsilon" in bn.attributes else 1e-5
        factor = scale / np.sqrt(var + epsilon)
        new_w = (w * factor[:, None, None, None]).astype(np.float32)
        new_b = ((b - mean) * factor + shift).astype(np.float32)
        weights = _initializer(graph, _fresh(graph, "fused_w_"), new_w)
        bias = _initializer(graph, _fresh(graph, "fused_b_"), new_b)
        fused = ir.node("Conv", [conv.inputs[0], weights, bias], attributes=conv.attributes)
        keep_conv_name = rng.random() < 0.5
        conv_name = conv.outputs[0].name
        fused.name = conv.name
        _replace_node(graph, bn, fused, touched)
        if keep_conv_name:
            conv.outputs[0].name = None
            fused.outputs[0].name = conv_name
        graph.remove(conv, safe=True)
        _drop_dead(graph)


def split_batch_norm(graph: ir.Graph, rng: random.Random, touched: set[ir.Node]) -> None:
    """BatchNormalization -> Mul and Add with the folded scale and shift."""
    for bn in list(graph):
        if bn.op_type != "BatchNormalization" or bn in touched:
            continue
        arrays = [_constant_array(v) for v in bn.inputs[1:]]
        if any(a is None for a in arrays):
            continue
        scale, shift, mean, var = arrays
        factor = (scale / np.sqrt(var + 1e-5)).astype(np.float32)
        offset = (shift - mean * factor).astype(np.float32)
        f = _initializer(graph, _fresh(graph, "bn_scale_"), factor.reshape(1, -1, 1, 1))
        o = _initializer(graph, _fresh(graph, "bn_shift_"), offset.reshape(1, -1, 1, 1))
        mul = ir.node("Mul", [bn.inputs[0], f])
        mul.outputs[0].name = _fresh(graph, "bn_mul_")
        graph.insert_before(bn, mul)
        touched.add(mul)
        _replace_node(graph, bn, ir.node("Add", [mul.outputs[0], o]), touched)
        _drop_dead(graph)


def merge_duplicates(graph: ir.Graph, rng: random.Random, touched: set[ir.Node]) -> None:
    """Nodes with the same op, attributes and inputs: the first survives (onnxslim); equal
    literals are merged first, or not (then copies reading equal literals stay)."""
    if rng.random() < 0.5:
        merge_equal_constants(graph, rng, touched)
    changed = True
    while changed:
        changed = False
        seen: dict[tuple, ir.Node] = {}
        for node in graph:
            key = (
                node.op_type,
                tuple(id(v) for v in node.inputs),
                tuple(sorted((k, str(a)) for k, a in node.attributes.items())),
            )
            first = seen.get(key)
            if first is None or node.op_type == "Constant":
                seen.setdefault(key, node)
                continue
            if any(v in graph.outputs for v in node.outputs):
                continue
            for mine, theirs in zip(node.outputs, first.outputs, strict=True):
                ir.convenience.replace_all_uses_with(mine, theirs)
            graph.remove(node, safe=True)
            touched.add(first)
            changed = True
            break


def merge_equal_constants(graph: ir.Graph, rng: random.Random, touched: set[ir.Node]) -> None:
    """Constant nodes of equal tensors: the first survives, its readers count as touched."""
    first: dict[tuple[object, ...], ir.Node] = {}
    for node in list(graph):
        if node.op_type != "Constant" or node.outputs[0] in graph.outputs:
            continue
        tensor = node.attributes["value"].as_tensor()
        key = (tensor.dtype, tuple(tensor.shape.numpy()), tensor.tobytes())
        kept = first.setdefault(key, node)
        if kept is node:
            continue
        touched.add(kept)
        for use in list(node.outputs[0].uses()):
            touched.add(use.node)
        node.outputs[0].replace_all_uses_with(kept.outputs[0])
        graph.remove(node, safe=True)


def fuse_consecutive(graph: ir.Graph, rng: random.Random, touched: set[ir.Node]) -> None:
    """A Reshape of a Reshape becomes one Reshape of the first's input (onnxsim, onnxslim);
    a Slice of a Slice on other axes becomes one Slice with the starts, ends, axes and steps
    of both, as fresh initializers (onnxsim) or Concats of the old ones (onnxoptimizer).
    The fused node takes the second's output name or a fresh one; the first stays while
    others read it. The fused node's readers count as touched (they read a fused value)."""
    for node in list(graph):
        if node.op_type not in ("Reshape", "Slice") or node in touched or node.graph is None:
            continue
        first = node.inputs[0].producer() if node.inputs[0] is not None else None
        if first is None or first.op_type != node.op_type or first in touched:
            continue
        if node.op_type == "Reshape":
            shape = _constant_array(node.inputs[1])
            if shape is None or 0 in shape or "allowzero" in node.attributes:
                continue
            inputs = [first.inputs[0], node.inputs[1]]
            made: list[ir.Node] = []
        else:
            params = [[_constant_array(v) for v in each.inputs[1:]] for each in (first, node)]
            if any(len(p) != 4 or any(a is None for a in p) for p in params):
                continue
            if set(params[0][2].tolist()) & set(params[1][2].tolist()):
                continue  # the same axis twice: not one Slice
            if rng.random() < 0.5:
                inputs = [first.inputs[0]] + [
                    _initializer(graph, _fresh(graph, "fused_slice_"), np.concatenate([a, b]))
                    for a, b in zip(*params, strict=True)
                ]
                made = []
            else:
                made = [
                    ir.node("Concat", [a, b], attributes={"axis": 0})
                    for a, b in zip(first.inputs[1:], node.inputs[1:], strict=True)
                ]
                inputs = [first.inputs[0], *(each.outputs[0] for each in made)]
                for each in made:
                    each.outputs[0].name = _fresh(graph, "fused_slice_")
                    graph.insert_before(node, each)
                    touched.add(each)
        fused = ir.node(node.op_type, inputs, attributes=dict(node.attributes))
        for use in list(node.outputs[0].uses()):
            touched.add(use.node)  # its readers now read a fused value
        _replace_node(graph, node, fused, touched)
        if rng.random() < 0.5 and fused.outputs[0] not in graph.outputs:
            fused.outputs[0].name = _fresh(graph, "fused_")
    _drop_dead(graph)


def eliminate_no_ops(graph: ir.Graph, rng: random.Random, touched: set[ir.Node]) -> None:
    """Identity and same-type Cast removed; readers read the input."""
    for node in list(graph):
        is_cast = node.op_type == "Cast" and node.inputs[0] is not None
        if node.op_type != "Identity" and not (
            is_cast and node.inputs[0].dtype == ir.DataType(node.attributes["to"].as_int())
        ):
            continue
        source, output = node.inputs[0], node.outputs[0]
        if source is None or output in graph.outputs or source in graph.inputs:
            continue
        for use in list(output.uses()):
            touched.add(use.node)
        if source.producer() is not None:
            touched.add(source.producer())
        ir.convenience.replace_all_uses_with(output, source)
        graph.remove(node, safe=True)


def insert_layout(graph: ir.Graph, rng: random.Random, touched: set[ir.Node]) -> None:
    """A layout conversion around a chain of nodes, as onnxruntime's NCHWc does: each
    chain node reads its dynamic inputs through a cancelling Transpose pair, gets a fresh
    output name, and a Conv's weights are copied to fresh initializers; the chain's last
    value is handed back under its name through another pair."""
    # Only nodes this tool has not rewritten yet: a chain of fused or split nodes renamed
    # end to end leaves nothing that says which part computes what.
    nodes = [n for n in graph if n.op_type not in ("Constant", "Shape") and n not in touched]
    if len(nodes) < 2:
        return
    start = rng.randrange(len(nodes) - 1)
    chain = nodes[start : start + rng.randint(2, 4)]
    last = chain[-1].outputs[0]
    if last.shape is None or len(chain[-1].outputs) != 1:
        return
    name = last.name
    for node in chain:
        rank = len(node.outputs[0].shape) if node.outputs[0].shape is not None else None
        for index, value in enumerate(node.inputs):
            if value is None or value.is_initializer() or value.shape is None:
                if value is not None and value.is_initializer() and node.op_type == "Conv":
                    copy = _initializer(
                        graph, _fresh(graph, "reorder_w_"), value.const_value.numpy()
                    )
                    node.replace_input_with(index, copy)
                continue
            if value.producer() is not None and value.producer().op_type == "Constant":
                continue
            perm = _perm(len(value.shape))
            there = ir.node("Transpose", [value], attributes={"perm": perm})
            back = ir.node("Transpose", [there.outputs[0]], attributes={"perm": _inverse(perm)})
            there.outputs[0].name = _fresh(graph, "reorder_in_")
            graph.insert_before(node, there)
            back.outputs[0].name = _fresh(graph, "reorder_in_")
            graph.insert_before(node, back)
            node.replace_input_with(index, back.outputs[0])
            touched.update((there, back))
        if rank is not None:
            for output in node.outputs:
                output.name = _fresh(graph, "nchwc_")
        touched.add(node)
    fresh = chain[-1].outputs[0]
    perm = _perm(len(last.shape) if last.shape is not None else 2)
    there = ir.node("Transpose", [fresh], attributes={"perm": perm})
    back = ir.node("Transpose", [there.outputs[0]], attributes={"perm": _inverse(perm)})
    there.outputs[0].name = _fresh(graph, "reorder_out_")
    graph.insert_after(chain[-1], [there, back])
    for use in list(fresh.uses()):
        if use.node is not there:
            use.node.replace_input_with(use.idx, back.outputs[0])
    _take_graph_outputs(graph, fresh, back.outputs[0])
    back.outputs[0].name = name or _fresh(graph, "reorder_out_")
    touched.update((there, back))


BLOCKED_DOMAIN = "test.blocked"
"""The custom domain of ``block_layout``'s nodes (model-local functions: any runtime runs
them, on any CPU)."""
_FUSABLE_ACTIVATIONS = ("Relu", "Sigmoid", "Tanh")


def block_layout(graph: ir.Graph, rng: random.Random, touched: set[ir.Node]) -> None:
    """A blocked layout, as onnxruntime's NCHWc transformer makes it: each Conv (with the
    activation reading it alone fused in, named by an ``activation`` attribute) becomes a
    Conv of a custom domain working on a channels-last layout, its weights copied to fresh
    initializers; a ``ReorderInput`` converts its input unless another blocked Conv made
    it, a ``ReorderOutput`` hands back each value plain nodes read, under its name; the
    values between blocked Convs are fresh."""
    blocked: dict[ir.Value, ir.Value] = {}  # plain value -> the blocked value computing it
    for conv in list(graph):
        if (
            conv.op_type != "Conv"
            or conv.domain not in ("", "ai.onnx")
            or conv in touched
            or len(conv.inputs) != 3
            or conv.inputs[0] is None
            or conv.inputs[0].shape is None
            or any(v is None or _constant_array(v) is None for v in conv.inputs[1:])
        ):
            continue
        activation = _single_use(conv.outputs[0], graph)
        if (
            activation is None
            or activation.op_type not in _FUSABLE_ACTIVATIONS
            or activation in touched
        ):
            activation = None
        last = activation or conv
        data = conv.inputs[0]
        read = blocked.get(data)
        if read is None:
            reorder = ir.node("ReorderInput", [data], domain=BLOCKED_DOMAIN)
            reorder.outputs[0].name = _fresh(graph, "reorder_")
            graph.insert_before(conv, reorder)
            touched.add(reorder)
            read = reorder.outputs[0]
        weights = [
            _initializer(graph, _fresh(graph, "reorder_w_"), _constant_array(v))
            for v in conv.inputs[1:]
            if v is not None
        ]
        attributes = dict(conv.attributes)
        overload = ""
        if activation is not None:
            attributes["activation"] = ir.AttrString("activation", activation.op_type)
            overload = activation.op_type
        _blocked_conv_function(graph, conv, overload)
        fused = ir.node(
            "Conv",
            [read, *weights],
            attributes={k: a.value for k, a in attributes.items()},
            domain=BLOCKED_DOMAIN,
            overload=overload,
        )
        fused.outputs[0].name = _fresh(graph, "nchwc_")
        graph.insert_after(last, fused)
        plain = last.outputs[0]
        blocked[plain] = fused.outputs[0]
        back = ir.node("ReorderOutput", [fused.outputs[0]], domain=BLOCKED_DOMAIN)
        graph.insert_after(fused, back)
        touched.update((fused, back))
        name = plain.name
        for use in list(plain.uses()):
            use.node.replace_input_with(use.idx, back.outputs[0])
        _take_graph_outputs(graph, plain, back.outputs[0])
        graph.remove([last, conv] if activation is not None else [conv], safe=True)
        back.outputs[0].name = name
        back.outputs[0].shape, back.outputs[0].type = plain.shape, plain.type
    # A blocked Conv reading another's output reads the blocked value: no reorder between.
    for plain_back in [n for n in graph if n.op_type == "ReorderOutput" and n in touched]:
        value = plain_back.outputs[0]
        for use in list(value.uses()):
            reader = use.node
            if reader.domain == BLOCKED_DOMAIN and reader.op_type == "ReorderInput":
                for inner in list(reader.outputs[0].uses()):
                    inner.node.replace_input_with(inner.idx, plain_back.inputs[0])
        for reader in [u.node for u in value.uses()]:
            if reader.op_type == "ReorderInput" and not reader.outputs[0].uses():
                graph.remove(reader, safe=True)
        if not value.uses() and value not in graph.outputs:
            graph.remove(plain_back, safe=True)
    _declare_blocked_functions(graph)


def _blocked_conv_function(graph: ir.Graph, conv: ir.Node, overload: str) -> None:
    """The bodies of the blocked ops, kept in ``graph.meta`` until ``apply_tool`` adds them
    to the model: a Conv on a channels-last layout (with its activation), and the two
    reorders."""
    functions = graph.meta.setdefault("functions", {})
    conv_key = ("Conv", overload, tuple(sorted((k, str(a)) for k, a in conv.attributes.items())))
    if ("Conv", overload) in functions and functions[("Conv", overload)][0] != conv_key:
        raise ValueError(
            "block_layout: one attribute set per activation"
        )  # generated Convs share one
    x, w, b = (ir.Value(name=n) for n in ("x", "w", "b"))
    to_plain = ir.node("Transpose", [x], attributes={"perm": [0, 3, 1, 2]})
    body = ir.node(
        "Conv",
        [to_plain.outputs[0], w, b],
        attributes={k: a.value for k, a in conv.attributes.items()},
    )
    nodes = [to_plain, body]
    if overload:
        nodes.append(ir.node(overload, [body.outputs[0]]))
    nodes.append(ir.node("Transpose", [nodes[-1].outputs[0]], attributes={"perm": [0, 2, 3, 1]}))
    functions[("Conv", overload)] = (conv_key, _function("Conv", overload, [x, w, b], nodes))
    for name, perm in (("ReorderInput", [0, 2, 3, 1]), ("ReorderOutput", [0, 3, 1, 2])):
        if (name, "") not in functions:
            v = ir.Value(name="x")
            node = ir.node("Transpose", [v], attributes={"perm": perm})
            functions[(name, "")] = (None, _function(name, "", [v], [node]))


def _function(
    name: str, overload: str, inputs: list[ir.Value], nodes: list[ir.Node]
) -> ir.Function:
    body = ir.Graph(inputs, [nodes[-1].outputs[0]], nodes=nodes, opset_imports={"": 20})
    return ir.Function(BLOCKED_DOMAIN, name, overload, graph=body, attributes=[])


def _declare_blocked_functions(graph: ir.Graph) -> None:
    if graph.meta.get("functions"):
        graph.opset_imports.setdefault(BLOCKED_DOMAIN, 1)


def _perm(rank: int) -> list[int]:
    return [0, *range(2, rank), 1] if rank > 2 else list(reversed(range(rank)))


def _inverse(perm: list[int]) -> list[int]:
    inverse = [0] * len(perm)
    for index, axis in enumerate(perm):
        inverse[axis] = index
    return inverse


WHOLE_BLOCK_DOMAIN = "test.blocked_whole"
"""The custom domain of ``block_layout_whole_channels``'s nodes (model-local functions)."""
_WHOLE_BLOCK_ELEMENTWISE = ("Relu", "Sigmoid", "Tanh", "Neg")


def block_layout_whole_channels(graph: ir.Graph, rng: random.Random, touched: set[ir.Node]) -> None:
    """onnxruntime's NCHWc with one block holding all channels: a blocked value keeps its
    plain shape and stores its elements pixel by pixel (channels innermost), so at a 1x1
    spatial size it holds them in the plain order (MobileViT's last stage). Each Conv
    becomes a Conv of a custom domain (its weights copied to fresh initializers); a
    one-input activation reading a blocked value becomes a custom op of its own beside the
    blocked Conv, nothing fused into the Conv (onnxruntime's QuickGelu next to an NCHWc
    Conv); a plain Add whose inputs are all blocked stays a plain Add under its name,
    reading the blocked values and writing a fresh one (onnxruntime's Concat between NCHWc
    Convs). Values between blocked nodes are fresh; a ``ReorderInput`` converts what a
    blocked node reads from plain nodes, a ``ReorderOutput`` hands back each value plain
    nodes read, under its name."""
    blocked: dict[ir.Value, ir.Value] = {}  # plain value -> the blocked value computing it
    replaced: list[ir.Node] = []

    def blocked_read(value: ir.Value, before: ir.Node) -> ir.Value:
        read = blocked.get(value)
        if read is None:
            _whole_block_functions(graph, value)
            reorder = ir.node("ReorderInput", [value], domain=WHOLE_BLOCK_DOMAIN)
            reorder.outputs[0].name = _fresh(graph, "reorder_")
            graph.insert_before(before, reorder)
            touched.add(reorder)
            read = blocked[value] = reorder.outputs[0]
        return read

    shapes: dict[ir.Value, ir.Shape] = {}  # plain value -> its shape (as the tool infers)

    def put(old: ir.Node, new: ir.Node) -> None:
        graph.insert_after(old, new)
        new.outputs[0].name = _fresh(graph, "nchwc_")
        blocked[old.outputs[0]] = new.outputs[0]
        shape = _conv_shape(old) if old.op_type == "Conv" else shapes.get(old.inputs[0])
        if shape is not None:
            shapes[old.outputs[0]] = shape
        replaced.append(old)
        touched.add(new)

    for node in list(graph):
        if node in touched or node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
            continue
        for value in node.inputs:
            if value is not None and value.shape is not None and value not in shapes:
                shapes[value] = value.shape
        if (
            node.op_type == "Conv"
            and len(node.inputs) == 3
            and node.inputs[0] is not None
            and node.inputs[0].shape is not None
            and node.inputs[0].shape.is_static()
            and all(v is not None and _constant_array(v) is not None for v in node.inputs[1:])
        ):
            weights = [
                _initializer(graph, _fresh(graph, "reorder_w_"), _constant_array(v))
                for v in node.inputs[1:]
                if v is not None
            ]
            read = blocked_read(node.inputs[0], node)
            _whole_block_conv(graph, node)
            attributes = {k: a.value for k, a in node.attributes.items()}
            put(node, ir.node("Conv", [read, *weights], attributes, domain=WHOLE_BLOCK_DOMAIN))
        elif (
            node.op_type in _WHOLE_BLOCK_ELEMENTWISE
            and len(node.inputs) == 1
            and node.inputs[0] in blocked
        ):
            _whole_block_elementwise(graph, node.op_type)
            activation = ir.node(node.op_type, [blocked[node.inputs[0]]], domain=WHOLE_BLOCK_DOMAIN)
            put(node, activation)
        elif (
            node.op_type == "Add"
            and len(node.inputs) == 2
            and all(v in blocked for v in node.inputs)
        ):
            put(node, ir.node("Add", [blocked[v] for v in node.inputs], name=node.name))
    gone = set(replaced)
    for old in replaced:
        plain = old.outputs[0]
        readers = [use for use in plain.uses() if use.node not in gone]
        if not readers and plain not in graph.outputs:
            continue
        back = ir.node("ReorderOutput", [blocked[plain]], domain=WHOLE_BLOCK_DOMAIN)
        graph.insert_after(blocked[plain].producer(), back)
        touched.add(back)
        name = plain.name
        for use in readers:
            use.node.replace_input_with(use.idx, back.outputs[0])
        _take_graph_outputs(graph, plain, back.outputs[0])
        plain.name = None
        back.outputs[0].name = name
        back.outputs[0].shape = plain.shape or shapes.get(plain)
        back.outputs[0].type = plain.type or ir.TensorType(ir.DataType.FLOAT)
    for old in reversed(replaced):
        for index in range(len(old.inputs)):
            old.replace_input_with(index, None)
        graph.remove(old, safe=True)
    for reorder in [n for n in graph if n.domain == WHOLE_BLOCK_DOMAIN]:
        if reorder.op_type == "ReorderInput" and not reorder.outputs[0].uses():
            graph.remove(reorder, safe=True)
    if graph.meta.get("functions"):
        graph.opset_imports.setdefault(WHOLE_BLOCK_DOMAIN, 1)


def _conv_shape(conv: ir.Node) -> ir.Shape | None:
    """The output shape of a 2-D Conv of static input and weight shapes."""
    data, weight = conv.inputs[0], conv.inputs[1]
    if data is None or weight is None or data.shape is None or weight.shape is None:
        return None
    (n, _, *spatial), (channels, _, *kernel) = data.shape.numpy(), weight.shape.numpy()
    rank = len(spatial)
    pads = conv.attributes["pads"].as_ints() if "pads" in conv.attributes else [0] * 2 * rank
    strides = conv.attributes["strides"].as_ints() if "strides" in conv.attributes else [1] * rank
    out = [
        (size + pads[i] + pads[i + rank] - kernel[i]) // strides[i] + 1
        for i, size in enumerate(spatial)
    ]
    return ir.Shape([n, channels, *out])


def _whole_block_functions(graph: ir.Graph, value: ir.Value) -> None:
    """The reorders' bodies, for values of ``value``'s shape (one shape per graph)."""
    functions = graph.meta.setdefault("functions", {})
    assert value.shape is not None
    shape = [int(d) for d in value.shape.numpy()]
    n, c = shape[0], shape[1]
    pixels = int(np.prod(shape[2:]))
    key = (WHOLE_BLOCK_DOMAIN, "ReorderInput")
    if key in functions:
        if functions[key][0] != shape:
            raise ValueError("block_layout_whole_channels: one shape per graph")
        return
    for name, first in (("ReorderInput", [n, c, pixels]), ("ReorderOutput", [n, pixels, c])):
        x = ir.Value(name="x")
        nodes = _regrouped(x, first, shape)
        functions[(WHOLE_BLOCK_DOMAIN, name)] = (shape, _whole_block(name, [x], nodes))


def _regrouped(x: ir.Value, first: list[int], shape: list[int]) -> list[ir.Node]:
    """Nodes viewing ``x`` as ``first`` (3-D), swapping its last two axes, viewing the
    result as ``shape``."""
    to_first = ir.node("Constant", [], attributes={"value": ir.tensor(np.array(first, np.int64))})
    to_shape = ir.node("Constant", [], attributes={"value": ir.tensor(np.array(shape, np.int64))})
    view = ir.node("Reshape", [x, to_first.outputs[0]])
    swap = ir.node("Transpose", [view.outputs[0]], attributes={"perm": [0, 2, 1]})
    back = ir.node("Reshape", [swap.outputs[0], to_shape.outputs[0]])
    return [to_first, to_shape, view, swap, back]


def _whole_block_conv(graph: ir.Graph, conv: ir.Node) -> None:
    """The blocked Conv's body: the plain Conv between the two reorders."""
    functions = graph.meta["functions"]
    signature = tuple(sorted((k, str(a)) for k, a in conv.attributes.items()))
    key = (WHOLE_BLOCK_DOMAIN, "Conv")
    if key in functions:
        if functions[key][0] != signature:
            raise ValueError("block_layout_whole_channels: one attribute set per Conv")
        return
    shape = functions[(WHOLE_BLOCK_DOMAIN, "ReorderInput")][0]
    n, c, pixels = shape[0], shape[1], int(np.prod(shape[2:]))
    x, w, b = (ir.Value(name=name) for name in ("x", "w", "b"))
    plain = _regrouped(x, [n, pixels, c], shape)
    body = ir.node(
        "Conv", [plain[-1].outputs[0], w, b], {k: a.value for k, a in conv.attributes.items()}
    )
    nodes = [*plain, body, *_regrouped(body.outputs[0], [n, c, pixels], shape)]
    functions[key] = (signature, _whole_block("Conv", [x, w, b], nodes))


def _whole_block_elementwise(graph: ir.Graph, op_type: str) -> None:
    functions = graph.meta["functions"]
    if (WHOLE_BLOCK_DOMAIN, op_type) not in functions:
        x = ir.Value(name="x")
        body = _whole_block(op_type, [x], [ir.node(op_type, [x])])
        functions[(WHOLE_BLOCK_DOMAIN, op_type)] = (None, body)


def _whole_block(name: str, inputs: list[ir.Value], nodes: list[ir.Node]) -> ir.Function:
    body = ir.Graph(inputs, [nodes[-1].outputs[0]], nodes=nodes, opset_imports={"": 20})
    return ir.Function(WHOLE_BLOCK_DOMAIN, name, "", graph=body, attributes=[])


def split_shape(graph: ir.Graph, rng: random.Random, touched: set[ir.Node]) -> None:
    """onnxruntime's transpose optimizer on ``Shape(Transpose(x, perm))``: a new ``Shape``
    of ``x`` under the old node's name (its output renamed) and a ``Gather`` of ``perm``
    from it taking the old output's name (dynamic BERT's attention)."""
    for node in list(graph):
        if node.op_type != "Shape" or node.domain not in ("", "ai.onnx") or node in touched:
            continue
        producer = node.inputs[0].producer() if node.inputs[0] is not None else None
        if (
            node.attributes
            or producer is None
            or producer.op_type != "Transpose"
            or "perm" not in producer.attributes
            or producer.inputs[0] is None
        ):
            continue
        perm = np.array(producer.attributes["perm"].as_ints(), np.int64)
        shape = ir.node("Shape", [producer.inputs[0]], name=node.name)
        shape.outputs[0].name = _fresh(graph, "shape_")
        indices = _initializer(graph, _fresh(graph, "perm_"), perm)
        gather = ir.node("Gather", [shape.outputs[0], indices], attributes={"axis": 0})
        gather.name = _fresh(graph, "Gather_")
        graph.insert_before(node, shape)
        _replace_node(graph, node, gather, touched)
        touched.add(shape)


REWRITES: dict[str, Rewrite] = {
    "rename_values": rename_values,
    "rename_nodes": rename_nodes,
    "reorder": reorder,
    "constants_to_initializers": constants_to_initializers,
    "fold_constants": fold_constants,
    "fuse_gemm": fuse_gemm,
    "fuse_conv_bn": fuse_conv_bn,
    "split_batch_norm": split_batch_norm,
    "merge_duplicates": merge_duplicates,
    "fuse_consecutive": fuse_consecutive,
    "merge_equal_constants": merge_equal_constants,
    "eliminate_no_ops": eliminate_no_ops,
    "insert_layout": insert_layout,
    "block_layout": block_layout,
    "block_layout_whole_channels": block_layout_whole_channels,
    "split_shape": split_shape,
}


def apply_tool(
    proto: onnx.ModelProto, rewrites: list[str], seed: int, *, keep_model_metadata: bool
) -> tuple[onnx.ModelProto, list[str | None], list[str | None]]:
    """The tool's output for ``proto`` and, per node of it in order, the name the node had
    in ``proto`` when no rewrite touched it (else None), and the name it had when it is a
    node of ``proto`` at all (else None: a node the tool made)."""
    rng = random.Random(seed)
    model = ir.from_proto(proto)
    graph = model.graph
    original_inputs = {
        node: (
            node.op_type,
            [v.name if v is not None else None for v in node.inputs],
            [v.is_initializer() if v is not None else None for v in node.inputs],
            [v.name for v in node.outputs],
        )
        for node in graph
    }
    names = {node: node.name for node in graph}
    graph.meta["names at start"] = {v.name for node in graph for v in node.outputs} | set(
        graph.initializers
    )
    touched: set[ir.Node] = set()
    for name in rewrites:
        REWRITES[name](graph, rng, touched)
    for _, function in graph.meta.get("functions", {}).values():
        model.functions[function.identifier()] = function
    for node in graph:
        node.metadata_props.clear()
        for value in node.outputs:
            value.metadata_props.clear()
    if not keep_model_metadata:
        model.metadata_props.clear()
    untouched: list[str | None] = []
    for node in graph:
        before = original_inputs.get(node)
        now = (
            node.op_type,
            [v.name if v is not None else None for v in node.inputs],
            [v.is_initializer() if v is not None else None for v in node.inputs],
            [v.name for v in node.outputs],
        )
        untouched.append(names.get(node) if node not in touched and before == now else None)
    return ir.to_proto(model), untouched, [names.get(node) for node in graph]
