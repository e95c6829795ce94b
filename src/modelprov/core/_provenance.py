"""Provenance of an onnx_ir model in memory: which sources each node and value carries.

Read it from a model (from modelprov's table, or from torch.onnx's per-node metadata),
apply the :class:`~modelprov.core._correspond.Change` of each step, write it back as metadata
merged by the policies.
"""

from __future__ import annotations

import dataclasses
import logging
import operator
from collections.abc import Iterable, Mapping, Sequence

import onnx_ir as ir

from modelprov.core import _sources, _stack_trace
from modelprov.core._correspond import Change, Snapshot
from modelprov.core._policy import DEFAULT_POLICIES, MergeContext, Policies
from modelprov.core._sources import (
    Source,
    SourceTable,
    carries_source,
    collect_sources,
    dump_ids,
    parse_ids,
)
from modelprov.core._walks import all_graphs, all_nodes, nodes_and_graphs
from modelprov.keys import (
    KEPT_FOR_RECALL_KEY,
    NODE_SOURCES_KEY,
    OUTPUT_OF_KEY,
    RESERVED_PREFIX,
    STACK_TRACE_KEY,
    TABLE_KEY,
)

__all__ = ["Provenance", "node_label"]

logger = logging.getLogger(__name__)


def _is_literal(node: ir.Node) -> bool:
    """A Constant node: a value written into the graph, not computed from others."""
    return node.op_type == "Constant" and not node.inputs and node.domain in ("", "ai.onnx")


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
    twins: dict[ir.Value, frozenset[int]] = dataclasses.field(default_factory=dict)
    """Per value that took other nodes' outputs' places (merged common subexpressions,
    removed no-ops), when it is no source's output (a ``Shape`` each lowering computes for
    itself): the sources of its producer and of those nodes, whose outputs meet there
    (what ``follow_output`` reads as the node's output sources)."""

    @classmethod
    def read(
        cls,
        model: ir.Model,
        *,
        trace_options: _stack_trace.TraceOptions | None = None,
        walked: tuple[list[ir.Node], list[ir.Graph]] | None = None,
    ) -> Provenance:
        """Reads provenance from a model modelprov wrote, or starts it from a plain export.
        ``walked``, when given, is ``nodes_and_graphs(model.graph)`` of the model as it is."""
        nodes, graphs = walked if walked is not None else nodes_and_graphs(model.graph)
        props = [node.metadata_props for node in nodes]
        table, node_ids = collect_sources(
            dict(model.metadata_props),
            (  # one pass: no list of pairs is kept
                (node.name or f"{node.op_type}@{position}", metadata)  # node_label
                for position, (node, metadata) in enumerate(zip(nodes, props, strict=True))
            ),
        )
        if trace_options is not None:
            table = SourceTable(_rewritten(source, trace_options) for source in table)
        node_sources: dict[ir.Node, frozenset[int]] = {}
        singles: dict[str, frozenset[int]] = {}  # one shared set per single source
        for node, ids in zip(nodes, node_ids, strict=True):
            if len(ids) == 1:
                found = singles.get(ids[0])
                if found is None:
                    found = singles[ids[0]] = frozenset((table.index_of(ids[0]),))
                node_sources[node] = found
            else:
                node_sources[node] = frozenset(table.index_of(i) for i in ids)
        provenance = cls(table=table, node_sources=node_sources, value_sources={})
        provenance.value_sources = provenance._read_value_sources(nodes, graphs)
        for position, (node, metadata) in enumerate(zip(nodes, props, strict=True)):
            marked = metadata.get(KEPT_FOR_RECALL_KEY)
            if marked is None:
                continue
            where = f"node {node_label(node, position)!r}"
            ids = parse_ids(marked, where=where, key=KEPT_FOR_RECALL_KEY)
            provenance.kept_for_recall[node] = (
                frozenset(table.index_of(i) for i in ids if i in table) & node_sources[node]
            )
        return provenance

    def _read_value_sources(
        self, nodes: Sequence[ir.Node], graphs: Sequence[ir.Graph]
    ) -> dict[ir.Value, frozenset[int]]:
        """Every node output's sources: its explicit ``output_of`` (which also counts on a
        node with several sources), else the rule of ``derived_value_sources``."""
        result: dict[ir.Value, frozenset[int]] = {}
        graph_outputs = {value for graph in graphs for value in graph.outputs}
        node_sources = self.node_sources
        empty: frozenset[int] = frozenset()
        for node in nodes:
            own = node_sources.get(node, empty)
            for value in node.outputs:
                explicit = value.metadata_props.get(OUTPUT_OF_KEY)
                if explicit is not None:
                    ids = parse_ids(explicit, where=f"value {value.name!r}", key=OUTPUT_OF_KEY)
                    result[value] = frozenset(
                        self.table.index_of(i) for i in ids if i in self.table
                    )
                elif len(own) == 1:  # the rule of _derived, in the same pass
                    result[value] = (
                        own if _leaves(value, own, graph_outputs, node_sources) else empty
                    )
        return result

    def derived_value_sources(
        self, model: ir.Model, *, nodes: Sequence[ir.Node] | None = None
    ) -> dict[ir.Value, frozenset[int]]:
        """Default rule: a value is a source's output when it leaves that source's nodes.
        ``nodes``, when given, is ``all_nodes(model.graph)`` (read once by the caller)."""
        if nodes is None:
            nodes, graphs = nodes_and_graphs(model.graph)
        else:
            graphs = all_graphs(model.graph)
        return self._derived(nodes, graphs)

    def _derived(
        self, nodes: Sequence[ir.Node], graphs: Sequence[ir.Graph]
    ) -> dict[ir.Value, frozenset[int]]:
        """``derived_value_sources`` of these nodes (``graphs``: the graph and its
        subgraphs, whose outputs leave every source)."""
        graph_outputs = {value for graph in graphs for value in graph.outputs}
        node_sources = self.node_sources
        empty: frozenset[int] = frozenset()
        result: dict[ir.Value, frozenset[int]] = {}
        for node in nodes:
            own = node_sources.get(node, empty)
            if len(own) != 1:
                continue
            for value in node.outputs:
                result[value] = own if _leaves(value, own, graph_outputs, node_sources) else empty
        return result

    def apply(self, change: Change, graph: ir.Graph, before: Snapshot | None = None) -> None:
        """Moves sources along one step's change (surviving nodes keep theirs); ``graph``
        is the graph after the change, as ``correspond`` compared it, and ``before`` (when
        given) the snapshot it was compared with: a new value that replaced the output of a
        removed Identity is also the output of the Identity's input when the same new node
        took over that input's producer (the Identity and its producer went in one step).

        A node computes the sources of the nodes it took over. From a constant it folded
        it takes only sources that are not operations computing on data elsewhere (a
        constant torch's exporter shares belongs to the operation it was created for); from
        a literal (a Constant node) only sources that computed nothing but literals, and
        nothing from what lies behind a ``Shape`` or ``Size`` it folded. Such sources are
        given to it only if no node keeps them otherwise (recall wins), and marked
        (:data:`KEPT_FOR_RECALL_KEY`).
        """
        empty: frozenset[int] = frozenset()
        node_sources = self.node_sources
        recall = self.kept_for_recall
        constant = change.constant
        kinds: list[tuple[set[int], set[int]]] = []  # (operations, non-literal), when needed

        def source_kinds() -> tuple[set[int], set[int]]:
            """Sources of nodes computing on data, and of nodes that are not literals."""
            if not kinds:
                operations: set[int] = set()
                computing: set[int] = set()
                for old, ids in node_sources.items():
                    if old not in constant:
                        operations.update(ids)
                    elif not _is_literal(old):
                        computing.update(ids)
                kinds.append((operations, operations | computing))
            return kinds[0]

        updated: dict[ir.Node, frozenset[int]] = {}
        deferred: dict[ir.Node, set[int]] = {}
        for node, old in change.same.items():
            marked = recall.get(old) if recall else None
            if marked:
                updated[node] = node_sources.get(old, empty) - marked
                deferred.setdefault(node, set()).update(marked)
            else:
                updated[node] = node_sources.get(old, empty)  # the same set: no copy
        no_nodes: set[ir.Node] = set()
        for node, claimed in change.absorbed.items():
            computed = set(updated.get(node, empty))
            own_outputs = change.produced.get(node, no_nodes)
            if own_outputs and _is_literal(node):
                # A literal standing for equal literals (a tool merged them) computes none.
                own_outputs = {old for old in own_outputs if not _is_literal(old)}
            folded: list[ir.Node] = []  # constants it only folded: decided below
            for old_node in claimed:
                if old_node in constant and old_node not in own_outputs:
                    folded.append(old_node)
                    continue
                marked = recall.get(old_node) if recall else None
                if marked:
                    computed.update(node_sources.get(old_node, empty) - marked)
                    deferred.setdefault(node, set()).update(marked)
                else:
                    computed.update(node_sources.get(old_node, empty))
            if not folded:
                updated[node] = frozenset(computed)
                continue
            merged = set(computed)
            operations, computing = source_kinds()
            for old_node in folded:
                # A literal belongs to its source only where the source computes nothing
                # else: the exporter shares literals between lowerings.
                owners = computing if _is_literal(old_node) else operations
                for index in node_sources.get(old_node, empty):
                    if index in computed or index not in owners:
                        merged.add(index)
                    else:
                        deferred.setdefault(node, set()).add(index)
            updated[node] = frozenset(merged)
        for node, extra in change.fallback.items():
            for old_node in extra:
                deferred.setdefault(node, set()).update(node_sources.get(old_node, empty))
        kept_for_recall: dict[ir.Node, frozenset[int]] = {}
        if deferred:
            strict: set[int] = set().union(*updated.values())
            for node, indices in deferred.items():
                missing = frozenset(indices - strict)
                if missing:
                    updated[node] = updated.get(node, empty) | missing
                    kept_for_recall[node] = missing
        self.kept_for_recall = kept_for_recall
        value_sources = self.value_sources
        for new_value, olds in change.replaced.items():
            merged = set(value_sources.get(new_value, empty))
            for old_value in olds:
                merged.update(value_sources.get(old_value, empty))
                if before is not None:
                    for aliased in _aliased_values(old_value, new_value, change, before):
                        merged.update(value_sources.get(aliased, empty))
            value_sources[new_value] = frozenset(merged)
            if not merged:
                self._merge_twins(new_value, olds, change)
        walked = change.after_graphs and change.after_graphs[0] is graph
        current = change.after_nodes if walked else all_nodes(graph)
        kept: set[int] = set().union(*[updated.setdefault(node, empty) for node in current])
        for node in change.removed:
            for index in node_sources.get(node, empty):
                if index not in kept:
                    self.lost.add(index)
        self.lost -= kept
        self.node_sources = updated
        live_values = {value for node in current for value in node.outputs}
        self.value_sources = {
            value: sources
            for value, sources in value_sources.items()
            if value in live_values or value.producer() is None
        }
        if self.twins:
            self.twins = {
                value: sources for value, sources in self.twins.items() if value in live_values
            }

    def _merge_twins(self, new_value: ir.Value, olds: Sequence[ir.Value], change: Change) -> None:
        """Records in :attr:`twins` the sources of the nodes whose outputs ``new_value``
        replaced, with those of its producer's (kept) node."""
        producer = new_value.producer()
        if producer is None:
            return
        twins = [
            old.producer()
            for old in olds
            if old is not new_value
            and (node := old.producer()) is not None
            and node is not producer
        ]
        if not twins:
            return
        empty: frozenset[int] = frozenset()
        kept = change.same.get(producer)
        found = set(self.twins.get(new_value, empty))
        for node in [kept, *twins]:
            if node is not None:
                found.update(self.node_sources.get(node, empty))
                for value in node.outputs:
                    found.update(self.twins.get(value, empty))
        if found:
            self.twins[new_value] = frozenset(found)

    def write(
        self,
        model: ir.Model,
        *,
        policies: Policies | None = None,
        trace_options: _stack_trace.TraceOptions | None = None,
        walked: tuple[list[ir.Node], list[ir.Graph]] | None = None,
    ) -> None:
        """Writes merged node and value metadata and the sources table into ``model``.
        ``walked``, when given, is ``nodes_and_graphs(model.graph)`` of the model as it is."""
        policies = policies if policies is not None else DEFAULT_POLICIES
        max_bytes = trace_options.max_bytes if trace_options is not None else None
        table = self.table
        scopes = _KeyScopes(policies)
        source_keys: set[str] | None = None  # every source's keys, when first needed
        nodes, graphs = walked if walked is not None else nodes_and_graphs(model.graph)
        derived = self._derived(nodes, graphs)
        carried: set[str] = set()
        scoped: dict[int, bool] = {}  # per source: has a value-scoped key
        own_ids: dict[int, str | None] = {}  # per source: see _own_id
        empty: frozenset[int] = frozenset()
        node_sources = self.node_sources
        value_sources = self.value_sources
        kept_for_recall = self.kept_for_recall
        for position, node in enumerate(nodes):
            own = node_sources.get(node, empty)
            label = node.name or f"{node.op_type}@{position}"  # node_label, inlined
            index = next(iter(own)) if len(own) == 1 else -1
            verbatim = index >= 0 and max_bytes is None
            if verbatim:
                has_scoped = scoped.get(index)
                if has_scoped is None:
                    has_scoped = _has_scoped_key(table, index, scopes, scoped)
                verbatim = not has_scoped
            merged: Mapping[str, str]
            if verbatim:
                # One source, nothing to merge or budget: its metadata as it is (what
                # merged_metadata returns then, without asking a policy key by key).
                merged = table.metadata_of(index)
            else:
                outputs: set[int] = set()
                for value in node.outputs:
                    outputs.update(value_sources.get(value, empty))
                if not outputs and self.twins:
                    for value in node.outputs:
                        outputs.update(self.twins.get(value, empty) & own)
                merged = self.merged_metadata(
                    sorted(own), outputs, policies, label=label, max_bytes=max_bytes
                )
            props = node.metadata_props
            foreign: dict[str, str] = {}
            # Equal contents in the same order (the order is the file's): nothing to write.
            if props != merged or not all(map(operator.eq, props, merged)):
                # Unless the node holds exactly ``merged`` already (a node left as it was
                # read): ``merged``, then the node's keys of no source and not modelprov's.
                if source_keys is None:
                    source_keys = set().union(*map(table.metadata_of, range(len(table))))
                foreign = {
                    key: value
                    for key, value in props.items()
                    if key not in source_keys and not key.startswith(RESERVED_PREFIX)
                }
                props.clear()
                props.update(merged)
                props.update(foreign)
            if kept_for_recall:
                marked = kept_for_recall.get(node)
                if marked:
                    props[KEPT_FOR_RECALL_KEY] = dump_ids(table.ids(marked))
            if verbatim:
                # merged is the source's metadata: carried when free of modelprov's keys and
                # the node's own source id is the source's.
                if index in own_ids:
                    own_id = own_ids[index]
                else:
                    own_id = own_ids[index] = _own_id(table, index)
                source_id = table.id_of(index)
                # A node holding keys of no source besides (a rewrite rule's name) does not
                # hold its source verbatim: read back, they would join the source's keys.
                if not foreign and own_id is not None and (own_id or f"node:{label}") == source_id:
                    carried.add(source_id)
                else:
                    props[NODE_SOURCES_KEY] = dump_ids([source_id])
            elif index >= 0 and not foreign and self._carries(index, label, merged):
                carried.add(table.id_of(index))
            elif own:
                props[NODE_SOURCES_KEY] = dump_ids(table.ids(own))
            for value in node.outputs:
                current = value_sources.get(value)
                found = derived.get(value)
                if verbatim and current is own and found is own and not value.metadata_props:
                    # The output of the node's one source, as derived, no value-scoped key:
                    # _write_value would find nothing to remove or write.
                    continue
                if current or found or value.metadata_props:
                    self._write_value(value, policies, found, scoped, scopes)
        if len(carried) == len(table):
            model.metadata_props.pop(TABLE_KEY, None)
        else:
            model.metadata_props[TABLE_KEY] = table.dumps(carried=carried)

    def _carries(self, index: int, label: str, merged: Mapping[str, str]) -> bool:
        """True when a node's own metadata identifies and holds its one source verbatim."""
        return carries_source(label, merged, self.table[index])

    def _write_value(
        self,
        value: ir.Value,
        policies: Policies,
        derived: frozenset[int] | None,
        scoped: dict[int, bool],
        scopes: _KeyScopes,
    ) -> None:
        """Writes a value's ``output_of`` and value-scoped keys (``scoped``: the cache of
        ``_has_scoped_key``; ``scopes``: of ``Policies.is_value_scoped``)."""
        current = self.value_sources.get(value)
        props = value.metadata_props
        if not current and not derived and not props:
            return  # nothing to remove, nothing to write
        if props:
            for key in [key for key in props if scopes[key]]:
                del props[key]
            props.pop(OUTPUT_OF_KEY, None)
        if (current or frozenset()) != (derived or frozenset()):
            props[OUTPUT_OF_KEY] = dump_ids(self.table.ids(current or ()))
        if not current or not any(
            _has_scoped_key(self.table, index, scopes, scoped) for index in current
        ):
            return  # no source has a value-scoped key: nothing to merge
        sources = sorted(current)
        keys = _ordered_keys(self.table.metadata_of(index) for index in sources)
        for key in keys:
            if not scopes[key]:
                continue
            values, ids = _values_of(self.table, sources, key)
            if not values:
                continue
            ctx = MergeContext(key, value.name or "", (True,) * len(values), ids)
            result = policies.merge(key, values, ctx)
            if result is not None:
                props[key] = result

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
        table = self.table
        if len(indices) == 1:
            # One source: its values as they are, except value-scoped keys (their policy
            # decides, e.g. from_output drops a value the node does not produce).
            index = indices[0]
            source_id, flag = table.id_of(index), index in outputs
            for key, value in table.metadata_of(index).items():
                if not policies.is_value_scoped(key):
                    merged[key] = value
                    continue
                if value:
                    ctx = MergeContext(key, label, (flag,), (source_id,))
                    result = policies.merge(key, [value], ctx)
                else:  # an empty value counts as none, as with several sources
                    result = policies.merge(key, [], MergeContext(key, label))
                if result is not None:
                    merged[key] = result
            per_key: dict[str, tuple[list[str], list[str], list[bool]]] = {}
        else:
            # Every key's non-empty values with their source ids and output flags, keys in
            # order of first appearance, values in source order: one pass over the sources.
            per_key = {}
            for index in indices:
                source_id = table.id_of(index)
                flag = index in outputs
                for key, value in table.metadata_of(index).items():
                    found = per_key.get(key)
                    if found is None:
                        found = per_key[key] = ([], [], [])
                    if value:
                        found[0].append(value)
                        found[1].append(source_id)
                        found[2].append(flag)
        for key, (values, ids, flags) in per_key.items():
            result = policies.merge(key, values, MergeContext(key, label, tuple(flags), tuple(ids)))
            if result is not None:
                merged[key] = result
        if max_bytes is not None:
            trace = merged.get(STACK_TRACE_KEY)
            if trace is not None and len(trace.encode()) > max_bytes:
                values, _ = _values_of(table, indices, STACK_TRACE_KEY)
                merged[STACK_TRACE_KEY] = _stack_trace.format_merged_traces(
                    values, max_bytes=max_bytes
                )
        return merged


