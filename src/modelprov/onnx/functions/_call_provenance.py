"""Provenance of call nodes: merged metadata of a call, and the sources table after (un)wrapping.

A call node computes every source of the nodes it wraps: its metadata is their merge by
the policies (a call of one source carries that source verbatim), and it names them under
``modelprov.sources`` when it does not carry one source verbatim. Sources that no
main-graph node carries any more (they live in function bodies) go to the model's table.
"""

from __future__ import annotations

import onnx_ir as ir

from modelprov.core._policy import DEFAULT_POLICIES, Policies
from modelprov.core._provenance import Provenance, node_label
from modelprov.core._sources import (
    SourceTable,
    carries_source,
    collect_sources,
    dump_ids,
    original_metadata,
    own_source_id,
    parse_ids,
)
from modelprov.core._walks import all_nodes
from modelprov.errors import MetadataError
from modelprov.keys import NODE_SOURCES_KEY, TABLE_KEY

__all__ = ["call_metadata", "read_table", "rewrite_table"]


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


def read_table(model: ir.Model) -> SourceTable:
    """Every source of a model: its table and the sources its main-graph nodes carry (the
    table :meth:`Provenance.read` reads, without the per-node and per-value maps)."""
    nodes = all_nodes(model.graph)
    table, _ = collect_sources(
        dict(model.metadata_props),
        [(node_label(node, position), node.metadata_props) for position, node in enumerate(nodes)],
    )
    return table


def rewrite_table(model: ir.Model, table: SourceTable) -> None:
    """Stores in the model's table every source of ``table`` that no node carries verbatim.

    A node carries a source when it has no ``modelprov.sources`` list and its own metadata
    is that source's under the id it gives itself; sources named by a list must be in
    ``table`` (MetadataError otherwise).
    """
    carried: set[str] = set()
    for position, node in enumerate(all_nodes(model.graph)):
        metadata = node.metadata_props
        listed = metadata.get(NODE_SOURCES_KEY)
        if listed is not None:
            label = node_label(node, position)
            missing = [i for i in parse_ids(listed, where=f"node {label!r}") if i not in table]
            if missing:
                raise MetadataError(
                    f"node {label!r} names source {missing[0]!r}, which the model's "
                    f"{TABLE_KEY!r} table does not hold; the metadata was edited by hand or "
                    "the table is stale"
                )
            continue
        # The id first (modelprov's own keys never name it): most nodes share a carried one.
        source_id = own_source_id(node_label(node, position), metadata)
        if source_id in carried or source_id not in table:
            continue
        if dict(table.by_id(source_id).metadata) == original_metadata(metadata):
            carried.add(source_id)
    if all(source.id in carried for source in table):
        model.metadata_props.pop(TABLE_KEY, None)
    else:
        model.metadata_props[TABLE_KEY] = table.dumps(carried=carried)
