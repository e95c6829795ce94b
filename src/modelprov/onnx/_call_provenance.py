"""Provenance of call nodes: merged metadata of a call, and the sources table after (un)wrapping.

A call node computes every source of the nodes it wraps: its metadata is their merge by
the policies (a call of one source carries that source verbatim), and it names them under
``modelprov.sources`` when it does not carry one source verbatim. Sources that no
main-graph node carries any more (they live in function bodies) go to the model's table.
"""

from __future__ import annotations

import onnx_ir as ir

from modelprov.core._correspond import all_nodes
from modelprov.core._provenance import Provenance, node_label
from modelprov.core._sources import (
    SourceTable,
    carries_source,
    collect_sources,
    dump_ids,
)
from modelprov.core.keys import NODE_SOURCES_KEY, TABLE_KEY
from modelprov.core.policy import DEFAULT_POLICIES, Policies

__all__ = ["call_metadata", "rewrite_table"]


def call_metadata(
    provenance: Provenance,
    indices: set[int],
    outputs: set[int],
    *,
    label: str,
    policies: Policies | None,
) -> dict[str, str]:
    """The metadata of a call computing the sources ``indices``."""
    ordered = sorted(indices)
    merged = provenance.merged_metadata(
        ordered, outputs, policies if policies is not None else DEFAULT_POLICIES, label=label
    )
    if len(ordered) == 1 and carries_source(label, merged, provenance.table[ordered[0]]):
        return merged
    if ordered:
        merged[NODE_SOURCES_KEY] = dump_ids(provenance.table.ids(ordered))
    return merged


def rewrite_table(model: ir.Model, table: SourceTable) -> None:
    """Stores in the model's table every source of ``table`` that no node carries verbatim."""
    nodes = all_nodes(model.graph)
    labels = [node_label(node, position) for position, node in enumerate(nodes)]
    _, node_ids = collect_sources(
        dict(model.metadata_props),
        [(label, dict(node.metadata_props)) for label, node in zip(labels, nodes, strict=True)],
        stored_table=table,
    )
    carried: set[str] = set()
    for label, node, ids in zip(labels, nodes, node_ids, strict=True):
        if NODE_SOURCES_KEY in node.metadata_props or len(ids) != 1 or ids[0] not in table:
            continue
        if carries_source(label, node.metadata_props, table.by_id(ids[0])):
            carried.add(ids[0])
    if all(source.id in carried for source in table):
        model.metadata_props.pop(TABLE_KEY, None)
    else:
        model.metadata_props[TABLE_KEY] = table.dumps(carried=carried)
