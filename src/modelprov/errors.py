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
import re
from collections.abc import Mapping

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
    "keyword",
]


class ExitCode(enum.IntEnum):
    """Exit codes of the ``modelprov`` command; each member's ``meaning`` is the line
    ``modelprov --help`` lists for it (README.md documents them too)."""

    meaning: str

    def __new__(cls, value: int, meaning: str) -> ExitCode:
        member = int.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member

    OK = 0, "ok"
    """Success."""
    CHECK_FAILED = 1, "a check failed (diff --fail-under, export --verify)"
    """A check did not pass (``diff --fail-under``, ``export --verify``)."""
    BAD_INPUT = 2, "usage or input error (arguments, files, models, metadata, policies)"
    """A usage error or an input modelprov cannot use (file, model, metadata, annotations,
    policies, models that do not correspond)."""
    CANNOT_WRITE = 3, "an output cannot be written"
    """An output cannot be written."""
    LOWERING_FAILED = 4, "StableHLO lowering failed"
    """Lowering to StableHLO failed."""
    MISSING_DEPENDENCY = 5, "an optional dependency is missing (the message names the extra)"
    """An optional dependency (extra) is not installed."""
    INTERNAL_ERROR = 70, "internal error, a bug (--debug shows the traceback)"
    """A bug in modelprov or a library it runs; ``--debug`` shows the traceback."""
    INTERRUPTED = 130, "interrupted (Ctrl-C, SIGTERM); nothing is left half-written"
    """Stopped by Ctrl-C or SIGTERM; nothing was left half-written."""
    BROKEN_PIPE = 141, "stdout closed early (| head)"
    """The reader of stdout went away (``| head``)."""


_KEYWORD = re.compile("\ue000([A-Za-z_][A-Za-z0-9_]*)\ue001(.*?)\ue001(.*?)\ue002", re.S)


def keyword(name: str, python: str | None = None, *, command_line_suffix: str = "") -> str:
    """How a message names the API keyword ``name``, so each audience reads its own words.

    ``str(error)`` says ``python`` (default ``name=``); the command line says the flag that
    gives ``name`` (``--ranges r.json``) followed by ``command_line_suffix``, or ``python``
    when the command has no such flag::

        raise QuantizationError(f"{keyword('ranges', f'ranges[{key!r}]')}: not a tensor")
    """
    spelled = python if python is not None else f"{name}="
    return f"\ue000{name}\ue001{spelled}\ue001{command_line_suffix}\ue002"


def _said(template: str, flags: Mapping[str, str]) -> str:
    def spell(match: re.Match[str]) -> str:
        name, python, suffix = match.groups()
        return flags[name] + suffix if name in flags else python

    return _KEYWORD.sub(spell, template)


class ModelprovError(Exception):
    """Base class of every error modelprov raises on purpose.

    A message may name API keywords with :func:`keyword`: ``str(error)`` spells them as
    Python, :meth:`said_with` as the command line's flags.
    """

    exit_code: ExitCode = ExitCode.BAD_INPUT
    _template: str | None = None

    def __init__(self, *args: object) -> None:
        if args and isinstance(args[0], str) and _KEYWORD.search(args[0]):
            self._template = args[0]
            args = (_said(args[0], {}), *args[1:])
        super().__init__(*args)

    def said_with(self, flags: Mapping[str, str]) -> str:
        """The message with each keyword it names that ``flags`` knows (keyword -> how the
        command line gives it, e.g. ``{"ranges": "--ranges r.json"}``) spelled that way."""
        if self._template is None:
            return str(self)
        return _said(self._template, flags)


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
