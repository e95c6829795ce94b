"""modelprov.audit: what provenance a model carries, what it costs, and what is broken.

Reads metadata only: a model given by path is loaded without its external weights, so
auditing a model with gigabytes of weights takes about as much memory as its graph.
Duplicate keys and bad UTF-8 are found on the raw protobuf (onnx_ir keeps only the last
of duplicate keys).
"""

from __future__ import annotations

import dataclasses
import heapq
import os
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import onnx
import onnx_ir as ir

from modelprov._model_io._convert import ModelInput, model_input
from modelprov._model_io._proto_check import text_problems
from modelprov._model_io._proto_walk import subgraphs
from modelprov.core._printable import printable_json, printable_lines
from modelprov.core._sources import MAX_VALUE_BYTES, Source, collect_sources, node_label
from modelprov.errors import MetadataError
from modelprov.keys import ATEN_DOMAIN, AUDIT_FORMAT, MODULE_DOMAIN

__all__ = [
    "AuditReport",
    "FunctionUse",
    "InvalidMetadata",
    "KeyCoverage",
    "LargeValue",
    "audit",
    "has_provenance",
    "metadata_bytes",
]

VERSION = 1
LARGEST_VALUES = 10

_Text = str | bytes
_Entries = Sequence[tuple[_Text, _Text]]


@dataclasses.dataclass(frozen=True)
class KeyCoverage:
    """How many nodes carry one metadata key, and its bytes over those nodes."""

    key: str
    nodes: int
    fraction: float
    bytes: int


@dataclasses.dataclass(frozen=True)
class LargeValue:
    """One of the largest metadata values: where it is, its key and its size in bytes."""

    where: str
    key: str
    bytes: int


@dataclasses.dataclass(frozen=True)
class InvalidMetadata:
    """A metadata entry that makes the model invalid or that modelprov refuses."""

    where: str
    key: str
    problem: str


@dataclasses.dataclass(frozen=True)
class FunctionUse:
    """A model-local function, identified by (domain, name, overload), and its callers."""

    domain: str
    name: str
    overload: str
    nodes: int
    calls: int


