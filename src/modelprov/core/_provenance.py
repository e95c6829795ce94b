"""Provenance of an onnx_ir model in memory: which sources each node and value carries.

Read it from a model (from modelprov's table, or from torch.onnx's per-node metadata),
apply the :class:`~modelprov.core._correspond.Change` of each step, write it back as metadata
merged by the policies.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence

import onnx_ir as ir

from modelprov.core import _sources, _stack_trace
from modelprov.core._correspond import Change, all_graphs, all_nodes
from modelprov.core._sources import (
    Source,
    SourceTable,
    carries_source,
    collect_sources,
    dump_ids,
    parse_ids,
)
from modelprov.core.keys import (
    KEPT_FOR_RECALL_KEY,
    NODE_SOURCES_KEY,
    OUTPUT_OF_KEY,
    RESERVED_PREFIX,
    STACK_TRACE_KEY,
    TABLE_KEY,
)
from modelprov.core.policy import DEFAULT_POLICIES, MergeContext, Policies

__all__ = ["Provenance", "node_label"]

logger = logging.getLogger(__name__)


def node_label(node: ir.Node, position: int) -> str:
    """A node's name, or ``<op_type>@<position>`` for unnamed nodes."""
    return _sources.node_label(node.name, node.op_type, position)


def _rewritten(source: Source, options: _stack_trace.TraceOptions) -> Source:
    trace = source.metadata.get(STACK_TRACE_KEY)
    if not trace:
        return source
    metadata = dict(source.metadata)
    metadata[STACK_TRACE_KEY] = _stack_trace.rewrite_paths(trace, options)
    return Source.from_metadata(source.id, metadata, user_code=options.user_code)


