"""The user's torch.export program, captured by modelprov before torch.onnx decomposes it.

torch.onnx turns an nn.Module into an ExportedProgram (``torch.export.export`` with
``strict=False`` first), decomposes it and keeps only the decomposed program. Nodes the
decomposition deletes (Llama's same-dtype ``to`` casts) then leave no trace, so no ONNX node
could name them. modelprov makes that first capture itself, the way torch.onnx's first
strategy does, and hands torch.onnx the program; when the capture fails (or shapes come as
``dynamic_axes``, which torch.onnx rewrites into ``dynamic_shapes`` and new arguments)
torch.onnx captures as usual.

The capture runs inside ``torch.fx.traceback.preserve_node_meta()``: only there does a
non-strict capture record ``torch.fx.traceback.annotate`` blocks in ``node.meta["custom"]``.
Only the capture: torch's ``torch._dynamo.disable`` wrappers annotate too while exporting
(``_torchdynamo_disable_method`` = the innermost disabled function), and a decomposition run
inside the same wrapper re-traces placeholders under a different function (``trace`` against
the capture's ``dispatch_trace`` for programs with higher-order ops such as ``torch.cond``),
which torch's ``placeholder_naming_pass`` refuses ("Mismatch in custom metadata"). The
decomposition carries ``node.meta["custom"]`` over by itself (its interpreter keeps node meta).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["capture_program"]


def capture_program(
    model: torch.nn.Module | torch.export.ExportedProgram,
    args: tuple[Any, ...],
    torch_keywords: Mapping[str, Any],
) -> torch.export.ExportedProgram | None:
    """The program to export: the user's own, a fresh non-strict capture, or None.

    None means torch.onnx should capture the module itself (``dynamic_axes``, or a model
    ``torch.export.export(strict=False)`` refuses; torch.onnx then tries its other ways).
    ``dynamic_shapes`` are honoured as torch.onnx honours them: a named dimension (a str)
    is ``Dim.DYNAMIC`` for the capture, and torch.onnx names the ONNX axes after it.
    """
    if isinstance(model, torch.export.ExportedProgram):
        return model
    if torch_keywords.get("dynamic_axes") is not None:
        return None
    dynamic_shapes = _named_dims_dynamic(torch_keywords.get("dynamic_shapes"))
    try:
        with torch.fx.traceback.preserve_node_meta():
            return torch.export.export(
                model,
                tuple(args),
                kwargs=torch_keywords.get("kwargs"),
                dynamic_shapes=dynamic_shapes,
                strict=False,
            )
    except Exception:  # torch.onnx's capture strategies try again and report the failure
        return None


def _named_dims_dynamic(spec: Any) -> Any:
    """``dynamic_shapes`` with each str dimension name replaced by ``Dim.DYNAMIC``."""
    if isinstance(spec, str):
        return torch.export.Dim.DYNAMIC
    if isinstance(spec, Mapping):
        return {key: _named_dims_dynamic(value) for key, value in spec.items()}
    if isinstance(spec, list):
        return [_named_dims_dynamic(value) for value in spec]
    if isinstance(spec, tuple):
        return tuple(_named_dims_dynamic(value) for value in spec)
    return spec
