"""Anchors for convolutions a tool rewrote into a blocked layout (onnxruntime's NCHWc), for
recover: what the values between them are when no name says it.

onnxruntime's ``all`` level (and any tool doing the same in a custom domain) replaces each
Conv (with the BatchNorm, activation and residual
Add it fuses) by a ``com.microsoft.nchwc`` Conv reading and writing a blocked layout, with
``ReorderInput`` / ``ReorderOutput`` converting at the block's borders. The values inside a
run of such Convs are fresh: nothing says which original operations each Conv computes.

Each blocked Conv is paired with the original Conv it replaces by structure: the same
kernel, strides, dilations and groups, weights of the same kernel size and at least the
original's channels (the tool pads them to its block), and the activation it fused among
the original Conv's readers; the original reads the value the blocked Conv reads (through
reorders), or one computed from the previous paired Conv's output without another Conv in
between. The fresh value a paired Conv reads is then the value the original Conv read (the
input of a Pad the tool folded into the Conv's pads), and its fused residual input is the
other operand of the original residual Add: each Conv claims its own block, no more.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx_ir as ir

from modelprov.onnx.recover._anchors_structure import (
    anchored_producer,
    same_attributes,
    same_type,
)

__all__ = ["anchor_blocked_convs"]

_PLAIN = ("", "ai.onnx")
_SAME = ("kernel_shape", "strides", "dilations", "group")
_STEPS = 6  # original nodes between two paired Convs (activation, Pad, Add, ...)


def anchor_blocked_convs(
    new_nodes: list[ir.Node], value_anchors: dict[ir.Value, ir.Value]
) -> set[ir.Value]:
    """Adds to ``value_anchors`` (new -> old) the fresh values blocked Convs read and write,
    and returns those of them that hold their old value in the blocked layout: they compute
    what the old value is (for the claims), with their elements in another order, so they
    are not that value's output (``output_of``) for a reader comparing tensors."""
    paired: dict[ir.Node, ir.Node] = {}
    taken: set[ir.Node] = set()
    named = set(value_anchors)
    plain_reads: set[ir.Value] = set()
    for node in new_nodes:
        if node.domain in _PLAIN or node.op_type != "Conv" or not node.inputs:
            continue
        read = _behind_reorders(node.inputs[0])
        if read is None:
            continue
        old_read = value_anchors.get(read)

        def fits(old: ir.Node, node: ir.Node = node) -> bool:
            return old not in taken and _fits(node, old)

        if old_read is not None:
            found = [old for old in _conv_readers(old_read) if fits(old)]
        else:
            before = _paired_upstream(read, paired)
            if before is None:
                continue
            found = _nearest_convs_downstream(paired[before], fits)
        if len(found) != 1:
            continue
        (old,) = found
        paired[node] = old
        taken.add(old)
        old_input = _behind_pad(old)
        if old_read is None and old_input is not None and same_type(old_input, read):
            value_anchors[read] = old_input
            plain_reads.add(read)
        _anchor_residual(node, old, value_anchors)
        _anchor_output(node, old, value_anchors)
    _anchor_blocked_inputs(new_nodes, value_anchors, named)
    return set(value_anchors) - named - plain_reads


def _behind_reorders(value: ir.Value | None) -> ir.Value | None:
    """The value a blocked node reads, before the reorders into its layout."""
    for _ in range(8):
        producer = value.producer() if value is not None else None
        if producer is None or producer.domain in _PLAIN or producer.op_type != "ReorderInput":
            return value
        value = producer.inputs[0] if producer.inputs else None
    return value


def _paired_upstream(value: ir.Value, paired: dict[ir.Node, ir.Node]) -> ir.Node | None:
    """The nearest paired blocked Conv upstream of a fresh value, through first inputs of
    the new nodes between (a fused activation such as QuickGelu)."""
    current: ir.Value | None = value
    for _ in range(4):
        producer = current.producer() if current is not None else None
        if producer is None:
            return None
        if producer in paired:
            return producer
        if producer.domain not in _PLAIN and producer.op_type == "Conv":
            return None  # an unpaired Conv: nothing to follow
        current = producer.inputs[0] if producer.inputs else None
    return None


