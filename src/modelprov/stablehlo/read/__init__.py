"""Reading back: provenance of MLIR and HLO from elsewhere, from attributes and locations,
and restoring it after MLIR passes."""
