"""ONNX side of modelprov: export, optimize, provenance lookup."""
