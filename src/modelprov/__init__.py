"""modelprov: keep every operation's provenance and user metadata through export and optimization.

Public API (everything else lives in private modules)::

    modelprov.export(model, args, f=None, *, policies=None, optimize=True, **torch_kwargs)
    modelprov.optimize(model, *, policies=None, rules=None)
    modelprov.recover(original, optimized)
    modelprov.sources(model, node), modelprov.SourceIndex(model)
    modelprov.Policies, modelprov.DEFAULT_POLICIES, modelprov.core.policy.*
    modelprov.audit(model), modelprov.diff(before, after)

The names that need torch or onnxscript (export, optimize, annotate, calibrate, functionize,
export_stablehlo…) are imported on first use, so reading and checking ONNX files pays for
neither.
Formats: docs/metadata-format.md.
"""

import importlib
from typing import TYPE_CHECKING, Any

from modelprov import errors, policy
from modelprov._join import join_sources
from modelprov.audit import AuditReport, DiffReport, Recall, audit, diff
from modelprov.core._sources import Source
from modelprov.core._stack_trace import TraceOptions
from modelprov.onnx._inline import InlinePass, inline
from modelprov.onnx._lookup import SourceIndex, sources
from modelprov.onnx._recover import RecoveryReport, recover, recover_with_report
from modelprov.onnx._structural_hash import structural_hash
from modelprov.policy import DEFAULT_POLICIES, MergeContext, Policies
from modelprov.report import overlay, report, write_overlay, write_report

if TYPE_CHECKING:
    from modelprov.annotation import annotate, annotations, calibrate
    from modelprov.numerics import NumericsReport, compare
    from modelprov.onnx._export import export
    from modelprov.onnx._find_calls import find_calls
    from modelprov.onnx._functionize import FunctionizePass, FunctionizeResult, functionize
    from modelprov.onnx._optimize import (
        OptimizeProvenancePass,
        OptimizeResult,
        StepRecord,
        optimize,
    )
    from modelprov.onnx._quantize import quantize
    from modelprov.onnx._tools import optimize_with
    from modelprov.stablehlo import StableHLOProgram, export_stablehlo

_LAZY = {
    "annotate": "modelprov.annotation",
    "annotations": "modelprov.annotation",
    "calibrate": "modelprov.annotation",
    "export": "modelprov.onnx._export",
    "find_calls": "modelprov.onnx._find_calls",
    "FunctionizePass": "modelprov.onnx._functionize",
    "FunctionizeResult": "modelprov.onnx._functionize",
    "functionize": "modelprov.onnx._functionize",
    "OptimizeProvenancePass": "modelprov.onnx._optimize",
    "OptimizeResult": "modelprov.onnx._optimize",
    "StepRecord": "modelprov.onnx._optimize",
    "optimize": "modelprov.onnx._optimize",
    "optimize_with": "modelprov.onnx._tools",
    "StableHLOProgram": "modelprov.stablehlo",
    "quantize": "modelprov.onnx._quantize",
    "export_stablehlo": "modelprov.stablehlo",
    "compare": "modelprov.numerics",
    "NumericsReport": "modelprov.numerics",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'modelprov' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "DEFAULT_POLICIES",
    "AuditReport",
    "DiffReport",
    "FunctionizePass",
    "FunctionizeResult",
    "InlinePass",
    "MergeContext",
    "NumericsReport",
    "OptimizeProvenancePass",
    "OptimizeResult",
    "Policies",
    "Recall",
    "RecoveryReport",
    "Source",
    "SourceIndex",
    "StableHLOProgram",
    "StepRecord",
    "TraceOptions",
    "annotate",
    "annotations",
    "audit",
    "calibrate",
    "compare",
    "diff",
    "errors",
    "export",
    "export_stablehlo",
    "find_calls",
    "functionize",
    "inline",
    "join_sources",
    "optimize",
    "optimize_with",
    "overlay",
    "policy",
    "quantize",
    "recover",
    "recover_with_report",
    "report",
    "sources",
    "structural_hash",
    "write_overlay",
    "write_report",
]

__version__ = "0.1.0"
