"""Per-layer annotations and calibration on the torch side (before export)."""

from modelprov._base._public_names import pin_module
from modelprov.annotation._calibrate import calibrate
from modelprov.annotation._module_annotations import (
    annotate,
    annotations,
    effective_annotations,
    module_paths,
    normalize_annotations,
)
from modelprov.annotation._values import format_value

__all__ = [
    "annotate",
    "annotations",
    "calibrate",
    "effective_annotations",
    "format_value",
    "module_paths",
    "normalize_annotations",
]

pin_module(globals(), __all__, __name__)
