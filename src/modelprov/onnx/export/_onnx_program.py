"""The ONNXProgram modelprov.export returns: torch's, with a ``.optimize()`` that keeps provenance.

torch.onnx documents ``export(..., optimize=False)`` then ``program.optimize()``; torch's
``optimize`` runs onnxscript's optimizer, which keeps one fused node's metadata per key and
drops the rest. This subclass runs modelprov's optimization there instead (the same
onnxscript optimizer, watched step by step, keys merged by the export's policies).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx_ir as ir
import torch

from modelprov.core._policy import Policies
from modelprov.core._stack_trace import TraceOptions
from modelprov.onnx.optimize._optimize import OptimizeProvenancePass

__all__ = ["ProvenanceONNXProgram"]


class ProvenanceONNXProgram(torch.onnx.ONNXProgram):  # type: ignore[misc]
    """A ``torch.onnx.ONNXProgram`` whose ``optimize()`` is :func:`modelprov.optimize`.

    Everything else is torch's. ``policies``, ``rules`` and ``trace_options`` are those of
    the :func:`modelprov.export` call that made it.
    """

    def __init__(
        self,
        model: ir.Model,
        exported_program: torch.export.ExportedProgram | None,
        *,
        policies: Policies | None = None,
        rules: Sequence[Any] | None = None,
        trace_options: TraceOptions | None = None,
    ) -> None:
        super().__init__(model, exported_program)
        self.optimize_pass = OptimizeProvenancePass(
            policies=policies, rules=rules, trace_options=trace_options
        )

    def optimize(self) -> None:
        """Optimizes the model in place like torch's ``ONNXProgram.optimize`` (onnxscript's
        ``optimize_ir``: same graph) and keeps every node's provenance; a session opened
        by calling the program is released, so the next call runs the optimized model."""
        self.optimize_pass(self.model)
        self.release()
