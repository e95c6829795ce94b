"""Accept a model as an onnx_ir.Model, an onnx.ModelProto or a path."""

from __future__ import annotations

import os

import onnx
import onnx_ir as ir

from modelprov._io import load_model

__all__ = ["ModelLike", "as_ir"]

ModelLike = ir.Model | onnx.ModelProto | str | os.PathLike[str]


def as_ir(model: ModelLike) -> ir.Model:
    """The model as an onnx_ir.Model (files are read without their weights)."""
    if isinstance(model, ir.Model):
        return model
    if isinstance(model, onnx.ModelProto):
        return ir.from_proto(model)
    return load_model(model)
