"""quantize: onnxruntime's static quantization fed the PyTorch ranges, with Q/DQ provenance
and the scale table."""
