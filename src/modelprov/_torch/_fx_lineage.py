"""Which node of the user's torch.export program an FX node came from (its shared source id).

Backends decompose the ExportedProgram before translating it (torch.onnx with its own table,
the StableHLO lowering with torchax's), and each decomposition renames nodes. torch 2.13
records the way back in ``node.meta["from_node"]``: a list of ``NodeSource`` links, one per
pass, each naming the node it came from and, through its own ``from_node``, that node's
origin. The nodes of a fresh ``torch.export.export`` program have no ``from_node``; so the
roots of the chain (or the links whose ``graph_id`` is the user's program's graph) name the
node the user's program held. Both exporters write that name, so ONNX nodes and StableHLO
ops of one model can be joined on it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["export_node_names", "nodes_by_export_name"]

_MAX_LINKS = 10_000  # chains are short; the bound guards against cycles


def export_node_names(node: Any, original_graph_id: int | None = None) -> tuple[str, ...]:
    """Names of the user-program nodes ``node`` (a ``torch.fx.Node``) was made from.

    With ``original_graph_id`` (``id()`` of the user's program graph), the walk stops at links
    of that graph (at the roots when none is); without it, at the roots of the chain. A node
    without ``from_node`` is its own origin. Names are distinct, in the order the chain lists them.
    """
    found: list[str] = []
    pending: list[Any] = list(node.meta.get("from_node") or [])
    if not pending:
        return (str(node.name),)
    seen = 0
    while pending and seen < _MAX_LINKS:
        link = pending.pop(0)
        seen += 1
        parents = getattr(link, "from_node", None) or []
        graph_id = getattr(link, "graph_id", None)
        at_original = original_graph_id is not None and graph_id == original_graph_id
        if at_original or (original_graph_id is None and not parents):
            name = str(link.name)
            if name not in found:
                found.append(name)
            continue
        pending.extend(parents)
    if not found and original_graph_id is not None:
        return export_node_names(node)  # the program was copied on the way: use the roots
    return tuple(found)


def nodes_by_export_name(graph: Any, original_graph_id: int) -> dict[str, list[Any]]:
    """User-program node name -> the call nodes of ``graph`` (a decomposed ``torch.fx.Graph``)
    made from it and from it alone, in graph order."""
    members: dict[str, list[Any]] = {}
    for node in graph.nodes:
        if node.op == "call_function":
            sources = export_node_names(node, original_graph_id)
            if len(sources) == 1:
                members.setdefault(sources[0], []).append(node)
    return members
