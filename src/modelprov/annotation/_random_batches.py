"""Random calibration batches shaped like a model's example inputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from modelprov.errors import AnnotationError

__all__ = ["random_batches"]


def _random_like(value: Any, generator: torch.Generator) -> Any:
    """A random tensor like ``value`` (normal floats; integers within [0, max + 1))."""
    if not isinstance(value, torch.Tensor):
        return value
    if value.dtype == torch.bool:
        return torch.randint(0, 2, value.shape, generator=generator).bool()
    if value.is_floating_point():
        return torch.randn(value.shape, generator=generator, dtype=value.dtype)
    high = int(value.max().item()) + 1 if value.numel() else 1
    return torch.randint(0, max(high, 1), value.shape, generator=generator, dtype=value.dtype)


def random_batches(
    count: int, args: tuple[Any, ...], kwargs: Mapping[str, Any], *, seed: int = 0
) -> list[tuple[Any, ...] | dict[str, Any]]:
    """``count`` seeded random batches shaped like the example inputs, for calibrate()."""
    if count < 1:
        raise AnnotationError(f"the number of calibration batches must be positive, got {count}")
    if args and kwargs:
        raise AnnotationError(
            "random calibration batches need example inputs that are all positional or all "
            "keyword arguments"
        )
    generator = torch.Generator().manual_seed(seed)
    if kwargs:
        return [{k: _random_like(v, generator) for k, v in kwargs.items()} for _ in range(count)]
    return [tuple(_random_like(v, generator) for v in args) for _ in range(count)]
