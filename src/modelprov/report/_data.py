"""The report's data: summary, nodes with their sources and layout, groups, lost sources.

Everything the page shows is in one JSON document (``format: modelprov.report``); the
page's script renders it with ``textContent`` only, so metadata is never read as HTML.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import onnx_ir as ir

from modelprov.audit._audit import metadata_bytes
from modelprov.audit._diff import DiffReport, Recall, diff
from modelprov.core._sources import Source, parse_ids
from modelprov.core._stack_trace import display_path
from modelprov.errors import MetadataError
from modelprov.keys import (
    NAMESPACE_KEY,
    OUTPUT_OF_KEY,
    REPORT_FORMAT,
    RESERVED_PREFIX,
    TORCH_PREFIX,
)
from modelprov.onnx._lookup import node_sources
from modelprov.onnx.quantize._quant_params import quantization_keys
from modelprov.report._code import CodeContext
from modelprov.report._layout import layout_group
from modelprov.report._pack import REPORT_VERSION
from modelprov.report._states import (
    CONFIDENCE_KEY,
    STATE_COLORS,
    STATES,
    known_sources,
    node_state,
)

__all__ = ["REPORT_FORMAT", "REPORT_VERSION", "metadata_bytes", "report_data"]


_OPEN_ALL_UP_TO = 400
"""Graphs with at most this many nodes open every group; larger ones open two levels."""


def _user_keys(metadata: Mapping[str, str]) -> dict[str, str]:
    """Metadata a user put there: not torch.onnx's own keys nor modelprov's."""
    return {
        key: value
        for key, value in metadata.items()
        if not key.startswith((TORCH_PREFIX, RESERVED_PREFIX)) and key != NAMESPACE_KEY
    }


def _output_module(node: ir.Node, known: Sequence[Source]) -> str:
    """The module where the node's output is computed: that of the source whose output it
    produces (``modelprov.output_of``, or its only source; the first of several, the others
    being aliases a step removed, as ``namespace`` says), else of its last source."""
    ids: set[str] = set()
    for value in node.outputs:
        text = value.metadata_props.get(OUTPUT_OF_KEY)
        if text:
            try:
                ids.update(parse_ids(text, where=f"value {value.name!r}", key=OUTPUT_OF_KEY))
            except MetadataError:
                continue
    chosen = [source for source in known if source.id in ids]
    return (chosen[0] if chosen else known[-1]).module_path or ""


def _source_json(
    source: Source, code: CodeContext | None, shown_paths: dict[str, str]
) -> dict[str, Any]:
    """A source for the page, its file shortened for display (``shown_paths`` caches that
    per file); ``code`` collects the code around its line (keyed by the displayed
    ``file:line``)."""
    shown = None
    if source.file is not None:
        shown = shown_paths.get(source.file)
        if shown is None:
            shown = shown_paths[source.file] = display_path(source.file)
    if code is not None and source.file is not None and source.line is not None:
        code.add(source.file, f"{shown}:{source.line}", source.line)
    return {
        "id": source.id,
        "fx": source.fx_node,
        "module": source.module_path,
        "type": source.module_type,
        "target": source.target,
        "file": shown,
        "line": source.line,
        "trace": source.stack_trace,
        "keys": _user_keys(source.metadata),
    }


def _recall_json(recall: Recall) -> dict[str, Any]:
    return {"value": recall.value, "kept": recall.kept, "total": recall.total}


def _group_paths(paths: Iterable[str]) -> list[str]:
    """Every group path and its ancestors, '' (the root) first, parents before children."""
    result: dict[str, None] = {"": None}
    for path in paths:
        parts = path.split(".") if path else []
        for end in range(1, len(parts) + 1):
            result[".".join(parts[:end])] = None
    return list(result)


def _place_orphans(
    node_group: list[str | None],
    predecessors: Mapping[int, list[int]],
    consumers: Mapping[int, list[int]],
) -> None:
    """Puts each node without sources into a neighbour's group (producers first), else root."""
    for i, group in enumerate(node_group):
        if group is None:
            node_group[i] = next(
                (node_group[p] for p in predecessors[i] if node_group[p] is not None), None
            )
    for i in reversed(range(len(node_group))):
        if node_group[i] is None:
            node_group[i] = next(
                (node_group[c] for c in consumers.get(i, ()) if node_group[c] is not None), ""
            )


