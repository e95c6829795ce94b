"""modelprov.sources and SourceIndex: the original operations behind a node.

Reading a node's sources needs the whole model (the sources table, and the source ids of
nodes standing for themselves depend on the nodes before them), so the work is done once
per model by a ``SourceIndex`` (O(graph)) and each lookup is O(1). ``sources(model, node)``
keeps the index of the models it was last asked about and rebuilds it when the model's
sources table, its number of nodes or the asked node's metadata changed.
"""

from __future__ import annotations

import collections
import weakref
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import onnx
import onnx_ir as ir

from modelprov._base._gc import gc_paused
from modelprov._model_io._convert import ModelInput, model_input
from modelprov._model_io._duplicate_keys import merged_entries
from modelprov._model_io._proto_walk import graph_nodes as proto_nodes
from modelprov.core._sources import TABLE_KEY, Source, SourceTable, collect_sources, node_label
from modelprov.core._walks import all_nodes
from modelprov.errors import UsageError
from modelprov.keys import ATEN_DOMAIN, MODULE_DOMAIN

if TYPE_CHECKING:
    from torch.onnx import ONNXProgram

__all__ = ["SourceIndex", "function_body_sources", "node_sources", "proto_nodes", "sources"]

_PROTO_CACHE_SIZE = 2
"""ModelProto cannot be weakly referenced: the cache keeps this many of them alive."""


def _proto_metadata(node: onnx.NodeProto, label: str) -> dict[str, str]:
    return merged_entries(node.metadata_props, where=label)


class SourceIndex:
    """Every node's sources, read once: O(graph) to build, O(1) per lookup.

    A snapshot of the model when it was built; after changing the model's metadata or
    nodes, build a new one (``current()`` tells whether it still matches)::

        index = modelprov.SourceIndex(model)
        for node in model.graph:
            print(node.name, [s.fx_node for s in index.sources(node)])

    Args:
        model: an onnx_ir.Model, an onnx.ModelProto, a path (read as an onnx_ir.Model) or a
            torch.onnx.ONNXProgram (its onnx_ir.Model); lookups take nodes of that form.
    """

    def __init__(self, model: ModelInput) -> None:
        found = model_input(model, where="SourceIndex")
        with gc_paused():
            self._build(found)

    def _build(self, model: onnx.ModelProto | ir.Model) -> None:
        nodes: list[ir.Node] | list[onnx.NodeProto]
        if isinstance(model, ir.Model):
            nodes = all_nodes(model.graph)
            model_metadata: Mapping[str, str] = model.metadata_props
            metadata = [dict(node.metadata_props) for node in nodes]
            labels = [node_label(node.name, node.op_type, i) for i, node in enumerate(nodes)]
            self._top_level = len(model.graph)
        else:
            nodes = proto_nodes(model.graph)
            model_metadata = merged_entries(model.metadata_props, where="model")
            labels = [node_label(node.name, node.op_type, i) for i, node in enumerate(nodes)]
            metadata = [
                _proto_metadata(node, label) for node, label in zip(nodes, labels, strict=True)
            ]
            self._top_level = len(model.graph.node)
        # A strong reference from an index cached under an onnx_ir.Model would keep the
        # model alive forever; ModelProto cannot be weakly referenced.
        self._model: weakref.ref[ir.Model] | onnx.ModelProto = (
            weakref.ref(model) if isinstance(model, ir.Model) else model
        )
        self._table_text = model_metadata.get(TABLE_KEY)
        self._model_keys = len(model_metadata)
        table, node_ids = collect_sources(model_metadata, list(zip(labels, metadata, strict=True)))
        self._table = table
        self._nodes: list[ir.Node | onnx.NodeProto] = list(nodes)
        self._metadata = metadata
        self._sources = [[table.by_id(i) for i in ids] for ids in node_ids]
        self._position = {id(node): i for i, node in enumerate(nodes)}

    @property
    def table(self) -> SourceTable:
        """All sources of the model, in source order."""
        return self._table

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[tuple[ir.Node | onnx.NodeProto, list[Source]]]:
        """(node, sources) for every node, subgraphs included, parents before children."""
        for node, found in zip(self._nodes, self._sources, strict=True):
            yield node, list(found)

    def _find(self, node: onnx.NodeProto | ir.Node) -> int | None:
        position = self._position.get(id(node))
        if position is not None and self._nodes[position] is node:
            return position
        if isinstance(node, onnx.NodeProto):  # an equal copy of one of the model's nodes
            for position, candidate in enumerate(self._nodes):
                if candidate == node:
                    return position
        return None

    def sources(self, node: onnx.NodeProto | ir.Node) -> list[Source]:
        """The original operations a node computes, in source order (UsageError if the
        node was not in the model when the index was built)."""
        position = self._find(node)
        if position is None:
            raise UsageError(f"node {node.name!r} is not a node of this model")
        return list(self._sources[position])

    def current(self, node: onnx.NodeProto | ir.Node | None = None) -> bool:
        """Whether the model still matches the index: same sources table, same number of
        nodes, and (when given) the node is indexed with the metadata it has now.

        For an onnx_ir.Model the table is compared in full (by identity first); for a
        ModelProto, reading the table costs its size, so only the number of model
        metadata entries is compared — a table rewritten in place with nothing else
        changed needs a new index.
        """
        model = self._model() if isinstance(self._model, weakref.ref) else self._model
        if model is None:
            return False
        if isinstance(model, ir.Model):
            text = model.metadata_props.get(TABLE_KEY)
            if text is not self._table_text and text != self._table_text:
                return False
            if len(model.metadata_props) != self._model_keys:
                return False
            if len(model.graph) != self._top_level:
                return False
        else:
            if len(model.metadata_props) != self._model_keys:
                return False
            if len(model.graph.node) != self._top_level:
                return False
        if node is None:
            return True
        position = self._find(node)
        if position is None:
            return False
        if isinstance(node, ir.Node):
            return node.metadata_props == self._metadata[position]
        label = node_label(node.name, node.op_type, position)
        return _proto_metadata(node, label) == self._metadata[position]


