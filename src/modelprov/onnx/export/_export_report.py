"""The markdown report ``modelprov.export(report=True)`` writes about the model it returns."""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Sequence

import onnx_ir as ir

from modelprov._model_io._files import atomic_write_bytes
from modelprov.onnx._lookup import node_sources

__all__ = ["OutputCheck", "ProvenanceCounts", "provenance_counts", "write_export_report"]


@dataclasses.dataclass(frozen=True)
class OutputCheck:
    """One output compared between torch and onnxruntime."""

    name: str
    max_abs_diff: float
    max_rel_diff: float
    ok: bool


@dataclasses.dataclass(frozen=True)
class ProvenanceCounts:
    """What a model's provenance covers: nodes, nodes with sources, FX nodes named."""

    nodes: int
    nodes_with_sources: int
    fx_nodes: frozenset[str]


def provenance_counts(model: ir.Model) -> ProvenanceCounts:
    """Counts nodes, nodes with sources, and the FX nodes the model's nodes name."""
    pairs = node_sources(model)
    return ProvenanceCounts(
        nodes=len(pairs),
        nodes_with_sources=sum(1 for _, sources in pairs if sources),
        fx_nodes=frozenset(s.fx_node for _, sources in pairs for s in sources if s.fx_node),
    )


def write_export_report(
    folder: str | os.PathLike[str],
    *,
    model_name: str,
    before: ProvenanceCounts,
    after: ProvenanceCounts,
    checks: Sequence[OutputCheck] | None,
    saved_to: str | None,
) -> str:
    """Writes ``modelprov_export_<time>.md`` into ``folder``; returns its path."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d_%H-%M-%S-%f")
    path = os.path.join(os.fspath(folder), f"modelprov_export_{stamp}.md")
    kept = len(after.fx_nodes & before.fx_nodes)
    recall = kept / len(before.fx_nodes) if before.fx_nodes else 1.0
    lines = [
        f"# modelprov export report: {model_name}",
        "",
        "This describes the model modelprov.export returned"
        + (f" and saved to `{saved_to}`." if saved_to else " (not saved)."),
        "",
        "| | unoptimized | returned |",
        "|---|---|---|",
        f"| nodes | {before.nodes} | {after.nodes} |",
        f"| nodes with sources | {before.nodes_with_sources} | {after.nodes_with_sources} |",
        f"| FX nodes named | {len(before.fx_nodes)} | {len(after.fx_nodes)} |",
        "",
        f"FX-node recall: {recall:.3f}.",
        "",
        "## Verification (onnxruntime against torch)",
        "",
    ]
    if checks is None:
        lines.append("Not run (pass `verify=True`).")
    else:
        lines += ["| output | max abs diff | max rel diff | ok |", "|---|---|---|---|"]
        lines += [
            f"| {c.name} | {c.max_abs_diff:.3g} | {c.max_rel_diff:.3g} | "
            + ("yes |" if c.ok else "NO |")
            for c in checks
        ]
    os.makedirs(os.fspath(folder), exist_ok=True)
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode("utf-8"))
    return path
