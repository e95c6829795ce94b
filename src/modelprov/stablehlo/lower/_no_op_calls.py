"""ATen calls the decompositions removed as no-ops, back as one identity node each.

torch.export's decompositions delete the calls whose output is their first input (a ``to``
to the tensor's own dtype, ``alias``, ``contiguous``): their users read the input
directly. With ``composites=True`` such a call is still an ATen call of the user's program,
so :func:`restore_no_op_calls` puts one ``aten.alias`` node back in the decomposed graph for
it (``from_node`` naming the call, its module stack and trace) and makes the users that
read its value through it read the new node. ``_composites`` then lowers it as a composite
named by the call, whose decomposition returns its operand (torchax lowers ``alias`` to no
op): what the program computes is unchanged, and a backend that knows the call's name sees
it where the program had it.

A use is rerouted only when it is certain to be the call's: the user's decomposed nodes read
the input's lowered value, and none of the user's other arguments has that value. A call
none of whose uses is certain stays as it was (no node).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from modelprov._torch._compat import is_op_overload
from modelprov._torch._fx_lineage import export_node_names, nodes_by_export_name

__all__ = ["NO_OP_PASS", "restore_no_op_calls", "same_value"]

NO_OP_PASS = "modelprov_no_op_call"
"""The ``pass_name`` of the ``from_node`` link of each restored node."""

_META_KEYS = ("nn_module_stack", "stack_trace", "val", "tensor_meta", "source_fn_stack")


def _tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def same_value(node: torch.fx.Node, source: torch.fx.Node) -> bool:
    """True when ``node``'s output has ``source``'s shape and dtype (an identity's)."""
    mine, theirs = node.meta.get("val"), source.meta.get("val")
    return (
        _tensor(mine)
        and _tensor(theirs)
        and tuple(mine.shape) == tuple(theirs.shape)
        and mine.dtype == theirs.dtype
    )



def _tensor_inputs(node: torch.fx.Node) -> list[torch.fx.Node]:
    return [n for n in node.all_input_nodes if _tensor(n.meta.get("val"))]


def restore_no_op_calls(decomposed: torch.fx.GraphModule, original: torch.fx.Graph) -> list[str]:
    """Insert one ``aten.alias`` node per removed no-op call of ``original`` into
    ``decomposed`` (edited in place) and reroute its certain uses; returns the calls
    restored, by name."""
    graph = decomposed.graph
    members = nodes_by_export_name(graph, id(original))
    placeholders = {n.name: n for n in graph.nodes if n.op == "placeholder"}
    restored: dict[str, torch.fx.Node] = {}  # original call -> its new node

    def lowered(item: torch.fx.Node, steps: int = 0, *, new: bool = True) -> torch.fx.Node | None:
        """The decomposed node whose value is original node ``item``'s (``new``: a restored
        node counts; without, the node the decompositions left)."""
        if new and item.name in restored:
            return restored[item.name]
        if item.op == "placeholder":
            return placeholders.get(item.name)
        group = members.get(item.name)
        if group:
            leaving = [n for n in group if any(u not in group for u in n.users)]
            return leaving[0] if len(leaving) == 1 else None
        first = item.args[0] if item.args else None
        if isinstance(first, torch.fx.Node) and steps < 10_000:
            return lowered(first, steps + 1, new=new)
        return None

    for call in original.nodes:
        if call.op != "call_function" or not is_op_overload(call.target):
            continue
        if members.get(call.name) or not call.args or not isinstance(call.args[0], torch.fx.Node):
            continue
        source = call.args[0]
        if not same_value(call, source):
            continue  # a folded constant, a dead call: no identity
        value, read = lowered(source), lowered(source, new=False)
        if value is None or read is None:
            continue
        reads = _certain_reads(call, read, members, lambda n: lowered(n, new=False), graph)
        if reads is None:
            continue
        with graph.inserting_before(graph.output_node()):  # moved before its users below
            node = graph.call_function(torch.ops.aten.alias.default, (value,))
        node.meta.update({k: call.meta[k] for k in _META_KEYS if k in call.meta})
        node.meta["from_node"] = [
            torch.fx.traceback.NodeSource(
                call, NO_OP_PASS, torch.fx.traceback.NodeSourceAction.CREATE
            )
        ]
        for reader, position in reads:
            if position is None:
                reader.replace_input_with(read, node)
            else:
                outputs = list(reader.args[0])
                outputs[position] = node
                reader.args = (type(reader.args[0])(outputs), *reader.args[1:])
        restored[call.name] = node
    order: dict[torch.fx.Node, float] = {node: n for n, node in enumerate(graph.nodes)}
    for name in reversed(list(restored)):  # a chain's last call first
        node = restored[name]
        if not node.users:  # a chain whose last call stayed: nothing reads it
            graph.erase_node(restored.pop(name))
            continue
        # right before its first user's group: every call's nodes stay contiguous
        first = min(
            (_group_start(user, members, original) for user in node.users),
            key=order.__getitem__,
        )
        first.prepend(node)
        order[node] = (order.get(node.prev, order[first] - 1) + order[first]) / 2
    if restored:
        graph.lint()
        decomposed.recompile()
    return list(restored)


def _group_start(
    node: torch.fx.Node, members: Mapping[str, Sequence[torch.fx.Node]], original: torch.fx.Graph
) -> torch.fx.Node:
    """The first decomposed node of the call ``node`` was made from (``node`` itself when
    it was made from several, or is a restored node or the output)."""
    if node.op != "call_function":
        return node
    sources = export_node_names(node, id(original))
    group = members.get(sources[0]) if len(sources) == 1 else None
    return group[0] if group and node in group else node


def _certain_reads(
    call: torch.fx.Node,
    value: torch.fx.Node,
    members: Mapping[str, Sequence[torch.fx.Node]],
    lowered: Any,
    graph: torch.fx.Graph,
) -> list[tuple[torch.fx.Node, int | None]] | None:
    """(decomposed node, output position or None) for every read of ``value`` that is
    certainly a use of ``call``; None when some use of ``call`` is uncertain. A use by
    another removed no-op call reads the restored node once that call is restored."""
    reads: list[tuple[torch.fx.Node, int | None]] = []
    for user in call.users:
        if user.op == "output":
            output = graph.output_node()
            originals = list(user.args[0]) if isinstance(user.args[0], (list, tuple)) else []
            mine = list(output.args[0]) if isinstance(output.args[0], (list, tuple)) else []
            if len(originals) != len(mine):
                return None
            for position, (was, now) in enumerate(zip(originals, mine, strict=True)):
                if was is call and now is value:
                    reads.append((output, position))
            continue
        others = [n for n in _tensor_inputs(user) if n is not call]
        if any(lowered(other) is value for other in others):
            return None  # the user reads the same value another way: which read is ours?
        group = members.get(user.name)
        if not group and user.args and user.args[0] is call and same_value(user, call):
            continue  # a removed no-op call of this one's value: it reads the restored node
        readers = [node for node in group or () if value in node.all_input_nodes]
        if not readers:
            return None  # a node of several calls, a folded use: not certain
        reads.extend((reader, None) for reader in readers)
    return reads if reads or call.users else None
