"""torch.onnx export with provenance: the capture, ATen call records, annotations onto
nodes, the returned ONNXProgram and the export report."""
