"""modelprov: keep every operation's provenance and user metadata through export and optimization.

Public API (everything else lives in private modules)::

    modelprov.export(model, args, f=None, *, policies=None, optimize=True, **torch_kwargs)
    modelprov.optimize(model, *, policies=None, rules=None)
    modelprov.sources(model, node)
    modelprov.Policies, modelprov.DEFAULT_POLICIES, modelprov.policy.*
    modelprov.diff(before, after)

Formats: docs/metadata-format.md.
"""

from modelprov import errors, policy
from modelprov._sources import Source
from modelprov._stack_trace import TraceOptions
from modelprov.annotation import annotate, annotations, calibrate
from modelprov.audit import AuditReport, DiffReport, Recall, audit, diff
from modelprov.onnx._export import export
from modelprov.onnx._find_calls import find_calls
from modelprov.onnx._functionize import FunctionizePass, functionize
from modelprov.onnx._inline import InlinePass, inline
from modelprov.onnx._lookup import sources
from modelprov.onnx._optimize import OptimizeProvenancePass, StepRecord, optimize
from modelprov.onnx._recover import recover
from modelprov.onnx._structural_hash import structural_hash
from modelprov.onnx._tools import optimize_with
from modelprov.policy import DEFAULT_POLICIES, MergeContext, Policies
from modelprov.report import overlay, report, write_overlay, write_report
from modelprov.stablehlo import StableHLOProgram, export_stablehlo

__all__ = [
    "DEFAULT_POLICIES",
    "AuditReport",
    "DiffReport",
    "FunctionizePass",
    "InlinePass",
    "MergeContext",
    "OptimizeProvenancePass",
    "Policies",
    "Recall",
    "Source",
    "StableHLOProgram",
    "StepRecord",
    "TraceOptions",
    "annotate",
    "annotations",
    "audit",
    "calibrate",
    "diff",
    "errors",
    "export",
    "export_stablehlo",
    "find_calls",
    "functionize",
    "inline",
    "optimize",
    "optimize_with",
    "overlay",
    "policy",
    "recover",
    "report",
    "sources",
    "structural_hash",
    "write_overlay",
    "write_report",
]

__version__ = "0.1.0"
