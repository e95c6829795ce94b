"""Provenance: read and write are each other's inverse; a node given several sources gets
their keys merged by the policies."""

from __future__ import annotations

import json

import onnx
import onnx_ir as ir

from modelprov._cli._examples import plain_export_bytes
from modelprov.core._policy import Policies, join, max
from modelprov.core._provenance import Provenance
from modelprov.keys import FX_NODE_KEY, NODE_SOURCES_KEY


def _export() -> ir.Model:
    return ir.from_proto(onnx.load_from_string(plain_export_bytes("mlp")))


def _metadata(model: ir.Model) -> list[dict[str, str]]:
    return [dict(node.metadata_props) for node in model.graph] + [dict(model.metadata_props)]


def test_write_after_read_changes_nothing_the_second_time() -> None:
    model = _export()
    Provenance.read(model).write(model)
    written = _metadata(model)
    Provenance.read(model).write(model)
    assert _metadata(model) == written
    provenance = Provenance.read(model)
    assert all(len(sources) == 1 for sources in provenance.node_sources.values())


def test_a_node_with_several_sources_gets_them_merged_by_policy() -> None:
    model = _export()
    fx_texts = [node.metadata_props[FX_NODE_KEY] for node in model.graph]
    provenance = Provenance.read(model)
    first, second = list(model.graph)[:2]
    ids = {provenance.table.id_of(i) for n in (first, second) for i in provenance.node_sources[n]}
    provenance.node_sources[first] = (
        provenance.node_sources[first] | provenance.node_sources[second]
    )
    provenance.write(model)
    assert set(json.loads(first.metadata_props[NODE_SOURCES_KEY])) == ids
    # fx_node's default policy is join("\n"), in source order
    assert first.metadata_props[FX_NODE_KEY] == "\n".join(fx_texts[:2])
    again = Provenance.read(model)
    assert {again.table.id_of(i) for i in again.node_sources[first]} == ids


def test_user_policies_decide_a_user_key() -> None:
    model = _export()
    nodes = list(model.graph)[:3]
    for rank, node in enumerate(nodes):
        node.metadata_props["custom.max"] = str(rank + 0.5)
        node.metadata_props["custom.note"] = f"n{rank}"
    provenance = Provenance.read(model)
    indices = sorted({index for node in nodes for index in provenance.node_sources[node]})
    policies = Policies({"custom.max": max, "custom.note": join("; ")})
    merged = provenance.merged_metadata(indices, set(), policies, label="n")
    assert merged["custom.max"] == "2.5"
    assert merged["custom.note"] == "n0; n1; n2"
