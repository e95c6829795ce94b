"""SourceIndex and the cached sources(): equal to reading the whole model per call, and
rebuilt when the model's table or a node's metadata changes."""

from __future__ import annotations

import functools
import json
import warnings

import onnx_ir as ir
import pytest
import torch

import modelprov
from modelprov._cli import _examples
from modelprov.core._sources import TABLE_KEY, Source, SourceTable, collect_sources, node_label
from modelprov.errors import InvalidModelError, UsageError
from modelprov.onnx._lookup import SourceIndex, proto_nodes


@functools.cache
def _plain(name: str) -> ir.Model:
    module, args = _examples.EXAMPLES[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, args, dynamo=True, optimize=False, verbose=False)
    assert program is not None
    model: ir.Model = program.model
    return model


def plain_export(name: str) -> ir.Model:
    """torch.onnx.export(dynamo=True, optimize=False) of an example (cached)."""
    return _plain(name)


def _read_whole_model(model: ir.Model, node: ir.Node) -> list[Source]:
    """What sources() did before the index: parse everything, then find the node."""
    nodes = list(ir.traversal.RecursiveGraphIterator(model.graph))
    table, node_ids = collect_sources(
        dict(model.metadata_props),
        [
            (node_label(each.name, each.op_type, i), dict(each.metadata_props))
            for i, each in enumerate(nodes)
        ],
    )
    position = next(i for i, each in enumerate(nodes) if each is node)
    return [table.by_id(i) for i in node_ids[position]]


@pytest.fixture(scope="module")
def optimized() -> ir.Model:
    """A model with a sources table (several nodes merge several sources)."""
    return modelprov.optimize(plain_export("transformer_encoder").clone())


def test_index_equals_reading_the_whole_model(optimized: ir.Model) -> None:
    assert optimized.metadata_props.get(TABLE_KEY)
    index = SourceIndex(optimized)
    merged = 0
    for node in optimized.graph:
        expected = _read_whole_model(optimized, node)
        assert index.sources(node) == expected
        assert modelprov.sources(optimized, node) == expected
        merged += len(expected) > 1
    assert merged > 0
    assert len(index) == len(optimized.graph)


def test_proto_index_equals_ir_index(optimized: ir.Model) -> None:
    proto = ir.serde.serialize_model(optimized)
    index = SourceIndex(proto)
    for node, proto_node in zip(optimized.graph, proto_nodes(proto.graph), strict=True):
        assert modelprov.sources(proto, proto_node) == index.sources(proto_node)
        assert index.sources(proto_node) == modelprov.sources(optimized, node)


def _edit_table(model: ir.Model, source_id: str, key: str, value: str) -> None:
    """Rewrites one stored source's metadata in the model's table."""
    table, order = SourceTable.loads(model.metadata_props[TABLE_KEY])
    edited = SourceTable(
        Source.from_metadata(s.id, {**s.metadata, key: value}) if s.id == source_id else s
        for s in table
    )
    text = edited.dumps()
    document = json.loads(text)
    assert document["format"] == "modelprov.sources" and order
    model.metadata_props[TABLE_KEY] = text


def test_cached_sources_follow_a_changed_table(optimized: ir.Model) -> None:
    model = optimized.clone()
    node = next(n for n in model.graph if len(modelprov.sources(model, n)) > 1)
    before = modelprov.sources(model, node)
    stored = {s.id for s in SourceTable.loads(model.metadata_props[TABLE_KEY])[0]}
    target = next(s.id for s in before if s.id in stored)
    _edit_table(model, target, "user.tag", "changed")
    after = modelprov.sources(model, node)
    assert [s.id for s in after] == [s.id for s in before]
    assert {s.id: s.metadata.get("user.tag") for s in after}[target] == "changed"
    assert after == _read_whole_model(model, node)


def test_cached_sources_follow_node_changes() -> None:
    model = plain_export("double_transpose").clone()
    first = next(iter(model.graph))
    assert modelprov.sources(model, first) == _read_whole_model(model, first)
    first.metadata_props["user.note"] = "edited"
    assert modelprov.sources(model, first)[0].metadata["user.note"] == "edited"
    added = ir.Node("", "Identity", [first.outputs[0]], name="added_identity")
    model.graph.append(added)
    found = modelprov.sources(model, added)
    assert [s.id for s in found] == ["node:added_identity"]
    model.graph.remove(added, safe=True)
    with pytest.raises(ValueError, match="added_identity"):
        modelprov.sources(model, added)


def test_index_rejects_foreign_nodes_and_kinds(optimized: ir.Model) -> None:
    other = plain_export("double_transpose").clone()
    with pytest.raises(ValueError, match="not a node of this model"):
        SourceIndex(optimized).sources(next(iter(other.graph)))
    with pytest.raises(InvalidModelError, match="model.onnx"):
        SourceIndex("model.onnx")  # a path, but no file there
    with pytest.raises(UsageError, match="a path cannot hold the node"):
        modelprov.sources("model.onnx", next(iter(optimized.graph)))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="onnx_ir.Model with one of its onnx_ir.Node"):
        modelprov.sources(optimized, ir.serde.serialize_node(next(iter(optimized.graph))))
