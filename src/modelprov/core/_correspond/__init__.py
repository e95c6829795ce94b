"""Which original nodes each node of a changed graph now computes.

One engine for every kind of change (modelprov's own passes, onnxscript's optimizer and
rewriter, black-box tools): take a :class:`Snapshot` of the graph before, let the change
happen, then :func:`correspond` the graph after against it. A matcher pairs surviving nodes
and values (anchors); one claim phase then gives every removed node to the node(s) now
computing what it computed:

* :mod:`._anchors_identity`: identity anchors, for in-process passes;
* :mod:`._anchors_named`: anchors from names and structure, supplied by
  :mod:`modelprov.onnx.recover._recover` for black-box tools;
* :mod:`._claims`: the claim phase (fusion, constant folding, rules emitting several nodes);
* :mod:`._graph`: :class:`Snapshot` and :class:`Change`, shared by all (graph walks:
  :mod:`modelprov.core._walks`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx_ir as ir

from modelprov.core._correspond._anchors_identity import literal_key, match_by_identity
from modelprov.core._correspond._anchors_named import match_by_anchors
from modelprov.core._correspond._claims import assign_claims
from modelprov.core._correspond._graph import (
    METADATA_READERS,
    Change,
    Matching,
    Snapshot,
    data_inputs,
)
from modelprov.core._walks import nodes_and_graphs

__all__ = [
    "METADATA_READERS",
    "Change",
    "Matching",
    "Snapshot",
    "correspond",
    "data_inputs",
    "literal_key",
]


def correspond(
    before: Snapshot,
    graph: ir.Graph,
    *,
    node_anchors: Mapping[ir.Node, ir.Node] | None = None,
    value_anchors: Mapping[ir.Value, ir.Value] | None = None,
    equal_values: Mapping[ir.Value, Sequence[ir.Value]] | None = None,
) -> Change:
    """Compares ``graph`` (after a change) with the snapshot taken before it.

    Without ``node_anchors``, nodes and values are matched by identity (in-process passes).
    ``node_anchors`` maps new nodes to the old nodes they are (same computation), and
    ``value_anchors`` maps new values to old values they equal, for graphs rebuilt by
    other tools; ``equal_values`` (with ``node_anchors``) maps new values to further old
    values they equal (duplicates a tool merged).
    """
    after_nodes, after_graphs = nodes_and_graphs(graph)
    if node_anchors is None:
        matching = match_by_identity(before, after_graphs, after_nodes, value_anchors)
    else:
        matching = match_by_anchors(
            before, graph, after_nodes, node_anchors, value_anchors, equal_values
        )
    change = assign_claims(before, after_nodes, matching)
    change.after_nodes = after_nodes
    change.after_graphs = after_graphs
    return change
