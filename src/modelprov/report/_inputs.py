"""Accept a model as an onnx_ir.Model, an onnx.ModelProto or a path."""

from __future__ import annotations

from modelprov.onnx._convert import AnyModel as ModelLike
from modelprov.onnx._convert import as_ir

__all__ = ["ModelLike", "as_ir"]