def _numerics_json(numerics: Any, nodes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A NumericsReport's rows by report node: per node its worst row (the largest relative
    error), and per module path its worst error, for colouring nodes and modules by error."""
    by_name = {entry["name"]: i for i, entry in enumerate(nodes) if entry["name"]}
    first = numerics.first_divergence
    worst: dict[int, Any] = {}
    for row in numerics.rows:
        i = by_name.get(row.node)
        if i is None:
            continue
        if i not in worst or _rel(row) > _rel(worst[i]):
            worst[i] = row
    return {
        "rtol": numerics.rtol,
        "atol": numerics.atol,
        "reference": numerics.reference,
        "first": by_name.get(first.node) if first is not None else None,
        "nodes": [
            [
                i,
                _finite(_rel(row)),
                _finite(row.sqnr_db),
                row.source.fx_node,
                row.value,
                bool(row.diverges),
                None if row.own_sqnr_db is None else _finite(row.own_sqnr_db),
            ]
            for i, row in sorted(worst.items())
        ],
    }


def _rel(row: Any) -> float:
    return float("inf") if math.isnan(row.max_rel_error) else float(row.max_rel_error)


def _finite(number: float) -> float | None:
    return (
        number
        if math.isfinite(number)
        else (None if math.isnan(number) else (1e300 if number > 0 else -1e300))
    )


def report_data(
    model: ir.Model,
    *,
    before: ir.Model | None = None,
    title: str = "",
    source_code: bool = True,
    numerics: Any = None,
    source_roots: Iterable[str | os.PathLike[str]] = (),
) -> dict[str, Any]:
    """The JSON document the HTML report renders.

    ``source_code``: read the Python files the stack traces name (bounded, and only under
    the allowed roots, ``source_roots`` among them; see ``report._code``) to show a few lines
    around each source line. ``numerics``: a :class:`~modelprov.numerics.NumericsReport` of
    this model, to colour nodes by error.
    """
    code = CodeContext(source_roots) if source_code else None
    shown_paths: dict[str, str] = {}
    pairs = node_sources(model)
    index = {id(node): i for i, (node, _) in enumerate(pairs)}
    source_index: dict[str, int] = {}
    sources: list[dict[str, Any]] = []
    predecessors: dict[int, list[int]] = {}
    consumers: dict[int, list[int]] = {}
    nodes: list[dict[str, Any]] = []
    node_group: list[str | None] = []
    state_counts = dict.fromkeys(STATES, 0)
    quantization = quantization_keys(model)
    for i, (node, found) in enumerate(pairs):
        ids = []
        known = known_sources(found)
        for source in known:
            if source.id not in source_index:
                source_index[source.id] = len(sources)
                sources.append(_source_json(source, code, shown_paths))
            ids.append(source_index[source.id])
        producers = []
        for value in node.inputs:
            producer = value.producer() if value is not None else None
            if producer is not None and id(producer) in index:
                producers.append(index[id(producer)])
        predecessors[i] = producers
        for p in dict.fromkeys(producers):
            consumers.setdefault(p, []).append(i)
        state = node_state(node.metadata_props, found)
        state_counts[state] += 1
        entry: dict[str, Any] = {
            "name": node.name or "",
            "op": node.op_type,
            "domain": node.domain,
            "state": state,
            "src": ids,
            "keys": _user_keys(node.metadata_props) | quantization.get(node, {}),
        }
        confidence = node.metadata_props.get(CONFIDENCE_KEY)
        if confidence is not None:
            entry["confidence"] = confidence
        nodes.append(entry)
        node_group.append(_output_module(node, known) if known else None)
    _place_orphans(node_group, predecessors, consumers)
    module_of = [group or "" for group in node_group]
    for i, entry in enumerate(nodes):
        entry["in"] = list(dict.fromkeys(predecessors[i]))
        entry["out"] = consumers.get(i, [])

    paths = _group_paths(module_of)
    group_of = {path: g for g, path in enumerate(paths)}
    members: list[list[int]] = [[] for _ in paths]
    for i, path in enumerate(module_of):
        members[group_of[path]].append(i)
    module_types: dict[str, str] = {}
    for entry in sources:
        module_types.setdefault(entry["module"], entry["type"])
    subtree = [0] * len(paths)
    first = [len(nodes)] * len(paths)
    for g in reversed(range(len(paths))):
        subtree[g] += len(members[g])
        if members[g]:
            first[g] = min(first[g], members[g][0])
        if g:
            parent = group_of[paths[g].rpartition(".")[0]]
            subtree[parent] += subtree[g]
            first[parent] = min(first[parent], first[g])
    open_all = len(nodes) <= _OPEN_ALL_UP_TO
    groups: list[dict[str, Any]] = []
    for g, path in enumerate(paths):
        layout = layout_group(members[g], predecessors)
        for member in members[g]:
            x, y = layout.positions[member]
            nodes[member].update(group=g, x=x, y=y)
        depth = path.count(".") + 1 if path else 0
        groups.append(
            {
                "path": path,
                "label": path.rpartition(".")[2] if path else "(root module)",
                "type": module_types.get(path, ""),
                "parent": group_of[path.rpartition(".")[0]] if path else None,
                "depth": depth,
                "nodes": members[g],
                "count": subtree[g],
                "first": first[g],
                "w": layout.width,
                "h": layout.height,
                "edges": [list(edge) for edge in layout.edges],
                "open": open_all or depth <= 1,
            }
        )

    with_sources = len(nodes) - state_counts["none"]
    summary: dict[str, Any] = {
        "nodes": len(nodes),
        "states": state_counts,
        "coverage": with_sources / len(nodes) if nodes else 1.0,
        "sources": len(sources),
        "groups": len(paths),
        "metadata_bytes": metadata_bytes(model),
    }
    lost: list[dict[str, Any]] = []
    if before is not None:
        report: DiffReport = diff(before, model)
        summary["before"] = {
            "nodes": report.nodes_before,
            "metadata_bytes": metadata_bytes(before),
            "recall": {
                "fx_nodes": _recall_json(report.fx_nodes),
                "fx_nodes_dyn": _recall_json(report.fx_nodes_dyn),
                "source_lines": _recall_json(report.source_lines),
                "module_paths": _recall_json(report.module_paths),
            },
        }
        lost_names = set(report.lost_sources)
        seen: set[str] = set()
        for _, found in node_sources(before):
            for source in found:
                name = source.fx_node or source.id
                if name in lost_names and name not in seen:
                    seen.add(name)
                    lost.append(_source_json(source, code, shown_paths))
    extra = {"numerics": _numerics_json(numerics, nodes)} if numerics is not None else {}
    return extra | {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "title": title or model.graph.name or "model",
        "colors": dict(STATE_COLORS),
        "summary": summary,
        "sources": sources,
        "nodes": nodes,
        "groups": groups,
        "lost": lost,
        "code": code.table() if code is not None else {},
    }
