"""Numerics by provenance: where an exported, optimized or quantized model parts from PyTorch."""

from modelprov._base._public_names import pin_module
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

pin_module(globals(), __all__, __name__)
