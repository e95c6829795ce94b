"""The user's torch.export program, captured by modelprov before torch.onnx decomposes it.

torch.onnx turns an nn.Module into an ExportedProgram (``torch.export.export`` with
``strict=False`` first), decomposes it and keeps only the decomposed program. Nodes the
decomposition deletes (Llama's same-dtype ``to`` casts) then leave no trace, so no ONNX node
could name them. For static shapes modelprov makes that first capture itself, the way
torch.onnx's first strategy does, and hands torch.onnx the program; when the capture fails
(or shapes are dynamic, where torch.onnx adjusts the capture) torch.onnx captures as usual.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["capture_program"]

_DYNAMIC_KEYWORDS = ("dynamic_shapes", "dynamic_axes")


def capture_program(
    model: torch.nn.Module | torch.export.ExportedProgram,
    args: tuple[Any, ...],
    torch_keywords: Mapping[str, Any],
) -> torch.export.ExportedProgram | None:
    """The program to export: the user's own, a fresh non-strict capture, or None.

    None means torch.onnx should capture the module itself (dynamic shapes, or a model
    ``torch.export.export(strict=False)`` refuses; torch.onnx then tries its other ways).
    """
    if isinstance(model, torch.export.ExportedProgram):
        return model
    if any(torch_keywords.get(name) is not None for name in _DYNAMIC_KEYWORDS):
        return None
    try:
        return torch.export.export(
            model, tuple(args), kwargs=torch_keywords.get("kwargs"), strict=False
        )
    except Exception:  # torch.onnx's capture strategies try again and report the failure
        return None
