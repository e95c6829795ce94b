"""What each step of an optimization kept, merged and lost (like LLVM's debug-info reports)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import onnx
import onnx_ir as ir

from modelprov.audit._diff import DiffReport, diff
from modelprov.core._printable import printable_json, printable_lines
from modelprov.core._stack_trace import display_location
from modelprov.keys import OPTIMIZE_REPORT_FORMAT
from modelprov.onnx._lookup import node_sources

if TYPE_CHECKING:
    from modelprov.onnx.optimize._optimize import StepRecord

__all__ = ["OptimizeReport", "StepReport", "optimize_report"]


@dataclasses.dataclass(frozen=True)
class StepReport:
    """One step: node counts, nodes merged into new ones, and the sources it lost.

    ``merged_nodes`` are the nodes the step replaced by its ``new_nodes`` (their sources
    move onto the new nodes); ``eliminated_nodes`` were removed as dead code.
    """

    name: str
    nodes_before: int
    nodes_after: int
    new_nodes: int
    merged_nodes: int
    eliminated_nodes: int
    unattributed_nodes: int
    lost_sources: Mapping[str, str]
    """Lost source id -> its innermost source line ('' when unknown)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {**dataclasses.asdict(self), "lost_sources": dict(self.lost_sources)}

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text, control and bidi characters in names escaped."""
        return printable_json(self.to_dict(), indent=2)

    def to_text(self) -> str:
        """One line per step, then one per lost source."""
        lines = [
            f"{self.name}: nodes {self.nodes_before} -> {self.nodes_after}; "
            f"{self.merged_nodes} merged into {self.new_nodes} new, "
            f"{self.eliminated_nodes} eliminated as dead, "
            f"{self.unattributed_nodes} new without sources, "
            f"{len(self.lost_sources)} sources lost"
        ]
        lines += [
            f"  lost {source}" + (f"  ({display_location(where)})" if where else "")
            for source, where in self.lost_sources.items()
        ]
        return printable_lines(lines)


@dataclasses.dataclass(frozen=True)
class OptimizeReport:
    """Per-step records of an optimization and the overall diff of its output."""

    steps: tuple[StepReport, ...]
    diff: DiffReport

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``"format": "modelprov.optimize-report", "version": 1``)."""
        return {
            "format": OPTIMIZE_REPORT_FORMAT,
            "version": 1,
            "steps": [step.to_dict() for step in self.steps],
            "diff": self.diff.to_dict(),
        }

    def to_json(self) -> str:
        """The JSON report (:meth:`to_dict`) as text, control and bidi characters in names
        escaped (``core._printable``)."""
        return printable_json(self.to_dict(), indent=2)

    def to_text(self) -> str:
        """Steps first, then the overall diff."""
        return "\n".join(
            [*(step.to_text() for step in self.steps), "overall:", self.diff.to_text()]
        )


def optimize_report(
    before: onnx.ModelProto | ir.Model,
    after: onnx.ModelProto | ir.Model,
    steps: Sequence[StepRecord],
) -> OptimizeReport:
    """Builds the report from the model before, the model after and the pass's ``steps``."""
    before_ir = before if isinstance(before, ir.Model) else ir.from_proto(before)
    lines: dict[str, str] = {}
    for _, found in node_sources(before_ir):
        for source in found:
            if source.file is not None:
                lines.setdefault(source.id, f"{source.file}:{source.line}")
    return OptimizeReport(
        steps=tuple(
            StepReport(
                name=step.name,
                nodes_before=step.nodes_before,
                nodes_after=step.nodes_after,
                new_nodes=step.new_nodes,
                merged_nodes=step.removed_nodes,
                eliminated_nodes=step.eliminated_nodes,
                unattributed_nodes=step.unanchored_nodes,
                lost_sources={source: lines.get(source, "") for source in step.lost_sources},
            )
            for step in steps
        ),
        diff=diff(before_ir, after),
    )
