"""The options of modelprov's ONNX passes, as frozen dataclasses that import no onnx.

Each pass inherits its options class (``FunctionizePass(FunctionizeOptions, ...)``), so the
fields here are the pass's keyword options; the command line derives its flags from these
classes (``_cli_spec.OptionsOf``), which lets ``modelprov optimize --help`` answer without
loading onnx, onnx_ir or onnxscript. Options a command line cannot give (policies, rewrite
rules, trace options) stay on the pass classes.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

__all__ = ["FunctionizeOptions", "InlineOptions", "Level", "OptimizeOptions", "RecoverOptions"]

Level = Literal["aten", "module"]
"""What :class:`~modelprov.onnx.functions._functionize.FunctionizePass` wraps into one function."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class OptimizeOptions:
    """The options of ``OptimizeProvenancePass`` a command line can give."""

    per_pass: bool = False
    """Run the optimizer as its sequence of passes, each tracked on its own (the command
    line sets it: ``optimize --report`` needs it)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class FunctionizeOptions:
    """The options of ``FunctionizePass`` a command line can give."""

    level: Level = dataclasses.field(
        default="aten",
        metadata={
            "help": "one function per ATen op (aten, the default) or per nn.Module call (module)"
        },
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class InlineOptions:
    """The options of ``InlineProvenancePass`` (none yet)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RecoverOptions:
    """The options of :func:`~modelprov.recover` as frozen fields, the way the passes declare
    theirs; the command line derives ``modelprov recover``'s flags from them."""

    force: bool = dataclasses.field(
        default=False,
        metadata={
            "help": "recover even when OPTIMIZED does not correspond to ORIGINAL (outputs "
            "differ on random inputs, or, when they cannot run, interface, op kinds or size "
            "differ); a warning says what was overridden"
        },
    )
