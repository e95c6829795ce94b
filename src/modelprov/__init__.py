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
from modelprov.audit import DiffReport, Recall, diff
from modelprov.onnx._export import export
from modelprov.onnx._lookup import sources
from modelprov.onnx._optimize import OptimizeProvenancePass, StepRecord, optimize
from modelprov.policy import DEFAULT_POLICIES, MergeContext, Policies
from modelprov.stablehlo import StableHLOProgram, export_stablehlo

__all__ = [
    "DEFAULT_POLICIES",
    "DiffReport",
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
    "calibrate",
    "diff",
    "errors",
    "export",
    "export_stablehlo",
    "optimize",
    "policy",
    "sources",
]

__version__ = "0.1.0"