_IR_CACHE: weakref.WeakKeyDictionary[ir.Model, SourceIndex] = weakref.WeakKeyDictionary()
_PROTO_CACHE: collections.OrderedDict[int, SourceIndex] = collections.OrderedDict()


def source_index(model: onnx.ModelProto | ir.Model) -> SourceIndex:
    """The cached index of a model, rebuilt when the model no longer matches it."""
    if isinstance(model, ir.Model):
        index = _IR_CACHE.get(model)
        if index is None or not index.current():
            index = _IR_CACHE[model] = SourceIndex(model)
        return index
    index = _PROTO_CACHE.get(id(model))
    if index is None or index._model is not model or not index.current():
        index = SourceIndex(model)
        _PROTO_CACHE[id(model)] = index
        while len(_PROTO_CACHE) > _PROTO_CACHE_SIZE:
            _PROTO_CACHE.popitem(last=False)
    _PROTO_CACHE.move_to_end(id(model))
    return index


def node_sources(model: ir.Model) -> list[tuple[ir.Node, list[Source]]]:
    """Every node of the model (subgraphs included) with its sources, in graph order."""
    return [(node, found) for node, found in source_index(model) if isinstance(node, ir.Node)]


def function_body_sources(model: ir.Model) -> list[tuple[ir.Node, list[Source]]]:
    """The nodes in the bodies of the model's own (user) functions with their sources.

    Bodies functionize made (the ATen and module function domains) are left out:
    they hold the first call's nodes, whose sources the calls carry.
    """
    own = (ATEN_DOMAIN, MODULE_DOMAIN)
    nodes = [
        node
        for function in model.functions.values()
        if function.domain not in own
        for node in ir.traversal.RecursiveGraphIterator(function)
    ]
    if not nodes:
        return []
    table, node_ids = collect_sources(
        dict(model.metadata_props),
        [
            (f"{node.name or node.op_type}@body{i}", dict(node.metadata_props))
            for i, node in enumerate(nodes)
        ],
    )
    return [
        (node, [table.by_id(i) for i in ids]) for node, ids in zip(nodes, node_ids, strict=True)
    ]


def sources(
    model: onnx.ModelProto | ir.Model | ONNXProgram, node: onnx.NodeProto | ir.Node
) -> list[Source]:
    """The original operations a node computes, in source order.

    Works for any model modelprov wrote (it reads the model's sources table) and for a
    plain torch.onnx export (one source per node, from the node's own metadata). The
    model is read once and kept indexed (see ``SourceIndex``), so looking up every node
    costs one pass over the model.

    Args:
        model: the model holding ``node`` (onnx.ModelProto, onnx_ir.Model, or a
            torch.onnx.ONNXProgram: its onnx_ir.Model).
        node: one of its nodes, of the same form (onnx.NodeProto or onnx_ir.Node).
    """
    model = model_input(model, where="sources(model, node)", path_as=None)
    if not (
        (isinstance(model, ir.Model) and isinstance(node, ir.Node))
        or (isinstance(model, onnx.ModelProto) and isinstance(node, onnx.NodeProto))
    ):
        raise UsageError(
            "sources(model, node) takes an onnx.ModelProto with one of its onnx.NodeProto, "
            f"or an onnx_ir.Model with one of its onnx_ir.Node; got {type(model).__name__} "
            f"and {type(node).__name__}"
        )
    index = source_index(model)
    if not index.current(node):
        index = _rebuild(model)
    return index.sources(node)


def _rebuild(model: onnx.ModelProto | ir.Model) -> SourceIndex:
    index = SourceIndex(model)
    if isinstance(model, ir.Model):
        _IR_CACHE[model] = index
    else:
        _PROTO_CACHE[id(model)] = index
    return index
