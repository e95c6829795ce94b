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


def _absorbing_step(kept_elsewhere: bool) -> tuple[Provenance, ir.Node]:
    """Old nodes A (sources a, and r kept only for recall) and B (source b) removed and
    absorbed by a new node N; a surviving node S has source s, and r too when
    ``kept_elsewhere``."""
    from modelprov.core._correspond import Change
    from modelprov.core._sources import Source, SourceTable

    table = SourceTable(Source.from_metadata(i, {"k": i}) for i in ("a", "b", "r", "s"))
    a, b, r, s = range(4)
    old_a, old_b = ir.node("Relu", []), ir.node("Relu", [])
    x = ir.Value(name="x")
    survivor = ir.node("Neg", [x])
    new = ir.node("Abs", [survivor.outputs[0]])
    graph = ir.Graph([x], new.outputs, nodes=[survivor, new])
    provenance = Provenance(
        table=table,
        node_sources={
            old_a: frozenset({a, r}),
            old_b: frozenset({b}),
            survivor: frozenset({s, r} if kept_elsewhere else {s}),
        },
        value_sources={},
        kept_for_recall={old_a: frozenset({r})},
    )
    change = Change(
        absorbed={new: {old_a, old_b}},
        replaced={},
        same={survivor: survivor},
        new_nodes=[new],
        removed=[old_a, old_b],
        eliminated=[],
        unanchored=[],
        after_nodes=[survivor, new],
        after_graphs=[graph],
    )
    provenance.apply(change, graph)
    return provenance, new


def test_a_claimed_node_passes_on_what_it_kept_only_for_recall_as_such() -> None:
    provenance, new = _absorbing_step(kept_elsewhere=False)
    assert provenance.node_sources[new] == {0, 1, 2}
    assert provenance.kept_for_recall == {new: {2}}  # still only for recall
    provenance, new = _absorbing_step(kept_elsewhere=True)
    assert provenance.node_sources[new] == {0, 1}  # the survivor keeps it
    assert provenance.kept_for_recall == {}
