"""Model I/O, the one edge for model files and kinds: loading with its checks, repair of
duplicate keys, streamed and atomic writing, and the conversion between ModelProto,
onnx_ir.Model and ONNXProgram (``_convert.model_input``)."""