def _conv_readers(value: ir.Value) -> list[ir.Node]:
    """Original Convs reading ``value`` in their data slot, directly or through a Pad."""
    found = []
    for use in value.uses():
        reader = use.node
        if use.idx != 0:
            continue
        if _is_conv(reader):
            found.append(reader)
        elif _is_pad(reader):
            found.extend(
                u.node for u in reader.outputs[0].uses() if u.idx == 0 and _is_conv(u.node)
            )
    return found


def _nearest_convs_downstream(old: ir.Node, fits: Callable[[ir.Node], bool]) -> list[ir.Node]:
    """The original Convs that ``fits`` accepts nearest downstream of ``old``'s output, with
    no other Conv in between (a residual chain repeats equal blocks further down)."""
    seen: set[ir.Node] = set()
    frontier = [old.outputs[0]]
    for _ in range(_STEPS):
        found: list[ir.Node] = []
        following: list[ir.Value] = []
        for value in frontier:
            for use in value.uses():
                reader = use.node
                if reader in seen:
                    continue
                seen.add(reader)
                if _is_conv(reader):
                    if use.idx == 0 and _is_conv(reader) and fits(reader):
                        found.append(reader)
                    continue
                if _is_pad(reader):
                    found.extend(
                        u.node
                        for u in reader.outputs[0].uses()
                        if u.idx == 0 and _is_conv(u.node) and fits(u.node)
                    )
                    continue
                following.extend(reader.outputs)
        if found:
            return found
        frontier = following
    return []


def _fits(node: ir.Node, old: ir.Node) -> bool:
    """True when the blocked Conv ``node`` can be the original Conv ``old`` (module
    docstring)."""
    for name in _SAME:
        mine, theirs = node.attributes.get(name), old.attributes.get(name)
        if (mine is None) != (theirs is None) or (mine is not None and str(mine) != str(theirs)):
            return False
    pads, old_pads = node.attributes.get("pads"), old.attributes.get("pads")
    if str(pads) != str(old_pads) and _behind_pad(old) is old.inputs[0]:
        return False  # other pads, and no Pad the tool could have folded in
    if len(node.inputs) < 2 or len(old.inputs) < 2:
        return False
    weight, old_weight = node.inputs[1], old.inputs[1]
    if weight is None or old_weight is None or weight.shape is None or old_weight.shape is None:
        return False
    if not weight.shape.is_static() or not old_weight.shape.is_static():
        return False
    shape, old_shape = weight.shape.numpy(), old_weight.shape.numpy()
    if len(shape) != len(old_shape) or len(shape) < 2:
        return False
    if shape[2:] != old_shape[2:] or shape[0] < old_shape[0]:
        return False
    activation = node.attributes.get("activation")
    return activation is None or _reaches_op(old, activation.as_string())


def _reaches_op(old: ir.Node, op_type: str) -> bool:
    """True when an ``op_type`` node reads ``old``'s output, or the output of a residual Add
    reading it (what a fused activation stands for)."""
    readers = [use.node for use in old.outputs[0].uses()]
    readers += [
        use.node
        for reader in readers
        if reader.op_type == "Add" and reader.domain in ("", "ai.onnx")
        for use in reader.outputs[0].uses()
    ]
    return any(reader.op_type == op_type for reader in readers)


def _anchor_residual(node: ir.Node, old: ir.Node, value_anchors: dict[ir.Value, ir.Value]) -> None:
    """A blocked Conv's fused residual input (its fourth) is the other operand of the Add
    reading the original Conv's output."""
    if len(node.inputs) < 4 or node.inputs[3] is None:
        return
    residual = _behind_reorders(node.inputs[3])
    if residual is None or residual in value_anchors:
        return
    adds = [
        use.node
        for use in old.outputs[0].uses()
        if use.node.op_type == "Add" and use.node.domain in ("", "ai.onnx")
    ]
    if len(adds) != 1 or len(adds[0].inputs) != 2:
        return
    others = [
        value for value in adds[0].inputs if value is not None and value is not old.outputs[0]
    ]
    if len(others) == 1 and same_type(others[0], residual):
        value_anchors[residual] = others[0]


