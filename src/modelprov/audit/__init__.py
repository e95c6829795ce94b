"""Audit and diff: what provenance a model carries, and what a step kept."""

from modelprov._base._public_names import pin_module
from modelprov.audit._audit import (
    AuditReport,
    FunctionUse,
    InvalidMetadata,
    KeyCoverage,
    LargeValue,
    audit,
)
from modelprov.audit._diff import DiffReport, Recall, diff
from modelprov.audit._steps import OptimizeReport, optimize_report

__all__ = [
    "AuditReport",
    "DiffReport",
    "FunctionUse",
    "InvalidMetadata",
    "KeyCoverage",
    "LargeValue",
    "OptimizeReport",
    "Recall",
    "audit",
    "diff",
    "optimize_report",
]

pin_module(globals(), __all__, __name__)