def _leaves(
    value: ir.Value,
    own: frozenset[int],
    graph_outputs: set[ir.Value],
    node_sources: Mapping[ir.Node, frozenset[int]],
) -> bool:
    """True when ``value`` leaves the nodes of its producer's sources ``own``: it is a graph
    output, or a node without all of ``own`` reads it."""
    if value in graph_outputs:
        return True
    for use in value.uses():  # a loop: cheaper than any() over a generator
        sources = node_sources.get(use.node)
        if sources is not own and (sources is None or not own <= sources):
            return True
    return False


class _KeyScopes(dict[str, bool]):
    """Per key, ``Policies.is_value_scoped``, asked once."""

    def __init__(self, policies: Policies) -> None:
        super().__init__()
        self._policies = policies

    def __missing__(self, key: str) -> bool:
        found = self[key] = self._policies.is_value_scoped(key)
        return found


def _has_scoped_key(
    table: SourceTable, index: int, scopes: _KeyScopes, known: dict[int, bool]
) -> bool:
    """True when the source at ``index`` has a value-scoped key (``known`` caches it)."""
    found = known.get(index)
    if found is None:
        found = known[index] = any(scopes[key] for key in table.metadata_of(index))
    return found


def _own_id(table: SourceTable, index: int) -> str | None:
    """What a node holding the source at ``index`` verbatim calls its source: the FX node
    name ('' for ``node:<label>``), or None when the metadata holds modelprov's own keys
    (then the node's metadata is not the source's alone)."""
    metadata = table.metadata_of(index)
    if any(key.startswith(RESERVED_PREFIX) for key in metadata):
        return None
    return _sources.fx_node_name(metadata)


