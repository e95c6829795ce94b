"""One exception hierarchy for modelprov, and the command line's exit codes.

Each class means one thing; every message names what it is about (file, node, key) and says
what to do. The command line exits with the class's ``exit_code``:

| class | means | exit code |
|---|---|---|
| ``UsageError`` | a wrong argument or option (command line or API) | 2 |
| ``InvalidModelError`` | an input file or model is not a readable ONNX model | 2 |
| ``MetadataError`` | a metadata key or value of an input is malformed | 2 |
| ``AnnotationError`` | user annotations or calibration inputs are invalid | 2 |
| ``PolicyError`` | a merge policy failed or rejected a conflict, or a policies file is bad | 2 |
| ``CorrespondenceError`` | two models that should correspond do not | 2 |
| ``QuantizationError`` | quantization cannot run as asked | 2 |
| ``ExportError`` | a torch.onnx.export keyword modelprov.export cannot honour | 2 |
| ``VerificationError`` | ``export(verify=True)``: the model does not compute what torch does | 1 |
| ``OutputError`` | an output cannot be written (folder, permissions, disk) | 3 |
| ``StableHLOError`` (``LoweringError``) | lowering to StableHLO failed | 4 |
| ``MissingDependencyError`` | an optional dependency is not installed | 5 |
"""

from __future__ import annotations

import enum

__all__ = [
    "AnnotationError",
    "CorrespondenceError",
    "ExitCode",
    "ExportError",
    "InvalidModelError",
    "LoweringError",
    "MetadataError",
    "MissingDependencyError",
    "ModelprovError",
    "OutputError",
    "PolicyError",
    "QuantizationError",
    "StableHLOError",
    "UsageError",
    "VerificationError",
]


class ExitCode(enum.IntEnum):
    """Exit codes of the ``modelprov`` command (documented in README.md)."""

    OK = 0
    """Success."""
    CHECK_FAILED = 1
    """A check did not pass (``diff --fail-under``)."""
    BAD_INPUT = 2
    """A usage error or an input modelprov cannot use (file, model, metadata, annotations,
    policies, models that do not correspond)."""
    CANNOT_WRITE = 3
    """An output cannot be written."""
    LOWERING_FAILED = 4
    """Lowering to StableHLO failed."""
    MISSING_DEPENDENCY = 5
    """An optional dependency (extra) is not installed."""
    INTERNAL_ERROR = 70
    """A bug in modelprov or a library it runs; ``--debug`` shows the traceback."""
    INTERRUPTED = 130
    """Stopped by Ctrl-C or SIGTERM; nothing was left half-written."""
    BROKEN_PIPE = 141
    """The reader of stdout went away (``| head``)."""


class ModelprovError(Exception):
    """Base class of every error modelprov raises on purpose."""

    exit_code: ExitCode = ExitCode.BAD_INPUT


class UsageError(ModelprovError, ValueError):
    """A command-line argument or API option is wrong."""


class InvalidModelError(ModelprovError, ValueError):
    """An input is not a readable ONNX model (wrong format, truncated, missing file,
    unsafe external data)."""


class MetadataError(ModelprovError, ValueError):
    """A metadata key or value is malformed (bad UTF-8, oversized, unparseable format)."""


class PolicyError(ModelprovError):
    """A merge policy failed or found a conflict it was told to reject, or a policies file
    (``load_policies``, ``--policies``) cannot be read or is invalid."""


class CorrespondenceError(ModelprovError, ValueError):
    """Two models that should correspond (before/after a tool) do not."""


class AnnotationError(ModelprovError, ValueError):
    """User annotations or calibration inputs are invalid."""


class OutputError(ModelprovError, OSError):
    """An output cannot be written: its folder is missing or not writable, it would
    overwrite an input, or the disk refused the write."""

    exit_code = ExitCode.CANNOT_WRITE


class StableHLOError(ModelprovError):
    """Lowering to StableHLO or attaching attributes failed."""

    exit_code = ExitCode.LOWERING_FAILED


LoweringError = StableHLOError
"""Another name of :class:`StableHLOError`: the lowering class of the hierarchy."""


class MissingDependencyError(ModelprovError, ImportError):
    """An optional dependency is not installed; the message says which extra to install."""

    exit_code = ExitCode.MISSING_DEPENDENCY


class QuantizationError(ModelprovError, ValueError):
    """Quantization cannot run as asked (missing or invalid ranges, a quantizer failure)."""


class ExportError(ModelprovError, ValueError):
    """A torch.onnx.export keyword modelprov.export cannot honour (the message says why)."""


class VerificationError(ModelprovError):
    """export(verify=True): the saved, optimized model does not compute what torch does."""

    exit_code = ExitCode.CHECK_FAILED
