"""Name and structure anchors, for graphs rebuilt by black-box tools: the caller
(:mod:`modelprov.onnx.recover._recover`) pairs new nodes and values with old ones; replacements are
read off the paired nodes' inputs and outputs and the main graph's outputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx_ir as ir

from modelprov.core._correspond._graph import Matching, Snapshot, new_and_removed

__all__ = ["match_by_anchors"]


def match_by_anchors(
    before: Snapshot,
    graph: ir.Graph,
    after_nodes: list[ir.Node],
    node_anchors: Mapping[ir.Node, ir.Node],
    value_anchors: Mapping[ir.Value, ir.Value] | None = None,
    equal_values: Mapping[ir.Value, Sequence[ir.Value]] | None = None,
) -> Matching:
    """Matches ``graph`` against ``before`` by the given anchors: ``node_anchors`` maps new
    nodes to the old nodes they are, ``value_anchors`` new values to old values they equal,
    ``equal_values`` new values to further old values they equal."""
    same = dict(node_anchors)
    new_nodes, removed = new_and_removed(before, after_nodes, same)
    return Matching(
        same=same,
        new_nodes=new_nodes,
        removed=removed,
        replaced=_anchored_replacements(before, graph, same, value_anchors, equal_values),
        claimable=set(removed),
        values_persist=False,
    )


def _anchored_replacements(
    before: Snapshot,
    graph: ir.Graph,
    old_of: Mapping[ir.Node, ir.Node],
    value_anchors: Mapping[ir.Value, ir.Value] | None,
    equal_values: Mapping[ir.Value, Sequence[ir.Value]] | None = None,
) -> dict[ir.Value, list[ir.Value]]:
    """Value replacements when nodes were matched by anchors instead of identity."""
    replaced: dict[ir.Value, list[ir.Value]] = {}

    def record(old: ir.Value | None, new: ir.Value | None) -> None:
        if old is None or new is None:
            return
        olds = replaced.setdefault(new, [])
        if old not in olds:
            olds.append(old)

    for new_node, old_node in old_of.items():
        for old, new in zip(before.inputs[old_node], new_node.inputs, strict=False):
            record(old, new)
        for old, new in zip(before.outputs[old_node], new_node.outputs, strict=False):
            record(old, new)
    main_old = next(iter(before.graph_outputs.values()), ())
    for old, new in zip(main_old, graph.outputs, strict=False):
        record(old, new)
    for new, old in (value_anchors or {}).items():
        record(old, new)
    for new, olds in (equal_values or {}).items():
        for old in olds:
            record(old, new)
    return replaced
