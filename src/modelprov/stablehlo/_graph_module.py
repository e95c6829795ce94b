"""torch_xla's StableHLO entry point, provenance included: change one import and keep going.

``torch_xla.stablehlo.exported_program_to_stablehlo(exported, options)`` returns a
``StableHLOGraphModule`` with ``get_stablehlo_text()``, ``get_stablehlo_bytecode()``,
``save(directory)`` and ``__call__``. The same names here lower through torchax and JAX
(``export_stablehlo``), so every op carries modelprov's attributes and provenance locations,
and run on XLA CPU. ``program`` gives the full ``StableHLOProgram``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import torch

from modelprov.core._policy import Policies
from modelprov.core._stack_trace import TraceOptions
from modelprov.stablehlo._export import export_stablehlo
from modelprov.stablehlo._program import StableHLOProgram
from modelprov.stablehlo.attach._numbers import NumberAttributes

__all__ = ["StableHLOExportOptions", "StableHLOGraphModule", "exported_program_to_stablehlo"]

_METHOD = "forward"


@dataclasses.dataclass(frozen=True)
class StableHLOExportOptions:
    """Options of :func:`exported_program_to_stablehlo`.

    Attributes:
        annotations: ``{module_path: {key: value}}`` written on the ops of each module
            (value-scoped keys such as ``custom.min`` only on the ops producing its output).
        policies: how values of a key merge and which keys are value-scoped (default
            ``DEFAULT_POLICIES``).
        trace_options: path rewriting for stack frames, attributes and locations.
        include_human_readable_text: ``save`` also writes the MLIR text (torch_xla's name).
        number_attributes: ``"typed"`` (numeric user keys as ``f64`` / ``i64`` attributes)
            or ``"string"`` (every user key a string, seed 003's form).
    """

    annotations: Mapping[str, Mapping[str, str | int | float | bool]] | None = None
    policies: Policies | None = None
    trace_options: TraceOptions | None = None
    include_human_readable_text: bool = True
    number_attributes: NumberAttributes = "typed"


class StableHLOGraphModule:
    """The lowered program, with torch_xla's ``StableHLOGraphModule`` methods."""

    def __init__(self, program: StableHLOProgram, options: StableHLOExportOptions) -> None:
        self._program = program
        self._options = options

    @property
    def program(self) -> StableHLOProgram:
        """The full result: ops with their attributes, sources, the portable artifact."""
        return self._program

    def _check_method(self, method_name: str | None) -> None:
        if method_name not in (None, _METHOD):
            raise ValueError(
                f"this program has one method, {_METHOD!r}; got method_name={method_name!r}"
            )

    def get_stablehlo_text(self, method_name: str | None = None) -> str:
        """The StableHLO module text with modelprov's attributes (no debug locations)."""
        self._check_method(method_name)
        return self._program.text

    def get_stablehlo_text_with_locations(self, method_name: str | None = None) -> str:
        """The same text with locations (module path/source node around the user's frames)."""
        self._check_method(method_name)
        return self._program.text_with_locations

    def get_stablehlo_bytecode(self, method_name: str | None = None) -> bytes:
        """The module as a StableHLO portable artifact (JAX's serialization, attributes kept)."""
        self._check_method(method_name)
        return bytes(self._program.exported.mlir_module_serialized)

    def __call__(self, *args: Any) -> Any:
        """Run on XLA CPU; a torch tensor, or a tuple of them for several outputs."""
        outputs = [torch.from_numpy(output.copy()) for output in self._program.run(*args)]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def save(self, directory: str | os.PathLike[str]) -> list[str]:
        """Write ``forward.mlir`` (text), its ``.jaxexport`` and ``.weights.npz`` in ``directory``.

        The directory is created when missing. Load with ``modelprov.stablehlo.load_exported``.
        Without ``include_human_readable_text`` the text file is removed again.
        Returns the paths written.
        """
        os.makedirs(directory, exist_ok=True)
        base = os.path.join(os.fspath(directory), f"{_METHOD}.mlir")
        written = list(self._program.save(base))
        if not self._options.include_human_readable_text:
            os.unlink(base)
            written.remove(base)
        return written


def exported_program_to_stablehlo(
    exported_program: torch.export.ExportedProgram,
    options: StableHLOExportOptions | None = None,
) -> StableHLOGraphModule:
    """Lower ``exported_program`` to StableHLO like torch_xla's function of the same name.

    The text is the one ``export_stablehlo`` gives for the module the program came from.
    Raises TypeError for anything but an ExportedProgram; see ``export_stablehlo`` for the rest.
    """
    if not isinstance(exported_program, torch.export.ExportedProgram):
        raise TypeError(
            "exported_program_to_stablehlo needs a torch.export.ExportedProgram (from "
            f"torch.export.export(model, args)), got {type(exported_program).__name__}; "
            "for an nn.Module call modelprov.export_stablehlo(model, args)"
        )
    chosen = options if options is not None else StableHLOExportOptions()
    program = export_stablehlo(
        exported_program,
        annotations=chosen.annotations,
        policies=chosen.policies,
        trace_options=chosen.trace_options,
        number_attributes=chosen.number_attributes,
    )
    return StableHLOGraphModule(program, chosen)
