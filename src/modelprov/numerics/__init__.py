"""Numerics by provenance: where an exported, optimized or quantized model parts from PyTorch."""

from modelprov.numerics._compare import DEFAULT_ATOL, DEFAULT_RTOL, compare
from modelprov.numerics._report import ModuleNumerics, NumericsReport, NumericsRow

__all__ = [
    "DEFAULT_ATOL",
    "DEFAULT_RTOL",
    "ModuleNumerics",
    "NumericsReport",
    "NumericsRow",
    "compare",
]
