"""recover: provenance back onto a black-box tool's output (anchors from names and
structure, the run check), and the registry of black-box tools."""