@dataclasses.dataclass
class Provenance:
    """Sources per node and per value (the sources whose output a value is)."""

    table: SourceTable
    node_sources: dict[ir.Node, frozenset[int]]
    value_sources: dict[ir.Value, frozenset[int]]
    lost: set[int] = dataclasses.field(default_factory=set)
    kept_for_recall: dict[ir.Node, frozenset[int]] = dataclasses.field(default_factory=dict)
    """Per node, the sources it carries only so that they are not lost."""

    @classmethod
    def read(
        cls, model: ir.Model, *, trace_options: _stack_trace.TraceOptions | None = None
    ) -> Provenance:
        """Reads provenance from a model modelprov wrote, or starts it from a plain export."""
        nodes = all_nodes(model.graph)
        table, node_ids = collect_sources(
            dict(model.metadata_props),
            [
                (node_label(node, position), node.metadata_props)
                for position, node in enumerate(nodes)
            ],
        )
        if trace_options is not None:
            table = SourceTable(_rewritten(source, trace_options) for source in table)
        node_sources = {
            node: frozenset(table.index_of(i) for i in ids)
            for node, ids in zip(nodes, node_ids, strict=True)
        }
        provenance = cls(table=table, node_sources=node_sources, value_sources={})
        provenance.value_sources = provenance._read_value_sources(model, nodes)
        for position, node in enumerate(nodes):
            marked = node.metadata_props.get(KEPT_FOR_RECALL_KEY)
            if marked is None:
                continue
            where = f"node {node_label(node, position)!r}"
            ids = parse_ids(marked, where=where)
            provenance.kept_for_recall[node] = (
                frozenset(table.index_of(i) for i in ids if i in table) & node_sources[node]
            )
        return provenance

    def _read_value_sources(
        self, model: ir.Model, nodes: Sequence[ir.Node]
    ) -> dict[ir.Value, frozenset[int]]:
        derived = self.derived_value_sources(model, nodes=nodes)
        result: dict[ir.Value, frozenset[int]] = {}
        # Every node output: an explicit output_of also counts on a node with several sources.
        for value in (value for node in nodes for value in node.outputs):
            explicit = value.metadata_props.get(OUTPUT_OF_KEY)
            if explicit is not None:
                ids = parse_ids(explicit, where=f"value {value.name!r}")
                result[value] = frozenset(self.table.index_of(i) for i in ids if i in self.table)
            elif value in derived:
                result[value] = derived[value]
        return result

    def derived_value_sources(
        self, model: ir.Model, *, nodes: Sequence[ir.Node] | None = None
    ) -> dict[ir.Value, frozenset[int]]:
        """Default rule: a value is a source's output when it leaves that source's nodes.
        ``nodes``, when given, is ``all_nodes(model.graph)`` (read once by the caller)."""
        graph_outputs = {value for graph in all_graphs(model.graph) for value in graph.outputs}
        result: dict[ir.Value, frozenset[int]] = {}
        for node in all_nodes(model.graph) if nodes is None else nodes:
            own = self.node_sources.get(node, frozenset())
            if len(own) != 1:
                continue
            for value in node.outputs:
                consumers = [use.node for use in value.uses()]
                leaves = value in graph_outputs or any(
                    not own <= self.node_sources.get(consumer, frozenset())
                    for consumer in consumers
                )
                result[value] = own if leaves else frozenset()
        return result

    def apply(self, change: Change, graph: ir.Graph) -> None:
        """Moves sources along one step's change (surviving nodes keep theirs).

        A node computes the sources of the nodes it took over. From a constant it folded
        it takes only sources that are not operations computing on data elsewhere (a
        constant torch's exporter shares belongs to the operation it was created for), and
        nothing from what lies behind a ``Shape`` or ``Size`` it folded. Such sources are
        given to it only if no node keeps them otherwise (recall wins), and marked
        (:data:`KEPT_FOR_RECALL_KEY`).
        """
        operations: set[int] = set()
        for old, ids in self.node_sources.items():
            if old not in change.constant:
                operations.update(ids)
        updated: dict[ir.Node, frozenset[int]] = {}
        deferred: dict[ir.Node, set[int]] = {}
        for node, old in change.same.items():
            marked = self.kept_for_recall.get(old, frozenset())
            updated[node] = self.node_sources.get(old, frozenset()) - marked
            if marked:
                deferred.setdefault(node, set()).update(marked)
        for node, claimed in change.absorbed.items():
            computed = set(updated.get(node, frozenset()))
            own_outputs = change.produced.get(node, set())
            for old_node in claimed:
                if old_node not in change.constant or old_node in own_outputs:
                    marked = self.kept_for_recall.get(old_node, frozenset())
                    computed.update(self.node_sources.get(old_node, frozenset()) - marked)
                    deferred.setdefault(node, set()).update(marked)
            merged = set(computed)
            for old_node in claimed:
                if old_node not in change.constant or old_node in own_outputs:
                    continue
                for index in self.node_sources.get(old_node, frozenset()):
                    if index in computed or index not in operations:
                        merged.add(index)
                    else:
                        deferred.setdefault(node, set()).add(index)
            updated[node] = frozenset(merged)
        for node, extra in change.fallback.items():
            for old_node in extra:
                deferred.setdefault(node, set()).update(
                    self.node_sources.get(old_node, frozenset())
                )
        strict: set[int] = set()
        for sources in updated.values():
            strict.update(sources)
        kept_for_recall: dict[ir.Node, frozenset[int]] = {}
        for node, indices in deferred.items():
            missing = frozenset(indices - strict)
            if missing:
                updated[node] = updated.get(node, frozenset()) | missing
                kept_for_recall[node] = missing
        self.kept_for_recall = kept_for_recall
        for new_value, olds in change.replaced.items():
            merged = set(self.value_sources.get(new_value, frozenset()))
            for old_value in olds:
                merged.update(self.value_sources.get(old_value, frozenset()))
            self.value_sources[new_value] = frozenset(merged)
        current = all_nodes(graph)
        kept: set[int] = set()
        for node in current:
            kept.update(updated.setdefault(node, frozenset()))
        for node in change.removed:
            for index in self.node_sources.get(node, frozenset()):
                if index not in kept:
                    self.lost.add(index)
        self.lost -= kept
        self.node_sources = updated
        live_values = {value for node in current for value in node.outputs}
        self.value_sources = {
            value: sources
            for value, sources in self.value_sources.items()
            if value in live_values or value.producer() is None
        }

    def write(
        self,
        model: ir.Model,
        *,
        policies: Policies | None = None,
        trace_options: _stack_trace.TraceOptions | None = None,
    ) -> None:
        """Writes merged node and value metadata and the sources table into ``model``."""
        policies = policies if policies is not None else DEFAULT_POLICIES
        max_bytes = trace_options.max_bytes if trace_options is not None else None
        source_keys = {key for source in self.table for key in source.metadata}
        nodes = all_nodes(model.graph)
        derived = self.derived_value_sources(model, nodes=nodes)
        carried: set[str] = set()
        scoped: dict[int, bool] = {}  # per source: has a value-scoped key
        for position, node in enumerate(nodes):
            indices = sorted(self.node_sources.get(node, frozenset()))
            label = node_label(node, position)
            if (
                len(indices) == 1
                and max_bytes is None
                and not _has_scoped_key(self.table, indices[0], policies, scoped)
            ):
                # One source, nothing to merge or budget: its metadata as it is (what
                # merged_metadata returns then, without asking a policy key by key).
                merged = dict(self.table[indices[0]].metadata)
            else:
                outputs: set[int] = set()
                for value in node.outputs:
                    outputs.update(self.value_sources.get(value, frozenset()))
                merged = self.merged_metadata(
                    indices, outputs, policies, label=label, max_bytes=max_bytes
                )
            foreign = {
                key: value
                for key, value in node.metadata_props.items()
                if key not in source_keys and not key.startswith(RESERVED_PREFIX)
            }
            node.metadata_props.clear()
            node.metadata_props.update(merged)
            node.metadata_props.update(foreign)
            marked = self.kept_for_recall.get(node)
            if marked:
                node.metadata_props[KEPT_FOR_RECALL_KEY] = dump_ids(self.table.ids(sorted(marked)))
            if len(indices) == 1 and self._carries(indices[0], label, merged):
                carried.add(self.table[indices[0]].id)
            elif indices:
                node.metadata_props[NODE_SOURCES_KEY] = dump_ids(self.table.ids(indices))
            for value in node.outputs:
                self._write_value(value, policies, derived.get(value), scoped)
        if len(carried) == len(self.table):
            model.metadata_props.pop(TABLE_KEY, None)
        else:
            model.metadata_props[TABLE_KEY] = self.table.dumps(carried=carried)

    def _carries(self, index: int, label: str, merged: Mapping[str, str]) -> bool:
        """True when a node's own metadata identifies and holds its one source verbatim."""
        return carries_source(label, merged, self.table[index])

    def _write_value(
        self,
        value: ir.Value,
        policies: Policies,
        derived: frozenset[int] | None,
        scoped: dict[int, bool],
    ) -> None:
        """Writes a value's ``output_of`` and value-scoped keys (``scoped``: the cache of
        ``_has_scoped_key``)."""
        sources = sorted(self.value_sources.get(value, frozenset()))
        if not sources and not derived and not value.metadata_props:
            return  # nothing to remove, nothing to write
        for key in [key for key in value.metadata_props if policies.is_value_scoped(key)]:
            del value.metadata_props[key]
        value.metadata_props.pop(OUTPUT_OF_KEY, None)
        if frozenset(sources) != (derived or frozenset()):
            value.metadata_props[OUTPUT_OF_KEY] = dump_ids(self.table.ids(sources))
        if not any(_has_scoped_key(self.table, index, policies, scoped) for index in sources):
            return  # no source has a value-scoped key: nothing to merge
        keys = _ordered_keys(self.table[index] for index in sources)
        for key in keys:
            if not policies.is_value_scoped(key):
                continue
            values, ids = _values_of(self.table, sources, key)
            if not values:
                continue
            ctx = MergeContext(key, value.name or "", (True,) * len(values), ids)
            result = policies.merge(key, values, ctx)
            if result is not None:
                value.metadata_props[key] = result

    def merged_metadata(
        self,
        indices: list[int],
        outputs: set[int],
        policies: Policies,
        *,
        label: str,
        max_bytes: int | None = None,
    ) -> dict[str, str]:
        """The merged metadata of a node with these sources (sorted indices)."""
        merged: dict[str, str] = {}
        sources = [self.table[index] for index in indices]
        for key in _ordered_keys(sources):
            if len(sources) == 1 and not policies.is_value_scoped(key):
                result: str | None = sources[0].metadata[key]
            else:
                values, ids = _values_of(self.table, indices, key)
                flags = tuple(self.table.index_of(i) in outputs for i in ids)
                result = policies.merge(key, values, MergeContext(key, label, flags, ids))
            if result is None:
                continue
            if (
                key == STACK_TRACE_KEY
                and max_bytes is not None
                and len(result.encode()) > max_bytes
            ):
                values, _ = _values_of(self.table, indices, key)
                result = _stack_trace.format_merged_traces(values, max_bytes=max_bytes)
            merged[key] = result
        return merged


def _has_scoped_key(
    table: SourceTable, index: int, policies: Policies, known: dict[int, bool]
) -> bool:
    """True when the source at ``index`` has a value-scoped key (``known`` caches it)."""
    found = known.get(index)
    if found is None:
        found = known[index] = any(policies.is_value_scoped(key) for key in table[index].metadata)
    return found


def _ordered_keys(sources: Iterable[Source]) -> list[str]:
    keys: dict[str, None] = {}
    for source in sources:
        keys.update(dict.fromkeys(source.metadata))
    return list(keys)


def _values_of(
    table: SourceTable, indices: Iterable[int], key: str
) -> tuple[list[str], tuple[str, ...]]:
    values: list[str] = []
    ids: list[str] = []
    for index in indices:
        source = table[index]
        value = source.metadata.get(key)
        if value:
            values.append(value)
            ids.append(source.id)
    return values, tuple(ids)
