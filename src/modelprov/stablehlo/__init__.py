"""StableHLO export with per-op provenance and user attributes (torchax + JAX lowering).

Needs the ``stablehlo`` extra: ``pip install "modelprov[stablehlo]"``. ``FxNodeInfo`` is
``modelprov.Source`` (the same class; ``StableHLOProgram.nodes`` holds one per FX node).
"""

from modelprov._base._public_names import pin_module
from modelprov.stablehlo._export import export_stablehlo
from modelprov.stablehlo._graph_module import (
    StableHLOExportOptions,
    StableHLOGraphModule,
    exported_program_to_stablehlo,
)
from modelprov.stablehlo._program import StableHLOProgram, load_exported
from modelprov.stablehlo._records import FxNodeInfo, OpRecord
from modelprov.stablehlo.read._hlo import HloOp, read_hlo_sources
from modelprov.stablehlo.read._read import MlirOp, read_mlir_sources
from modelprov.stablehlo.read._restore import restore_attributes

__all__ = [
    "FxNodeInfo",
    "HloOp",
    "MlirOp",
    "OpRecord",
    "StableHLOExportOptions",
    "StableHLOGraphModule",
    "StableHLOProgram",
    "export_stablehlo",
    "exported_program_to_stablehlo",
    "load_exported",
    "read_hlo_sources",
    "read_mlir_sources",
    "restore_attributes",
]

pin_module(globals(), __all__, __name__)
