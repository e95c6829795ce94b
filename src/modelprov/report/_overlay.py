"""Model Explorer node data: coverage or a numeric metadata key on every ONNX node.

The format is the one ai-edge-model-explorer reads from a ``.json`` node-data file
(``ModelNodeData``): ``{graph_id: {"name", "results": {node_id: {"value", "bgColor"?}},
"gradient"?}}``. Node ids are those model-explorer-onnx gives: node names after
onnx-ir's ``NameFixPass`` (unnamed and duplicate names fixed), nodes of ``If`` branches
embedded in their parent graph as ``<if name>/<branch>/<node name>``, and bodies of other
subgraph-holding nodes of the main graph as graphs ``<node name>/<attribute>``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from typing import Any

import onnx_ir as ir
from onnx_ir.passes.common import NameFixPass

from modelprov._model_io._convert import ModelInput, as_ir
from modelprov._model_io._files import atomic_write_bytes
from modelprov._model_io._ir_check import checked_clone
from modelprov.core._walks import all_nodes
from modelprov.errors import MetadataError
from modelprov.onnx._lookup import node_sources
from modelprov.report._states import STATE_COLORS, known_sources, node_state

__all__ = ["explorer_ids", "numerics_overlay", "overlay", "write_overlay"]

_MAIN_GRAPH = "<main>"
"""model-explorer-onnx's id for a main graph without a name."""

_GRADIENT = [
    {"stop": 0, "bgColor": "#2c7bb6"},
    {"stop": 0.5, "bgColor": "#ffffbf"},
    {"stop": 1, "bgColor": "#d7191c"},
]


def _walk(
    graph: ir.Graph, graph_id: str, prefix: str, top_level: bool
) -> Iterator[tuple[ir.Node, str, str]]:
    for node in graph:
        node_id = prefix + (node.name or "")
        yield node, graph_id, node_id
        for attribute in node.attributes.values():
            if not isinstance(attribute, ir.Attr) or attribute.type != ir.AttributeType.GRAPH:
                continue
            subgraph = attribute.as_graph()
            if node.op_type == "If" and node.domain == "":
                yield from _walk(subgraph, graph_id, f"{node_id}/{attribute.name}/", top_level)
            elif top_level:
                yield from _walk(subgraph, f"{node_id}/{attribute.name}", "", False)


def explorer_ids(model: ir.Model) -> list[tuple[str, str] | None]:
    """(graph id, node id) Model Explorer gives each node of ``all_nodes(model.graph)``.

    None for nodes Model Explorer does not show (inside nested non-``If`` subgraphs).
    """
    originals = all_nodes(model.graph)
    clone = checked_clone(model)
    NameFixPass()(clone)
    position = {id(node): i for i, node in enumerate(all_nodes(clone.graph))}
    if len(position) != len(originals):
        raise AssertionError("a cloned model has a different number of nodes")
    result: list[tuple[str, str] | None] = [None] * len(originals)
    main = clone.graph.name or _MAIN_GRAPH
    for node, graph_id, node_id in _walk(clone.graph, main, "", True):
        result[position[id(node)]] = (graph_id, node_id)
    return result


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def overlay(model: ModelInput, *, key: str | None = None, coverage: bool = False) -> dict[str, Any]:
    """Model Explorer node data for every node of an ONNX model (JSON-ready).

    With ``coverage`` (the default when no ``key`` is given) each node's value is its
    number of sources, coloured by provenance state (exact, merged, recovered, none).
    With ``key`` each node carrying a numeric value of that metadata key gets it, coloured
    on a blue-to-red gradient. Save it as ``.json`` and load it in Model Explorer beside the
    model.
    """
    if key is not None and coverage:
        raise ValueError("overlay: pass either key=... or coverage=True, not both")
    model_ir = as_ir(model, where="overlay")
    ids = explorer_ids(model_ir)
    pairs = node_sources(model_ir)
    name = f"modelprov {key}" if key is not None else "modelprov coverage"
    graphs: dict[str, dict[str, Any]] = {}

    def results_of(graph_id: str) -> dict[str, Any]:
        graph = graphs.setdefault(graph_id, {"name": name, "results": {}})
        results: dict[str, Any] = graph["results"]
        return results

    skipped: list[tuple[str, str]] = []
    for where, (node, found) in zip(ids, pairs, strict=True):
        if where is None:
            continue
        graph_id, node_id = where
        metadata = node.metadata_props
        if key is None:
            state = node_state(metadata, found)
            count = len(known_sources(found))
            results_of(graph_id)[node_id] = {"value": count, "bgColor": STATE_COLORS[state]}
            continue
        text = metadata.get(key)
        if text is None:
            continue
        value = _number(text)
        if value is None:
            skipped.append((node_id, text))
            continue
        results_of(graph_id)[node_id] = {"value": value}
    if key is not None:
        if not graphs:
            detail = (
                f"; its values are not numbers (node {skipped[0][0]!r} has "
                f"{json.dumps(skipped[0][1])[:60]})"
                if skipped
                else "; keys on its nodes: "
                + (
                    ", ".join(sorted({k for n, _ in pairs for k in n.metadata_props})[:12])
                    or "none"
                )
            )
            raise MetadataError(f"overlay: no node carries a numeric value of key {key!r}{detail}")
        for graph in graphs.values():
            graph["gradient"] = _GRADIENT
    return graphs


def numerics_overlay(model: ModelInput, report: Any) -> dict[str, Any]:
    """Model Explorer node data of a :class:`~modelprov.numerics.NumericsReport`: each
    compared node's largest relative error (max |c - r| / max |r|) as its log10 (float noise
    near -7, a wrong layer near 0), on the blue-to-red gradient of numeric overlays."""
    model_ir = as_ir(model, where="numerics_overlay")
    ids = explorer_ids(model_ir)
    worst: dict[str, float] = {}
    for row in report.rows:
        error = row.max_rel_error if math.isfinite(row.max_rel_error) else 1e9
        worst[row.node] = max(worst.get(row.node, 0.0), error)
    graphs: dict[str, dict[str, Any]] = {}
    for node, where in zip(all_nodes(model_ir.graph), ids, strict=True):
        if where is None or node.name not in worst:
            continue
        graph_id, node_id = where
        graph = graphs.setdefault(
            graph_id, {"name": "modelprov max rel error", "results": {}, "gradient": _GRADIENT}
        )
        graph["results"][node_id] = {"value": round(math.log10(max(worst[node.name], 1e-12)), 3)}
    return graphs


def write_overlay(
    model: ModelInput,
    path: str | os.PathLike[str],
    *,
    key: str | None = None,
    coverage: bool = False,
) -> str:
    """Writes :func:`overlay` as JSON to ``path`` and returns the path."""
    text = json.dumps(overlay(model, key=key, coverage=coverage), indent=1)
    atomic_write_bytes(path, text.encode("utf-8"))
    return os.fspath(path)