def _anchor_output(node: ir.Node, old: ir.Node, value_anchors: dict[ir.Value, ir.Value]) -> None:
    """A paired Conv's fresh output is the last original value of what it fused: the
    original Conv's output, the residual Add's, or that of the activation reading either
    (a node the tool left beside it, such as a QuickGelu, then reads that value)."""
    output = node.outputs[0] if node.outputs else None
    if output is None or output in value_anchors:
        return
    end = old.outputs[0]
    if len(node.inputs) > 3 and node.inputs[3] is not None:
        adds = [
            use.node
            for use in end.uses()
            if use.node.op_type == "Add" and use.node.domain in _PLAIN
        ]
        if len(adds) != 1:
            return
        end = adds[0].outputs[0]
    activation = node.attributes.get("activation")
    if activation is not None:
        fused = [use.node for use in end.uses() if use.node.op_type == activation.as_string()]
        if len(fused) != 1:
            return
        end = fused[0].outputs[0]
    if same_type(end, output):
        value_anchors[output] = end


def _anchor_blocked_inputs(
    new_nodes: list[ir.Node], value_anchors: dict[ir.Value, ir.Value], named: set[ir.Value]
) -> None:
    """Fresh values read by nodes whose outputs are known, downstream first (a chain of
    them anchors back to its start):

    * a ``ReorderOutput`` converts a value, it computes nothing: its fresh input is the
      value its output is, in the blocked layout (the output of an activation the tool
      left beside a blocked Conv, also read by the next blocked Conv);
    * a node working in the blocked layout whose outputs were anchored here (not by
      name), and which is the original node of those outputs (a plain Concat of two
      blocked values; the same op in the blocked domain, as a pooling or an activation
      beside a blocked Conv), reads slot by slot what that original node read: a fresh
      input takes the original input's place.
    """
    for node in reversed(new_nodes):
        if node.domain not in _PLAIN and node.op_type == "ReorderOutput":
            _anchor_converted(node, value_anchors)
            continue
        if node.op_type in ("Conv", "ReorderInput") or not node.outputs:
            continue
        if all(value in named for value in node.outputs):
            continue
        old_node = anchored_producer(node, value_anchors)
        if (
            old_node is None
            or old_node.op_type != node.op_type
            or (old_node.domain != node.domain and old_node.domain not in _PLAIN)
            or len(old_node.inputs) != len(node.inputs)
            or not same_attributes(node, old_node)
        ):
            continue
        for new_input, old_input in zip(node.inputs, old_node.inputs, strict=True):
            if (
                new_input is not None
                and old_input is not None
                and new_input not in value_anchors
                and new_input.producer() is not None
                and same_type(old_input, new_input)
            ):
                value_anchors[new_input] = old_input


def _anchor_converted(reorder: ir.Node, value_anchors: dict[ir.Value, ir.Value]) -> None:
    """A ``ReorderOutput``'s fresh input is the old value its output is."""
    if len(reorder.inputs) != 1 or len(reorder.outputs) != 1:
        return
    (value,), (output,) = reorder.inputs, reorder.outputs
    old = value_anchors.get(output)
    if value is None or old is None or value in value_anchors or value.producer() is None:
        return
    value_anchors[value] = old


def _behind_pad(old: ir.Node) -> ir.Value | None:
    """What the original Conv reads, before a Pad in front of it."""
    value = old.inputs[0] if old.inputs else None
    producer = value.producer() if value is not None else None
    if producer is not None and _is_pad(producer) and producer.inputs:
        return producer.inputs[0]
    return value


def _is_conv(node: ir.Node) -> bool:
    return node.op_type == "Conv" and node.domain in _PLAIN


def _is_pad(node: ir.Node) -> bool:
    return node.op_type == "Pad" and node.domain in _PLAIN