def _ordered_keys(sources: Iterable[Mapping[str, str]]) -> list[str]:
    """The keys of these metadata, in order of first appearance."""
    keys: dict[str, None] = {}
    for metadata in sources:
        keys.update(dict.fromkeys(metadata))
    return list(keys)


def _values_of(
    table: SourceTable, indices: Iterable[int], key: str
) -> tuple[list[str], tuple[str, ...]]:
    values: list[str] = []
    ids: list[str] = []
    for index in indices:
        value = table.metadata_of(index).get(key)
        if value:
            values.append(value)
            ids.append(table.id_of(index))
    return values, tuple(ids)


def _aliased_values(
    old_value: ir.Value, new_value: ir.Value, change: Change, before: Snapshot
) -> list[ir.Value]:
    """The values ``old_value`` was an alias of through removed Identity nodes, as long as
    the node producing ``new_value`` took over their producers (so it computes them)."""
    producer = new_value.producer()
    taken = change.absorbed.get(producer, set()) if producer is not None else set()
    found: list[ir.Value] = []
    value = old_value
    while True:
        producer = before.producer.get(value)
        if (
            producer is None
            or producer.op_type != "Identity"
            or producer.domain not in ("", "ai.onnx")
            or producer not in taken
        ):
            return found
        inputs = before.inputs.get(producer, ())
        source = inputs[0] if inputs else None
        if source is None or before.producer.get(source) not in taken:
            return found
        found.append(source)
        value = source
