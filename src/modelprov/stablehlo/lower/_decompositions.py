"""Decompositions modelprov runs (``run_decompositions``) before torchax lowers a program.

Each one rewrites a call torchax 0.0.13 mishandles into an equal call it lowers; nothing is
computed differently (the numerics tests compare with torch on XLA CPU).

- ``aten.convolution`` with one-element ``stride`` / ``padding`` / ``dilation`` /
  ``output_padding`` lists (ATen repeats them for every spatial dimension; transformers'
  EfficientNet depthwise convolutions with ``padding="valid"`` give ``padding=[0]``):
  torchax extends the list in place (``padding *= n``), and FX argument lists are immutable,
  so the lowering raised ``'immutable_list' object does not support mutation``. The
  decomposition calls the same op with each list repeated to the spatial rank.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["LOWERING_DECOMPOSITIONS"]

aten = torch.ops.aten


def _repeated(values: Sequence[Any], rank: int) -> list[Any]:
    return list(values) * rank if len(values) == 1 and rank > 1 else list(values)


def _convolution(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
) -> Any:
    rank = weight.dim() - 2
    lists = (stride, padding, dilation, output_padding)
    if all(len(values) == rank for values in lists) or rank <= 1:
        return NotImplemented  # already in the form torchax lowers: keep the op as it is
    stride, padding, dilation, output_padding = (_repeated(values, rank) for values in lists)
    return aten.convolution.default(
        input, weight, bias, stride, padding, dilation, transposed, output_padding, groups
    )


LOWERING_DECOMPOSITIONS: dict[Any, Callable[..., Any]] = {
    aten.convolution.default: _convolution,
}
"""op overload -> decomposition, for ``ExportedProgram.run_decompositions``."""
