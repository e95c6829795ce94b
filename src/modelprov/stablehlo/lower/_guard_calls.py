"""ATen calls that only check a tensor, as identity nodes the later readers read through.

torch.export writes checks as ATen calls without results: ``aten._assert_tensor_metadata``
before each ``.to(...)`` says which dtype, device and layout its tensor has. They are ATen
calls of the user's program like any other, but one without results cannot be a
``stablehlo.composite``: JAX drops an op whose values nothing reads. With ``composites=True``
:func:`thread_guard_calls` makes each such call hand its checked tensor on: one
``aten.alias`` node right after the call's own node(s), made from the call (its
``from_node``, module stack and trace), and the decomposed nodes that read the tensor later
on behalf of the call's later users read it through that node. ``_composites`` then lowers
the call and its identity as one composite named by the call, its non-tensor arguments as
attributes, whose decomposition returns its operand: what the program computes is
unchanged (torchax lowers ``alias`` and the check to no op), and a backend that knows the
check's name sees it where the program had it, on the value it checks.

A guard call is an ATen call whose schema returns nothing and whose first argument is a
tensor. A call whose tensor no later user of the user's program reads stays as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from modelprov._torch._compat import is_op_overload, op_schema
from modelprov._torch._fx_lineage import nodes_by_export_name
from modelprov.stablehlo.lower._no_op_calls import same_value

__all__ = ["thread_guard_calls"]

_META_KEYS = ("nn_module_stack", "stack_trace", "source_fn_stack")


def _is_guard(node: torch.fx.Node) -> bool:
    """An ATen call returning nothing whose first argument is a tensor node."""
    if node.op != "call_function" or not is_op_overload(node.target):
        return False
    first = node.args[0] if node.args else None
    if not isinstance(first, torch.fx.Node) or not isinstance(first.meta.get("val"), torch.Tensor):
        return False
    return not op_schema(node.target).returns



def _checked_value(
    guard_nodes: Sequence[torch.fx.Node], checked: torch.fx.Node
) -> torch.fx.Node | None:
    """The decomposed node whose value the guard's own nodes check (the first argument
    they read), None when they disagree or read none."""
    read = {node.args[0] for node in guard_nodes if node.args}
    found = [item for item in read if isinstance(item, torch.fx.Node)]
    if len(found) != 1:
        return None
    return found[0] if same_value(found[0], checked) else None


def _later_readers(
    guard: torch.fx.Node,
    checked: torch.fx.Node,
    value: torch.fx.Node,
    after: torch.fx.Node,
    members: Mapping[str, Sequence[torch.fx.Node]],
    order: Mapping[torch.fx.Node, int],
    original_order: Mapping[torch.fx.Node, int],
) -> list[torch.fx.Node]:
    """Decomposed nodes after ``after`` that read ``value`` for a user of ``checked`` which
    comes after ``guard`` in the user's program."""
    readers: list[torch.fx.Node] = []
    for user in checked.users:
        if user is guard or original_order[user] < original_order[guard]:
            continue
        for node in members.get(user.name, ()):
            if order[node] > order[after] and value in node.all_input_nodes:
                readers.append(node)
    return readers


def thread_guard_calls(
    decomposed: torch.fx.GraphModule, original: torch.fx.Graph
) -> dict[str, str]:
    """Give each guard call of ``original`` one identity node in ``decomposed`` (edited in
    place) that its later readers read; returns identity node name -> the name of the
    decomposed node whose value it hands on."""
    graph = decomposed.graph
    members = nodes_by_export_name(graph, id(original))
    order = {node: n for n, node in enumerate(graph.nodes)}
    original_order = {node: n for n, node in enumerate(original.nodes)}
    threaded: dict[str, str] = {}
    for call in original.nodes:
        if not _is_guard(call):
            continue
        own = members.get(call.name)
        checked = call.args[0]
        assert isinstance(checked, torch.fx.Node)  # _is_guard
        if not own:
            continue  # the decompositions removed it: nothing of it is lowered
        value = _checked_value(own, checked)
        if value is None:
            continue
        last = max(own, key=order.__getitem__)
        readers = _later_readers(call, checked, value, last, members, order, original_order)
        if not readers:
            continue  # nothing reads the checked tensor later: no value to hand on
        with graph.inserting_after(last):
            node = graph.call_function(torch.ops.aten.alias.default, (value,))
        node.meta.update({k: call.meta[k] for k in _META_KEYS if k in call.meta})
        node.meta["val"] = value.meta["val"]
        if "tensor_meta" in value.meta:
            node.meta["tensor_meta"] = value.meta["tensor_meta"]
        node.meta["from_node"] = list(last.meta.get("from_node") or [])
        for reader in readers:
            reader.replace_input_with(value, node)
        threaded[str(node.name)] = str(value.name)
    if threaded:
        graph.lint()
        decomposed.recompile()
    return threaded