@dataclasses.dataclass(frozen=True)
class AuditReport:
    """The provenance a model carries.

    Nodes are those of the main graph and its subgraphs (function bodies are counted under
    ``functions``). A node has no sources when none of its sources carries any metadata.
    Metadata bytes count UTF-8 key and value bytes of every entry (model, graphs, nodes,
    function bodies, values).
    """

    nodes: int
    nodes_without_sources: tuple[str, ...]
    sources: int
    fx_nodes: tuple[str, ...]
    source_lines: tuple[str, ...]
    module_paths: tuple[str, ...]
    key_coverage: tuple[KeyCoverage, ...]
    metadata_bytes: int
    metadata_bytes_by_scope: Mapping[str, int]
    largest_values: tuple[LargeValue, ...]
    invalid_metadata: tuple[InvalidMetadata, ...]
    functions: tuple[FunctionUse, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, versioned (``"format": "modelprov.audit", "version": 1``)."""
        return {
            "format": AUDIT_FORMAT,
            "version": VERSION,
            "nodes": self.nodes,
            "nodes_without_sources": list(self.nodes_without_sources),
            "sources": self.sources,
            "fx_nodes": {"count": len(self.fx_nodes), "names": list(self.fx_nodes)},
            "source_lines": {"count": len(self.source_lines), "lines": list(self.source_lines)},
            "module_paths": {"count": len(self.module_paths), "paths": list(self.module_paths)},
            "key_coverage": {
                item.key: {"nodes": item.nodes, "fraction": item.fraction, "bytes": item.bytes}
                for item in self.key_coverage
            },
            "metadata_bytes": {"total": self.metadata_bytes, **self.metadata_bytes_by_scope},
            "largest_values": [dataclasses.asdict(item) for item in self.largest_values],
            "invalid_metadata": [dataclasses.asdict(item) for item in self.invalid_metadata],
            "functions": [dataclasses.asdict(item) for item in self.functions],
        }

    def to_json(self) -> str:
        """The JSON report (:meth:`to_dict`) as text, control and bidi characters in names
        escaped (``core._printable``)."""
        return printable_json(self.to_dict(), indent=2)

    def to_text(self) -> str:
        """A human-readable report (names escaped: ``core._printable``)."""
        lines = [
            f"nodes: {self.nodes} ({len(self.nodes_without_sources)} without sources)",
            f"sources: {self.sources} ({len(self.fx_nodes)} FX nodes, "
            f"{len(self.source_lines)} source lines, {len(self.module_paths)} module paths)",
            f"metadata: {self.metadata_bytes:,} bytes ("
            + ", ".join(f"{k} {v:,}" for k, v in self.metadata_bytes_by_scope.items())
            + ")",
        ]
        lines += [f"  without sources: {name}" for name in self.nodes_without_sources[:20]]
        if len(self.nodes_without_sources) > 20:
            lines.append(f"  ... and {len(self.nodes_without_sources) - 20} more")
        lines.append("key coverage (share of nodes carrying the key):")
        lines += [
            f"  {item.fraction:4.2f} {item.key} ({item.nodes}/{self.nodes} nodes, "
            f"{item.bytes:,} bytes)"
            for item in self.key_coverage
        ]
        lines.append("largest values:")
        lines += [
            f"  {item.bytes:>10,} bytes  {item.where}: {item.key}" for item in self.largest_values
        ]
        lines.append(f"invalid metadata: {len(self.invalid_metadata) or 'none'}")
        lines += [
            f"  {item.where}: key {item.key!r}: {item.problem}" for item in self.invalid_metadata
        ]
        lines.append(f"functions: {len(self.functions) or 'none'}")
        lines += [
            f"  {item.domain}::{item.name}"
            + (f" (overload {item.overload!r})" if item.overload else "")
            + f": {item.nodes} nodes, {item.calls} calls"
            for item in self.functions
        ]
        return printable_lines(lines)


def has_provenance(found: Sequence[Source]) -> bool:
    """Whether a node's sources say anything: some source carries metadata."""
    return any(source.metadata for source in found)


@dataclasses.dataclass
class _Holder:
    """One object carrying metadata_props: its scope, a readable name, its raw entries."""

    scope: str
    where: str
    entries: _Entries


def _text(item: _Text) -> str:
    return item if isinstance(item, str) else item.decode("utf-8", "backslashreplace")


def _size(item: _Text) -> int:
    return len(item.encode("utf-8", "surrogatepass")) if isinstance(item, str) else len(item)


# --- walking a ModelProto -------------------------------------------------------------------


def _proto_entries(props: Any) -> _Entries:
    return [(entry.key, entry.value) for entry in props]


def _proto_graph(graph: onnx.GraphProto, label: str, counter: list[int]) -> Iterator[_Holder]:
    yield _Holder("graphs", f"graph {label!r}", _proto_entries(graph.metadata_props))
    for value in (*graph.input, *graph.output, *graph.value_info):
        yield _Holder("values", f"value {value.name!r}", _proto_entries(value.metadata_props))
    for tensor in graph.initializer:
        yield _Holder("values", f"value {tensor.name!r}", _proto_entries(tensor.metadata_props))
    for node in graph.node:
        position = counter[0]
        counter[0] += 1
        name = node_label(node.name, node.op_type, position)
        yield _Holder("nodes", name, _proto_entries(node.metadata_props))
        for subgraph in subgraphs(node):
            yield from _proto_graph(subgraph, subgraph.name or name, counter)


def _proto_holders(proto: onnx.ModelProto) -> Iterator[_Holder]:
    yield _Holder("model", "model", _proto_entries(proto.metadata_props))
    yield from _proto_graph(proto.graph, proto.graph.name, [0])
    for function in proto.functions:
        label = _function_label(function.domain, function.name, function.overload)
        yield _Holder("functions", label, _proto_entries(function.metadata_props))
        for node in function.node:
            yield _Holder(
                "functions",
                f"{label} node {node.name or node.op_type!r}",
                _proto_entries(node.metadata_props),
            )


_OWN_FUNCTIONS = (f"function {ATEN_DOMAIN}::", f"function {MODULE_DOMAIN}::")


def _is_user_body_node(holder: _Holder) -> bool:
    """A node in the body of a user's function: its metadata is its own source (the bodies
    functionize makes hold the first call's nodes, whose sources the calls carry)."""
    return (
        holder.scope == "functions"
        and " node " in holder.where
        and not holder.where.startswith(_OWN_FUNCTIONS)
    )


def _proto_functions(proto: onnx.ModelProto) -> list[FunctionUse]:
    calls: Counter[tuple[str, str, str]] = Counter()

    def count(nodes: Sequence[onnx.NodeProto]) -> None:
        for node in nodes:
            calls[(node.domain, node.op_type, node.overload)] += 1
            for subgraph in subgraphs(node):
                count(subgraph.node)

    count(proto.graph.node)
    for function in proto.functions:
        count(function.node)
    return [
        FunctionUse(
            f.domain, f.name, f.overload, len(f.node), calls[(f.domain, f.name, f.overload)]
        )
        for f in proto.functions
    ]


# --- walking an onnx_ir.Model ---------------------------------------------------------------


def _ir_graph(graph: ir.Graph | ir.Function, label: str, counter: list[int]) -> Iterator[_Holder]:
    scope = "functions" if isinstance(graph, ir.Function) else "nodes"
    if isinstance(graph, ir.Graph):
        yield _Holder("graphs", f"graph {label!r}", list(graph.metadata_props.items()))
        values: list[ir.Value] = [*graph.inputs, *graph.initializers.values()]
        values += [output for node in graph for output in node.outputs]
        for value in dict.fromkeys(values):
            props = list(value.metadata_props.items())
            if props:
                yield _Holder("values", f"value {value.name!r}", props)
    for node in graph:
        position = counter[0]
        counter[0] += 1
        name = node_label(node.name, node.op_type, position)
        where = name if scope == "nodes" else f"{label} node {node.name or node.op_type!r}"
        yield _Holder(scope, where, list(node.metadata_props.items()))
        for attribute in node.attributes.values():
            if attribute.type == ir.AttributeType.GRAPH:
                subgraphs = [attribute.as_graph()]
            elif attribute.type == ir.AttributeType.GRAPHS:
                subgraphs = list(attribute.as_graphs())
            else:
                continue
            for subgraph in subgraphs:
                yield from _ir_graph(subgraph, subgraph.name or name, counter)


def _ir_holders(model: ir.Model) -> Iterator[_Holder]:
    yield _Holder("model", "model", list(model.metadata_props.items()))
    yield from _ir_graph(model.graph, model.graph.name or "", [0])
    for (domain, name, overload), function in model.functions.items():
        label = _function_label(domain, name, overload)
        yield _Holder("functions", label, list(function.metadata_props.items()))
        yield from _ir_graph(function, label, [0])


def _ir_functions(model: ir.Model) -> list[FunctionUse]:
    calls: Counter[tuple[str, str, str]] = Counter()
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        calls[(node.domain, node.op_type, node.overload)] += 1
    for function in model.functions.values():
        for node in ir.traversal.RecursiveGraphIterator(function):
            calls[(node.domain, node.op_type, node.overload)] += 1
    return [
        FunctionUse(
            domain, name, overload, sum(1 for _ in function), calls[(domain, name, overload)]
        )
        for (domain, name, overload), function in model.functions.items()
    ]


def _function_label(domain: str, name: str, overload: str) -> str:
    return f"function {domain}::{name}" + (f":{overload}" if overload else "")


# --- the report -----------------------------------------------------------------------------


def _check(holder: _Holder) -> tuple[dict[str, str], list[InvalidMetadata]]:
    """The holder's valid metadata (last duplicate wins, as onnx_ir reads it) and its problems."""
    problems: list[InvalidMetadata] = []
    counts = Counter(holder.entries[i][0] for i in range(len(holder.entries)))
    valid: dict[str, str] = {}
    for key, count in counts.items():
        if count > 1:
            problems.append(
                InvalidMetadata(holder.where, _text(key), f"duplicate key ({count} entries)")
            )
    for key, value in holder.entries:
        if not isinstance(key, str):
            problems.append(InvalidMetadata(holder.where, _text(key), "key is not valid UTF-8"))
        elif not isinstance(value, str):
            problems.append(InvalidMetadata(holder.where, key, "value is not valid UTF-8"))
        elif _size(value) > MAX_VALUE_BYTES:
            problems.append(
                InvalidMetadata(
                    holder.where, key, f"value of {_size(value):,} bytes exceeds the 1 MiB limit"
                )
            )
        else:
            valid[key] = value
    return valid, problems


_SCOPES = ("nodes", "values", "model", "graphs", "functions")


def _bytes_by_scope(holders: Sequence[_Holder]) -> dict[str, int]:
    """UTF-8 key plus value bytes of every metadata entry, by scope: the one count."""
    scope_bytes = dict.fromkeys(_SCOPES, 0)
    for holder in holders:
        scope_bytes[holder.scope] += sum(_size(key) + _size(value) for key, value in holder.entries)
    return scope_bytes


def metadata_bytes(model: onnx.ModelProto | ir.Model) -> dict[str, int]:
    """Metadata bytes by scope (``nodes``, ``values``, ``model``, ``graphs``, ``functions``)
    and their ``total``: the figures :func:`audit` reports, for the HTML report too."""
    holders = list(
        _proto_holders(model) if isinstance(model, onnx.ModelProto) else _ir_holders(model)
    )
    scope_bytes = _bytes_by_scope(holders)
    return {"total": sum(scope_bytes.values()), **scope_bytes}


def audit(model: ModelInput) -> AuditReport:
    """Audits the provenance metadata of a model (ModelProto, onnx_ir.Model, a path or a
    torch.onnx.ONNXProgram).

    A path is read without its external weights. Raises InvalidModelError for an unreadable
    file and MetadataError when the model's sources table is corrupt.
    """
    where = os.fspath(model) if isinstance(model, str | os.PathLike) else "model"
    model = model_input(model, where="audit", path_as="proto", check_text=False)
    if isinstance(model, onnx.ModelProto):
        for problem in text_problems(model, metadata=False):  # metadata: reported below
            raise MetadataError(f"{where}: {problem}; fix it before auditing")
        holders = list(_proto_holders(model))
        functions = _proto_functions(model)
    else:
        holders = list(_ir_holders(model))
        functions = _ir_functions(model)
    invalid: list[InvalidMetadata] = []
    valid: list[dict[str, str]] = []
    for holder in holders:
        entries, problems = _check(holder)
        valid.append(entries)
        invalid.extend(problems)
    nodes = [
        (h.where, v)
        for h, v in zip(holders, valid, strict=True)
        if h.scope == "nodes" or _is_user_body_node(h)
    ]
    model_metadata = valid[0]
    table, node_ids = collect_sources(model_metadata, nodes)
    referenced = {source_id for ids in node_ids for source_id in ids}
    used = [source for source in table if source.id in referenced and source.metadata]
    without = tuple(
        label
        for (label, _), ids in zip(nodes, node_ids, strict=True)
        if not has_provenance([table.by_id(i) for i in ids])
    )

    carried: Counter[str] = Counter()
    key_bytes: Counter[str] = Counter()
    scope_bytes = _bytes_by_scope(holders)
    largest: list[tuple[int, int, LargeValue]] = []
    serial = 0
    for holder in holders:
        seen: set[_Text] = set()
        for key, value in holder.entries:
            size = _size(key) + _size(value)
            if holder.scope == "nodes":
                key_bytes[_text(key)] += size
                if key not in seen:
                    carried[_text(key)] += 1
                    seen.add(key)
            item = LargeValue(holder.where, _text(key), _size(value))
            serial += 1
            entry = (item.bytes, -serial, item)
            if len(largest) < LARGEST_VALUES:
                heapq.heappush(largest, entry)
            elif entry[:2] > largest[0][:2]:
                heapq.heapreplace(largest, entry)
    total_nodes = len(nodes)
    return AuditReport(
        nodes=total_nodes,
        nodes_without_sources=without,
        sources=len(used),
        fx_nodes=tuple(sorted({s.fx_node for s in used if s.fx_node})),
        source_lines=tuple(sorted({f"{s.file}:{s.line}" for s in used if s.file is not None})),
        module_paths=tuple(sorted({s.module_path for s in used if s.fx_node})),
        key_coverage=tuple(
            KeyCoverage(key, count, count / total_nodes if total_nodes else 0.0, key_bytes[key])
            for key, count in sorted(carried.items())
        ),
        metadata_bytes=sum(scope_bytes.values()),
        metadata_bytes_by_scope=scope_bytes,
        largest_values=tuple(item for _, _, item in sorted(largest, key=lambda e: (-e[0], -e[1]))),
        invalid_metadata=tuple(invalid),
        functions=tuple(functions),
    )
