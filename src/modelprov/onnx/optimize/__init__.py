"""optimize: onnxscript's optimizer and rules, tracked step by step
(``OptimizeProvenancePass``)."""
