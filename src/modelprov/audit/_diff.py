"""modelprov.diff: how much provenance a step kept (recall), and what it lost."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any

import onnx_ir as ir

from modelprov._model_io._convert import ModelInput, as_ir
from modelprov.audit._audit import has_provenance
from modelprov.core._printable import printable_lines
from modelprov.core._sources import Source
from modelprov.core._stack_trace import display_location
from modelprov.core._walks import all_nodes
from modelprov.keys import DIFF_FORMAT
from modelprov.onnx._lookup import function_body_sources, node_sources

__all__ = ["DiffReport", "Recall", "diff", "dynamic_nodes"]


@dataclasses.dataclass(frozen=True)
class Recall:
    """Share of the items of the model before that the model after still references."""

    total: int
    kept: int
    lost: tuple[str, ...]

    @property
    def value(self) -> float:
        """kept / total (1.0 when there is nothing to keep)."""
        return self.kept / self.total if self.total else 1.0

    @classmethod
    def of(cls, before: Iterable[str], after: set[str]) -> Recall:
        """Recall of the distinct items of ``before`` in ``after``."""
        wanted = sorted(set(before))
        lost = tuple(item for item in wanted if item not in after)
        return cls(total=len(wanted), kept=len(wanted) - len(lost), lost=lost)


def dynamic_nodes(graph: ir.Graph) -> set[ir.Node]:
    """Nodes that compute on a graph input (not constant-foldable) and are not Identity."""
    dynamic_values: set[ir.Value] = set(graph.inputs)
    result: set[ir.Node] = set()
    for node in all_nodes(graph):
        if any(value in dynamic_values for value in node.inputs if value is not None):
            dynamic_values.update(node.outputs)
            if node.op_type != "Identity":
                result.add(node)
    return result


def _line(source: Source) -> str | None:
    return f"{source.file}:{source.line}" if source.file is not None else None


@dataclasses.dataclass(frozen=True)
class DiffReport:
    """Provenance recall of a model after a change, against the model before it.

    "dyn" counts only sources of nodes that compute on a graph input and are not Identity.
    """

    nodes_before: int
    nodes_after: int
    fx_nodes: Recall
    fx_nodes_dyn: Recall
    source_lines: Recall
    source_lines_dyn: Recall
    module_paths: Recall
    module_paths_dyn: Recall
    nodes_without_sources: tuple[str, ...]
    """Nodes of the model after whose sources carry no metadata at all."""
    lost_sources: Mapping[str, str]
    """Lost FX node -> its innermost source line ('' when unknown)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``format``/``version`` included)."""

        def recall(item: Recall) -> dict[str, Any]:
            return {
                "recall": item.value,
                "total": item.total,
                "kept": item.kept,
                "lost": list(item.lost),
            }

        return {
            "format": DIFF_FORMAT,
            "version": 1,
            "nodes_before": self.nodes_before,
            "nodes_after": self.nodes_after,
            "fx_nodes": recall(self.fx_nodes),
            "fx_nodes_dyn": recall(self.fx_nodes_dyn),
            "source_lines": recall(self.source_lines),
            "source_lines_dyn": recall(self.source_lines_dyn),
            "module_paths": recall(self.module_paths),
            "module_paths_dyn": recall(self.module_paths_dyn),
            "nodes_without_sources": list(self.nodes_without_sources),
            "lost_sources": dict(self.lost_sources),
        }

    def to_text(self) -> str:
        """A short human-readable report (names escaped: ``core._printable``)."""
        rows = [
            ("FX nodes", self.fx_nodes, self.fx_nodes_dyn),
            ("source lines", self.source_lines, self.source_lines_dyn),
            ("module paths", self.module_paths, self.module_paths_dyn),
        ]
        lines = [f"nodes: {self.nodes_before} -> {self.nodes_after}"]
        lines += [
            f"{name:>13} recall {all_.value:.2f} ({all_.kept}/{all_.total}), "
            f"dyn {dyn.value:.2f} ({dyn.kept}/{dyn.total})"
            for name, all_, dyn in rows
        ]
        lines.append(f"nodes without sources: {len(self.nodes_without_sources)}")
        lines += [f"  {name}" for name in self.nodes_without_sources]
        lines.append(f"lost FX nodes: {len(self.lost_sources)}")
        dynamic = set(self.fx_nodes_dyn.lost)
        for fx, where in self.lost_sources.items():
            lines.append(
                f"  lost {fx}"
                + (" [dyn]" if fx in dynamic else "")
                + (f"  ({display_location(where)})" if where else "")
            )
        return printable_lines(lines)

    def to_json(self) -> str:
        """The JSON report (:meth:`to_dict`) as text."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)


def diff(before: ModelInput, after: ModelInput) -> DiffReport:
    """Compares the provenance of ``after`` with ``before`` (an export and its optimized form).

    Models may be ModelProtos, onnx_ir models, paths (read without their weights) or
    torch.onnx.ONNXProgram.
    """
    before_ir = as_ir(before, where="diff(before)")
    after_ir = as_ir(after, where="diff(after)")
    dynamic = dynamic_nodes(before_ir.graph)
    before_pairs = node_sources(before_ir) + function_body_sources(before_ir)
    after_pairs = node_sources(after_ir) + function_body_sources(after_ir)

    def collect(
        pairs: Iterable[tuple[ir.Node, list[Source]]], only: set[ir.Node] | None
    ) -> tuple[list[str], list[str], list[str]]:
        fx: list[str] = []
        lines: list[str] = []
        modules: list[str] = []
        for node, found in pairs:
            if only is not None and node not in only:
                continue
            for source in found:
                fx.append(source.fx_node or source.id)
                line = _line(source)
                if line is not None:
                    lines.append(line)
                modules.append(source.module_path)
        return fx, lines, modules

    fx_all, lines_all, modules_all = collect(before_pairs, None)
    fx_dyn, lines_dyn, modules_dyn = collect(before_pairs, dynamic)
    fx_after, lines_after, modules_after = (set(items) for items in collect(after_pairs, None))
    lost_lines: dict[str, str] = {}
    fx_recall = Recall.of(fx_all, fx_after)
    for _, found in before_pairs:
        for source in found:
            name = source.fx_node or source.id
            if name in fx_recall.lost and name not in lost_lines:
                lost_lines[name] = _line(source) or ""
    return DiffReport(
        nodes_before=len(before_pairs),
        nodes_after=len(after_pairs),
        fx_nodes=fx_recall,
        fx_nodes_dyn=Recall.of(fx_dyn, fx_after),
        source_lines=Recall.of(lines_all, lines_after),
        source_lines_dyn=Recall.of(lines_dyn, lines_after),
        module_paths=Recall.of(modules_all, modules_after),
        module_paths_dyn=Recall.of(modules_dyn, modules_after),
        nodes_without_sources=tuple(
            node.name or node.op_type for node, found in after_pairs if not has_provenance(found)
        ),
        lost_sources=lost_lines,
    )
