"""The main graph's node order, kept by functionize and given back by inline.

functionize puts a call where its region's last node was, so nodes that ran between the
region's nodes (a Dropout's Identity between a parallel attention's and MLP's nodes, in a
transformers Phi layer) end up before the whole call, and inline puts the body back in one
block: the graph is the same but its node order is not. functionize therefore records the
original order as model metadata (:data:`NODE_ORDER_KEY`, a JSON array of the main graph's
node names) and inline sorts the graph back by it, then removes the key. Nodes the record does
not name (renamed or added after functionize) keep their place after the named node before
them; a topological sort (stable) keeps any order valid.
"""

from __future__ import annotations

import json

import onnx_ir as ir

from modelprov.errors import MetadataError
from modelprov.keys import NODE_ORDER_KEY

__all__ = ["NODE_ORDER_KEY", "record_node_order", "restore_node_order", "store_node_order"]


def record_node_order(model: ir.Model) -> list[str] | None:
    """The main graph's node names in order, when every node has a distinct name (else
    None: the order could not be told back)."""
    names = [node.name for node in model.graph]
    if any(not name for name in names) or len(set(names)) != len(names):
        return None
    return [str(name) for name in names]


def store_node_order(model: ir.Model, names: list[str] | None) -> None:
    """Write ``names`` (from :func:`record_node_order`) unless an order is already there
    (functionize of a functionized model: the first record describes the flat graph)."""
    if names is not None and NODE_ORDER_KEY not in model.metadata_props:
        model.metadata_props[NODE_ORDER_KEY] = json.dumps(names, separators=(",", ":"))


def restore_node_order(model: ir.Model) -> bool:
    """Sort the main graph by the recorded order and drop the record; returns whether the
    model had one. A record that is not a JSON array of strings is a MetadataError."""
    text = model.metadata_props.get(NODE_ORDER_KEY)
    if text is None:
        return False
    try:
        names = json.loads(text)
    except (ValueError, RecursionError):
        names = None
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise MetadataError(
            f"model metadata {NODE_ORDER_KEY!r} must be a JSON array of node names (as "
            "functionize writes it); remove the key to inline without restoring the order"
        )
    rank = {name: position for position, name in enumerate(names)}
    graph = model.graph
    nodes = list(graph)
    keys: dict[ir.Node, tuple[int, int]] = {}
    previous = -1
    for position, node in enumerate(nodes):
        known = rank.get(node.name or "")
        if known is not None:
            previous = known
        keys[node] = (previous if known is None else known, position)
    ordered = sorted(nodes, key=keys.__getitem__)
    if ordered != nodes:
        graph.remove(nodes, safe=False)
        graph.extend(ordered)
        graph.sort()  # stable: only moves what the record's order would break
    del model.metadata_props[NODE_ORDER_KEY]
    return True
