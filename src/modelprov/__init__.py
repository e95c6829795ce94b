"""modelprov: keep every operation's provenance and user metadata through export and optimization.

Public API (everything else lives in private modules)::

    modelprov.export(model, args, f=None, *, policies=None, optimize=True, **torch_kwargs)
    modelprov.optimize(model, *, policies=None, rules=None)
    modelprov.recover(original, optimized)
    modelprov.sources(model, node), modelprov.SourceIndex(model)
    modelprov.Policies, modelprov.DEFAULT_POLICIES, modelprov.core._policy.*
    modelprov.audit(model), modelprov.diff(before, after)

Every name is imported on first use: ``import modelprov`` loads no onnx, torch or
onnxscript, so the command line's ``--version`` and ``--help`` start at once, and reading
and checking ONNX files pays for no exporter.
Formats: docs/metadata-format.md.
"""

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from modelprov._base._public_names import pin_value

if TYPE_CHECKING:
    from modelprov import errors, policy
    from modelprov.annotation import annotate, annotations, calibrate
    from modelprov.audit import AuditReport, DiffReport, Recall, audit, diff
    from modelprov.audit._join import join_sources
    from modelprov.core._sources import Source
    from modelprov.core._stack_trace import TraceOptions
    from modelprov.numerics import NumericsReport, compare
    from modelprov.onnx._lookup import SourceIndex, sources
    from modelprov.onnx.export._export import export
    from modelprov.onnx.functions._find_calls import find_calls
    from modelprov.onnx.functions._functionize import (
        FunctionizePass,
        FunctionizeResult,
        functionize,
    )
    from modelprov.onnx.functions._inline import InlineProvenancePass, inline
    from modelprov.onnx.functions._structural_hash import structural_hash
    from modelprov.onnx.optimize._optimize import (
        OptimizeProvenancePass,
        OptimizeResult,
        StepRecord,
        optimize,
    )
    from modelprov.onnx.quantize._quantize import quantize
    from modelprov.onnx.recover._recover import RecoveryReport, recover, recover_with_report
    from modelprov.onnx.recover._tools import optimize_with
    from modelprov.policy import DEFAULT_POLICIES, MergeContext, Policies
    from modelprov.report import overlay, report, write_overlay, write_report
    from modelprov.stablehlo import StableHLOProgram, export_stablehlo

_LAZY = {
    "errors": ".errors",
    "policy": ".policy",
    "keys": ".keys",
    "core": ".core",
    "annotation": ".annotation",
    "onnx": ".onnx",
    "stablehlo": ".stablehlo",
    "join_sources": ".audit._join",
    "annotate": ".annotation",
    "annotations": ".annotation",
    "calibrate": ".annotation",
    "AuditReport": ".audit",
    "DiffReport": ".audit",
    "Recall": ".audit",
    "audit": ".audit",
    "diff": ".audit",
    "Source": ".core",
    "TraceOptions": ".core",
    "export": ".onnx.export._export",
    "find_calls": ".onnx.functions._find_calls",
    "FunctionizePass": ".onnx.functions._functionize",
    "FunctionizeResult": ".onnx.functions._functionize",
    "functionize": ".onnx.functions._functionize",
    "InlineProvenancePass": ".onnx.functions._inline",
    "inline": ".onnx.functions._inline",
    "SourceIndex": ".onnx._lookup",
    "sources": ".onnx._lookup",
    "OptimizeProvenancePass": ".onnx.optimize._optimize",
    "OptimizeResult": ".onnx.optimize._optimize",
    "StepRecord": ".onnx.optimize._optimize",
    "optimize": ".onnx.optimize._optimize",
    "quantize": ".onnx.quantize._quantize",
    "RecoveryReport": ".onnx.recover._recover",
    "recover": ".onnx.recover._recover",
    "recover_with_report": ".onnx.recover._recover",
    "structural_hash": ".onnx.functions._structural_hash",
    "optimize_with": ".onnx.recover._tools",
    "DEFAULT_POLICIES": ".policy",
    "MergeContext": ".policy",
    "Policies": ".policy",
    "overlay": ".report",
    "report": ".report",
    "write_overlay": ".report",
    "write_report": ".report",
    "StableHLOProgram": ".stablehlo",
    "export_stablehlo": ".stablehlo",
    "numerics": ".numerics",
    "compare": ".numerics",
    "NumericsReport": ".numerics",
}
"""Where each public name lives (relative to this package); imported on first use. A name
that a public subpackage hands out is taken from that subpackage, which sets its
``__module__``; the others get ``modelprov``."""

_MODULES = frozenset({"errors", "policy", "keys", "core", "annotation", "onnx", "stablehlo"})
"""The names that are modules (``modelprov.core`` works without importing it first)."""

_FUNCTIONS_NAMED_LIKE_PACKAGES = frozenset({"audit", "report"})
"""``modelprov.audit`` and ``modelprov.report`` are functions, though subpackages share
their names: importing a subpackage must not rebind the package's attribute to it."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'modelprov' has no attribute {name!r}")
    loaded = importlib.import_module(module, __name__)
    value = loaded if name in _MODULES else getattr(loaded, name)
    pin_value(name, value, __name__)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


class _Package(types.ModuleType):
    """The package's module: keeps the functions ``audit`` and ``report`` when their
    subpackages are imported (Python binds a subpackage to its parent's attribute)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _FUNCTIONS_NAMED_LIKE_PACKAGES and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__all__ = [
    "DEFAULT_POLICIES",
    "AuditReport",
    "DiffReport",
    "FunctionizePass",
    "FunctionizeResult",
    "InlineProvenancePass",
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
