"""One exception hierarchy for modelprov.

Every message names what it is about (file, node, key) and says what to do.
"""

from __future__ import annotations

__all__ = [
    "AnnotationError",
    "CorrespondenceError",
    "ExportError",
    "InvalidModelError",
    "MetadataError",
    "MissingDependencyError",
    "ModelprovError",
    "PolicyError",
    "QuantizationError",
    "StableHLOError",
    "VerificationError",
]


class ModelprovError(Exception):
    """Base class of every error modelprov raises on purpose."""


class InvalidModelError(ModelprovError, ValueError):
    """The input is not a readable ONNX model (wrong format, truncated, missing file)."""


class MetadataError(ModelprovError, ValueError):
    """A metadata key or value is malformed (bad UTF-8, oversized, unparseable format)."""


class PolicyError(ModelprovError):
    """A merge policy failed or found a conflict it was told to reject."""


class CorrespondenceError(ModelprovError, ValueError):
    """Two models that should correspond (before/after a tool) do not."""


class AnnotationError(ModelprovError, ValueError):
    """User annotations or calibration inputs are invalid."""


class StableHLOError(ModelprovError):
    """Lowering to StableHLO or attaching attributes failed."""


class MissingDependencyError(ModelprovError, ImportError):
    """An optional dependency is not installed; the message says which extra to install."""


class QuantizationError(ModelprovError, ValueError):
    """Quantization cannot run as asked (missing or invalid ranges, a quantizer failure)."""


class ExportError(ModelprovError, ValueError):
    """A torch.onnx.export keyword modelprov.export cannot honour (the message says why)."""


class VerificationError(ModelprovError):
    """export(verify=True): the saved, optimized model does not compute what torch does."""
